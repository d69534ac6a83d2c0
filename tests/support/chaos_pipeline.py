"""The chaos pipeline (issue 33): every fault at once, as a new user would meet them, on one pipeline.

Hosts (tests/support/netns.py): the archive host is a network namespace, the Spark host the root
namespace, joined by a veth pair.

* archive host: the sidecar (``aeron-archive serve``, its embedded media driver, control on
  ``<address>:CONTROL_PORT``) and a live publisher (tests/support/live_publisher.py) on a media
  driver of its own, publishing ``aeron:udp?endpoint=127.0.0.1:RECORD_PORT`` which the sidecar
  records (REMOTE); after a sidecar restart the publisher records anew (a new recording);
* Spark host: the query (tests/support/sink_tail_query_process.py: live ``readStream`` -> the
  exactly-once sink, local[2]) in a process of its own on a standalone media driver, reaching the
  archive by its control channel only; its sink channel is a UDP endpoint on the archive host.

``ChaosPipeline`` starts all of it, injects faults (``FAULT_KINDS``: SIGKILL of the sidecar, then
a restart on the same directory and ports after 1-3 s; SIGKILL of the query's process tree, then
a restart from its checkpoint; SIGKILL of one of its Python workers; the archive host's link down
for a few seconds), restarts a query that failed on its own (as a supervisor would), and reads
back what was recorded and what the sink committed. ``fault_plan`` draws the faults from a seed,
so a failing run is reproduced by its seed. Everything is stopped by PID in ``stop_all``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aeron_spark.archive.cli.serve_command import READY_PREFIX
from aeron_spark.archive.cli.sidecar_process import parse_ready_line, serve_command
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.connector.commit_markers import MARKER_MAGIC, MARKER_PAYLOAD_LENGTH, CommitMarker, sink_id_of_channel

from tests.support.link_partition import link_down
from tests.support.live_publisher import LivePublisher
from tests.support.netns import CONTROL_PORT, in_namespace
from tests.support.sink_tail_query_process import SinkTailQuery, source_key_of
from tests.support.survival_checks import RecordedStream, recorded_stream

FAULT_KINDS = ("sidecar", "query", "worker", "partition")
RECORD_PORT = 8020  # on the archive host's loopback: the recorded stream
SINK_PORT = 8021  # on the archive host's address: the sink recording's UDP endpoint
STREAM_ID = 4901
SINK_STREAM_ID = 4902
SINK_ID = "chaos"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
#: Query runs in a row that end before committing a batch: past it the query is failing, not being faulted
#: (a soak restarts the query dozens of times, each restart committing before the next fault).
MAX_RUNS_WITHOUT_A_COMMIT = 5
RESTARTED_QUERY_TIMEOUT_S = 240.0
WORKER_WAIT_S = 30.0  # how long a worker SIGKILL waits for the query to have a Python worker


@dataclass(frozen=True)
class Fault:
    at_s: float  # seconds after the chaos began
    kind: str
    down_s: float  # a killed sidecar's downtime, or a partition's length


def fault_plan(seed: int, duration_s: float, *, every_kind: bool = True, gap_s: tuple[float, float] = (7.0, 14.0),
               kinds: Sequence[str] = FAULT_KINDS) -> list[Fault]:
    """Faults at random gaps over ``duration_s``: with ``every_kind`` each kind at least once (in a
    random order, then random kinds), sidecar kills twice as likely as the others."""
    rng = random.Random(seed)
    weighted = [kind for kind in kinds for _ in range(2 if kind == "sidecar" else 1)]
    first = list(kinds) if every_kind else []
    rng.shuffle(first)
    faults, at = [], rng.uniform(*gap_s) / 2
    while at < duration_s or first:  # every kind, even past the duration
        kind = first.pop(0) if first else rng.choice(weighted)
        down = rng.uniform(1.0, 3.0) if kind == "sidecar" else rng.uniform(3.0, 6.0)
        faults.append(Fault(round(at, 1), kind, round(down, 1)))
        at += rng.uniform(*gap_s)
    return faults


# --- processes on the archive host ---------------------------------------------------------------


class NamespacedProcess:
    """A command run in a namespace (``ip netns exec`` execs it: the Popen PID is the command's),
    its output lines kept with arrival times; stopped by PID."""

    def __init__(self, namespace: str, command: Sequence[str], name: str) -> None:
        self.name = name
        self.lines: list[str] = []
        self.process = subprocess.Popen(in_namespace(namespace, command), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            found = next((line for line in list(self.lines) if line.startswith(prefix)), None)
            if found is not None:
                return found
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.name} (pid {self.pid}) did not print {prefix!r} within {timeout} s "
                                   f"(exit code {self.process.returncode}):\n" + "\n".join(self.lines[-40:]))
            time.sleep(0.05)

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
        self._reader.join(5)


class ArchiveHostSidecar:
    """The sidecar on the archive host, restartable on the same directory and control endpoint."""

    def __init__(self, namespace: str, address: str, archive_dir: Path) -> None:
        self.namespace, self.address, self.archive_dir = namespace, address, archive_dir
        self.control_channel = f"aeron:udp?endpoint={address}:{CONTROL_PORT}"
        self.runs: list[NamespacedProcess] = []
        self.ready: dict[str, str] = {}

    @property
    def current(self) -> NamespacedProcess:
        return self.runs[-1]

    def start(self) -> float:
        """Starts it and waits for its ready line; the time it was seen (epoch s)."""
        command = serve_command(self.archive_dir, "--control-channel", self.control_channel,
                                "--segment-length", "64k", "--log-level", "INFO")
        self.runs.append(NamespacedProcess(self.namespace, command, "the sidecar"))
        line = self.current.wait_for_line(READY_PREFIX, READY_TIMEOUT_S)
        self.ready = parse_ready_line(line)
        return time.time()

    def kill(self) -> None:
        """SIGKILL by PID; removes the embedded driver's directory it leaves behind."""
        self.current.kill()
        driver_dir = self.ready.get("aeronDir")
        if driver_dir and os.path.isdir(driver_dir):
            shutil.rmtree(driver_dir, ignore_errors=True)

    def stop(self) -> None:
        if self.runs:
            self.current.terminate()
            self.kill()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.current.lines[-lines:]) if self.runs else ""


