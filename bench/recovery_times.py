"""Recovery times of the live pipeline, per fault kind: how long after a fault the query commits again.

Pipeline (one machine, the layout of tests/spark/test_chaos_pipeline.py without the namespace): a
UDP publisher (tests/support/live_publisher.py, on the Spark host's media driver) recorded by the
sidecar (``aeron-archive serve``, its embedded driver, UDP control); a query in a process of its own
(tests/support/sink_tail_query_process.py, on a standalone driver): live ``readStream`` of the
channel -> the exactly-once sink ``writeStream`` into a sink recording of the same archive, local[2].

Measured, each ``--repeats`` times, a fault every ``--gap`` s:

* ``cold start``: the query process launched -> its first committed batch (rows > 0), split into
  Spark's start-up (launch -> ``start()`` returned) and the first batch (its ``durationMs``);
* ``sidecar SIGKILL``: SIGKILL, restart on the same directory and ports after ``--down`` s; the
  restarted sidecar's ready line -> the running query's next committed batch (a query that fails
  meanwhile is restarted from its checkpoint, and the time includes that);
* ``query SIGKILL``: the query's process tree SIGKILLed, restarted from its checkpoint at once;
  the restart -> its first committed batch, split into Spark's start-up and that batch (a Spark
  driver restart -> its first batch);
* ``worker SIGKILL``: one of the query's Python workers SIGKILLed -> the first batch begun after the
  kill committed (Spark does not restart a killed driver-side source worker: the query fails then,
  and its restart from the checkpoint is in the time).

    .venv/bin/python bench/recovery_times.py [--repeats 3] [--faults sidecar,query,worker]
        [--step-timings FILE] [--option NAME=VALUE ...]

Prints one line per fault and a table (median / max seconds per kind) with the first batch's
``durationMs``. ``--step-timings FILE`` keeps the connector's step timings (AERON_SPARK_TIMINGS) of
every Python worker. Every process started here is stopped by PID, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from tests.support.driver_process import running_driver_process  # noqa: E402
from tests.support.live_publisher import LivePublisher  # noqa: E402
from tests.support.ports import free_udp_port  # noqa: E402
from tests.support.process_tree import descendant_pids  # noqa: E402
from tests.support.sidecar import Sidecar  # noqa: E402
from tests.support.sink_tail_query_process import Progress, SinkTailQuery  # noqa: E402

STREAM_ID = 4811
SINK_STREAM_ID = 4812
RATE_PER_S = 200
COMMIT_TIMEOUT_S = 240.0
MAX_RESTARTS = 3


@dataclass
class Pipeline:
    """The running processes and how to start the query again."""

    tmp: Path
    driver_host: Path
    control_port: int
    record_fragment: str
    sink_channel: str
    options: list[str]
    step_timings: Path | None
    query_args: list[str] = field(default_factory=list)
    sidecar: Sidecar | None = None
    publisher: LivePublisher | None = None
    queries: list[SinkTailQuery] = field(default_factory=list)

    @property
    def query(self) -> SinkTailQuery:
        return self.queries[-1]

    def start_sidecar(self) -> float:
        """Starts the sidecar; the time of its ready line (epoch s)."""
        self.sidecar = Sidecar(self.tmp / "archive", control_port=self.control_port).start()
        return time.time()

    def start_query(self) -> SinkTailQuery:
        args = ["--control-channel", self.sidecar.control_channel, "--channel", self.record_fragment,
                "--stream-id", str(STREAM_ID), "--sink-channel", self.sink_channel, "--sink-stream-id",
                str(SINK_STREAM_ID), "--sink-id", "recovery", "--checkpoint", str(self.tmp / "checkpoint"),
                "--stop-file", str(self.tmp / "stop-query"), *self.query_args]
        for option in self.options:
            args += ["--option", option]
        env = {**os.environ, "AERON_DIR": str(self.driver_host)}
        if self.step_timings is not None:
            env["AERON_SPARK_TIMINGS"] = str(self.step_timings)
        self.queries.append(SinkTailQuery(args, env))
        return self.query

    def committed_after(self, after: float, timeout: float = COMMIT_TIMEOUT_S,
                        started_after: bool = False) -> tuple[Progress, int]:
        """The first batch with rows that ends (``started_after``: begins) after ``after`` (epoch s),
        restarting a failed query from its checkpoint; (that batch, how many query restarts it took)."""
        deadline = time.monotonic() + timeout
        restarts = 0
        while True:
            found = [p for p in self.query.progress() if p.rows > 0 and (p.start if started_after else p.end) > after]
            if found:
                return found[0], restarts
            if not self.query.running:
                if restarts >= MAX_RESTARTS:
                    raise RuntimeError(f"the query failed {restarts + 1} times in a row:\n{self.query.output()}")
                print(f"  query failed: {(self.query.failure() or self.query.output(5))[:300]}", flush=True)
                self.query.kill()
                self.start_query()
                restarts += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"no committed batch within {timeout} s:\n{self.query.output()}")
            time.sleep(0.1)

    def stop(self) -> None:
        for query in self.queries:
            query.kill()
        if self.publisher is not None:
            self.publisher.stop()
        if self.sidecar is not None:
            self.sidecar.terminate()
            self.sidecar.kill()


class ProcessTimeline:
    """Samples the processes below a root every 50 ms: when each was first and last seen (epoch s),
    and its command line; shows where a first batch's time goes between Python worker start-ups."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[int, list] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            for pid in descendant_pids(self.root):
                if pid in self.seen:
                    self.seen[pid][1] = now
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as file:
                        command = file.read().replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:
                    continue
                self.seen[pid] = [now, now, command]
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def report(self, origin: float) -> str:
        lines = []
        for pid, (first, last, command) in sorted(self.seen.items(), key=lambda item: item[1][0]):
            short = " ".join(part.rsplit("/", 1)[-1] for part in command.split()[:4])[:90]
            lines.append(f"  {first - origin:7.2f} .. {last - origin:7.2f}  pid {pid:<7} {short}")
        return "\n".join(lines)


