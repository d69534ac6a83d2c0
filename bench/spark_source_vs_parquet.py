"""Benchmark: `spark.read.format("aeron-archive")` against Spark's own Parquet scan of the same data.

For each workload (default: 2,000,000 x 32 B and 500,000 x 1 KiB messages) it

1. records the messages through the real sidecar (`aeron-archive serve` subprocess with its
   embedded media driver; IPC publication, recorded locally),
2. writes the same payloads once into an uncompressed Parquet file (pyarrow),
3. runs, in one Spark session and alternating, a batch read of the recording and a Parquet scan,
   each followed by the same aggregation that touches every payload byte
   (``count(*)``, ``sum(length(payload))``, ``bit_xor(xxhash64(payload))``), and checks that both
   give the same answer,
4. prints min / median seconds, rows/s and payload MB/s of each, and the ratio source/Parquet.

Run::

    .venv/bin/python bench/spark_source_vs_parquet.py                       # defaults
    .venv/bin/python bench/spark_source_vs_parquet.py --workload 200000x32 --repetitions 3

Both sides are given two partitions at least (the source splits at term boundaries by
``maxBytesPerPartition``; Parquet by ``spark.sql.files.maxPartitionBytes`` over row groups), so
both use the two cores of local[2]. The archive directory and the Parquet file live under the same
work directory (page cache hot for both after writing). Every process started here is stopped by
PID, also on failure.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

READY_PREFIX = "aeron-archive ready:"
TERM_LENGTH = 16 * 1024 * 1024
STREAM_ID_BASE = 4001


@dataclass(frozen=True)
class Workload:
    count: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.count:,} x {self.size} B"

    @classmethod
    def parse(cls, text: str) -> "Workload":
        count, _, size = text.lower().partition("x")
        try:
            workload = cls(int(count.replace("_", "")), int(size))
        except ValueError:
            raise argparse.ArgumentTypeError(f"workload {text!r}: expected COUNTxSIZE, e.g. 2000000x32") from None
        if workload.count <= 0 or not 8 <= workload.size <= TERM_LENGTH // 8:
            raise argparse.ArgumentTypeError(f"workload {text!r}: count must be > 0 and size in 8..{TERM_LENGTH // 8}")
        return workload


# --- the sidecar --------------------------------------------------------------------------------


@dataclass
class RunningSidecar:
    process: subprocess.Popen
    archive_dir: Path
    aeron_dir: str


@contextmanager
def sidecar(archive_dir: Path) -> Iterator[RunningSidecar]:
    """`aeron-archive serve` on an IPC control channel; stopped by PID (SIGTERM, then SIGKILL)."""
    command = [sys.executable, "-m", "aeron_spark.archive.tool", "serve", "--dir", str(archive_dir),
               "--control-channel", "aeron:ipc", "--control-stream-id", "10", "--log-level", "WARNING"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        ready = _await_ready(process)
        fields = dict(token.split("=", 1) for token in ready[len(READY_PREFIX):].split())
        yield RunningSidecar(process, archive_dir, fields["aeronDir"])
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(30)


def _await_ready(process: subprocess.Popen, timeout_s: float = 60.0) -> str:
    found: list[str] = []

    def read() -> None:
        for line in process.stdout:
            if line.startswith(READY_PREFIX) and not found:
                found.append(line.strip())
    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"aeron-archive serve did not become ready (exit code {process.poll()})")
        time.sleep(0.05)
    return found[0]


# --- data ---------------------------------------------------------------------------------------


def payload_block(workload: Workload, seed: int) -> np.ndarray:
    """All payloads back to back: random bytes (incompressible), message i at [i*size, (i+1)*size)."""
    return np.random.default_rng(seed).integers(0, 256, workload.count * workload.size, dtype=np.uint8)


def record(archive, aeron, workload: Workload, data: np.ndarray, stream_id: int) -> tuple[int, int]:
    """Records every payload on a fresh IPC stream; returns (recording id, stop position)."""
    from aeron_spark.archive.client import SourceLocation

    channel = f"aeron:ipc?term-length={TERM_LENGTH}"
    archive.start_recording(channel, stream_id, SourceLocation.LOCAL)
    publication = aeron.add_exclusive_publication(channel, stream_id)
    try:
        recording_id = _await_recording(archive, publication)
        raw = data.tobytes()
        size = workload.size
        offer = publication.offer
        position = 0
        for start in range(0, len(raw), size):
            message = raw[start:start + size]
            while (position := offer(message)) < 0:
                time.sleep(0)  # back pressured by the recorder
        while archive.max_recorded_position(recording_id) < position:
            time.sleep(0.01)
    finally:
        archive.stop_recording(channel, stream_id)
        publication.close()
    while archive.stop_position(recording_id) < 0:
        time.sleep(0.01)
    return recording_id, position


def _await_recording(archive, publication, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for descriptor in archive.list_recordings_for_uri(0, None, "aeron:ipc", publication.stream_id):
            if descriptor.session_id == publication.session_id:
                return descriptor.recording_id
        time.sleep(0.01)
    raise RuntimeError(f"the archive did not start recording stream {publication.stream_id}")


def write_parquet(path: Path, workload: Workload, data: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    offsets = np.arange(0, workload.count + 1, dtype=np.int32) * workload.size
    payload = pa.Array.from_buffers(pa.binary(), workload.count,
                                    [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    # Row groups of ~16 MiB of payload, so Spark can split the file across both cores.
    rows_per_group = max(1, (16 << 20) // workload.size)
    pq.write_table(pa.table({"payload": payload}), path, compression="none", row_group_size=rows_per_group)


# --- measuring ----------------------------------------------------------------------------------


def aggregate(dataframe) -> tuple:
    from pyspark.sql import functions as F

    row = dataframe.agg(F.count("*"), F.sum(F.length("payload")), F.bit_xor(F.xxhash64("payload"))).collect()[0]
    return tuple(row)


@dataclass
class Timings:
    seconds: list[float]

    def line(self, name: str, workload: Workload) -> str:
        low, median = min(self.seconds), statistics.median(self.seconds)
        mb = workload.count * workload.size / 1e6
        return (f"  {name:<26} min {low:7.3f} s  median {median:7.3f} s   "
                f"best {workload.count / low / 1e6:6.2f} M rows/s {mb / low:8.1f} MB/s   "
                f"median {workload.count / median / 1e6:6.2f} M rows/s {mb / median:8.1f} MB/s")


SOURCE_ALL = "source, all columns"
SOURCE_PAYLOAD = "source, .schema(payload)"
PARQUET = "Parquet scan"


def measure(spark, workload: Workload, archive_dir: Path, recording_id: int, parquet: Path,
            repetitions: int, source_options: dict[str, str]) -> dict[str, Timings]:
    """Alternates the three reads (the default schema, only the payload column, Parquet)."""
    source = (spark.read.format("aeron-archive").option("archive.dir", str(archive_dir))
              .option("recordingIds", str(recording_id)).options(**source_options))
    scans = {SOURCE_ALL: lambda: aggregate(source.load()),
             SOURCE_PAYLOAD: lambda: aggregate(source.schema("payload binary").load()),
             PARQUET: lambda: aggregate(spark.read.parquet(str(parquet)))}
    answers = {name: scan() for name, scan in scans.items()}  # warm-up, and the correctness check
    expected = (workload.count, workload.count * workload.size)
    for name, answer in answers.items():
        if tuple(answer[:2]) != expected:
            raise AssertionError(f"{name}: count/bytes {answer[:2]} != {expected}")
    if len(set(answers.values())) != 1:
        raise AssertionError(f"the reads disagree: {answers}")
    seconds: dict[str, list[float]] = {name: [] for name in scans}
    for _ in range(repetitions):
        for name, scan in scans.items():  # alternating: noise hits all alike
            started = time.perf_counter()
            scan()
            seconds[name].append(time.perf_counter() - started)
    return {name: Timings(values) for name, values in seconds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parse, action="append",
                        help="COUNTxSIZE, repeatable (default: 2000000x32 and 500000x1024)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, help="where the archive and Parquet files go (default: a temp dir)")
    parser.add_argument("--max-bytes-per-partition", help="the source's maxBytesPerPartition (default: its default)")
    parser.add_argument("--min-partitions", default="2",
                        help="the source's minPartitions (default 2: the cores of local[2], as Parquet's split size)")
    parser.add_argument("--parquet-max-partition-bytes", default="32m",
                        help="spark.sql.files.maxPartitionBytes for the Parquet scan")
    args = parser.parse_args(argv)
    workloads = args.workload or [Workload(2_000_000, 32), Workload(500_000, 1024)]

    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="spark-source-bench-", dir=args.work_dir))
    try:
        with sidecar(work / "archive") as running:
            from aeron_spark.archive.client import ArchiveClient
            from aeron_spark.driver_integration import AeronClient

            aeron = AeronClient(running.aeron_dir, client_name="spark-source-bench")
            archive = ArchiveClient.connect(control_channel="aeron:ipc", response_channel="aeron:ipc", aeron=aeron)
            recordings = []
            try:
                for index, workload in enumerate(workloads):
                    data = payload_block(workload, seed=index)
                    started = time.perf_counter()
                    recording_id, stop = record(archive, aeron, workload, data, STREAM_ID_BASE + index)
                    recorded_s = time.perf_counter() - started
                    parquet = work / f"payloads-{index}.parquet"
                    write_parquet(parquet, workload, data)
                    recordings.append((workload, recording_id, parquet))
                    print(f"recorded {workload.label}: recording {recording_id}, {stop:,} bytes in "
                          f"{recorded_s:.1f} s; Parquet {parquet.stat().st_size:,} bytes", flush=True)
            finally:
                archive.close()
                aeron.close()
            spark = _spark(args.parquet_max_partition_bytes)
            try:
                from aeron_spark.connector import register
                register(spark)
                source_options = {"minPartitions": args.min_partitions}
                if args.max_bytes_per_partition:
                    source_options["maxBytesPerPartition"] = args.max_bytes_per_partition
                for workload, recording_id, parquet in recordings:
                    timings = measure(spark, workload, running.archive_dir, recording_id, parquet,
                                      args.repetitions, source_options)
                    print(f"\n{workload.label} ({args.repetitions} repetitions, local[2], source options "
                          f"{source_options})")
                    for name, timing in timings.items():
                        print(timing.line(name, workload))
                    scan = timings[PARQUET].seconds
                    for name in (SOURCE_ALL, SOURCE_PAYLOAD):
                        mine = timings[name].seconds
                        print(f"  ratio {name} / Parquet (rows/s): best {min(scan) / min(mine):.2f}x, "
                              f"median {statistics.median(scan) / statistics.median(mine):.2f}x", flush=True)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _spark(parquet_max_partition_bytes: str):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("spark-source-vs-parquet")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.files.maxPartitionBytes", parquet_max_partition_bytes)
             .config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


if __name__ == "__main__":
    sys.exit(main())