def namespaced_driver(namespace: str, aeron_dir: Path) -> NamespacedProcess:
    """A standalone media driver in the namespace, started (it prints its directory when up)."""
    driver = NamespacedProcess(namespace, [sys.executable, "-m", "aeron_spark.driver_integration.media_driver",
                                           "--dir", str(aeron_dir)], "the archive host's publisher driver")
    driver.wait_for_line(str(aeron_dir), READY_TIMEOUT_S)
    return driver


# --- what the sink committed -----------------------------------------------------------------------


@dataclass
class SinkContents:
    rows: list[tuple[int, int, bytes]]  # (source recording id, source position, payload), in sink order
    committed_rows: int  # rows the markers count
    markers: int
    debris: int  # data rows of dead commits (never visible to readers)


def sink_contents(client: ArchiveClient, replay_channel: str = "aeron:ipc") -> SinkContents | None:
    """A raw replay of the sink recording (markers included, an active one up to its recorded
    position): the data rows of committed batches, decoded; None while there is no sink recording."""
    found = [d for d in client.list_recordings_for_uri(0, None, f"alias=aeron-spark-sink:{SINK_ID}", SINK_STREAM_ID)
             if sink_id_of_channel(d.original_channel) == SINK_ID]
    if not found:
        return None
    assert len(found) == 1, f"more than one sink recording: {found}"
    descriptor = found[0]
    end = (client.recording_position(descriptor.recording_id) if descriptor.is_active
           else descriptor.stop_position)
    pending: list[tuple[int, bytes]] = []  # data rows since the last marker
    rows: list[tuple[int, int, bytes]] = []
    committed = markers = debris = 0
    if end > descriptor.start_position:
        with client.replay(descriptor.recording_id, descriptor.start_position, end - descriptor.start_position,
                           replay_channel, 1905) as replay:
            for message in replay.messages(idle_timeout=30):
                payload = message.payload
                if len(payload) == MARKER_PAYLOAD_LENGTH and payload.startswith(MARKER_MAGIC):
                    marker = CommitMarker.decode(payload)
                    batch = [(position, data) for position, data in pending if position >= marker.data_start]
                    debris += len(pending) - len(batch)  # a dead commit's rows before this batch's start
                    assert len(batch) == marker.row_count, (f"marker of batch {marker.batch_id} counts "
                                                            f"{marker.row_count} rows, {len(batch)} precede it")
                    rows.extend(source_key_of(data) for _, data in batch)
                    committed += marker.row_count
                    markers += 1
                    pending = []
                else:
                    pending.append((message.position, payload))
    return SinkContents(rows, committed, markers, debris + len(pending))


