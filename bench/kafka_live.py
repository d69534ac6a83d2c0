"""Benchmark: live latency of our source against Spark's Kafka source, same run, same messages.

One command, one Spark session (``local-cluster[2,1,1024]`` by default), our sidecar on its own
embedded driver (the source given ``archive.controlChannel`` only) and a real KRaft broker on localhost:

1. **publishers**, one message every ``--interval-ms`` (5 ms) each, while their queries run: ours
   offers 32 bytes on a recorded IPC stream (bench/live_tail_latency.py's ``Publisher``: bytes 0-8
   the publish time in epoch ns, 8-16 the sequence); Kafka's is Kafka's own console producer
   (``linger.ms=0``, default ``acks=all``) fed one line per message by this process, the same 16
   bytes as hex text (the publish time is taken just before the line is written to it). Spark turns
   Kafka's value back into the same 32 bytes (``unhex`` + 16 zero bytes), so both sides share the
   latency code;
2. **visible**: ``readStream`` (latest) → ``foreach`` (the executor notes when it processes each
   row; latency = that time − publish time), for ours and for Kafka, with the default trigger and
   with ``processingTime=0``; and the Kafka source under ``trigger(realTime=...)`` (Spark's
   real-time mode, Kafka only, output mode update), the field's latency bound; and, at each
   trigger, **the Python floor** (bench/python_source_floor.py: a Python Data Source whose messages
   are a clock's ticks, read from memory): what any Python streaming source pays per micro-batch, so
   ours − floor is our archive's share of the latency and floor − Kafka the Python Data Source path's;
3. **committed**: the same ``readStream`` → our exactly-once sink (one sidecar per sink so each has
   its own recording); latency = when the sink's commit was seen (live_tail_latency's
   ``SinkWatcher``) − publish time. Kafka's sink cannot commit exactly once, so "committed by the
   sink" is our sink behind either source.

First one unmeasured query per source (``--session-warmup`` s): a session's first queries pay for the
JVM's JIT and the Python workers' start (measured: 4x the p99 of the same query run later). Each query
runs ``--warmup`` s unmeasured, then ``--seconds`` s measured, and every batch is kept in its progress
(Spark keeps 100 by default). Per visible query, each message's latency is split across batch
boundaries: the wait for the batch that read it to begin, then the time in it, and whether it was
published before the previous batch began (a stale latest offset would show there). Printed per query:
p50/p95/p99/max, the ratio ours / Kafka of the visible p99 at the same trigger (target ≤ 1.0×) and
ours / floor, floor / Kafka,
Spark's progress medians and the CPU-seconds of every process over the query (warm-up included):
the sidecars, the Kafka broker, the Kafka console producer, Spark's JVMs and Python workers.

Run::

    .venv/bin/python bench/kafka_live.py --quick                     # 10 s per query after 5 s warm-up
    flock $BENCH_LOCK .venv/bin/python bench/kafka_live.py --seconds 60 --warmup 15

Every process started here is stopped by PID, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import live_tail_latency
import python_source_floor
from kafka_bench_support import (
    KafkaBroker,
    KafkaInstallation,
    add_kafka_layout_argument,
    kafka_broker_for_bench,
    kafka_options,
    spark_with_kafka,
)
from live_tail_latency import (
    SINK_ID,
    SINK_STREAM_ID,
    SOURCE_CHANNEL,
    SOURCE_STREAM_ID,
    ForeachLatencyWriter,
    LatencySamples,
    Publisher,
    SinkWatcher,
    explain_visible,
    foreach_rows,
    read_foreach_latencies,
    run_query,
    summary_line,
)
from profile_processes import PROFILED_KINDS, SamplingProfiler, spark_targets
from spark_bench_support import (
    CLUSTER_MASTER,
    ProcessCpu,
    cluster_hosts,
    exit_on_sigterm,
    loopback_udp_channel,
    progress,
    running_sidecar,
    spark_jvm_pid,
    spark_processes_stopped,
    stop_pid,
    stop_session,
)

TOPIC = "live"
TRIGGERS = {"default trigger": None, "processingTime=0": "0 seconds"}
REAL_TIME_TRIGGER = "5 seconds"  # real-time mode's shortest batch (a checkpoint interval, not a delay)


class KafkaPublisher:
    """Kafka's console producer, fed one line every ``interval_s``: ``<publish ns><sequence>`` as
    32 hex characters (the bytes of live_tail_latency's 32-byte payload, less its 16 zero bytes)."""

    def __init__(self, installation: KafkaInstallation, broker: KafkaBroker, interval_s: float) -> None:
        self.interval_s = interval_s
        self.process = subprocess.Popen(
            installation.java_command("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server",
                                      broker.bootstrap_servers, "--topic", TOPIC, "--timeout", "0",
                                      "--producer-property", "linger.ms=0"),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-publisher", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def _run(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        next_slot = time.monotonic()
        while not self._stop.is_set() and self.process.poll() is None:
            now = time.monotonic()
            if now < next_slot:
                time.sleep(next_slot - now)
            stdin.write(struct.pack("<qq", time.time_ns(), self.sent).hex() + "\n")
            stdin.flush()
            self.sent += 1
            next_slot += self.interval_s

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        stop_pid(self.process.pid, self.process)


def kafka_stream(spark, kafka: dict[str, str]):
    """The Kafka source as 32-byte ``payload`` rows in the Aeron publisher's layout."""
    from pyspark.sql import functions as F

    return (spark.readStream.format("kafka").options(**kafka).option("subscribe", TOPIC)
            .option("startingOffsets", "latest").load()
            .select(F.concat(F.unhex(F.col("value").cast("string")), F.unhex(F.lit("00" * 16))).alias("payload")))


def aeron_stream(spark, connection: dict[str, str], checkpoint: Path, **options: str):
    return (spark.readStream.format("aeron-archive").options(**connection).options(**options)
            .option("channel", SOURCE_CHANNEL).option("streamId", str(SOURCE_STREAM_ID))
            .option("startingPositions", "latest").option("checkpointLocation", str(checkpoint)).load()
            .select("payload"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per query (default 60)")
    parser.add_argument("--warmup", type=float, default=15.0, help="unmeasured seconds per query first (default 15)")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="one message per publisher every this many ms")
    parser.add_argument("--quick", action="store_true", help="10 s per query after a 5 s warm-up")
    parser.add_argument("--skip", default="",
                        help="comma list of parts to leave out: visible, committed, realtime, floor, read-on-driver "
                             "(default: none)")
    parser.add_argument("--work-dir", type=Path, help="where the archives and Kafka's data go (default: a temp dir)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="sample every process (py-spy, perf) over the measured window of each visible query; "
                             "a summary per query in DIR/*.txt (bench/profile_processes.py). Not for quiet runs")
    parser.add_argument("--step-timings", action="store_true",
                        help="the connector's step timings (AERON_SPARK_TIMINGS, connector/step_timings.py) of our "
                             "reads and commits, medians per query: where a batch's read of ours goes")
    parser.add_argument("--per-message", type=Path, metavar="FILE",
                        help="write each visible query's per-message figures (wait for its batch, in batch) as JSON")
    parser.add_argument("--trigger-order", default=",".join(TRIGGERS),
                        help=f"the order the triggers run in, a comma list of {', '.join(TRIGGERS)} (default: that)")
    parser.add_argument("--session-warmup", type=float, default=15.0, metavar="SECONDS",
                        help="first run one unmeasured query of each source for this long: the session's first "
                             "queries also pay for the JVM's JIT and the workers' start, and would not be like the "
                             "later ones (default 15, --quick 5; 0: none)")
    add_kafka_layout_argument(parser)
    args = parser.parse_args(argv)
    trigger_order = [label.strip() for label in args.trigger_order.split(",") if label.strip()]
    if set(trigger_order) != set(TRIGGERS):
        parser.error(f"--trigger-order {args.trigger_order!r}: give each of {', '.join(TRIGGERS)} (at least once)")
    # a trigger given again runs again, named "<trigger> #2": the first queries of a session pay for
    # the JIT and the workers' start, and a repeat shows how much
    profiler = SamplingProfiler(args.profile) if args.profile else None
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    if not skip <= {"visible", "committed", "realtime", "floor", "read-on-driver"}:
        parser.error(f"--skip {args.skip!r}: accepted values are visible, committed, realtime, floor, read-on-driver "
                     "(comma separated)")
    if args.quick:
        args.seconds, args.warmup, args.session_warmup = 10.0, 5.0, min(args.session_warmup, 5.0)
    cluster = args.layout == "cluster"

    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="kafka-live-bench-", dir=args.work_dir))
    results: list[tuple[str, dict[str, float] | None, str]] = []
    try:
        with contextlib.ExitStack() as stack:
            def sidecar_and_connection(name: str) -> tuple[Any, dict[str, str], dict[str, str]]:
                control = loopback_udp_channel() if cluster else "aeron:ipc"
                sidecar = stack.enter_context(running_sidecar(
                    work / name, "--control-channel", control, "--log-level", "WARNING"))
                if cluster:
                    connection = {"archive.controlChannel": sidecar.control_channel}
                    sink = {**connection, "channel": loopback_udp_channel(), "sink.stagingDir": str(work / f"{name}-staging")}
                else:
                    connection = {"archive.dir": str(sidecar.archive_dir)}
                    sink = {**connection, "channel": "aeron:ipc"}
                return sidecar, connection, sink

            sidecar, connection, sink_options = sidecar_and_connection("archive")
            # Kafka's source feeds a sink of its own: each sink's recording and commits are watched alone.
            kafka_sink_sidecar, _, kafka_sink_options = sidecar_and_connection("archive-kafka-sink")
            installation, broker = stack.enter_context(kafka_broker_for_bench(work))
            broker.create_topic(TOPIC, partitions=1)  # one partition, as our one recording
            kafka = kafka_options(broker)
            hosts = stack.enter_context(cluster_hosts(work)) if cluster else None
            stack.enter_context(spark_processes_stopped())
            timings_file = work / "step-timings.jsonl" if args.step_timings else None
            extra: dict[str, str] = {}
            if timings_file is not None:  # driver-side workers inherit it, executors' get it from executorEnv
                os.environ[live_tail_latency.TIMINGS_VARIABLE] = str(timings_file)
                extra[f"spark.executorEnv.{live_tail_latency.TIMINGS_VARIABLE}"] = str(timings_file)
            spark = spark_with_kafka("kafka-live", args.layout, hosts, installation,
                                     **{"spark.default.parallelism": "2",
                                        # every batch of a query in its progress (Spark keeps 100 by default):
                                        # the medians and the per-message figures need the whole window
                                        "spark.sql.streaming.numRecentProgressUpdates": "100000", **extra})
            stack.callback(stop_session, spark)
            live_tail_latency.JVM_PID = spark_jvm_pid(spark)  # run_query samples Spark's CPU per batch
            # The executors' Python workers cannot import bench/: its ForeachWriter travels by value.
            from pyspark import cloudpickle
            cloudpickle.register_pickle_by_value(live_tail_latency)
            cloudpickle.register_pickle_by_value(python_source_floor)
            from aeron_spark.connector import register
            register(spark)
            spark.dataSource.register(python_source_floor.PythonSourceFloor)

            publisher = Publisher(sidecar.archive_dir, args.interval_ms / 1000)
            stack.callback(publisher.close)
            publisher.start()
            kafka_publisher = KafkaPublisher(installation, broker, args.interval_ms / 1000)
            stack.callback(kafka_publisher.close)
            named = {"sidecar": sidecar.pid, "sidecar of Kafka's sink": kafka_sink_sidecar.pid,
                     "Kafka broker": broker.pid, "Kafka console producer": kafka_publisher.pid}
            if hosts is not None:
                named["Spark driver's media driver"] = hosts.driver_pid
            cpu = ProcessCpu(named, spark_jvm_pid(spark))
            runs = iter(range(1000))

            per_message: dict[str, dict] = {}

            def measured(name: str, start: Callable[[], Any], samples: LatencySamples,
                         collect: Callable[[], None] | None = None, foreach_dir: Path | None = None) -> None:
                before = cpu.sample()
                mark = live_tail_latency._timings_mark(str(timings_file) if timings_file else None)
                window = None
                if profiler is not None:
                    def window():
                        return profiler.profiling(name, spark_targets(cpu, PROFILED_KINDS))
                result = run_query(name, start, args.warmup, args.seconds, samples, collect, window)
                cpu.add(name, before, cpu.sample())
                if profiler is not None:
                    progress(f"  {name}: sampling profile {profiler.written[-1]}")
                if timings_file is not None:
                    live_tail_latency._timings_report(str(timings_file), mark)
                if foreach_dir is not None:
                    per_message[name] = explain_visible(result, foreach_rows(foreach_dir))
                results.append((name, result.latency,
                                next(line for line in cpu.lines() if f"run, {name} (core-s)" in line)))

            def visible(name: str, stream_of: Callable[[Path], Any], trigger: dict[str, str] | None,
                        output_mode: str | None = None) -> None:
                samples = LatencySamples()
                out = work / f"foreach-{next(runs)}"
                out.mkdir()
                checkpoint = work / f"chk-{next(runs)}"

                def start():
                    writer = stream_of(checkpoint).writeStream.foreach(ForeachLatencyWriter(str(out)))
                    writer = writer.option("checkpointLocation", str(checkpoint))
                    if output_mode:
                        writer = writer.outputMode(output_mode)
                    return (writer.trigger(**trigger) if trigger else writer).start()
                measured(name, start, samples, lambda: read_foreach_latencies(out, samples), foreach_dir=out)

            def committed(name: str, stream_of: Callable[[Path], Any], archive_dir: Path, sink: dict[str, str],
                          trigger: dict[str, str] | None) -> None:
                samples = LatencySamples()
                run = next(runs)
                sink_id = f"{SINK_ID}-{run}"  # a sink (recording) per query: its batch ids start at 0 again
                watcher = SinkWatcher(archive_dir, samples, sink_id, SINK_STREAM_ID)
                checkpoint = work / f"chk-{run}"

                def start():
                    writer = (stream_of(checkpoint).writeStream.format("aeron-archive").options(**sink)
                              .option("streamId", str(SINK_STREAM_ID)).option("sink.id", sink_id)
                              .option("checkpointLocation", str(checkpoint)))
                    return (writer.trigger(**trigger) if trigger else writer).start()
                try:
                    measured(name, start, samples, watcher.stop)
                finally:
                    watcher.close()

            def ours(checkpoint: Path):
                return aeron_stream(spark, connection, checkpoint)

            def ours_on_driver(checkpoint: Path):
                return aeron_stream(spark, connection, checkpoint, readOnDriver="true")

            def theirs(_checkpoint: Path):
                return kafka_stream(spark, kafka)

            def floor(_checkpoint: Path):
                return python_source_floor.floor_stream(spark, args.interval_ms)

            if args.session_warmup > 0:  # unmeasured: JIT and Python workers warm for both sources
                warmed = [ours, theirs] + ([] if "floor" in skip else [floor]) + (
                    [] if "read-on-driver" in skip else [ours_on_driver])
                for stream_of in warmed:
                    checkpoint = work / f"chk-{next(runs)}"
                    query = (stream_of(checkpoint).writeStream.format("noop")
                             .option("checkpointLocation", str(checkpoint)).start())
                    try:
                        time.sleep(args.session_warmup)
                    finally:
                        query.stop()
                progress(f"session warm-up: {args.session_warmup:.0f} s per source, unmeasured")
            seen: dict[str, int] = {}
            for label in trigger_order:
                interval = TRIGGERS[label]
                trigger = {"processingTime": interval} if interval else None
                seen[label] = seen.get(label, 0) + 1
                if seen[label] > 1:
                    label = f"{label} #{seen[label]}"
                if "visible" not in skip:
                    visible(f"visible, ours, {label}", ours, trigger)
                    visible(f"visible, Kafka, {label}", theirs, trigger)
                    if "read-on-driver" not in skip:
                        visible(f"visible, ours readOnDriver, {label}", ours_on_driver, trigger)
                    if "floor" not in skip:
                        visible(f"visible, Python floor, {label}", floor, trigger)
            if "realtime" not in skip:
                try:
                    visible(f"visible, Kafka, realTime={REAL_TIME_TRIGGER}", theirs,
                            {"realTime": REAL_TIME_TRIGGER}, output_mode="update")
                except Exception as error:  # noqa: BLE001 - reported: the mode may not run with this connector
                    progress(f"real-time mode failed: {type(error).__name__}: {str(error)[:600]}")
                    results.append((f"visible, Kafka, realTime={REAL_TIME_TRIGGER}", None,
                                    f"  failed: {type(error).__name__}: {str(error)[:300]}"))
            if "committed" not in skip:
                for label in dict.fromkeys(trigger_order):  # each once
                    interval = TRIGGERS[label]
                    trigger = {"processingTime": interval} if interval else None
                    committed(f"committed, ours, {label}", ours, sidecar.archive_dir, sink_options, trigger)
                    committed(f"committed, Kafka, {label}", theirs, kafka_sink_sidecar.archive_dir,
                              kafka_sink_options, trigger)
            report(results, args, CLUSTER_MASTER if cluster else "local[2]", publisher.sent, kafka_publisher.sent)
            if args.per_message:
                args.per_message.write_text(json.dumps(per_message, indent=1))
                progress(f"per-message figures: {args.per_message}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def report(results: list[tuple[str, dict[str, float] | None, str]], args, master: str, ours_sent: int,
           kafka_sent: int) -> None:
    print(f"\nlive latency, {master}, layout {args.layout}: {args.seconds:.0f} s measured after {args.warmup:.0f} s "
          f"warm-up per query, one message every {args.interval_ms} ms per publisher "
          f"(sent: ours {ours_sent:,}, Kafka {kafka_sent:,})")
    by_name = {name: latency for name, latency, _ in results}
    for name, latency, _ in results:
        print(summary_line(name, latency or {}))
    labels = sorted({name.split(", ", 2)[2] for name, _, _ in results if name.startswith("visible, ours, ")})
    for label in labels:
        ours, theirs = by_name.get(f"visible, ours, {label}"), by_name.get(f"visible, Kafka, {label}")
        if ours and theirs:
            print(f"  ratio visible p99 ours / Kafka, {label}: {ours['p99'] / theirs['p99']:.2f}x (target <= 1.0x)")
        on_driver = by_name.get(f"visible, ours readOnDriver, {label}")
        if on_driver and theirs:
            print(f"  ratio visible p99 ours readOnDriver / Kafka, {label}: {on_driver['p99'] / theirs['p99']:.2f}x "
                  "(target <= 1.0x)")
        python_floor = by_name.get(f"visible, Python floor, {label}")
        if ours and theirs and python_floor:
            print(f"  visible p99, {label}: ours / Python floor {ours['p99'] / python_floor['p99']:.2f}x, "
                  f"Python floor / Kafka {python_floor['p99'] / theirs['p99']:.2f}x "
                  f"(ours - floor {ours['p99'] - python_floor['p99']:+.0f} ms, "
                  f"floor - Kafka {python_floor['p99'] - theirs['p99']:+.0f} ms)")
    for _, _, cpu_line in results:
        print(cpu_line)


if __name__ == "__main__":
    sys.exit(main())