def cold_start(pipeline: Pipeline, timeline: bool = False) -> dict[str, float]:
    query = pipeline.start_query()
    sampler = ProcessTimeline(query.process.pid) if timeline else None
    first, restarts = pipeline.committed_after(0.0)
    if sampler is not None:
        sampler.stop()
        print(f"processes below the query (s after its first batch began):\n{sampler.report(first.start)}", flush=True)
    started = query.started_at() or query.launched_at
    print(f"cold start: {first.end - query.launched_at:.1f} s to the first committed batch "
          f"(Spark start-up {started - query.launched_at:.1f} s, batch {first.batch_id}: {first.rows} rows, "
          f"{first.ms}, from {first.start:.3f} to {first.end:.3f}); restarts {restarts}", flush=True)
    return {"total": first.end - query.launched_at, "start-up": started - query.launched_at,
            "first batch": first.end - first.start, "addBatch": first.ms.get("addBatch", 0) / 1000.0}


def batches_between(pipeline: Pipeline, begin: float, end: float) -> str:
    """The batches that ran across [begin, end] (s relative to ``begin``), with their steps."""
    found = [p for query in pipeline.queries for p in query.progress() if p.end >= begin and p.start <= end]
    return "; ".join(f"#{p.batch_id} {p.rows} rows {p.start - begin:+.1f}..{p.end - begin:+.1f} s "
                     f"(addBatch {p.ms.get('addBatch', 0)} ms, latestOffset {p.ms.get('latestOffset', 0)} ms)"
                     for p in found)


def sidecar_kill(pipeline: Pipeline, down_s: float) -> float:
    assert pipeline.sidecar is not None
    killed_at = time.time()
    pipeline.sidecar.kill()
    time.sleep(down_s)
    ready = pipeline.start_sidecar()
    batch, restarts = pipeline.committed_after(ready)
    recovery = batch.end - ready
    print(f"sidecar SIGKILL: ready {ready - killed_at:.1f} s after the kill -> committed batch {batch.batch_id} "
          f"({batch.rows} rows) {recovery:.1f} s; query restarts {restarts}; batches since the kill (s after it): "
          f"{batches_between(pipeline, killed_at, batch.end)}", flush=True)
    return recovery


def query_kill(pipeline: Pipeline, splits: list[dict[str, float]]) -> float:
    """Kills the query, restarts it from its checkpoint; the restart -> its first committed batch,
    whose split (Spark's start-up, then that batch) is appended to ``splits``."""
    pipeline.query.kill()
    restarted = pipeline.start_query()
    batch, restarts = pipeline.committed_after(restarted.launched_at)
    recovery = batch.end - restarted.launched_at
    started = restarted.started_at() or restarted.launched_at
    splits.append({"start-up": started - restarted.launched_at, "first batch": batch.end - batch.start,
                   "addBatch": batch.ms.get("addBatch", 0) / 1000.0})
    print(f"query SIGKILL: restart -> committed batch {batch.batch_id} ({batch.rows} rows) {recovery:.1f} s "
          f"(Spark start-up {started - restarted.launched_at:.1f} s); that batch {batch.ms}; "
          f"further restarts {restarts}", flush=True)
    return recovery