def exactly_once_problems(sink: SinkContents, recorded: RecordedStream) -> list[str]:
    """What is wrong with the sink's rows against what was recorded: every recorded message once,
    with its bytes, nothing else, and in position order within each source recording."""
    problems = []
    keys = Counter((recording_id, position) for recording_id, position, _ in sink.rows)
    twice = sorted(key for key, count in keys.items() if count > 1)
    if twice:
        problems.append(f"{len(twice)} messages written more than once, e.g. {twice[:5]}")
    want = {(recording_id, position): payload for recording_id, position, payload in recorded.messages}
    got = {(recording_id, position): payload for recording_id, position, payload in sink.rows}
    missing = sorted(want.keys() - got.keys())
    if missing:
        problems.append(f"{len(missing)} recorded messages never written, e.g. {missing[:5]}")
    extra = sorted(got.keys() - want.keys())
    if extra:
        problems.append(f"{len(extra)} rows written that are no recorded message, e.g. {extra[:5]}")
    wrong = [key for key in want.keys() & got.keys() if want[key] != got[key]]
    if wrong:
        problems.append(f"{len(wrong)} rows with other bytes than recorded, e.g. {wrong[:5]}")
    last: dict[int, int] = {}
    for recording_id, position, _ in sink.rows:
        if position <= last.get(recording_id, -1):
            problems.append(f"recording {recording_id}: position {position} written after {last[recording_id]}")
            break
        last[recording_id] = position
    return problems


# --- the pipeline --------------------------------------------------------------------------------


@dataclass
class FaultOutcome:
    fault: Fault
    started: float  # epoch s
    recovered_s: float | None = None  # to the next committed batch ending after the fault (sidecar: after ready)
    note: str = ""


