"""Real-time demo: Aeron -> Spark (real-time mode, JVM source) -> Aeron (JVM sink), with latencies.

``./run-demo --realtime`` runs it (it needs a JDK 17 and Maven, which build the JVM module; the
default ``./run-demo`` needs only Python).

1. Builds the JVM module (``tools/build-jvm``: ``jvm/target/aeron-spark-jvm.jar`` + the pinned aeron-all).
2. Starts the archive sidecar (its own media driver, UDP control channel) and asks it to record the
   input stream ``aeron:udp?endpoint=localhost:<port>`` stream 2101.
3. Starts Spark (``local[2]``, both jars on ``spark.jars``) and one query in real-time mode:
   ``readStream.format("aeron-archive-jvm")`` on the input -> ``payload AS value`` ->
   ``writeStream.format("aeron-archive-jvm")`` on ``aeron:udp?control=localhost:<port>|control-mode=dynamic``
   stream 2102 (the sink asks the sidecar to record it; this process subscribes to it live too).
4. Publishes ``--messages`` messages at ``--rate`` per second (bytes 0-8: publish time in epoch ns,
   8-16: sequence) and reads the output stream: per message, latency = when it was read back - when
   it was published. Prints p50/p95/p99/max and the sink's recording.

Everything it starts (Spark, the sidecar by PID) is stopped in ``finally``. Exit code 0 on success.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from aeron_spark.archive.cli.sidecar_process import SidecarProcess, free_udp_port

REPOSITORY = Path(__file__).resolve().parents[1]
INPUT_STREAM_ID = 2101
OUTPUT_STREAM_ID = 2102
#: Java 17 + Aeron 1.5x inside Spark's JVM: Agrona reaches these JDK internals.
AERON_JVM_OPTIONS = ("--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED --add-opens=java.base/java.util.zip=ALL-UNNAMED "
                     "--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED "
                     "-Djava.net.preferIPv4Stack=true")
HEADER = struct.Struct("<qq")  # publish time (epoch ns), sequence


def say(text: str) -> None:
    print(f"[realtime-demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


def build_jvm_module() -> tuple[str, str]:
    """Our jar and aeron-all's (tools/build-jvm prints one clear line when javac or mvn is missing)."""
    completed = subprocess.run([str(REPOSITORY / "tools" / "build-jvm"), "--quiet"], capture_output=True, text=True,
                               check=False)
    if completed.returncode != 0:
        raise SystemExit(completed.stderr.strip().splitlines()[-1] if completed.stderr.strip()
                         else f"tools/build-jvm failed ({completed.returncode})")
    jar, aeron_jar = completed.stdout.split()[-2:]
    return jar, aeron_jar


