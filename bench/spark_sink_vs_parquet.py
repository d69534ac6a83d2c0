"""Benchmark: batch `write.format("aeron-archive")` (committed) against Spark's own Parquet writer.

For each workload (default: 1,000,000 x 32 B and 300,000 x 1 KiB rows) it

1. writes random (incompressible) payloads once into a Parquet file with pyarrow, reads it into
   Spark, repartitions it into two partitions and caches it (materialized before timing): both
   writers get the same cached rows, and the read of the input is not part of either timing,
2. times, in one local[2] Spark session and alternating, ``df.write.format("aeron-archive")``
   into the real sidecar (`aeron-archive serve` subprocess with its embedded media driver; the
   sink's default IPC channel, 16 MiB terms, recorded LOCAL; each save stages the rows on the
   executors, then the driver-side commit appends them and a commit marker and waits until the
   archive has recorded them) and ``df.write.parquet`` (Spark's default snappy compression,
   mode overwrite),
3. checks once per workload that the sink recording read back holds the same rows (count, bytes,
   bit_xor of xxhash64 of every payload) as the input,
4. prints min / median seconds, rows/s and payload MB/s of each, and the ratio sink/Parquet.

Run::

    .venv/bin/python bench/spark_sink_vs_parquet.py                          # defaults, 5 repetitions
    .venv/bin/python bench/spark_sink_vs_parquet.py --workload 200000x32 --repetitions 3

``--layout cluster`` (spark_bench_support.py): the sidecar on its own embedded driver with a UDP
control channel, Spark ``local-cluster[2,1,1024]``, this process (the Spark driver, where the
commit runs) on a standalone media driver of its own, executors' Python workers on embedded ones;
the sink is given ``archive.controlChannel``, a UDP sink channel the archive records
(``aeron:udp?endpoint=127.0.0.1:<free port>``, recorded REMOTE) and ``sink.stagingDir`` on a local
directory; the read-back goes over UDP too. The Parquet writer runs in the same session.

    .venv/bin/python bench/spark_sink_vs_parquet.py --layout cluster --repetitions 3

MB/s counts payload bytes only (10^6 B). Every process started here is stopped by PID, also on
failure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spark_bench_support import (
    CLUSTER_MASTER,
    ProcessCpu,
    Timings,
    Workload,
    add_layout_argument,
    cluster_hosts,
    exit_on_sigterm,
    fingerprint,
    interleaved_runs,
    loopback_udp_channel,
    payload_block,
    progress,
    running_sidecar,
    spark_for_layout,
    spark_jvm_pid,
    spark_processes_stopped,
    stop_session,
    write_parquet,
)

SINK_STREAM_ID_BASE = 5001
SINK = "aeron-archive sink"
PARQUET = "Parquet writer"
# How the sidecar writes its segment files: `aeron-archive serve`'s own default is buffered (as
# Aeron's); O_DIRECT (`--segment-direct-io`) is the opt-in for an archive that records large blocks.
SEGMENT_IO_SERVE_ARGS = {"buffered": ("--no-segment-direct-io",), "direct": ("--segment-direct-io",)}
# This benchmark's figures (docs/performance.md) were taken with O_DIRECT segment writes, chosen for
# IPC sinks writing 1 MiB blocks (docs/performance-history.md "O_DIRECT segment writes").
SINK_VS_PARQUET_SEGMENT_IO = "direct"


def add_segment_io_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--segment-io", choices=sorted(SEGMENT_IO_SERVE_ARGS), default=default,
                        help="how the sidecar writes segment files: buffered (page cache, the sidecar's default) "
                             f"or direct (O_DIRECT, --segment-direct-io); default here: {default}")


# --- data ---------------------------------------------------------------------------------------


def write_input(path: Path, workload: Workload, seed: int) -> None:
    """Random payloads (incompressible) in one Parquet file, written with pyarrow."""
    write_parquet(path, workload, payload_block(workload, seed))


# --- measuring ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    workload: Workload
    sink: Timings
    parquet: Timings


def measure(spark, workload: Workload, input_path: Path, sink_options: dict[str, str], read_options: dict[str, str],
            out_dir: Path, stream_id: int, repetitions: int, cpu: ProcessCpu) -> Result:
    rows = spark.read.parquet(str(input_path)).repartition(2).cache()
    expected = fingerprint(rows)  # materializes the cache
    if tuple(expected[:2]) != (workload.count, workload.count * workload.size):
        raise AssertionError(f"input holds {expected[:2]}, not {workload.count} rows of {workload.size} B")
    sink_id = f"bench-sink-{stream_id}"
    parquet_out = out_dir / f"parquet-{stream_id}"

    def sink_write() -> None:
        (rows.write.format("aeron-archive").mode("append").options(**sink_options)
         .option("streamId", str(stream_id)).option("sink.id", sink_id).save())

    def parquet_write() -> None:
        rows.write.mode("overwrite").parquet(str(parquet_out))

    writers: dict[str, Callable[[], None]] = {SINK: sink_write, PARQUET: parquet_write}
    for name, write in writers.items():  # warm-up (workers, JIT), and the correctness check below
        started = time.perf_counter()
        write()
        progress(f"{workload.label}: warm-up {name} {time.perf_counter() - started:.2f} s")
    sink_rows = (spark.read.format("aeron-archive").options(**read_options)
                 .option("channel", f"alias=aeron-spark-sink:{sink_id}").option("streamId", str(stream_id)).load())
    for name, written in ((SINK, sink_rows), (PARQUET, spark.read.parquet(str(parquet_out)))):
        answer = fingerprint(written)
        if answer != expected:
            raise AssertionError(f"{name}: read back {answer}, the input is {expected}")
    progress(f"{workload.label}: both outputs read back equal to the input")
    progress(f"{workload.label}: Python workers now: {cpu.worker_layout()}")
    seconds = interleaved_runs(workload.label, writers, repetitions, cpu)
    rows.unpersist()
    shutil.rmtree(parquet_out, ignore_errors=True)
    return Result(workload, Timings(seconds[SINK]), Timings(seconds[PARQUET]))


def report(result: Result, repetitions: int, master: str, layout: str) -> str:
    workload = result.workload
    return "\n".join([
        f"\n{workload.label} ({repetitions} repetitions, {master}, layout {layout})",
        result.sink.line(SINK, workload),
        result.parquet.line(PARQUET, workload),
        result.sink.ratio_line("sink", result.parquet, "Parquet"),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parser(1 << 20), action="append",
                        help="COUNTxSIZE, repeatable (default: 1000000x32 and 300000x1024)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, help="where the archive, input and outputs go (default: a temp dir)")
    parser.add_argument("--sink-mtu", help="the sink's sink.mtu (default: its default, 8192 on IPC, 1408 on UDP); "
                                           "over UDP a datagram carries up to this many bytes")
    add_segment_io_argument(parser, SINK_VS_PARQUET_SEGMENT_IO)
    add_layout_argument(parser)
    args = parser.parse_args(argv)
    workloads = args.workload or [Workload(1_000_000, 32), Workload(300_000, 1024)]
    cluster = args.layout == "cluster"
    master = CLUSTER_MASTER if cluster else "local[2]"

    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="spark-sink-bench-", dir=args.work_dir))
    try:
        inputs = []
        for index, workload in enumerate(workloads):
            path = work / f"input-{index}.parquet"
            write_input(path, workload, seed=index)
            inputs.append((workload, path))
        progress(f"wrote the inputs: {', '.join(workload.label for workload, _ in inputs)}")
        with contextlib.ExitStack() as stack:
            control = loopback_udp_channel() if cluster else "aeron:ipc"
            sidecar = stack.enter_context(running_sidecar(
                work / "archive", "--control-channel", control, "--log-level", "WARNING",
                *SEGMENT_IO_SERVE_ARGS[args.segment_io]))
            if cluster:  # the Spark driver commits over UDP from its own driver; staging on a local directory
                read_options = {"archive.controlChannel": sidecar.control_channel}
                sink_options = {**read_options, "channel": loopback_udp_channel(),
                                "sink.stagingDir": str(work / "staging")}
            else:
                read_options = {"archive.dir": str(sidecar.archive_dir)}
                sink_options = {**read_options, "channel": "aeron:ipc"}
            if args.sink_mtu:
                sink_options["sink.mtu"] = args.sink_mtu
            hosts = stack.enter_context(cluster_hosts(work)) if cluster else None
            stack.enter_context(spark_processes_stopped())
            spark = spark_for_layout("spark-sink-vs-parquet", args.layout, hosts, **{
                "spark.default.parallelism": "2", "spark.driver.memory": "3g"})
            stack.callback(stop_session, spark)
            named = {"sidecar": sidecar.pid}
            if hosts is not None:
                named["Spark driver's media driver"] = hosts.driver_pid
            cpu = ProcessCpu(named, spark_jvm_pid(spark))
            from aeron_spark.connector import register
            register(spark)
            for index, (workload, path) in enumerate(inputs):
                progress(f"{workload.label}: sink options {sink_options}")
                result = measure(spark, workload, path, sink_options, read_options, work,
                                 SINK_STREAM_ID_BASE + index, args.repetitions, cpu)
                print(report(result, args.repetitions, master, args.layout))
                print("\n".join(line for line in cpu.lines() if workload.label in line), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
