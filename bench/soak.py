"""A soak of the chaos pipeline: the faults of tests/spark/test_chaos_pipeline.py for many minutes,
sampling the sidecar's RSS, open files and catalog size over time.

The pipeline and its faults are tests/support/chaos_pipeline.py's (archive host in a network
namespace: needs root and ``ip netns``): a live UDP publisher recorded by the sidecar, a query
reading it with ``readStream`` and writing it with the exactly-once sink; SIGKILLs of the sidecar
(restarted on the same directory and ports), of the query (restarted from its checkpoint), of its
Python workers, and partitions, one every ``--fault-gap`` seconds. A sampler thread reads the
running sidecar's ``/proc`` every ``--sample-s``: RSS, open file descriptors, ``archive.catalog``'s
size, the recordings' bytes and the catalog's entries; a sidecar SIGKILLed and restarted starts
its own curve (``sidecar_run`` column). At the end publishing stops, the sink must hold every
recorded message exactly once, and ``aeron-archive verify`` must be clean (reported, exit 1 if not).

    .venv/bin/python bench/soak.py --minutes 30 --csv soak.csv --curve soak.txt [--seed N]
        [--fault-gap 20,40] [--faults sidecar,query,worker,partition] [--sample-s 10]

The curve (``--curve``) is plain text: per sample the minute, the sidecar run, RSS, open files,
catalog bytes and entries, with a bar for the RSS; then per sidecar run its first and last RSS and open files
(flat is the target). Every process started here is stopped by PID, also on failure.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from tests.support.chaos_pipeline import FAULT_KINDS, ChaosPipeline, exactly_once_problems, fault_plan  # noqa: E402
from tests.support.driver_process import running_driver_process  # noqa: E402
from tests.support.netns import network_namespaces_problem, veth_namespaces  # noqa: E402

FIELDS = ("seconds", "sidecar_run", "pid", "rss_mb", "open_files", "catalog_bytes", "catalog_entries",
          "archive_bytes")


class Sampler:
    """Samples the running sidecar every ``interval_s`` on a thread of its own."""

    def __init__(self, pipeline: ChaosPipeline, interval_s: float) -> None:
        self.pipeline = pipeline
        self.interval_s = interval_s
        self.began = time.monotonic()
        self.rows: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            sidecar = self.pipeline.sidecar
            if sidecar is None or not sidecar.runs or sidecar.current.process.poll() is not None:
                continue  # killed, not restarted yet
            sample = self.pipeline.sidecar_sample()
            if sample["open_files"] < 0:
                continue
            sample["seconds"] = round(time.monotonic() - self.began, 1)
            sample["sidecar_run"] = len(sidecar.runs) - 1
            sample["catalog_entries"] = catalog_entries(self.pipeline.archive_dir)
            self.rows.append(sample)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def catalog_entries(archive_dir: Path) -> int:
    """Valid recordings in the catalog (``aeron-archive count-entries``' figure), -1 if unreadable."""
    try:
        from aeron_spark.archive.storage.catalog import Catalog  # noqa: PLC0415 - a bench helper
        with Catalog.open(archive_dir, read_only=True) as catalog:
            return catalog.count_entries()
    except Exception:  # noqa: BLE001 - the count is informative only; a layout change must not end the soak
        return -1


def curve(rows: list[dict[str, float]], width: int = 50) -> str:
    if not rows:
        return "(no samples)\n"
    top = max(row["rss_mb"] for row in rows) or 1.0
    lines = [f"{'min':>6} {'run':>3} {'rss MB':>7} {'files':>5} {'catalog B':>10} {'entries':>7}  rss"]
    for row in rows:
        bar = "#" * max(1, int(row["rss_mb"] / top * width))
        lines.append(f"{row['seconds'] / 60:6.1f} {int(row['sidecar_run']):3d} {row['rss_mb']:7.1f} "
                     f"{int(row['open_files']):5d} {int(row['catalog_bytes']):10d} {int(row['catalog_entries']):7d}  {bar}")
    lines.append("")
    lines.append("per sidecar run: first -> last sample (RSS MB, open files), minutes covered")
    for run in sorted({int(row["sidecar_run"]) for row in rows}):
        mine = [row for row in rows if int(row["sidecar_run"]) == run]
        first, last = mine[0], mine[-1]
        lines.append(f"  run {run}: RSS {first['rss_mb']:.1f} -> {last['rss_mb']:.1f}, files "
                     f"{int(first['open_files'])} -> {int(last['open_files'])}, "
                     f"{(last['seconds'] - first['seconds']) / 60:.1f} min, {len(mine)} samples")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the faulty phase")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--fault-gap", default="20,40", help="MIN,MAX seconds between faults")
    parser.add_argument("--faults", default=",".join(FAULT_KINDS), help="kinds, comma-separated")
    parser.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--rate", type=int, default=150, help="messages per second published")
    parser.add_argument("--csv", type=Path, default=Path("soak.csv"))
    parser.add_argument("--curve", type=Path, default=Path("soak.txt"))
    args = parser.parse_args(argv)
    kinds = [kind.strip() for kind in args.faults.split(",") if kind.strip()]
    if set(kinds) - set(FAULT_KINDS):
        parser.error(f"--faults: unknown kind(s) {sorted(set(kinds) - set(FAULT_KINDS))}; accepted: "
                     f"{', '.join(FAULT_KINDS)}")
    try:
        low, high = (float(part) for part in args.fault_gap.split(","))
    except ValueError:
        parser.error(f"--fault-gap {args.fault_gap!r}: expected MIN,MAX seconds, e.g. 20,40")
    problem = network_namespaces_problem()
    if problem is not None:
        parser.error(f"the soak {problem}")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    faults = fault_plan(seed, args.minutes * 60, gap_s=(low, high), kinds=kinds) if kinds else []
    print(f"soak seed {seed}: {len(faults)} faults over {args.minutes} min", flush=True)
    status = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp_name, \
            veth_namespaces("10.218", "aeron-soak", None) as (archive_host, _spark_host):
        tmp = Path(tmp_name)
        driver_host = tmp / "spark-host-aeron"
        assert archive_host.namespace is not None
        with running_driver_process(driver_host):
            pipeline = ChaosPipeline(tmp, archive_host.namespace, archive_host.address, driver_host,
                                     rate_per_s=args.rate)
            sampler: Sampler | None = None
            try:
                pipeline.start()
                sampler = Sampler(pipeline, args.sample_s)
                pipeline.wait_first_commit(300.0)
                pipeline.run_chaos(faults, random.Random(seed), log=lambda line: print(line, flush=True))
                remaining = args.minutes * 60 - (time.monotonic() - started)
                while remaining > 0:  # the last fault came early: run on to the full length
                    pipeline.supervise()
                    time.sleep(min(1.0, remaining))
                    remaining = args.minutes * 60 - (time.monotonic() - started)
                recorded = pipeline.finish_publishing(300.0)
                sink = pipeline.wait_for_sink(len(recorded.messages), 600.0, poll_s=10.0)
                sampler.stop()
                pipeline.stop_query()
                sink = pipeline.sink()
                problems = exactly_once_problems(sink, recorded) if sink is not None else ["no sink recording"]
                verify = pipeline.verify_archive()
                print(f"{len(recorded.messages)} messages in {len(recorded.ranges)} recordings; exactly once in "
                      f"order: {'yes' if not problems else '; '.join(problems)}; verify exit {verify.returncode}; "
                      f"query runs {len(pipeline.queries)}; {(time.monotonic() - started) / 60:.1f} min", flush=True)
                if problems or verify.returncode != 0:
                    print(verify.stdout[-3000:], verify.stderr[-3000:])
                    status = 1
            finally:
                if sampler is not None:
                    sampler.stop()
                pipeline.stop_all()
            rows = sampler.rows if sampler is not None else []
            with args.csv.open("w", newline="") as out:
                writer = csv.DictWriter(out, fieldnames=FIELDS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(rows)
            args.curve.write_text(f"soak seed {seed}, {args.minutes} min, faults {', '.join(kinds)} every "
                                  f"{args.fault_gap} s\n" + curve(rows))
            print(f"{len(rows)} samples: {args.csv}, {args.curve}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