class OutputReader(threading.Thread):
    """Polls the sink's output stream; notes each message's latency (read time - publish time)."""

    def __init__(self, aeron, channel: str, stream_id: int) -> None:
        super().__init__(name="output-reader", daemon=True)
        self.subscription = aeron.add_subscription(channel, stream_id)
        self.latencies_ns: dict[int, int] = {}
        self.warmups = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        def on_message(payload, _header) -> None:
            now = time.time_ns()
            sent, sequence = HEADER.unpack_from(bytes(payload[:HEADER.size]))
            if sequence < 0:
                self.warmups += 1
            else:
                self.latencies_ns.setdefault(sequence, now - sent)
        while not self.stopping.is_set():
            if self.subscription.poll(on_message, 256) == 0:
                time.sleep(0.0001)

    def close(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(5)
        self.subscription.close()


def publish(publication, sequence: int, size: int) -> None:
    message = HEADER.pack(time.time_ns(), sequence) + bytes(max(0, size - HEADER.size))
    publication.offer_with_retry(message)


def percentile(sorted_values: list[int], fraction: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index] / 1e6


def spark_session(jars: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("aeron-archive real-time demo")
             .config("spark.jars", jars)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.catalogImplementation", "in-memory")
             .config("spark.driver.extraJavaOptions", AERON_JVM_OPTIONS + " -XX:+UseSerialGC")
             # Real-time mode writes only into Spark's own sinks unless this is off (docs/exactly-once.md).
             .config("spark.sql.streaming.realTimeMode.allowlistCheck", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages to publish (default 2000)")
    parser.add_argument("--rate", type=float, default=200.0, help="messages per second (default 200)")
    parser.add_argument("--size", type=int, default=32, help="message size in bytes, >= 16 (default 32)")
    parser.add_argument("--batch", default="30 seconds",
                        help="real-time batch (checkpoint) interval, at least 5 seconds (default 30 seconds): rows "
                             "flow through a running batch at once; between batches the source reopens its replays")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.messages <= 0 or args.rate <= 0 or args.size < HEADER.size:
        parser.error("--messages and --rate must be positive and --size at least 16")
    return args


def _exit_on_sigterm(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop everything


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - one story, told in order
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    from aeron_spark.archive.client.archive_client import ArchiveClient

    say("building the JVM module (tools/build-jvm)")
    jar, aeron_jar = build_jvm_module()
    say(f"jars: {jar}, {aeron_jar}")
    work = Path(tempfile.mkdtemp(prefix="aeron-spark-realtime-demo-"))
    control_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    input_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    output_control = f"localhost:{free_udp_port()}"
    output_channel = f"aeron:udp?control={output_control}|control-mode=dynamic"
    sidecar = archive = publication = reader = spark = query = None
    try:
        with open(work / "sidecar.log", "w") as log:
            sidecar = SidecarProcess.start(work / "archive", "--control-channel", control_channel,
                                           "--log-level", "WARNING", stderr=log, timeout_s=30.0,
                                           terminate_with_parent=True)
        say(f"sidecar pid {sidecar.pid} on {control_channel}")
        archive = ArchiveClient.from_mark_file(work / "archive")
        archive.start_recording(input_channel, INPUT_STREAM_ID)
        publication = archive.aeron.add_exclusive_publication(input_channel, INPUT_STREAM_ID)
        reader = OutputReader(archive.aeron, f"aeron:udp?endpoint=localhost:0|control={output_control}",
                              OUTPUT_STREAM_ID)
        reader.start()

        say("starting Spark (local[2]) and the real-time query")
        spark = spark_session(f"{jar},{aeron_jar}")
        archive_options = {"archive.controlChannel": control_channel}
        query = (spark.readStream.format("aeron-archive-jvm").options(**archive_options)
                 .option("channel", input_channel).option("streamId", str(INPUT_STREAM_ID))
                 .option("startingPositions", "latest").load()
                 .selectExpr("payload AS value")
                 .writeStream.format("aeron-archive-jvm").options(**archive_options)
                 .option("channel", output_channel).option("streamId", str(OUTPUT_STREAM_ID))
                 .option("_asyncProgressTrackingOverrideSinkSupportCheck", "true")
                 .option("checkpointLocation", str(work / "checkpoint"))
                 .outputMode("update").trigger(realTime=args.batch).start())
        say(f"query running: {input_channel} stream {INPUT_STREAM_ID} -> Spark real-time mode -> "
            f"{output_channel} stream {OUTPUT_STREAM_ID}, real-time batches of {args.batch}")

        # Warm-up: one message every 100 ms until one comes back (the query's first batch is running).
        deadline = time.monotonic() + 180
        while reader.warmups == 0:
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError("no message came back through Spark within 180 s")
            publish(publication, -1, args.size)
            time.sleep(0.1)
        say(f"the pipeline is up; publishing {args.messages} messages of {args.size} B at {args.rate:g}/s")
        started = time.monotonic()
        for sequence in range(args.messages):
            due = started + sequence / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            publish(publication, sequence, args.size)
        deadline = time.monotonic() + 60
        while len(reader.latencies_ns) < args.messages and time.monotonic() < deadline:
            time.sleep(0.05)
        got = len(reader.latencies_ns)
        latencies = sorted(reader.latencies_ns.values())
        if not latencies:
            raise RuntimeError("no message came back through Spark")
        say(f"read back {got} of {args.messages} messages; latency publish -> read back through Spark: "
            f"p50 {percentile(latencies, 0.50):.2f} ms, p95 {percentile(latencies, 0.95):.2f} ms, "
            f"p99 {percentile(latencies, 0.99):.2f} ms, max {latencies[-1] / 1e6:.2f} ms")
        # Stopping interrupts the running real-time batch; Spark logs that abort at ERROR level.
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
        for descriptor in archive.list_recordings():
            if descriptor.stream_id == OUTPUT_STREAM_ID:
                say(f"the sidecar recorded the sink's stream: recording {descriptor.recording_id} "
                    f"session {descriptor.session_id}, position {archive.recording_position(descriptor.recording_id)}"
                    if descriptor.stop_position < 0 else
                    f"the sidecar recorded the sink's stream: recording {descriptor.recording_id} "
                    f"session {descriptor.session_id}, {descriptor.start_position}..{descriptor.stop_position}")
        return 0 if got == args.messages else 1
    finally:
        if query is not None:
            try:
                query.stop()
            except Exception as error:  # noqa: BLE001 - keep stopping the rest
                say(f"stopping the query failed: {error}")
        if spark is not None:
            spark.stop()
        if reader is not None:
            reader.close()
        if publication is not None:
            publication.close()
        if archive is not None:
            archive.close()
        if sidecar is not None:
            sidecar.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
