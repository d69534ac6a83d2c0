"""Benchmark: reading with `format("aeron-archive")` against Spark's Kafka source, same run, same messages.

For each workload (default: 10,000,000 x 32 B and 1,000,000 x 1 KiB) it

1. records the messages as **two recordings** (the first half and the second half) through the real
   sidecar (`aeron-archive serve`, embedded media driver; IPC publications recorded LOCAL),
2. produces the same payloads, in the same order, into a **two-partition Kafka topic** (first half
   to partition 0, second half to 1) on a real KRaft broker on localhost (tests/support/kafka_broker.py),
   with Spark's Kafka batch sink (timed and printed, not part of the comparison),
3. in one Spark session and alternating, reads both:
   * **batch**: ``spark.read`` of both recordings (payload-only schema) / of the topic
     (``value`` as ``payload``), then ``count(*)``, ``sum(length(payload))``,
     ``bit_xor(xxhash64(payload))`` (every payload byte touched; both answers must agree);
   * **AvailableNow**: ``readStream`` from the start of both recordings / the topic's earliest
     offsets → ``noop``, ``trigger(availableNow=True)``, a fresh checkpoint each run (both must read
     every row),
4. prints min / median seconds, rows/s, the ratio ours / Kafka (rows/s; target ≥ 1.0×) and the
   CPU-seconds of every process per run: the sidecar, the Kafka broker, the Spark driver JVM and its
   media driver, the executors and their Python workers.

Layout (``--layout cluster``, the default): Spark ``local-cluster[2,1,1024]``, our archive on its own
embedded driver reached by ``archive.controlChannel`` over UDP, Kafka on localhost
(spark_bench_support.py). Run::

    .venv/bin/python bench/kafka_read.py --quick           # 200,000 x 32 B and 20,000 x 1 KiB, 1 repetition
    flock $BENCH_LOCK .venv/bin/python bench/kafka_read.py --repetitions 3

Every process started here is stopped by PID, also on failure.
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
from pathlib import Path
from typing import Any

import numpy as np
from kafka_bench_support import (
    add_kafka_layout_argument,
    kafka_broker_for_bench,
    kafka_options,
    spark_with_kafka,
    streamed_rows,
)
from profile_processes import PROFILED_KINDS, SamplingProfiler, spark_targets
from spark_bench_support import (
    CLUSTER_MASTER,
    ProcessCpu,
    Timings,
    Workload,
    cluster_hosts,
    exit_on_sigterm,
    fingerprint,
    interleaved_runs,
    loopback_udp_channel,
    payload_block,
    progress,
    running_sidecar,
    spark_jvm_pid,
    spark_processes_stopped,
    stop_session,
    write_parquet,
)
from spark_source_vs_parquet import PAYLOAD_ONLY, TERM_LENGTH, record

STREAM_ID_BASE = 6001
MODES = ("batch", "availableNow")
QUICK_WORKLOADS = [Workload(200_000, 32), Workload(20_000, 1024)]
DEFAULT_WORKLOADS = [Workload(10_000_000, 32), Workload(1_000_000, 1024)]
QUERY_TIMEOUT_S = 1800.0


def record_halves(aeron_dir: str, control_stream_id: int, workload: Workload, data: np.ndarray, index: int,
                  work: Path) -> tuple[list[int], list[Path]]:
    """Two recordings (first half, second half) and a Parquet file of each half (the Kafka input)."""
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.driver_integration import AeronClient

    half = workload.count // 2
    halves = [(Workload(half, workload.size), data[:half * workload.size]),
              (Workload(workload.count - half, workload.size), data[half * workload.size:])]
    aeron = AeronClient(aeron_dir, client_name="kafka-read-bench")
    recording_ids, parquets = [], []
    try:
        archive = ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=control_stream_id,
                                        response_channel="aeron:ipc", aeron=aeron)
        try:
            for part, (part_workload, part_data) in enumerate(halves):
                recording_id, stop, mtu = record(archive, aeron, part_workload, part_data,
                                                 STREAM_ID_BASE + 2 * index + part)
                recording_ids.append(recording_id)
                parquet = work / f"payloads-{index}-{part}.parquet"
                write_parquet(parquet, part_workload, part_data)
                parquets.append(parquet)
                progress(f"{workload.label}: recording {recording_id} holds {part_workload.label} "
                         f"({stop:,} bytes, mtu {mtu})")
        finally:
            archive.close()
    finally:
        aeron.close()
    return recording_ids, parquets


def fill_topic(spark, kafka: dict[str, str], topic: str, parquets: list[Path], workload: Workload) -> None:
    """Half ``p`` of the payloads into partition ``p`` of ``topic``, in order (Spark's Kafka batch sink)."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    for partition, parquet in enumerate(parquets):
        (spark.read.parquet(str(parquet)).coalesce(1)
         .select(F.col("payload").alias("value"), F.lit(partition).alias("partition"))
         .write.format("kafka").options(**kafka).option("topic", topic).save())
    progress(f"{workload.label}: produced into Kafka topic {topic} in {time.perf_counter() - started:.1f} s")


def compared_read_name(options: dict[str, str]) -> str:
    return "batch, ours, " + ", ".join(f"{key}={value}" for key, value in options.items())


def measure(spark, workload: Workload, connection: dict[str, str], recording_ids: list[int], kafka: dict[str, str],
            topic: str, modes: list[str], repetitions: int, work: Path, cpu: ProcessCpu,
            profiler: SamplingProfiler | None = None, compared_options: dict[str, str] | None = None
            ) -> dict[str, Timings]:
    from pyspark.sql import functions as F

    ids = ",".join(str(recording_id) for recording_id in recording_ids)
    ours_options = {**connection, "recordingIds": ids, "minPartitions": "2"}
    kafka_subscribe = {**kafka, "subscribe": topic, "startingOffsets": "earliest"}
    runs = iter(range(1_000_000))

    def ours_batch() -> tuple:
        return fingerprint(spark.read.format("aeron-archive").options(**ours_options).schema(PAYLOAD_ONLY).load())

    def kafka_batch() -> tuple:
        return fingerprint(spark.read.format("kafka").options(**kafka_subscribe).option("endingOffsets", "latest")
                           .load().select(F.col("value").alias("payload")))

    def available_now(stream) -> int:
        query = (stream.writeStream.format("noop").option("checkpointLocation", str(work / f"chk-{topic}-{next(runs)}"))
                 .trigger(availableNow=True).start())
        try:
            if not query.awaitTermination(QUERY_TIMEOUT_S):
                raise RuntimeError(f"an AvailableNow query did not finish within {QUERY_TIMEOUT_S:.0f} s")
        finally:
            if query.isActive:
                query.stop()
        return streamed_rows(query)

    def ours_stream() -> object:
        return available_now(spark.readStream.format("aeron-archive").options(**ours_options)
                             .option("startingPositions", "earliest").schema(PAYLOAD_ONLY).load())

    def kafka_stream() -> object:
        return available_now(spark.readStream.format("kafka").options(**kafka_subscribe).load()
                             .select(F.col("value").alias("payload")))

    reads: dict[str, Callable[[], Any]] = {}
    if "batch" in modes:
        reads.update({"batch, ours": ours_batch, "batch, Kafka": kafka_batch})
        if compared_options:
            compared = {**ours_options, **compared_options}
            reads[compared_read_name(compared_options)] = lambda: fingerprint(
                spark.read.format("aeron-archive").options(**compared).schema(PAYLOAD_ONLY).load())
    if "availableNow" in modes:
        reads.update({"AvailableNow, ours": ours_stream, "AvailableNow, Kafka": kafka_stream})
    answers = {}
    for name, read in reads.items():  # warm-up, and the correctness check
        started = time.perf_counter()
        answers[name] = read()
        progress(f"{workload.label}: warm-up {name} {time.perf_counter() - started:.2f} s -> {answers[name]}")
    if "batch" in modes:
        batch_answers = {name: answer for name, answer in answers.items() if name.startswith("batch")}
        if len(set(batch_answers.values())) != 1 or answers["batch, ours"][0] != workload.count:
            raise AssertionError(f"the batch reads disagree: {answers}")
    if "availableNow" in modes:
        if not answers["AvailableNow, ours"] == answers["AvailableNow, Kafka"] == workload.count:
            raise AssertionError(f"the AvailableNow reads did not read {workload.count} rows each: {answers}")
    seconds = interleaved_runs(workload.label, reads, repetitions, cpu)
    if profiler is not None:  # untimed: the samplers cost CPU
        for name, read in reads.items():
            if "ours" in name:
                with profiler.profiling(f"read {workload.label}, {name}", spark_targets(cpu, PROFILED_KINDS)):
                    read()
                progress(f"{workload.label}: profiled {name}: {profiler.written[-1]}")
    return {name: Timings(values) for name, values in seconds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parser(TERM_LENGTH // 8), action="append",
                        help="COUNTxSIZE, repeatable (default: 10000000x32 and 1000000x1024)")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma list of {', '.join(MODES)} (default: both)")
    parser.add_argument("--quick", action="store_true",
                        help="a small run that proves the benchmark works: "
                             + " and ".join(w.label for w in QUICK_WORKLOADS) + ", 1 repetition")
    parser.add_argument("--work-dir", type=Path, help="where the archive, Kafka's data and Parquet go (default: a temp dir)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="after the timed runs, one more run of ours per workload (and mode) under py-spy and "
                             "perf; a summary per run in DIR/*.txt (bench/profile_processes.py)")
    parser.add_argument("--compare-option", action="append", default=[], metavar="KEY=VALUE",
                        help="also read ours (batch) with this source option set, in the same run, alternating "
                             "(repeatable: all of them on one more read), e.g. replay.mtu=65504")
    add_kafka_layout_argument(parser)
    args = parser.parse_args(argv)
    profiler = SamplingProfiler(args.profile) if args.profile else None
    if any("=" not in option for option in args.compare_option):
        parser.error(f"--compare-option {args.compare_option!r}: give each as KEY=VALUE")
    compared_options = dict(option.split("=", 1) for option in args.compare_option)
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not modes or any(mode not in MODES for mode in modes):
        parser.error(f"--modes {args.modes!r}: accepted values are {', '.join(MODES)} (comma separated)")
    workloads = args.workload or (QUICK_WORKLOADS if args.quick else DEFAULT_WORKLOADS)
    repetitions = 1 if args.quick else args.repetitions
    cluster = args.layout == "cluster"
    master = CLUSTER_MASTER if cluster else "local[2]"

    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="kafka-read-bench-", dir=args.work_dir))
    try:
        with contextlib.ExitStack() as stack:
            if cluster:
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
            recorded = []
            for index, workload in enumerate(workloads):
                recording_ids, parquets = record_halves(sidecar.aeron_dir, control_stream_id, workload,
                                                        payload_block(workload, seed=index), index, work)
                recorded.append((workload, recording_ids, parquets, f"bench-read-{index}"))
            installation, broker = stack.enter_context(kafka_broker_for_bench(work))
            kafka = kafka_options(broker)
            for _workload, _ids, _parquets, topic in recorded:
                broker.create_topic(topic, partitions=2)
            hosts = stack.enter_context(cluster_hosts(work)) if cluster else None
            stack.enter_context(spark_processes_stopped())
            spark = spark_with_kafka("kafka-read", args.layout, hosts, installation,
                                     **{"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2"})
            stack.callback(stop_session, spark)
            named = {"sidecar": sidecar.pid, "Kafka broker": broker.pid}
            if hosts is not None:
                named["Spark driver's media driver"] = hosts.driver_pid
            cpu = ProcessCpu(named, spark_jvm_pid(spark))
            from aeron_spark.connector import register
            register(spark)
            for workload, recording_ids, parquets, topic in recorded:
                fill_topic(spark, kafka, topic, parquets, workload)
                timings = measure(spark, workload, connection, recording_ids, kafka, topic, modes, repetitions,
                                  work, cpu, profiler, compared_options)
                print(f"\n{workload.label} ({repetitions} repetitions, {master}, layout {args.layout}; ours: "
                      f"recordings {recording_ids}, Kafka: topic {topic}, 2 partitions)")
                for name, timing in timings.items():
                    print(timing.line(name, workload))
                for mode in ("batch", "AvailableNow"):
                    if f"{mode}, ours" in timings:
                        print(timings[f"{mode}, ours"].ratio_line(f"{mode}, ours", timings[f"{mode}, Kafka"], "Kafka"))
                compared_name = compared_read_name(compared_options)
                if compared_name in timings:
                    print(timings[compared_name].ratio_line(compared_name, timings["batch, Kafka"], "Kafka"))
                print("\n".join(line for line in cpu.lines() if workload.label in line), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
