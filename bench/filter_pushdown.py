"""Benchmark: a one-minute time range out of a large recording, with and without filter pushdown.

1. Records COUNT messages of SIZE bytes through the real sidecar (`aeron-archive serve`, embedded
   media driver, IPC publication of TERM-byte terms). Message ``i``'s reserved value is its time
   in epoch nanoseconds (the ``includeTimestamp`` convention), spread evenly over ``--span-minutes``
   (default 60) of synthetic time, so a minute is 1/60 of the recording.
2. In one Spark session (local[2], ``archive.dir``), alternating, reads the recording with
   ``includeTimestamp=true`` and ``timestamp >= t0 AND timestamp < t0 + 1 minute``:

   * **without pushdown** (``spark.sql.python.filterPushdown.enabled=false``): the whole recording is
     replayed and Spark filters it;
   * **with pushdown** (``=true``): the source bisects the terms for the range's first and last
     message and replays only that range; Spark still applies the filter.

   Both end in the same aggregation over every payload byte (count, sum of lengths, xor of hashes)
   and must agree.
3. Prints, for each: seconds (min, median), rows and payload bytes returned, bytes replayed (the
   planned ranges plus, with pushdown, what the time search consumed of its replays, taken from
   the reader's own plan in this process), and CPU seconds per process (sidecar included).

Run (full: 2,000,000 x 1 KiB = 2.1 GB recorded, 16 MiB terms; ``--quick``: 120,000 x 1 KiB, 1 MiB terms)::

    .venv/bin/python bench/filter_pushdown.py
    .venv/bin/python bench/filter_pushdown.py --quick

Every process started here is stopped by PID, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from spark_bench_support import (
    ProcessCpu,
    Timings,
    Workload,
    exit_on_sigterm,
    fingerprint,
    progress,
    running_sidecar,
    spark_for_layout,
    spark_jvm_pid,
    spark_processes_stopped,
    stop_session,
)

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
CONTROL_STREAM_ID = 10
STREAM_ID = 4101
WITHOUT = "without pushdown (Spark filters)"
WITH = "with pushdown"
NANOS_PER_MINUTE = 60 * 1_000_000_000


def record(aeron_dir: str, count: int, size: int, term_length: int, first_ns: int, step_ns: int) -> tuple[int, int, int]:
    """(recording id, start position, stop position) of ``count`` stamped messages."""
    from aeron_spark.archive.client.archive_client import ArchiveClient, SourceLocation
    from aeron_spark.driver_integration import AeronClient

    channel = f"aeron:ipc?term-length={term_length}"
    payloads = np.random.default_rng(7).integers(0, 256, size=size * 1024, dtype=np.uint8).tobytes()
    aeron = AeronClient(aeron_dir, client_name="filter-pushdown-bench")
    try:
        archive = ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=CONTROL_STREAM_ID,
                                        response_channel="aeron:ipc", aeron=aeron)
        try:
            archive.start_recording(channel, STREAM_ID, SourceLocation.LOCAL)
            publication = aeron.add_exclusive_publication(channel, STREAM_ID)
            try:
                descriptor = _await_recording(archive, publication)
                offer = publication.offer
                position = 0
                for index in range(count):
                    at = index % 1024 * size
                    message = payloads[at:at + size]
                    stamp = first_ns + index * step_ns
                    while (position := offer(message, reserved_value=stamp)) < 0:
                        time.sleep(0)  # back pressured by the recorder
                    if index % 500_000 == 0 and index:
                        progress(f"recorded {index:,} messages")
                while archive.max_recorded_position(descriptor.recording_id) < position:
                    time.sleep(0.01)
            finally:
                archive.stop_recording(channel, STREAM_ID)
                publication.close()
            while archive.stop_position(descriptor.recording_id) < 0:
                time.sleep(0.01)
            return descriptor.recording_id, descriptor.start_position, position
        finally:
            archive.close()
    finally:
        aeron.close()


def _await_recording(archive, publication, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for descriptor in archive.list_recordings_for_uri(0, None, "aeron:ipc", publication.stream_id):
            if descriptor.session_id == publication.session_id:
                return descriptor
        time.sleep(0.01)
    raise RuntimeError(f"the archive did not start recording stream {publication.stream_id}")


def utc(epoch_ns: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=epoch_ns // 1000)


def pushdown_plan(options: dict[str, str], low: dt.datetime, high: dt.datetime) -> tuple[int, int, int, float]:
    """(planned range bytes, time-search replays, bytes those consumed, planning seconds) of the
    reader given the range's filters, planned here as Spark's planning worker would."""
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThan

    from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader
    from aeron_spark.connector.source.options import ReadMode, SourceOptions
    from aeron_spark.connector.source.partition_planner import ReplayPartition

    reader = AeronArchiveBatchReader(SourceOptions.parse(dict(options), ReadMode.BATCH), forget_driver_connection=None)
    started = time.perf_counter()
    list(reader.pushFilters([GreaterThanOrEqual(("timestamp",), low), LessThan(("timestamp",), high)]))
    partitions = reader.partitions()
    seconds = time.perf_counter() - started
    planned = sum(p.replay_range.length for p in partitions if isinstance(p, ReplayPartition))
    cost = reader.pushdown_cost
    return planned, cost.probe_replays, cost.probe_bytes, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="120,000 x 1 KiB messages in 1 MiB terms, 1 repetition")
    parser.add_argument("--workload", type=Workload.parser(1024 * 1024), help="COUNTxSIZE (default 2000000x1024)")
    parser.add_argument("--term-length", type=int, help="bytes per term (default 16 MiB; --quick: 1 MiB)")
    parser.add_argument("--span-minutes", type=int, default=60, help="synthetic time the recording spans")
    parser.add_argument("--repetitions", type=int, help="default 3 (--quick: 1)")
    parser.add_argument("--work-dir", type=Path, help="where the archive goes (default: a temp dir)")
    args = parser.parse_args(argv)
    workload = args.workload or (Workload(120_000, 1024) if args.quick else Workload(2_000_000, 1024))
    term_length = args.term_length or (1 << 20 if args.quick else 16 << 20)
    repetitions = args.repetitions or (1 if args.quick else 3)
    step_ns = args.span_minutes * NANOS_PER_MINUTE // workload.count
    first_ns = time.time_ns() - args.span_minutes * NANOS_PER_MINUTE
    low_ns = first_ns + args.span_minutes * NANOS_PER_MINUTE // 2
    low, high = utc(low_ns), utc(low_ns + NANOS_PER_MINUTE)

    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="filter-pushdown-bench-", dir=args.work_dir))
    try:
        with contextlib.ExitStack() as stack:
            sidecar = stack.enter_context(running_sidecar(
                work / "archive", "--control-channel", "aeron:ipc", "--control-stream-id", str(CONTROL_STREAM_ID),
                "--log-level", "WARNING"))
            started = time.perf_counter()
            recording_id, start, stop = record(sidecar.aeron_dir, workload.count, workload.size, term_length,
                                               first_ns, step_ns)
            progress(f"recorded {workload.label}: recording {recording_id}, {stop - start:,} bytes in "
                     f"{time.perf_counter() - started:.1f} s")
            options = {"archive.dir": str(sidecar.archive_dir), "recordingIds": str(recording_id),
                       "includeTimestamp": "true", "minPartitions": "2"}
            planned, probe_replays, probe_bytes, plan_seconds = pushdown_plan(options, low, high)
            stack.enter_context(spark_processes_stopped())
            spark = spark_for_layout("filter-pushdown", "single-host", None, **{"spark.driver.memory": "2g"})
            stack.callback(stop_session, spark)
            cpu = ProcessCpu({"sidecar": sidecar.pid}, spark_jvm_pid(spark))
            from aeron_spark.connector import register
            from pyspark.sql import functions as F
            register(spark)

            def read(pushdown: bool) -> tuple:
                # A fresh DataFrame each time: a reused filtered DataFrame kept the scan planned with
                # pushdown for later queries (with the flag off again) in the first version of this bench.
                spark.conf.set(PUSHDOWN, "true" if pushdown else "false")
                return fingerprint(spark.read.format("aeron-archive").options(**options).load().filter(
                    (F.col("timestamp") >= low) & (F.col("timestamp") < high)))

            answers = {}
            for name in (WITHOUT, WITH):  # warm-up and check
                began = time.perf_counter()
                answers[name] = read(name == WITH)
                progress(f"warm-up {name}: {time.perf_counter() - began:.2f} s")
            if answers[WITH] != answers[WITHOUT] or not answers[WITH][0]:
                raise AssertionError(f"the reads disagree or are empty: {answers}")
            seconds: dict[str, list[float]] = {WITHOUT: [], WITH: []}
            for repetition in range(repetitions):
                for name in (WITH, WITHOUT) if repetition % 2 else (WITHOUT, WITH):
                    before = cpu.sample()
                    began = time.perf_counter()
                    read(name == WITH)
                    seconds[name].append(time.perf_counter() - began)
                    cpu.add(name, before, cpu.sample())
                progress(f"repetition {repetition + 1}/{repetitions}: "
                         + ", ".join(f"{name} {values[-1]:.2f} s" for name, values in seconds.items()))
            rows, payload_bytes = answers[WITH][0], answers[WITH][1]
            recorded = stop - start
            print(f"\n{workload.label}, {term_length >> 20} MiB terms, {recorded:,} bytes recorded over "
                  f"{args.span_minutes} min; range: one minute ({low.isoformat()} .. {high.isoformat()}); "
                  f"{repetitions} repetition(s), local[2]")
            print(f"  returned: {rows:,} rows, {payload_bytes:,} payload bytes")
            for name, replayed in ((WITHOUT, recorded), (WITH, planned + probe_bytes)):
                timing = Timings(seconds[name])
                print(f"  {name:<34} min {timing.best:7.3f} s  median {timing.median:7.3f} s   "
                      f"bytes replayed {replayed:,} ({replayed / payload_bytes:.2f}x the payload returned, "
                      f"{replayed / term_length:.1f} terms)")
            print(f"  pushdown plan: ranges {planned:,} bytes + time search {probe_bytes:,} bytes in "
                  f"{probe_replays} replays, planned in {plan_seconds:.3f} s")
            print(f"  ratio median seconds without / with pushdown: "
                  f"{Timings(seconds[WITHOUT]).median / Timings(seconds[WITH]).median:.1f}x")
            print("\n".join(cpu.lines()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
