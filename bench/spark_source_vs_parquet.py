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

The single-host layout also reads, alternating with the others, the ceiling of any Python source:
an in-memory Python source yielding the very batches the source yields (bench/in_memory_source.py,
read once through the source's own code in this process before Spark starts), with all columns
and with the payload only. The gap between it and Parquet is Spark's Python Data Source hop; the
gap between the source and it is ours.

Run::

    .venv/bin/python bench/spark_source_vs_parquet.py                       # defaults
    .venv/bin/python bench/spark_source_vs_parquet.py --workload 200000x32 --repetitions 3

Both sides are given two partitions at least (the source splits at term boundaries by
``maxBytesPerPartition``; Parquet by ``spark.sql.files.maxPartitionBytes`` over row groups), so
both use the two cores of local[2]. The archive directory and the Parquet file live under the same
work directory (page cache hot for both after writing).

``--layout cluster`` measures the same reads as a cluster deployment would run them
(spark_bench_support.py): the sidecar listens on a UDP control channel, the messages are recorded
as above over its local IPC control stream before Spark starts (that client is closed first),
Spark runs ``local-cluster[2,1,1024]`` with this process on a standalone media driver of its own
and each executor's Python worker on an embedded one, and the source is given
``archive.controlChannel`` only, so every replay crosses UDP. The Parquet scan runs in the same
session. Every process started here is stopped by PID, also on failure.

    .venv/bin/python bench/spark_source_vs_parquet.py --layout cluster --repetitions 3

Over UDP the source asks for replays at ``replay.mtu`` (default ``auto``: 8192 towards loopback,
as here), so 1 KiB frames recorded at mtu 1408 travel seven to a datagram instead of one.
``--replay-mtu`` sets the option; ``--compare-replay-mtu`` also reads, alternating with the
others, at the recording's mtu (``replay.mtu=recording``, the behaviour before the option):

    .venv/bin/python bench/spark_source_vs_parquet.py --layout cluster --workload 500000x1024 --compare-replay-mtu
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
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

TERM_LENGTH = 16 * 1024 * 1024
STREAM_ID_BASE = 4001


# --- data ---------------------------------------------------------------------------------------


def record(archive, aeron, workload: Workload, data: np.ndarray, stream_id: int,
           mtu: int | None = None) -> tuple[int, int, int]:
    """Records every payload on a fresh IPC stream (``mtu``: the channel's, else the driver's
    default); returns (recording id, stop position, the recording's mtu: a replay's datagram size)."""
    from aeron_spark.archive.client.archive_client import SourceLocation

    channel = f"aeron:ipc?term-length={TERM_LENGTH}" + (f"|mtu={mtu}" if mtu else "")
    archive.start_recording(channel, stream_id, SourceLocation.LOCAL)
    publication = aeron.add_exclusive_publication(channel, stream_id)
    try:
        descriptor = _await_recording(archive, publication)
        recording_id = descriptor.recording_id
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
    return recording_id, position, descriptor.mtu_length


def _await_recording(archive, publication, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for descriptor in archive.list_recordings_for_uri(0, None, "aeron:ipc", publication.stream_id):
            if descriptor.session_id == publication.session_id:
                return descriptor
        time.sleep(0.01)
    raise RuntimeError(f"the archive did not start recording stream {publication.stream_id}")


# --- measuring ----------------------------------------------------------------------------------


SOURCE_ALL = "source, all columns"
SOURCE_PAYLOAD = "source, payload only"
SOURCE_AT_RECORDING_MTU = "source, all columns, replay.mtu=recording"
CEILING_ALL = "in-memory Python source, all columns"
CEILING_PAYLOAD = "in-memory Python source, payload only"
PARQUET = "Parquet scan"
PAYLOAD_ONLY = "payload binary not null"


def ceiling_files(archive_dir: str, recording_id: int, source_options: dict[str, str], work: Path,
                  label: str) -> dict[str, list[str]]:
    """The source's own batches (all columns, payload only), read once in this process and kept in
    Arrow IPC files for the in-memory source (bench/in_memory_source.py)."""
    from in_memory_source import materialize
    from pyspark.sql.types import BinaryType, StructField, StructType

    options = {"archive.dir": archive_dir, "recordingIds": str(recording_id), **source_options}
    files = {}
    for name, schema in ((CEILING_ALL, None), (CEILING_PAYLOAD, StructType([StructField("payload", BinaryType(), False)]))):
        started = time.perf_counter()
        files[name], rows = materialize(dict(options), work, f"{label}-{len(files)}", schema)
        progress(f"{name}: {rows:,} rows in {len(files[name])} partition file(s), read in "
                 f"{time.perf_counter() - started:.1f} s")
    return files


def measure(spark, workload: Workload, connection: dict[str, str], recording_id: int, parquet: Path,
            repetitions: int, source_options: dict[str, str], cpu: ProcessCpu,
            ceiling: dict[str, list[str]] | None = None, compare_replay_mtu: bool = False) -> dict[str, Timings]:
    """Alternates the reads: the default schema, only the payload column, the default schema at the
    recording's mtu (when ``compare_replay_mtu``), the in-memory source with the same batches (when
    ``ceiling`` is given), Parquet."""
    def source(**extra: str):
        # A new reader per read: a DataFrameReader's schema() and option() change the reader itself.
        return (spark.read.format("aeron-archive").options(**connection)
                .option("recordingIds", str(recording_id)).options(**{**source_options, **extra}))

    scans = {SOURCE_ALL: lambda: fingerprint(source().load()),
             SOURCE_PAYLOAD: lambda: fingerprint(source().schema(PAYLOAD_ONLY).load())}
    if compare_replay_mtu:
        scans[SOURCE_AT_RECORDING_MTU] = lambda: fingerprint(source(**{"replay.mtu": "recording"}).load())
    if ceiling is not None:
        from in_memory_source import reader
        for name, files in ceiling.items():
            scans[name] = (lambda files: lambda: fingerprint(reader(spark, files).load()))(files)
    scans[PARQUET] = lambda: fingerprint(spark.read.parquet(str(parquet)))
    answers = {}
    for name, scan in scans.items():  # warm-up, and the correctness check
        started = time.perf_counter()
        answers[name] = scan()
        progress(f"{workload.label}: warm-up {name} {time.perf_counter() - started:.2f} s")
    expected = (workload.count, workload.count * workload.size)
    for name, answer in answers.items():
        if tuple(answer[:2]) != expected:
            raise AssertionError(f"{name}: count/bytes {answer[:2]} != {expected}")
    if len(set(answers.values())) != 1:
        raise AssertionError(f"the reads disagree: {answers}")
    progress(f"{workload.label}: Python workers now: {cpu.worker_layout()}")
    seconds = interleaved_runs(workload.label, scans, repetitions, cpu, alternate=False)
    return {name: Timings(values) for name, values in seconds.items()}


def record_all(aeron_dir: str, control_stream_id: int, workloads: list[Workload], work: Path,
               mtu: int | None) -> list[tuple]:
    """Records every workload over IPC on the archive's own driver (its IPC control stream) and
    writes its Parquet twin; the client is closed before Spark starts."""
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.driver_integration import AeronClient

    aeron = AeronClient(aeron_dir, client_name="spark-source-bench")
    recordings = []
    try:
        archive = ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=control_stream_id,
                                        response_channel="aeron:ipc", aeron=aeron)
        try:
            for index, workload in enumerate(workloads):
                data = payload_block(workload, seed=index)
                started = time.perf_counter()
                recording_id, stop, recorded_mtu = record(archive, aeron, workload, data, STREAM_ID_BASE + index, mtu)
                recorded_s = time.perf_counter() - started
                parquet = work / f"payloads-{index}.parquet"
                write_parquet(parquet, workload, data)
                recordings.append((workload, recording_id, parquet))
                print(f"recorded {workload.label}: recording {recording_id}, {stop:,} bytes in "
                      f"{recorded_s:.1f} s, mtu {recorded_mtu}; Parquet {parquet.stat().st_size:,} bytes", flush=True)
        finally:
            archive.close()
    finally:
        aeron.close()
    return recordings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parser(TERM_LENGTH // 8), action="append",
                        help="COUNTxSIZE, repeatable (default: 2000000x32 and 500000x1024)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, help="where the archive and Parquet files go (default: a temp dir)")
    parser.add_argument("--max-bytes-per-partition", help="the source's maxBytesPerPartition (default: its default)")
    parser.add_argument("--min-partitions", default="2",
                        help="the source's minPartitions (default 2: the cores of local[2], as Parquet's split size)")
    parser.add_argument("--parquet-max-partition-bytes", default="32m",
                        help="spark.sql.files.maxPartitionBytes for the Parquet scan")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="skip the in-memory Python source that yields the source's own batches (single-host only)")
    parser.add_argument("--record-mtu", type=int,
                        help="mtu of the recorded IPC channel (default: the driver's, 1408); a replay over UDP "
                             "sends datagrams of up to this size")
    parser.add_argument("--replay-mtu",
                        help="the source's replay.mtu (default: its default, auto: 8192 for UDP replays to loopback)")
    parser.add_argument("--compare-replay-mtu", action="store_true",
                        help="also read at replay.mtu=recording (the recording's mtu: one 1 KiB frame per datagram)")
    add_layout_argument(parser)
    args = parser.parse_args(argv)
    workloads = args.workload or [Workload(2_000_000, 32), Workload(500_000, 1024)]
    cluster = args.layout == "cluster"
    master = CLUSTER_MASTER if cluster else "local[2]"

    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="spark-source-bench-", dir=args.work_dir))
    try:
        with contextlib.ExitStack() as stack:
            if cluster:  # control over UDP for Spark; the benchmark records over the local (IPC) control stream
                sidecar = stack.enter_context(running_sidecar(
                    work / "archive", "--control-channel", loopback_udp_channel(), "--log-level", "WARNING"))
                control_stream_id = int(sidecar.ready["localControlStreamId"])
                connection = {"archive.controlChannel": sidecar.control_channel}
            else:
                sidecar = stack.enter_context(running_sidecar(
                    work / "archive", "--control-channel", "aeron:ipc", "--control-stream-id", "10",
                    "--log-level", "WARNING"))
                control_stream_id = 10
                connection = {"archive.dir": str(sidecar.archive_dir)}
            recordings = record_all(sidecar.aeron_dir, control_stream_id, workloads, work, args.record_mtu)
            source_options = {"minPartitions": args.min_partitions}
            if args.max_bytes_per_partition:
                source_options["maxBytesPerPartition"] = args.max_bytes_per_partition
            if args.replay_mtu:
                source_options["replay.mtu"] = args.replay_mtu
            with_ceiling = not cluster and not args.no_ceiling
            ceilings = {recording_id: ceiling_files(str(sidecar.archive_dir), recording_id, source_options, work,
                                                    f"ceiling-{recording_id}")
                        for _workload, recording_id, _parquet in recordings} if with_ceiling else {}
            hosts = stack.enter_context(cluster_hosts(work)) if cluster else None
            stack.enter_context(spark_processes_stopped())
            spark = spark_for_layout("spark-source-vs-parquet", args.layout, hosts, **{
                "spark.sql.files.maxPartitionBytes": args.parquet_max_partition_bytes, "spark.driver.memory": "2g"})
            stack.callback(stop_session, spark)
            named = {"sidecar": sidecar.pid}
            if hosts is not None:
                named["Spark driver's media driver"] = hosts.driver_pid
            cpu = ProcessCpu(named, spark_jvm_pid(spark))
            from aeron_spark.connector import register
            register(spark)
            if with_ceiling:
                import in_memory_source
                in_memory_source.register(spark)
            for workload, recording_id, parquet in recordings:
                timings = measure(spark, workload, connection, recording_id, parquet, args.repetitions,
                                  source_options, cpu, ceilings.get(recording_id), args.compare_replay_mtu)
                print(f"\n{workload.label} ({args.repetitions} repetitions, {master}, layout {args.layout}, "
                      f"source options {source_options})")
                for name, timing in timings.items():
                    print(timing.line(name, workload))
                for name in (SOURCE_ALL, SOURCE_PAYLOAD, SOURCE_AT_RECORDING_MTU, CEILING_ALL, CEILING_PAYLOAD):
                    if name in timings:
                        print(timings[name].ratio_line(name, timings[PARQUET], "Parquet"))
                if SOURCE_AT_RECORDING_MTU in timings:
                    print(timings[SOURCE_ALL].ratio_line(SOURCE_ALL, timings[SOURCE_AT_RECORDING_MTU],
                                                         "replay.mtu=recording"))
                for name, ceiling in ((SOURCE_ALL, CEILING_ALL), (SOURCE_PAYLOAD, CEILING_PAYLOAD)):
                    if ceiling in timings:
                        print(timings[name].ratio_line(name, timings[ceiling], "its in-memory ceiling"))
                print("\n".join(line for line in cpu.lines() if workload.label in line), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
