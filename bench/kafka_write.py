"""Benchmark: our exactly-once sink (`write.format("aeron-archive")`, committed) against Spark's Kafka sink.

For each workload (default: 10,000,000 x 32 B and 1,000,000 x 1 KiB rows) it

1. writes random (incompressible) payloads once into a Parquet file (pyarrow), reads them into
   Spark, repartitions them into two partitions and caches them (materialized before timing): both
   sinks get the same cached rows and the input's read is in neither timing,
2. times, in one Spark session and alternating, ``df.write.format("aeron-archive")`` into the real
   sidecar (each save stages the rows on the executors, then the driver-side commit appends them
   and a commit marker and waits until the archive has recorded them; a save is all or nothing)
   and ``df.write.format("kafka")`` (``payload`` as ``value``) into a two-partition topic on a real
   KRaft broker on localhost (Kafka's sink is at-least-once: its defaults, ``acks=all``, idempotent
   producer),
3. checks once per workload that what each sink holds reads back as the input (count, bytes,
   bit_xor of xxhash64 of every payload),
4. prints min / median seconds, rows/s, the ratio ours / Kafka (rows/s; target ≥ 1.0×) and the
   CPU-seconds of every process per run (sidecar and Kafka broker included).

The sidecar writes its segment files buffered (``--segment-io buffered``, its default and Aeron's;
Kafka's broker, at its defaults, writes through the page cache too); ``--compare-segment-io direct``
also writes the same rows into a second sidecar with O_DIRECT segment writes, in the same run.

Layout (``--layout cluster``, the default) as bench/spark_sink_vs_parquet.py's: the sidecar on its
own embedded driver with a UDP control channel, Spark ``local-cluster[2,1,1024]``, a UDP sink channel
recorded REMOTE and ``sink.stagingDir`` on a local directory; Kafka on localhost. Run::

    .venv/bin/python bench/kafka_write.py --quick          # 200,000 x 32 B and 20,000 x 1 KiB, 1 repetition
    flock $BENCH_LOCK .venv/bin/python bench/kafka_write.py --repetitions 3

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
from dataclasses import dataclass
from pathlib import Path

from kafka_bench_support import (
    add_kafka_layout_argument,
    kafka_broker_for_bench,
    kafka_options,
    spark_with_kafka,
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
    progress,
    running_sidecar,
    spark_jvm_pid,
    spark_processes_stopped,
    stop_session,
)
from spark_sink_vs_parquet import SEGMENT_IO_SERVE_ARGS, add_segment_io_argument, write_input

SINK_STREAM_ID_BASE = 7001
OURS = "aeron-archive sink"
KAFKA = "Kafka sink"
QUICK_WORKLOADS = [Workload(200_000, 32), Workload(20_000, 1024)]
DEFAULT_WORKLOADS = [Workload(10_000_000, 32), Workload(1_000_000, 1024)]
# Both sides at their defaults: Kafka's broker writes its log through the page cache and never
# fsyncs by default; our sidecar's default is buffered segment writes, as Aeron's. O_DIRECT (the
# setting before) measured no faster here in the same run (docs/performance.md, "(b) Write").
KAFKA_WRITE_SEGMENT_IO = "buffered"


@dataclass(frozen=True)
class OursVariant:
    """One way of running our sink in the run: its name in the report, its options, its sink id
    (its own recording) and how to read that recording back."""

    name: str
    sink_id: str
    sink_options: dict[str, str]
    read_options: dict[str, str]


def measure(spark, workload: Workload, input_path: Path, variants: list[OursVariant],
            kafka: dict[str, str], topic: str, stream_id: int, repetitions: int, cpu: ProcessCpu,
            profiler: SamplingProfiler | None = None) -> dict[str, Timings]:
    from pyspark.sql import functions as F

    rows = spark.read.parquet(str(input_path)).repartition(2).cache()
    expected = fingerprint(rows)  # materializes the cache
    if tuple(expected[:2]) != (workload.count, workload.count * workload.size):
        raise AssertionError(f"input holds {expected[:2]}, not {workload.count} rows of {workload.size} B")

    def ours_writer(variant: OursVariant) -> Callable[[], None]:
        def write() -> None:
            (rows.write.format("aeron-archive").mode("append").options(**variant.sink_options)
             .option("streamId", str(stream_id)).option("sink.id", f"{variant.sink_id}-{stream_id}").save())
        return write

    def kafka_sink() -> None:
        rows.select(F.col("payload").alias("value")).write.format("kafka").options(**kafka).option("topic", topic).save()

    writers: dict[str, Callable[[], None]] = {variant.name: ours_writer(variant) for variant in variants}
    writers[KAFKA] = kafka_sink
    for name, write in writers.items():  # warm-up (workers, JIT), and the correctness check below
        started = time.perf_counter()
        write()
        progress(f"{workload.label}: warm-up {name} {time.perf_counter() - started:.2f} s")
    kafka_back = (spark.read.format("kafka").options(**kafka).option("subscribe", topic)
                  .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
                  .select(F.col("value").alias("payload")))
    checks = [(KAFKA, kafka_back)]
    for variant in variants:
        checks.append((variant.name, spark.read.format("aeron-archive").options(**variant.read_options)
                       .option("channel", f"alias=aeron-spark-sink:{variant.sink_id}-{stream_id}")
                       .option("streamId", str(stream_id)).load()))
    for name, written in checks:
        answer = fingerprint(written)
        if answer != expected:
            raise AssertionError(f"{name}: read back {answer}, the input is {expected}")
    progress(f"{workload.label}: both sinks read back equal to the input")
    seconds = interleaved_runs(workload.label, writers, repetitions, cpu)
    if profiler is not None:  # untimed: the samplers cost CPU
        with profiler.profiling(f"write {workload.label}, {OURS}", spark_targets(cpu, PROFILED_KINDS)):
            writers[variants[0].name]()
        progress(f"{workload.label}: profiled {OURS}: {profiler.written[-1]}")
    rows.unpersist()
    return {name: Timings(values) for name, values in seconds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parser(1 << 20), action="append",
                        help="COUNTxSIZE, repeatable (default: 10000000x32 and 1000000x1024)")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="a small run that proves the benchmark works: "
                             + " and ".join(w.label for w in QUICK_WORKLOADS) + ", 1 repetition")
    parser.add_argument("--work-dir", type=Path, help="where the archive, Kafka's data and the input go (default: a temp dir)")
    parser.add_argument("--sink-mtu", help="our sink's sink.mtu (default: its default, auto: 8192 on this loopback "
                                           "cluster)")
    parser.add_argument("--compare-sink-mtu", metavar="MTU",
                        help="also write with sink.mtu=MTU (e.g. 1408, the UDP default before sink.mtu=auto), "
                             "same run, its own sink recording")
    parser.add_argument("--sink-channel-params", metavar="PARAMS",
                        help="extra URI params on our UDP sink channel, e.g. 'rcv-wnd=2m|so-rcvbuf=2m' (the archive's "
                             "receiver window; default: none, the driver's defaults)")
    parser.add_argument("--compare-sink-channel-params", metavar="PARAMS",
                        help="also write with these extra URI params on the sink channel (its own endpoint and sink "
                             "recording), same run: e.g. 'rcv-wnd=2m|so-rcvbuf=2m'")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="after the timed runs, one more run of ours per workload (and mode) under py-spy and "
                             "perf; a summary per run in DIR/*.txt (bench/profile_processes.py)")
    add_segment_io_argument(parser, KAFKA_WRITE_SEGMENT_IO)
    parser.add_argument("--compare-segment-io", choices=sorted(SEGMENT_IO_SERVE_ARGS),
                        help="also write into a second sidecar whose segment files are written this way "
                             "(buffered or direct), same run, same rows: an A/B of --segment-io")
    add_kafka_layout_argument(parser)
    args = parser.parse_args(argv)
    if args.compare_segment_io == args.segment_io:
        parser.error(f"--compare-segment-io {args.compare_segment_io} is the --segment-io already measured: "
                     f"compare with the other of {', '.join(sorted(SEGMENT_IO_SERVE_ARGS))}")
    profiler = SamplingProfiler(args.profile) if args.profile else None
    workloads = args.workload or (QUICK_WORKLOADS if args.quick else DEFAULT_WORKLOADS)
    repetitions = 1 if args.quick else args.repetitions
    cluster = args.layout == "cluster"
    master = CLUSTER_MASTER if cluster else "local[2]"

    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="kafka-write-bench-", dir=args.work_dir))
    try:
        inputs = []
        for index, workload in enumerate(workloads):
            path = work / f"input-{index}.parquet"
            write_input(path, workload, seed=index)
            inputs.append((workload, path))
        progress(f"wrote the inputs: {', '.join(workload.label for workload, _ in inputs)}")
        with contextlib.ExitStack() as stack:
            segment_ios = [args.segment_io] + ([args.compare_segment_io] if args.compare_segment_io else [])
            sidecars = {}  # segment io -> its sidecar (each its own archive and embedded driver)
            for segment_io in segment_ios:
                control = loopback_udp_channel() if cluster else "aeron:ipc"
                sidecars[segment_io] = stack.enter_context(running_sidecar(
                    work / f"archive-{segment_io}", "--control-channel", control, "--log-level", "WARNING",
                    *SEGMENT_IO_SERVE_ARGS[segment_io]))
            variants = []
            for segment_io, sidecar in sidecars.items():
                if cluster:  # the Spark driver commits over UDP from its own driver; staging on a local directory
                    read_options = {"archive.controlChannel": sidecar.control_channel}
                    sink_options = {**read_options, "channel": loopback_udp_channel(),
                                    "sink.stagingDir": str(work / f"staging-{segment_io}")}
                else:
                    read_options = {"archive.dir": str(sidecar.archive_dir)}
                    sink_options = {**read_options, "channel": "aeron:ipc"}
                if args.sink_mtu:
                    sink_options["sink.mtu"] = args.sink_mtu
                if cluster and args.sink_channel_params:
                    sink_options["channel"] += f"|{args.sink_channel_params}"
                name = OURS if segment_io == args.segment_io else f"{OURS}, {segment_io} segment io"
                variants.append(OursVariant(name, f"{segment_io}-sink", sink_options, read_options))
                if args.compare_sink_mtu is not None and segment_io == args.segment_io:
                    # not a prefix of the other sink ids: recordings are found by a channel fragment (substring)
                    variants.append(OursVariant(f"{OURS}, sink.mtu={args.compare_sink_mtu}",
                                                f"mtu-{args.compare_sink_mtu}-sink",
                                                {**sink_options, "sink.mtu": args.compare_sink_mtu}, read_options))
                if cluster and args.compare_sink_channel_params and segment_io == args.segment_io:
                    variants.append(OursVariant(f"{OURS}, {args.compare_sink_channel_params}", "params-sink", {
                        **sink_options, "channel": f"{loopback_udp_channel()}|{args.compare_sink_channel_params}"},
                        read_options))
            installation, broker = stack.enter_context(kafka_broker_for_bench(work))
            kafka = kafka_options(broker)
            hosts = stack.enter_context(cluster_hosts(work)) if cluster else None
            stack.enter_context(spark_processes_stopped())
            spark = spark_with_kafka("kafka-write", args.layout, hosts, installation,
                                     **{"spark.default.parallelism": "2", "spark.driver.memory": "3g"})
            stack.callback(stop_session, spark)
            named = {("sidecar" if segment_io == args.segment_io else f"sidecar ({segment_io} segment io)"): sidecar.pid
                     for segment_io, sidecar in sidecars.items()}
            named["Kafka broker"] = broker.pid
            if hosts is not None:
                named["Spark driver's media driver"] = hosts.driver_pid
            cpu = ProcessCpu(named, spark_jvm_pid(spark))
            from aeron_spark.connector import register
            register(spark)
            for index, (workload, path) in enumerate(inputs):
                topic = f"bench-write-{index}"
                broker.create_topic(topic, partitions=2)
                timings = measure(spark, workload, path, variants, kafka, topic,
                                  SINK_STREAM_ID_BASE + index, repetitions, cpu, profiler)
                print(f"\n{workload.label} ({repetitions} repetitions, {master}, layout {args.layout}; "
                      f"segment io {args.segment_io}; Kafka topic {topic}, 2 partitions)")
                for name, timing in timings.items():
                    print(timing.line(name, workload))
                for name in timings:
                    if name != KAFKA:
                        print(timings[name].ratio_line(name, timings[KAFKA], KAFKA))
                print("\n".join(line for line in cpu.lines() if workload.label in line), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
