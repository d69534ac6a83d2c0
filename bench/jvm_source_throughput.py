"""Benchmark: the JVM source ``format("aeron-archive-jvm")`` beside the Python source ``format("aeron-archive")``
as micro-batch readers: same recordings, same Spark session, interleaved repeats.

For each layout (``local[2]`` and ``local-cluster[2,1,1024]``, each in a process of its own: a Spark
driver JVM keeps the environment it started with) and each workload (default 2,000,000 x 32 B and
500,000 x 1 KiB) it

1. records the messages as **two recordings** (first half, second half: one partition per core for
   both sources; the JVM source makes one partition per recording) through the real sidecar
   (``aeron-archive serve``, embedded media driver, IPC publications recorded LOCAL),
2. reads both recordings from their start with ``readStream`` -> ``noop`` sink, a fresh checkpoint
   each run, no rate limit, in two modes:
   * **one micro-batch**: ``trigger(once=True)`` (one unlimited batch: what "batch" means for the
     JVM source, which has no ``spark.read`` mode);
   * **AvailableNow**: ``trigger(availableNow=True)`` (everything up to the positions at start);
   the Python source with a payload-only schema (``.schema("payload binary not null")``,
   ``minPartitions=2``) as bench/kafka_read.py reads it, the JVM source with ``.select("payload")``
   (it takes no user schema),
3. checks every warm-up read returns every row, then times ``--repetitions`` rounds, each round
   running the four reads in an order that alternates (reversed every other round),
4. prints min / median seconds, rows/s and payload MB/s per read, the ratio JVM / Python (rows/s of
   the medians, > 1: the JVM source is faster) per mode, and the CPU-seconds per run of every process
   (the sidecar, the Spark driver JVM with the JVM source's embedded Java media driver inside it, the
   executor JVMs with theirs, the Python workers with their embedded C drivers, the cluster driver
   host's media driver). With both layouts, a summary table of the medians comes last.

Layouts (bench/spark_bench_support.py):

* ``single-host``: ``local[2]``; the Python source is given ``archive.dir`` (its single-host mode: the
  sidecar's driver, IPC replays); the JVM source ``archive.controlChannel`` (it has no archive.dir; its
  embedded Java media driver in the Spark JVM receives UDP replays over loopback).
* ``cluster``: the sidecar on its own embedded driver with a UDP control channel, this process on a
  standalone media driver process (``AERON_DIR``), ``local-cluster[2,1,1024]`` executors whose
  ``AERON_DIR`` holds no driver: each executor's Python worker embeds a C driver, each executor JVM an
  embedded Java one (the JVM source launches it); both sources are given ``archive.controlChannel``
  only, so every replay crosses UDP.

Needs a JDK 17 and Maven for tools/build-jvm (the jar is built on first use, as the tests do). Run
(smoke: ~6 min on a loaded 2-core VM, mostly Spark start-ups; the full run belongs on a quiet machine,
estimated 6-9 minutes there: 2 layouts x 2 workloads x 4 reads x (1 warm-up + 5 repetitions))::

    .venv/bin/python bench/jvm_source_throughput.py --quick
    BENCH_LOCK=/tmp/bench.lock flock $BENCH_LOCK .venv/bin/python bench/jvm_source_throughput.py --repetitions 5

Every process started here (the per-layout processes, sidecars, media drivers, Spark) is stopped by
PID, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from kafka_bench_support import REPO_ROOT, streamed_rows  # puts the repository root on sys.path
from spark_bench_support import (
    CLUSTER_MASTER,
    DRIVER_THREAD,
    LAYOUTS,
    ProcessCpu,
    Timings,
    Workload,
    cluster_hosts,
    exit_on_sigterm,
    interleaved_runs,
    loopback_udp_channel,
    payload_block,
    progress,
    running_sidecar,
    spark_for_layout,
    spark_jvm_pid,
    spark_processes_stopped,
    stop_pid,
    stop_session,
)
from spark_source_vs_parquet import PAYLOAD_ONLY, TERM_LENGTH, record

from tests.support.jvm_module import AERON_JVM_OPTIONS, built_jvm_module  # on the path: kafka_bench_support
from tests.support.process_tree import kill_tree

STREAM_ID_BASE = 7001
MODES = ("once", "availableNow")
MODE_NAMES = {"once": "one micro-batch", "availableNow": "AvailableNow"}
SOURCES = {"Python": "aeron-archive", "JVM": "aeron-archive-jvm"}
QUICK_WORKLOADS = [Workload(20_000, 32), Workload(5_000, 1024)]
DEFAULT_WORKLOADS = [Workload(2_000_000, 32), Workload(500_000, 1024)]
QUERY_TIMEOUT_S = 900.0
RESULT_PREFIX = "RESULT "
LAYOUT_STOP_GRACE_S = 90.0


# --- one layout (a process of its own) ------------------------------------------------------------


def record_halves(aeron_dir: str, control_stream_id: int, workload: Workload, data: np.ndarray,
                  index: int) -> list[int]:
    """Two recordings on the sidecar (the first half of the messages, then the second)."""
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.driver_integration import AeronClient

    half = workload.count // 2
    parts = [(Workload(half, workload.size), data[:half * workload.size]),
             (Workload(workload.count - half, workload.size), data[half * workload.size:])]
    recording_ids = []
    with AeronClient(aeron_dir, client_name="jvm-source-bench") as aeron:
        archive = ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=control_stream_id,
                                        response_channel="aeron:ipc", aeron=aeron)
        try:
            for part, (part_workload, part_data) in enumerate(parts):
                recording_id, stop, mtu = record(archive, aeron, part_workload, part_data,
                                                 STREAM_ID_BASE + 2 * index + part)
                recording_ids.append(recording_id)
                progress(f"{workload.label}: recording {recording_id} holds {part_workload.label} "
                         f"({stop:,} bytes, mtu {mtu})")
        finally:
            archive.close()
    return recording_ids


def measure(spark, workload: Workload, sources: dict[str, dict[str, str]], modes: list[str], repetitions: int,
            work: Path, cpu: ProcessCpu) -> dict[str, Timings]:
    """Every (mode, source) read: one warm-up that must read every row, then the timed rounds."""
    runs = iter(range(1_000_000))

    def stream(source: str, mode: str) -> Callable[[], int]:
        def read() -> int:
            reader = spark.readStream.format(SOURCES[source]).options(**sources[source])
            frame = reader.schema(PAYLOAD_ONLY).load() if source == "Python" else reader.load().select("payload")
            writer = frame.writeStream.format("noop").option("checkpointLocation", str(work / f"chk-{next(runs)}"))
            query = writer.trigger(**({"once": True} if mode == "once" else {"availableNow": True})).start()
            try:
                if not query.awaitTermination(QUERY_TIMEOUT_S):
                    raise RuntimeError(f"a {MODE_NAMES[mode]} query did not finish within {QUERY_TIMEOUT_S:.0f} s")
            finally:
                if query.isActive:
                    query.stop()
            return streamed_rows(query)
        return read

    reads = {f"{MODE_NAMES[mode]}, {source}": stream(source, mode) for mode in modes for source in SOURCES}
    for name, read in reads.items():  # warm-up (JIT, workers, drivers) and the correctness check
        started = time.perf_counter()
        rows = read()
        progress(f"{workload.label}: warm-up {name} {time.perf_counter() - started:.2f} s, {rows:,} rows")
        if rows != workload.count:
            raise AssertionError(f"{name} read {rows:,} rows, not {workload.count:,}")
    seconds = interleaved_runs(workload.label, reads, repetitions, cpu)
    return {name: Timings(values) for name, values in seconds.items()}


def java_driver_dirs() -> set[str]:
    """The embedded Java media drivers' directories (AeronConnections: <aeron default dir>-spark-<pid>)."""
    return set(glob.glob("/dev/shm/aeron-*-spark-*"))


