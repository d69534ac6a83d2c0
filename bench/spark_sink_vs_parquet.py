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

MB/s counts payload bytes only (10^6 B). Every process started here is stopped by PID, also on
failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

READY_PREFIX = "aeron-archive ready:"
SINK_STREAM_ID_BASE = 5001


@dataclass(frozen=True)
class Workload:
    count: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.count:,} x {self.size} B"

    @property
    def payload_mb(self) -> float:
        return self.count * self.size / 1e6

    @classmethod
    def parse(cls, text: str) -> Workload:
        count, _, size = text.lower().partition("x")
        try:
            workload = cls(int(count.replace("_", "")), int(size))
        except ValueError:
            raise argparse.ArgumentTypeError(f"workload {text!r}: expected COUNTxSIZE, e.g. 1000000x32") from None
        if workload.count <= 0 or not 8 <= workload.size <= 1 << 20:
            raise argparse.ArgumentTypeError(f"workload {text!r}: count must be > 0 and size in 8..1048576")
        return workload


# --- the sidecar --------------------------------------------------------------------------------


@contextmanager
def running_sidecar(archive_dir: Path) -> Iterator[subprocess.Popen]:
    """`aeron-archive serve` (embedded driver, IPC control); stopped by PID: SIGTERM, then SIGKILL."""
    command = [sys.executable, "-m", "aeron_spark.archive.tool", "serve", "--dir", str(archive_dir),
               "--control-channel", "aeron:ipc", "--log-level", "WARNING"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        ready = threading.Event()

        def read() -> None:
            for line in process.stdout:
                if line.startswith(READY_PREFIX):
                    ready.set()
        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 60
        while not ready.wait(0.05):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"aeron-archive serve did not become ready (exit code {process.poll()})")
        yield process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(30)


# --- data ---------------------------------------------------------------------------------------


def write_input(path: Path, workload: Workload, seed: int) -> None:
    """Random payloads (incompressible) in one Parquet file, written with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = np.random.default_rng(seed).integers(0, 256, workload.count * workload.size, dtype=np.uint8)
    offsets = np.arange(0, workload.count + 1, dtype=np.int32) * workload.size
    payload = pa.Array.from_buffers(pa.binary(), workload.count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    pq.write_table(pa.table({"payload": payload}), path, compression="none",
                   row_group_size=max(1, (16 << 20) // workload.size))


def fingerprint(dataframe) -> tuple:
    from pyspark.sql import functions as F

    row = dataframe.agg(F.count("*"), F.sum(F.length("payload")), F.bit_xor(F.xxhash64("payload"))).collect()[0]
    return tuple(row)


# --- measuring ----------------------------------------------------------------------------------


@dataclass
class Timings:
    seconds: list[float]

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def line(self, name: str, workload: Workload) -> str:
        return (f"  {name:<22} min {self.best:7.3f} s  median {self.median:7.3f} s   "
                f"best {workload.count / self.best / 1e6:6.2f} M rows/s {workload.payload_mb / self.best:7.1f} MB/s   "
                f"median {workload.count / self.median / 1e6:6.2f} M rows/s "
                f"{workload.payload_mb / self.median:7.1f} MB/s")


@dataclass(frozen=True)
class Result:
    workload: Workload
    sink: Timings
    parquet: Timings

    @property
    def ratio_best(self) -> float:
        return self.parquet.best / self.sink.best

    @property
    def ratio_median(self) -> float:
        return self.parquet.median / self.sink.median


def measure(spark, workload: Workload, input_path: Path, archive_dir: Path, out_dir: Path, stream_id: int,
            repetitions: int) -> Result:
    rows = spark.read.parquet(str(input_path)).repartition(2).cache()
    expected = fingerprint(rows)  # materializes the cache
    if tuple(expected[:2]) != (workload.count, workload.count * workload.size):
        raise AssertionError(f"input holds {expected[:2]}, not {workload.count} rows of {workload.size} B")
    sink_id = f"bench-sink-{stream_id}"
    parquet_out = out_dir / f"parquet-{stream_id}"

    def sink_write() -> None:
        (rows.write.format("aeron-archive").mode("append").option("archive.dir", str(archive_dir))
         .option("channel", "aeron:ipc").option("streamId", str(stream_id)).option("sink.id", sink_id).save())

    def parquet_write() -> None:
        rows.write.mode("overwrite").parquet(str(parquet_out))

    writers: dict[str, Callable[[], None]] = {"aeron-archive sink": sink_write, "Parquet writer": parquet_write}
    for write in writers.values():  # warm-up (workers, JIT), and the correctness check below
        write()
    sink_rows = (spark.read.format("aeron-archive").option("archive.dir", str(archive_dir))
                 .option("channel", f"alias=aeron-spark-sink:{sink_id}").option("streamId", str(stream_id)).load())
    for name, written in (("aeron-archive sink", sink_rows), ("Parquet writer", spark.read.parquet(str(parquet_out)))):
        answer = fingerprint(written)
        if answer != expected:
            raise AssertionError(f"{name}: read back {answer}, the input is {expected}")
    seconds: dict[str, list[float]] = {name: [] for name in writers}
    for repetition in range(repetitions):
        order = list(writers.items())
        if repetition % 2:
            order.reverse()  # alternate which goes first: load and page cache hit both alike
        for name, write in order:
            started = time.perf_counter()
            write()
            seconds[name].append(time.perf_counter() - started)
    rows.unpersist()
    shutil.rmtree(parquet_out, ignore_errors=True)
    return Result(workload, Timings(seconds["aeron-archive sink"]), Timings(seconds["Parquet writer"]))


def report(result: Result, repetitions: int) -> str:
    workload = result.workload
    return "\n".join([
        f"\n{workload.label} ({repetitions} repetitions, local[2])",
        result.sink.line("aeron-archive sink", workload),
        result.parquet.line("Parquet writer", workload),
        f"  ratio sink/Parquet (rows/s): best {result.ratio_best:.2f}x, median {result.ratio_median:.2f}x",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parse, action="append",
                        help="COUNTxSIZE, repeatable (default: 1000000x32 and 300000x1024)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, help="where the archive, input and outputs go (default: a temp dir)")
    args = parser.parse_args(argv)
    workloads = args.workload or [Workload(1_000_000, 32), Workload(300_000, 1024)]

    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="spark-sink-bench-", dir=args.work_dir))
    try:
        inputs = []
        for index, workload in enumerate(workloads):
            path = work / f"input-{index}.parquet"
            write_input(path, workload, seed=index)
            inputs.append((workload, path))
        with running_sidecar(work / "archive"):
            spark = _spark()
            try:
                from aeron_spark.connector import register
                register(spark)
                for index, (workload, path) in enumerate(inputs):
                    result = measure(spark, workload, path, work / "archive", work, SINK_STREAM_ID_BASE + index,
                                     args.repetitions)
                    print(report(result, args.repetitions), flush=True)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _spark():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("spark-sink-vs-parquet")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.driver.memory", "3g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


if __name__ == "__main__":
    sys.exit(main())