def worker_kill(pipeline: Pipeline, rng: random.Random) -> float | None:
    workers = pipeline.query.python_workers()
    if not workers:
        print("worker SIGKILL: no Python worker running", flush=True)
        return None
    victim = rng.choice(workers)
    killed_at = time.time()
    try:
        os.kill(victim, 9)
    except ProcessLookupError:
        return None
    # A batch begun after the kill: one that was running may end without needing the killed worker.
    batch, restarts = pipeline.committed_after(killed_at, started_after=True)
    recovery = batch.end - killed_at
    print(f"worker SIGKILL (pid {victim} of {workers}): -> committed batch {batch.batch_id} ({batch.rows} rows) "
          f"{recovery:.1f} s; query restarts {restarts}", flush=True)
    return recovery


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="faults of each kind")
    parser.add_argument("--faults", default="sidecar,query,worker", help="kinds, comma-separated")
    parser.add_argument("--gap", type=float, default=8.0, help="seconds of steady running between faults")
    parser.add_argument("--down", type=float, default=2.0, help="seconds a killed sidecar stays down")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--step-timings", type=Path, default=None, help="AERON_SPARK_TIMINGS file to keep")
    parser.add_argument("--option", action="append", default=[], help="NAME=VALUE, a source and sink option")
    parser.add_argument("--spark-log-level", default="ERROR", help="the query's; INFO shows every task's timing")
    parser.add_argument("--process-timeline", action="store_true",
                        help="list the query's processes (Python workers) with when they ran, during the cold start")
    parser.add_argument("--event-log", type=Path, default=None, help="the query's Spark event log directory")
    parser.add_argument("--query-log", type=Path, default=None, help="write every query process's output here")
    args = parser.parse_args(argv)
    kinds = [kind.strip() for kind in args.faults.split(",") if kind.strip()]
    unknown = set(kinds) - {"sidecar", "query", "worker"}
    if unknown:
        parser.error(f"--faults: unknown kind(s) {sorted(unknown)}; accepted: sidecar, query, worker")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed}", flush=True)
    rng = random.Random(seed)
    results: dict[str, list[float]] = {kind: [] for kind in kinds}
    query_splits: list[dict[str, float]] = []  # per query restart: Spark start-up, first batch, its addBatch
    with tempfile.TemporaryDirectory(prefix="recovery-times-") as tmp_name:
        tmp = Path(tmp_name)
        driver_host = tmp / "spark-host-aeron"
        record_port, sink_port = free_udp_port(), free_udp_port()
        pipeline = Pipeline(tmp, driver_host, free_udp_port(), f"endpoint=127.0.0.1:{record_port}",
                            f"aeron:udp?endpoint=127.0.0.1:{sink_port}", args.option, args.step_timings,
                            ["--spark-log-level", args.spark_log_level,
                             *(["--event-log", str(args.event_log)] if args.event_log else [])])
        with running_driver_process(driver_host):
            try:
                pipeline.start_sidecar()
                pipeline.publisher = LivePublisher(
                    [], "--channel", f"aeron:udp?endpoint=127.0.0.1:{record_port}|term-length=64k",
                    "--stream-id", str(STREAM_ID), "--messages", "100000000", "--rate", str(RATE_PER_S),
                    "--control-channel", pipeline.sidecar.control_channel, "--aeron-dir", str(driver_host))
                pipeline.publisher.wait_until(lambda: len(pipeline.publisher.recordings()) == 1, "recording", 60)
                cold = cold_start(pipeline, args.process_timeline)
                plan = [kind for kind in kinds for _ in range(args.repeats)]
                rng.shuffle(plan)
                faults: dict[str, Callable[[], float | None]] = {
                    "sidecar": lambda: sidecar_kill(pipeline, args.down),
                    "query": lambda: query_kill(pipeline, query_splits),
                    "worker": lambda: worker_kill(pipeline, rng),
                }
                for kind in plan:
                    time.sleep(args.gap)
                    recovery = faults[kind]()
                    if recovery is not None:
                        results[kind].append(recovery)
            finally:
                pipeline.stop()
                if args.query_log is not None:
                    args.query_log.write_text("\n".join(f"{t:.3f} {line}" for query in pipeline.queries
                                                            for t, line in query.lines))
    print("\n| fault | n | median s | max s | measured from -> to |\n|---|---|---|---|---|")
    print(f"| cold start (query process) | 1 | {cold['total']:.1f} | {cold['total']:.1f} | launch -> first committed "
          f"batch (Spark start-up {cold['start-up']:.1f} s, first batch {cold['first batch']:.1f} s, its addBatch "
          f"{cold['addBatch']:.1f} s) |")
    spans = {"sidecar": "restarted sidecar's ready line -> next committed batch",
             "query": "query process restarted from its checkpoint -> first committed batch",
             "worker": "Python worker SIGKILL -> the first batch begun after it committed"}
    for kind in kinds:
        values = results[kind]
        if values:
            split = ""
            if kind == "query" and query_splits:
                split = " (" + ", ".join(f"{part} median {statistics.median(s[part] for s in query_splits):.1f} s"
                                         for part in ("start-up", "first batch", "addBatch")) + ")"
            print(f"| {kind} SIGKILL | {len(values)} | {statistics.median(values):.1f} | {max(values):.1f} | "
                  f"{spans[kind]}{split} |")
    print(json.dumps({"seed": seed, "cold": cold, "recovery_s": results, "query_restart_splits": query_splits}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