def remove_java_driver_dirs(before: set[str]) -> None:
    """Those this run left behind (a JVM stopped by SIGKILL skips its shutdown hook): pid no longer running."""
    for directory in java_driver_dirs() - before:
        pid = directory.rsplit("-", 1)[1]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(directory, ignore_errors=True)


def run_layout(layout: str, workloads: list[Workload], modes: list[str], repetitions: int,
               work_parent: Path | None) -> int:
    jvm = built_jvm_module()
    cluster = layout == "cluster"
    master = CLUSTER_MASTER if cluster else "local[2]"
    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix=f"jvm-source-bench-{layout}-", dir=work_parent))
    java_dirs_before = java_driver_dirs()
    try:
        with contextlib.ExitStack() as stack:
            sidecar = stack.enter_context(running_sidecar(
                work / "archive", "--control-channel", loopback_udp_channel(), "--log-level", "WARNING"))
            control_stream_id = int(sidecar.ready["localControlStreamId"])
            recorded = [(workload, record_halves(sidecar.aeron_dir, control_stream_id, workload,
                                                 payload_block(workload, seed=index), index))
                        for index, workload in enumerate(workloads)]
            hosts = stack.enter_context(cluster_hosts(work)) if cluster else None
            stack.enter_context(spark_processes_stopped())
            spark = spark_for_layout(f"jvm-source-throughput-{layout}", layout, hosts, **{
                "spark.jars": jvm.spark_jars, "spark.driver.memory": "2g",
                "spark.driver.extraJavaOptions": AERON_JVM_OPTIONS,
                "spark.executor.extraJavaOptions": AERON_JVM_OPTIONS})
            stack.callback(stop_session, spark)
            named = {"sidecar": sidecar.pid}
            if hosts is not None:
                named["Spark driver's media driver"] = hosts.driver_pid
            cpu = ProcessCpu(named, spark_jvm_pid(spark))
            from aeron_spark.connector import register
            register(spark)
            python_connection = ({"archive.controlChannel": sidecar.control_channel} if cluster
                                 else {"archive.dir": str(sidecar.archive_dir)})
            for workload, recording_ids in recorded:
                ids = ",".join(str(recording_id) for recording_id in recording_ids)
                sources = {
                    "Python": {**python_connection, "recordingIds": ids, "startingPositions": "earliest",
                               "minPartitions": "2"},
                    "JVM": {"archive.controlChannel": sidecar.control_channel, "recordingIds": ids,
                            "startingPositions": "earliest"}}
                timings = measure(spark, workload, sources, modes, repetitions, work, cpu)
                print(f"\n{workload.label} ({repetitions} repetitions, {master}, layout {layout}; "
                      f"recordings {recording_ids})")
                for name, timing in timings.items():
                    print(timing.line(name, workload))
                for mode in modes:
                    jvm_timing, python_timing = (timings[f"{MODE_NAMES[mode]}, {source}"] for source in ("JVM", "Python"))
                    print(jvm_timing.ratio_line(f"{MODE_NAMES[mode]}, JVM", python_timing, "Python"))
                print("\n".join(line for line in cpu.lines() if workload.label in line), flush=True)
                for name, timing in timings.items():
                    print(RESULT_PREFIX + json.dumps({
                        "layout": layout, "workload": workload.label, "count": workload.count, "size": workload.size,
                        "read": name, "seconds": timing.seconds,
                        "cpu": cpu.totals.get(f"{workload.label}, {name}", {}),
                        "runs": cpu.runs.get(f"{workload.label}, {name}", 0)}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        remove_java_driver_dirs(java_dirs_before)
    return 0


# --- both layouts: one process each, a summary at the end -------------------------------------------


def run_layout_process(layout: str, argv: list[str]) -> list[dict[str, Any]]:
    """This script for one layout, its output passed through; its RESULT lines returned. Stopped by
    PID (SIGTERM, so its own clean-up runs; then its whole process tree killed) if it outlives us."""
    command = [sys.executable, str(Path(__file__).resolve()), *argv, "--layout", layout]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, start_new_session=True)
    results = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(RESULT_PREFIX):
                results.append(json.loads(line[len(RESULT_PREFIX):]))
            else:
                print(line, end="", flush=True)
        if process.wait() != 0:
            raise RuntimeError(f"the {layout} layout's run failed (exit code {process.returncode})")
    finally:
        if process.poll() is None:
            stop_pid(process.pid, process, grace_s=LAYOUT_STOP_GRACE_S)
        if process.poll() is None:
            kill_tree(process.pid)
            process.wait(30)
    return results


def cpu_per_run(result: dict[str, Any]) -> str:
    """Every process's CPU seconds per timed run (an embedded driver's thread is inside its process's)."""
    if not result["runs"]:
        return "-"
    total = sum(seconds for kind, seconds in result["cpu"].items() if not kind.endswith(DRIVER_THREAD))
    return f"{total / result['runs']:.2f}"


def summary(results: list[dict[str, Any]]) -> list[str]:
    """Per layout, workload and mode: both sources' medians and the ratio JVM / Python."""
    lines = ["| layout | workload | mode | Python rows/s (MB/s) | JVM rows/s (MB/s) | JVM / Python (min-max per repeat) "
             "| CPU per run, Python / JVM (core-s) |",
             "|---|---|---|---|---|---|---|"]
    by_read = {(r["layout"], r["workload"], r["read"]): r for r in results}
    for layout, workload, read in by_read:
        if not read.endswith(", Python"):
            continue
        mode = read.rsplit(", ", 1)[0]
        python, jvm = by_read[(layout, workload, read)], by_read.get((layout, workload, f"{mode}, JVM"))
        if jvm is None:
            continue
        cells = []
        for result in (python, jvm):
            median = Timings(result["seconds"]).median
            cells.append(f"{result['count'] / median:,.0f} ({result['count'] * result['size'] / median / 1e6:.1f})")
        ratio = Timings(python["seconds"]).median / Timings(jvm["seconds"]).median
        paired = [p / j for p, j in zip(python["seconds"], jvm["seconds"])]  # the same repetition's two reads
        lines.append(f"| {layout} | {workload} | {mode} | {cells[0]} | {cells[1]} | {ratio:.2f}x "
                     f"({min(paired):.2f}-{max(paired):.2f}) | {cpu_per_run(python)} / {cpu_per_run(jvm)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parser(TERM_LENGTH // 8), action="append",
                        help="COUNTxSIZE, repeatable (default: 2000000x32 and 500000x1024)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma list of {', '.join(MODES)} (default: both)")
    parser.add_argument("--layout", choices=(*LAYOUTS, "both"), default="both",
                        help=f"single-host (local[2]), cluster ({CLUSTER_MASTER}, a media driver per executor) "
                             "or both, one after the other (default)")
    parser.add_argument("--quick", action="store_true",
                        help="a small run that proves the benchmark works: "
                             + " and ".join(w.label for w in QUICK_WORKLOADS) + ", 1 repetition")
    parser.add_argument("--work-dir", type=Path, help="where the archives go (default: a temp dir)")
    arguments = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(arguments)
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not modes or any(mode not in MODES for mode in modes):
        parser.error(f"--modes {args.modes!r}: accepted values are {', '.join(MODES)} (comma separated)")
    if args.repetitions < 1:
        parser.error(f"--repetitions {args.repetitions}: give 1 or more")
    if args.layout != "both":
        workloads = args.workload or (QUICK_WORKLOADS if args.quick else DEFAULT_WORKLOADS)
        return run_layout(args.layout, workloads, modes, 1 if args.quick else args.repetitions, args.work_dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    started = time.perf_counter()
    forwarded = ["--repetitions", str(args.repetitions), "--modes", ",".join(modes)]
    forwarded += [f"--workload={w.count}x{w.size}" for w in args.workload or []]
    forwarded += (["--quick"] if args.quick else []) + (["--work-dir", str(args.work_dir)] if args.work_dir else [])
    results = []
    for layout in LAYOUTS:
        results += run_layout_process(layout, forwarded)
    print(f"\nSummary (medians; ratio = JVM rows/s / Python rows/s), {time.perf_counter() - started:.0f} s in all")
    print("\n".join(summary(results)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