@dataclass
class ChaosPipeline:
    tmp: Path
    namespace: str  # the archive host
    address: str
    spark_driver_dir: Path  # the Spark host's media driver (running; the caller owns it)
    rate_per_s: int = 150
    master: str = "local[2,3]"  # 3 attempts per task: a killed Python worker fails its task, not the query
    chaos_began: float = 0.0  # epoch s
    query_options: list[str] = field(default_factory=list)
    sidecar: ArchiveHostSidecar | None = None
    publisher_driver: NamespacedProcess | None = None
    publisher: LivePublisher | None = None
    queries: list[SinkTailQuery] = field(default_factory=list)
    query_failures: list[str] = field(default_factory=list)
    outcomes: list[FaultOutcome] = field(default_factory=list)

    @property
    def archive_dir(self) -> Path:
        return self.tmp / "archive"

    @property
    def until_file(self) -> Path:
        return self.tmp / "publishing-done"

    @property
    def query(self) -> SinkTailQuery:
        return self.queries[-1]

    def start(self) -> None:
        self.sidecar = ArchiveHostSidecar(self.namespace, self.address, self.archive_dir)
        self.sidecar.start()
        publisher_dir = self.tmp / "archive-host-publisher-aeron"
        self.publisher_driver = namespaced_driver(self.namespace, publisher_dir)
        self.publisher = LivePublisher(
            in_namespace(self.namespace, []), "--channel", f"aeron:udp?endpoint=127.0.0.1:{RECORD_PORT}|term-length=64k",
            "--stream-id", str(STREAM_ID), "--messages", "1000000000", "--rate", str(self.rate_per_s),
            "--control-channel", self.sidecar.control_channel, "--aeron-dir", str(publisher_dir),
            "--until-file", str(self.until_file))
        self.publisher.wait_until(lambda: len(self.publisher.recordings()) >= 1, "its first recording", 60)
        self.start_query()

    def start_query(self) -> SinkTailQuery:
        assert self.sidecar is not None
        assert self.runs_without_a_commit() < MAX_RUNS_WITHOUT_A_COMMIT, (
            "the query failed again and again:\n" + "\n".join(self.query_failures[-5:]))
        args = ["--control-channel", self.sidecar.control_channel, "--channel", f"endpoint=127.0.0.1:{RECORD_PORT}",
                "--stream-id", str(STREAM_ID), "--sink-channel", f"aeron:udp?endpoint={self.address}:{SINK_PORT}",
                "--sink-stream-id", str(SINK_STREAM_ID), "--sink-id", SINK_ID,
                "--checkpoint", str(self.tmp / "checkpoint"), "--stop-file", str(self.tmp / "stop-query"),
                "--master", self.master]
        for option in self.query_options:
            args += ["--option", option]
        self.queries.append(SinkTailQuery(args, {**os.environ, "AERON_DIR": str(self.spark_driver_dir)}))
        return self.query

    def runs_without_a_commit(self) -> int:
        """The latest query runs, counted back to the last one that committed rows."""
        count = 0
        for query in reversed(self.queries):
            if any(progress.rows > 0 for progress in query.progress()):
                break
            count += 1
        return count

    def supervise(self) -> None:
        """Restarts the query from its checkpoint when it ended by itself."""
        if self.queries and not self.query.running:
            self.query.wait_exit(30)
            self.query_failures.append(self.query.failure() or ("exited without a failure line:\n"
                                                                + self.query.output(20)))
            self.start_query()

    def committed_batches(self) -> list[tuple[float, int]]:
        """(end epoch s, rows) of every committed batch with rows, over all query runs."""
        return [(p.end, p.rows) for query in self.queries for p in query.progress() if p.rows > 0]

    def wait_until(self, condition, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            self.supervise()
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; query:\n"
                                     + self.query.output(30))
            time.sleep(0.2)

    def wait_first_commit(self, timeout: float) -> float:
        self.wait_until(lambda: bool(self.committed_batches()), "the query's first committed batch", timeout)
        return min(end for end, _ in self.committed_batches())

    def inject(self, fault: Fault, rng: random.Random) -> FaultOutcome:
        assert self.sidecar is not None
        outcome = FaultOutcome(fault, time.time())
        if fault.kind == "sidecar":
            self.sidecar.kill()
            time.sleep(fault.down_s)
            outcome.started = self.sidecar.start()  # recovery counts from the ready line
        elif fault.kind == "query":
            self.query.kill()
            self.start_query()
        elif fault.kind == "worker":
            deadline = time.monotonic() + WORKER_WAIT_S
            workers = self.query.python_workers()
            while not workers and time.monotonic() < deadline:  # a query still starting has none yet
                self.supervise()
                time.sleep(0.5)
                workers = self.query.python_workers()
            if workers:
                victim = rng.choice(workers)
                outcome.note = f"pid {victim} of {len(workers)} workers"
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    outcome.note += " (gone already)"
            else:
                outcome.note = "no Python worker running"
        elif fault.kind == "partition":
            with link_down(self.namespace):
                time.sleep(fault.down_s)
        else:
            raise ValueError(f"unknown fault kind {fault.kind!r}; accepted: {', '.join(FAULT_KINDS)}")
        self.outcomes.append(outcome)
        return outcome

    def settle_recoveries(self) -> None:
        """Each fault's time to the next committed batch ending after it (None: none yet)."""
        ends = sorted(end for end, _ in self.committed_batches())
        for outcome in self.outcomes:
            after = [end for end in ends if end > outcome.started]
            outcome.recovered_s = after[0] - outcome.started if after else None

    def run_chaos(self, faults: Sequence[Fault], rng: random.Random, log=print) -> None:
        began = time.monotonic()
        self.chaos_began = time.time()
        for fault in faults:
            while time.monotonic() - began < fault.at_s:
                self.supervise()
                time.sleep(0.2)
            log(f"[{time.monotonic() - began:6.1f} s] fault: {fault.kind} ({fault.down_s} s)")
            outcome = self.inject(fault, rng)
            if outcome.note:
                log(f"           {outcome.note}")
            if fault.kind == "query":  # the next faults hit a running query, not one still starting
                waited = time.monotonic()
                restarted = self.query
                self.wait_until(lambda: any(p.rows > 0 for p in restarted.progress()) or restarted is not self.query,
                                "the restarted query's first committed batch", RESTARTED_QUERY_TIMEOUT_S)
                began += time.monotonic() - waited
                log(f"           restarted query committed after {time.monotonic() - waited:.1f} s")

    def finish_publishing(self, timeout: float) -> RecordedStream:
        """Stops publishing, waits until the last message is recorded; what every recording holds."""
        assert self.publisher is not None and self.sidecar is not None
        self.until_file.touch()
        deadline = time.monotonic() + timeout
        while not self.publisher.done():
            self.supervise()
            if self.publisher.process.poll() is not None:  # ended: its last lines may still be in the pipe
                self.publisher.wait_until(self.publisher.done, "the last message recorded", 5.0)
                break
            assert time.monotonic() < deadline, "the publisher did not finish:\n" + self.publisher.output()
            time.sleep(0.2)
        client = ArchiveClient.from_mark_file(self.archive_dir)
        try:
            return recorded_stream(client, f"endpoint=127.0.0.1:{RECORD_PORT}", STREAM_ID, "aeron:ipc")
        finally:
            client.close()

    def sink(self) -> SinkContents | None:
        client = ArchiveClient.from_mark_file(self.archive_dir)
        try:
            return sink_contents(client)
        finally:
            client.close()

    def wait_for_sink(self, count: int, timeout: float, poll_s: float = 3.0) -> SinkContents:
        """Waits until the sink committed ``count`` rows (restarting a failed query)."""
        deadline = time.monotonic() + timeout
        while True:
            self.supervise()
            contents = self.sink()
            if contents is not None and contents.committed_rows >= count:
                return contents
            if time.monotonic() > deadline:
                have = contents.committed_rows if contents is not None else 0
                raise AssertionError(f"the sink committed {have} of {count} rows within {timeout:.0f} s; "
                                     "query:\n" + self.query.output(30))
            time.sleep(poll_s)

    def stop_query(self, timeout: float = 120.0) -> None:
        (self.tmp / "stop-query").touch()
        if self.query.running:
            self.query.wait_exit(timeout)

    def verify_archive(self) -> subprocess.CompletedProcess[str]:
        """Stops the sidecar (SIGTERM) and runs ``aeron-archive verify`` on its directory."""
        assert self.sidecar is not None
        self.sidecar.stop()
        return subprocess.run([sys.executable, "-m", "aeron_spark.archive.cli.main", "verify", "--dir",
                               str(self.archive_dir)], capture_output=True, text=True, timeout=120)

    def batch_timeline(self, origin: float) -> str:
        """Every query run's batches: id, rows, start (s after ``origin``), duration and addBatch."""
        lines = []
        for number, query in enumerate(self.queries):
            batches = query.progress()
            lines.append(f"  query run {number} (launched {query.launched_at - origin:+.1f} s): " + ", ".join(
                f"#{p.batch_id} {p.rows}r @{p.start - origin:.1f}+{p.end - p.start:.1f}s"
                f"(add {p.ms.get('addBatch', 0) / 1000:.1f})"
                for p in batches))
        return "\n".join(lines)

    def sidecar_sample(self) -> dict[str, float]:
        """The running sidecar's RSS (MB), open files and catalog size (bytes), for the soak."""
        assert self.sidecar is not None
        pid = self.sidecar.current.pid
        rss_kb = 0
        try:
            with open(f"/proc/{pid}/status") as status:
                rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
            open_files = len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, StopIteration):
            open_files = -1
        catalog = self.archive_dir / "archive.catalog"
        return {"pid": pid, "rss_mb": rss_kb / 1024.0, "open_files": open_files,
                "catalog_bytes": catalog.stat().st_size if catalog.exists() else 0,
                "archive_bytes": sum(path.stat().st_size for path in self.archive_dir.glob("*.rec"))}

    def sidecar_diagnosis(self) -> str:
        """The running sidecar's thread stacks (py-spy, when installed) and ``aeron-archive errors``:
        what a stalled sidecar was doing, for the failure report."""
        if self.sidecar is None or not self.sidecar.runs or self.sidecar.current.process.poll() is not None:
            return "(no sidecar running)"
        parts = []
        py_spy = Path(sys.executable).with_name("py-spy")
        if py_spy.exists():
            dump = subprocess.run([str(py_spy), "dump", "--native", "--pid", str(self.sidecar.current.pid)],
                                  capture_output=True, text=True, timeout=60)
            parts.append(f"py-spy dump of the sidecar {self.sidecar.current.pid}:\n{dump.stdout}{dump.stderr}")
        errors = subprocess.run([sys.executable, "-m", "aeron_spark.archive.cli.main", "errors", "--dir",
                                 str(self.archive_dir)], capture_output=True, text=True, timeout=60)
        parts.append(f"aeron-archive errors:\n{errors.stdout[-4000:]}{errors.stderr[-2000:]}")
        return "\n".join(parts)

    def stop_all(self) -> None:
        """Every process started here, by PID (also after a failure)."""
        for query in self.queries:
            query.kill()
        if self.publisher is not None:
            self.publisher.stop()
        if self.publisher_driver is not None:
            self.publisher_driver.terminate()
        if self.sidecar is not None:
            for run in self.sidecar.runs:
                run.kill()
            self.sidecar.kill()
