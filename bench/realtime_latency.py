"""Benchmark: Aeron -> Spark (real-time mode) -> Aeron beside Kafka -> Spark (real-time mode) -> Kafka.

One command, same messages, same rates, same sizes (32 B and 1 KiB by default), one pipeline after the
other, each query in its own Spark session (``local[2]``, tests/support/jvm_sink_query_process.py):

* **Aeron**: a publisher in this process offers on a UDP stream our sidecar records; the query reads it
  with ``format("aeron-archive-jvm")`` (the JVM source) in ``trigger(realTime=...)``, passes ``payload``
  on as ``value`` and writes it with the JVM sink onto a dynamic-MDC UDP stream, which the sidecar
  records and a subscriber in this process reads live;
* **Kafka**: Kafka's console producer, fed one line per message by this process, writes to topic
  ``in``; the query reads it with Spark's Kafka source in real-time mode, passes ``value`` on and writes
  it with Spark's Kafka sink to topic ``out``; Kafka's console consumer reads ``out`` and this process
  reads its stdout.

Every message starts with its publish time (epoch ns) and sequence number (as bytes for Aeron, as 32
hex characters for Kafka's text lines), padded to the size. **Visible latency** = when this process
read the message back from the output stream - its publish time. Per pipeline, size and rate (each
rate step ``--seconds`` long after a warm-up that waits for the first message to come back):
messages published, read, rows/s read, p50/p95/p99/max. A rate is **sustained** when every message
of the step came back and the step's p99 is under ``--sustain-p99-ms``; the highest sustained rate is
the throughput figure. Real-time mode keeps each batch running for its trigger interval
(``--batch``, 5 s, the minimum), so latency is not bound by it.

``--boundary-report`` adds, per step, where the tail is: latency by the publish time's distance to the
nearest batch start, the stall at each boundary, Spark's per-batch ``durationMs`` and the JVM source and
sink's event timeline around each boundary (``AERON_SPARK_JVM_TIMINGS``, docs/realtime.md, "What a batch
boundary costs").

Run (smoke; the full run belongs on a quiet machine)::

    .venv/bin/python bench/realtime_latency.py --quick
    flock $BENCH_LOCK .venv/bin/python bench/realtime_latency.py --rates 1000,5000,20000,50000 --seconds 20

Every process started here (sidecar, broker, producer, consumer, Spark query processes) is stopped
by PID, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

from aeron_spark.archive.client import ArchiveClient  # noqa: E402
from aeron_spark.driver_integration import AeronClient  # noqa: E402

from tests.support.jvm_module import built_jvm_module  # noqa: E402
from tests.support.jvm_sink_query_process import JvmSinkQuery  # noqa: E402
from tests.support.kafka_broker import KafkaBroker, KafkaInstallation, ensure_kafka_fetched, running_kafka_broker  # noqa: E402
from tests.support.ports import free_udp_port  # noqa: E402
from tests.support.sidecar import running_sidecar  # noqa: E402

HEADER = struct.Struct("<qq")  # publish time (epoch ns), sequence; sequence -1: warm-up
INPUT_STREAM_ID = 5101
OUTPUT_STREAM_ID = 5102
WARMUP_TIMEOUT_S = 240.0
DRAIN_S = 5.0


def say(text: str) -> None:
    print(f"[realtime-latency {time.strftime('%H:%M:%S')}] {text}", flush=True)


@dataclass
class Step:
    pipeline: str
    size: int
    rate: float
    published: int
    read: int
    seconds: float
    latencies_ms: list[float]
    sustain_p99_ms: float
    # (publish time ns, latency ms) of every message read back, for the boundary report
    timeline: list[tuple[int, float]] = field(default_factory=list)
    started_ns: int = 0
    ended_ns: int = 0

    def percentile(self, fraction: float) -> float:
        values = self.latencies_ms
        return values[min(len(values) - 1, round(fraction * (len(values) - 1)))] if values else float("nan")

    @property
    def sustained(self) -> bool:
        return self.read == self.published and self.percentile(0.99) < self.sustain_p99_ms

    def row(self) -> str:
        return (f"| {self.pipeline} | {self.size} B | {self.rate:g} | {self.published} | {self.read} | "
                f"{self.read / self.seconds:.0f} | {self.percentile(0.5):.2f} | {self.percentile(0.95):.2f} | "
                f"{self.percentile(0.99):.2f} | {max(self.latencies_ms, default=float('nan')):.2f} | "
                f"{'yes' if self.sustained else 'no'} |")


class Arrivals:
    """sequence -> latency (ns) and publish time of each message read back, and whether a warm-up one came."""

    def __init__(self) -> None:
        self.latencies_ns: dict[int, int] = {}
        self.sent_ns: dict[int, int] = {}
        self.warmups = 0
        self.lock = threading.Lock()

    def note(self, sent_ns: int, sequence: int, now_ns: int) -> None:
        with self.lock:
            if sequence < 0:
                self.warmups += 1
            elif sequence not in self.latencies_ns:
                self.latencies_ns[sequence] = now_ns - sent_ns
                self.sent_ns[sequence] = sent_ns


# --- Aeron -----------------------------------------------------------------------------------------


class AeronEnds:
    """The publisher (recorded input stream) and the reader of the sink's output stream, on the sidecar's driver."""

    def __init__(self, aeron: AeronClient, input_channel: str, output_control: str) -> None:
        self.publication = aeron.add_exclusive_publication(input_channel, INPUT_STREAM_ID)
        self.subscription = aeron.add_subscription(f"aeron:udp?endpoint=localhost:0|control={output_control}",
                                                   OUTPUT_STREAM_ID)
        self.arrivals = Arrivals()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="aeron-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        def on_message(payload, _header) -> None:
            now = time.time_ns()
            sent, sequence = HEADER.unpack_from(bytes(payload[:HEADER.size]))
            self.arrivals.note(sent, sequence, now)
        while not self._stop.is_set():
            if self.subscription.poll(on_message, 256) == 0:
                time.sleep(0.00005)

    def send(self, sequence: int, size: int) -> None:
        self.publication.offer_with_retry(HEADER.pack(time.time_ns(), sequence) + bytes(size - HEADER.size))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.subscription.close()
        self.publication.close()


# --- Kafka -----------------------------------------------------------------------------------------


class KafkaEnds:
    """Kafka's console producer (topic in, fed lines) and console consumer (topic out, read lines)."""

    def __init__(self, installation: KafkaInstallation, broker: KafkaBroker, topic_in: str, topic_out: str) -> None:
        self.producer = subprocess.Popen(
            installation.java_command("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server",
                                      broker.bootstrap_servers, "--topic", topic_in,
                                      "--producer-property", "linger.ms=0"),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        self.consumer = subprocess.Popen(
            installation.java_command("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                                      broker.bootstrap_servers, "--topic", topic_out,
                                      "--consumer-property", "fetch.max.wait.ms=5"),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.arrivals = Arrivals()
        self._thread = threading.Thread(target=self._read, name="kafka-reader", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()

    def _read(self) -> None:
        assert self.consumer.stdout is not None
        for line in self.consumer.stdout:
            now = time.time_ns()
            with contextlib.suppress(ValueError, struct.error):
                sent, sequence = HEADER.unpack(bytes.fromhex(line[:32]))
                self.arrivals.note(sent, sequence, now)

    def send(self, sequence: int, size: int) -> None:
        stdin = self.producer.stdin
        assert stdin is not None
        with self._lock:
            text = HEADER.pack(time.time_ns(), sequence).hex()
            stdin.write(text + "x" * (size - len(text)) + "\n")
            stdin.flush()

    def close(self) -> None:
        for process in (self.producer, self.consumer):
            if process.poll() is None:
                process.kill()
                process.wait(30)
        self._thread.join(5)


# --- the runs --------------------------------------------------------------------------------------


def run_steps(pipeline: str, size: int, rates: list[float], seconds: float, sustain_p99_ms: float,
              send: Callable[[int, int], None], arrivals: Arrivals, query: JvmSinkQuery,
              boundary_report: Callable[[list[Step], list[dict]], None] | None = None) -> list[Step]:
    deadline = time.monotonic() + WARMUP_TIMEOUT_S
    while arrivals.warmups == 0:
        if query.failure() is not None or query.process.poll() is not None:
            raise RuntimeError(f"{pipeline} query ended during warm-up:\n{query.output()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{pipeline}: no warm-up message came back within {WARMUP_TIMEOUT_S:.0f} s:\n"
                               f"{query.output()}")
        send(-1, size)
        time.sleep(0.1)
    say(f"{pipeline} {size} B: the pipeline is up")
    steps = []
    first = 0
    for rate in rates:
        count = max(1, int(rate * seconds))
        started_ns = time.time_ns()
        started = time.monotonic()
        for offset in range(count):
            due = started + offset / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            send(first + offset, size)
        sent_for = time.monotonic() - started
        wait_until = time.monotonic() + DRAIN_S
        wanted = range(first, first + count)
        while time.monotonic() < wait_until:
            with arrivals.lock:
                if all(s in arrivals.latencies_ns for s in wanted):
                    break
            time.sleep(0.05)
        with arrivals.lock:
            timeline = [(arrivals.sent_ns[s], arrivals.latencies_ns[s] / 1e6) for s in wanted
                        if s in arrivals.latencies_ns]
        latencies = sorted(latency for _, latency in timeline)
        step = Step(pipeline, size, rate, count, len(latencies), max(sent_for, seconds), latencies, sustain_p99_ms,
                    timeline, started_ns, started_ns + int(sent_for * 1e9))
        say(step.row())
        steps.append(step)
        first += count
        if query.failure() is not None:
            raise RuntimeError(f"{pipeline} query failed:\n{query.output()}")
    if boundary_report is not None:
        # the batch running at the last step's end reports its progress only when it ends
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline and not any(
                batch_start_ns(p) > steps[-1].ended_ns for p in query.progress() if "timestamp" in p):
            time.sleep(0.2)
        boundary_report(steps, query.progress())
    return steps


def query_settings(jars: str, work: Path, source: dict, select: list[str], sink: dict[str, str], batch: str,
                   conf: dict[str, str] | None = None, sink_format: str = "aeron-archive-jvm") -> dict:
    return {"jars": jars, "source": source, "select": select, "sink": sink, "trigger": {"realTime": batch},
            "conf": conf or {}, "sink_format": sink_format, "checkpoint": str(work / "checkpoint"),
            "stop_file": str(work / "stop")}


@contextlib.contextmanager
def stopped_at_end(query: JvmSinkQuery) -> Iterator[JvmSinkQuery]:
    try:
        yield query
    finally:
        query.stop(timeout=60)
        query.kill()


def aeron_pipeline(args: argparse.Namespace, work: Path, jars: str, size: int) -> list[Step]:
    with running_sidecar(work / "archive") as sidecar, \
            AeronClient(sidecar.driver_dir, client_name="realtime-latency") as aeron, \
            ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron, timeout=30.0) as archive:
        input_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
        output_control = f"localhost:{free_udp_port()}"
        archive.start_recording(input_channel, INPUT_STREAM_ID)
        ends = AeronEnds(aeron, input_channel, output_control)
        try:
            archive_options = {"archive.controlChannel": sidecar.control_channel}
            query = JvmSinkQuery(query_settings(
                jars, work,
                {"format": "aeron-archive-jvm", "options": {**archive_options, "channel": input_channel,
                                                            "streamId": str(INPUT_STREAM_ID),
                                                            "startingPositions": "latest"}},
                ["payload AS value"],
                {**archive_options, "channel": f"aeron:udp?control={output_control}|control-mode=dynamic",
                 "streamId": str(OUTPUT_STREAM_ID), "_asyncProgressTrackingOverrideSinkSupportCheck": "true"},
                args.batch, {"spark.sql.streaming.realTimeMode.allowlistCheck": "false"}), env=timings_env(args, work))
            with stopped_at_end(query):
                return run_steps("Aeron", size, args.rate_list, args.seconds, args.sustain_p99_ms, ends.send,
                                 ends.arrivals, query, reporter(args, work, "Aeron", size))
        finally:
            ends.close()


def kafka_pipeline(args: argparse.Namespace, work: Path, installation: KafkaInstallation, broker: KafkaBroker,
                   size: int) -> list[Step]:
    topic_in, topic_out = f"in-{size}", f"out-{size}"
    broker.create_topic(topic_in)
    broker.create_topic(topic_out)
    ends = KafkaEnds(installation, broker, topic_in, topic_out)
    try:
        kafka = {"kafka.bootstrap.servers": broker.bootstrap_servers}
        query = JvmSinkQuery(query_settings(
            installation.spark_jars, work,
            {"format": "kafka", "options": {**kafka, "subscribe": topic_in, "startingOffsets": "latest"}},
            ["value"], {**kafka, "topic": topic_out}, args.batch, sink_format="kafka"), env=timings_env(args, work))
        with stopped_at_end(query):
            return run_steps("Kafka", size, args.rate_list, args.seconds, args.sustain_p99_ms, ends.send,
                             ends.arrivals, query, reporter(args, work, "Kafka", size))
    finally:
        ends.close()


# --- the boundary report --------------------------------------------------------------------------

DISTANCE_BINS_MS = (-2000, -1000, -500, -200, -100, 0, 100, 200, 500, 1000, 2000)
NEAR_BOUNDARY_MS = 2000
DETAILED_EVENTS = {"reader.open.end", "reader.close", "sink.commit.end"}
SPARK_DURATIONS = ("latestOffset", "queryPlanning", "walCommit", "commitOffsets", "addBatch", "triggerExecution")


def batch_start_ns(progress: dict) -> int:
    """A batch's trigger start (StreamingQueryProgress.timestamp, ISO-8601 UTC with ms) as epoch ns."""
    return int(datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1000) * 1_000_000


def timings_env(args: argparse.Namespace, work: Path) -> dict[str, str] | None:
    if not args.boundary_report:
        return None
    return {**os.environ, "AERON_SPARK_JVM_TIMINGS": str(work / "jvm-timings.log")}


def reporter(args: argparse.Namespace, work: Path,
             pipeline: str, size: int) -> Callable[[list[Step], list[dict]], None] | None:
    if not args.boundary_report:
        return None
    return lambda steps, progress: report_boundaries(pipeline, size, steps, progress, work / "jvm-timings.log")


def report_boundaries(pipeline: str, size: int, steps: list[Step], progress: list[dict], timings: Path) -> None:
    """Where the tail is: latency by the publish time's distance to the nearest batch start (a real-time
    batch boundary: the previous batch's tasks ended, this one's start), the stall at each boundary (the
    highest latency of messages published within 2 s of it), Spark's per-batch durations and, for the
    JVM source and sink, their event timeline around each boundary (AERON_SPARK_JVM_TIMINGS)."""
    batches = sorted((p for p in progress if "timestamp" in p), key=lambda p: p["batchId"])
    starts = [(p["batchId"], batch_start_ns(p)) for p in batches]
    events: list[tuple[int, str, str]] = []
    if timings.exists():
        for line in timings.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[0].isdigit():
                events.append((int(parts[0]) * 1000, parts[1], parts[3] if len(parts) > 3 else ""))
    say(f"boundary report, {pipeline} {size} B: Spark's durations per batch (ms)")
    for batch in batches:
        durations = batch.get("durationMs", {})
        say(f"  batch {batch['batchId']} at {batch['timestamp']}: rows {batch['numInputRows']}; "
            + ", ".join(f"{name} {durations.get(name, '-')}" for name in SPARK_DURATIONS))
    for step in steps:
        boundaries = [(batch_id, start) for batch_id, start in starts[1:]
                      if step.started_ns - NEAR_BOUNDARY_MS * 1e6 <= start <= step.ended_ns + NEAR_BOUNDARY_MS * 1e6]
        if not boundaries or not step.timeline:
            say(f"  {step.rate:g} msg/s: no batch boundary in the step")
            continue
        binned: dict[int, list[float]] = {}
        stalls: dict[int, float] = {batch_id: 0.0 for batch_id, _ in boundaries}
        far: list[float] = []
        for sent, latency in step.timeline:
            batch_id, start = min(boundaries, key=lambda b: abs(sent - b[1]))
            distance_ms = (sent - start) / 1e6
            if abs(distance_ms) > NEAR_BOUNDARY_MS:
                far.append(latency)
                continue
            stalls[batch_id] = max(stalls[batch_id], latency)
            low = max((edge for edge in DISTANCE_BINS_MS if edge <= distance_ms), default=DISTANCE_BINS_MS[0])
            binned.setdefault(low, []).append(latency)
        say(f"  {step.rate:g} msg/s: latency (ms) by publish time - nearest batch start "
            f"({len(boundaries)} boundaries in the step)")
        for low in sorted(binned):
            values = sorted(binned[low])
            high = next((edge for edge in DISTANCE_BINS_MS if edge > low), NEAR_BOUNDARY_MS)
            say(f"    [{low:+5d}, {high:+5d}) ms: n {len(values):6d}  p50 {values[len(values) // 2]:8.1f}  "
                f"p99 {values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]:8.1f}  max {values[-1]:8.1f}")
        if far:
            far.sort()
            say(f"    farther than {NEAR_BOUNDARY_MS} ms: n {len(far)}  p50 {far[len(far) // 2]:.1f}  "
                f"p99 {far[min(len(far) - 1, round(0.99 * (len(far) - 1)))]:.1f}  max {far[-1]:.1f}")
        say("    stall per boundary (max latency within 2 s of it, ms): "
            + ", ".join(f"batch {batch_id}: {stalls[batch_id]:.0f}" for batch_id, _ in boundaries))
        for batch_id, start in boundaries:
            near = [(at, name, detail) for at, name, detail in events if -1.5e9 <= at - start <= 2.5e9]
            if near:
                say(f"    batch {batch_id} JVM events (ms from its start): "
                    + "; ".join(f"{(at - start) / 1e6:+.1f} {name}" + (f" [{detail.strip()}]" if name in DETAILED_EVENTS
                                                                      else "") for at, name, detail in near))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="32,1024", help="message sizes in bytes, comma list (default 32,1024)")
    parser.add_argument("--rates", default="200,1000,5000",
                        help="messages/s, comma list, one step each, in this order (default 200,1000,5000)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per rate step (default 20)")
    parser.add_argument("--batch", default="5 seconds", help="real-time batch (checkpoint) interval (default 5 s)")
    parser.add_argument("--sustain-p99-ms", type=float, default=1000.0,
                        help="a step is sustained when all came back and p99 is below this (default 1000)")
    parser.add_argument("--skip", default="", help="comma list of pipelines to leave out: aeron, kafka")
    parser.add_argument("--quick", action="store_true", help="smoke run: 32 B only, rates 100,500, 5 s steps")
    parser.add_argument("--work-dir", type=Path, help="where archives, Kafka data, checkpoints go (default: temp)")
    parser.add_argument("--boundary-report", action="store_true",
                        help="per step: latency by distance to the nearest batch boundary, the stall per boundary, "
                             "Spark's per-batch durations and the JVM source/sink event timeline around each boundary")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.rates, args.seconds = "32", "100,500", 5.0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.rate_list = [float(r) for r in args.rates.split(",") if r.strip()]
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if not skip <= {"aeron", "kafka"}:
        parser.error(f"--skip {args.skip!r}: accepted values are aeron, kafka (comma separated)")
    if any(size < 32 for size in sizes):
        parser.error("--sizes: each size must be at least 32 bytes (Kafka's lines carry 32 hex characters)")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="realtime-latency-"))
    jvm = built_jvm_module()
    steps: list[Step] = []
    broker_context = contextlib.nullcontext() if "kafka" in skip else \
        running_kafka_broker(ensure_kafka_fetched(), data_dir=work / "kafka")
    with broker_context as broker:
        for size in sizes:
            if "aeron" not in skip:
                steps += aeron_pipeline(args, work / f"aeron-{size}", jvm.spark_jars, size)
            if "kafka" not in skip:
                assert broker is not None
                steps += kafka_pipeline(args, work / f"kafka-{size}", broker.installation, broker, size)
    print("\n| pipeline | size | rate (msg/s) | published | read | rows/s read | p50 ms | p95 ms | p99 ms | max ms "
          "| sustained |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for step in steps:
        print(step.row())
    print()
    for pipeline in ("Aeron", "Kafka"):
        for size in sizes:
            sustained = [s for s in steps if s.pipeline == pipeline and s.size == size and s.sustained]
            if any(s.pipeline == pipeline and s.size == size for s in steps):
                best = max(sustained, key=lambda s: s.rate, default=None)
                print(f"{pipeline} {size} B: highest sustained rate "
                      + (f"{best.rate:g} msg/s ({best.read / best.seconds:.0f} rows/s read, p99 "
                         f"{best.percentile(0.99):.2f} ms)" if best else "none of the rates tried"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
