"""Demo: live trades -> archive sidecar -> Spark VWAP -> new recording (the README's ``./run-demo``).

1. Starts the archive sidecar (``aeron-archive serve``, with its own embedded media driver) as a
   subprocess on a temporary directory, and asks it to record the trades stream: UDP
   ``aeron:udp?endpoint=localhost:<free port>``, stream 2001.
2. Starts Spark (``local[2]``) and two queries on the same pipeline: read the trades recording
   live with ``spark.readStream.format("aeron-archive")`` (channel + streamId), parse the JSON,
   VWAP per symbol over 5-second event-time windows (watermark 2 s: a window is emitted once the
   watermark passes its end); one query writes the windows to the console, the other with
   ``writeStream.format("aeron-archive")`` into a new recording (one JSON message per window and
   symbol, reserved value = window start in epoch ns).
3. Publishes synthetic trades from this process while the queries run: one UTF-8 JSON message per
   trade, ``{"symbol":"AAPL","price":187.25,"size":300,"ts":<epoch ms>}``; prints each batch's
   progress (batch id, rows, rows/s, end and latest offsets).
4. Once both queries have read every trade, stops them and prints the result recording's
   descriptor (recording id, start/stop positions) and its rows read back with
   ``spark.read.format("aeron-archive")``.

Everything it starts (publisher thread, Spark, the sidecar by PID) is stopped in ``finally``.
Exit code 0 on success. ``--trades`` and ``--seconds`` size the run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from aeron_spark.archive.cli.sidecar_process import SidecarProcess, free_udp_port

TRADES_STREAM_ID = 2001
RESULT_CHANNEL = "aeron:ipc"
RESULT_STREAM_ID = 3001
SINK_ID = "vwap-demo"
SYMBOLS = {"AAPL": 187.0, "MSFT": 415.0, "NVDA": 905.0, "AMZN": 178.0}
WINDOW = "5 seconds"
WATERMARK_DELAY = "2 seconds"
TRIGGER_INTERVAL = "2 seconds"
SIDECAR_START_TIMEOUT_S = 30.0


def say(text: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


# --- the trade publisher ----------------------------------------------------------------------


class TradePublisher(threading.Thread):
    """Publishes ``count`` random-walk trades evenly over ``seconds`` on one exclusive publication."""

    def __init__(self, aeron, channel: str, stream_id: int, count: int, seconds: float) -> None:
        super().__init__(name="trade-publisher", daemon=True)
        self.publication = aeron.add_exclusive_publication(channel, stream_id)
        self.count = count
        self.seconds = seconds
        self.published = 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._publish()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error

    def _publish(self) -> None:
        rng = random.Random(42)
        prices = dict(SYMBOLS)
        names = list(prices)
        started = time.monotonic()
        for index in range(self.count):
            if self.stopping.is_set():
                return
            due = started + self.seconds * index / self.count
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            symbol = names[rng.randrange(len(names))]
            prices[symbol] = round(max(1.0, prices[symbol] * (1 + rng.gauss(0, 0.0005))), 2)
            trade = {"symbol": symbol, "price": prices[symbol], "size": rng.randrange(1, 50) * 100,
                     "ts": time.time_ns() // 1_000_000}
            self.publication.offer_with_retry(json.dumps(trade, separators=(",", ":")).encode())
            self.published += 1

    def close(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(10)
        self.publication.close()


# --- Spark ------------------------------------------------------------------------------------


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("aeron-archive demo")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.catalogImplementation", "in-memory")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def vwap_per_window(trades):
    """Trades (source rows) -> one row per (5 s window, symbol): VWAP, volume, trade count."""
    from pyspark.sql import functions as F

    schema = "symbol STRING, price DOUBLE, size BIGINT, ts BIGINT"
    parsed = (trades.select(F.from_json(F.col("payload").cast("string"), schema).alias("t"))
              .select("t.symbol", "t.price", "t.size", F.timestamp_millis("t.ts").alias("event_time")))
    return (parsed.withWatermark("event_time", WATERMARK_DELAY)
            .groupBy(F.window("event_time", WINDOW), "symbol")
            .agg((F.sum(F.col("price") * F.col("size")) / F.sum("size")).alias("vwap"),
                 F.sum("size").alias("volume"), F.count("*").alias("trades"))
            .select(F.col("window.start").alias("window_start"), "symbol", F.round("vwap", 4).alias("vwap"),
                    "volume", "trades"))


def describe_progress(name: str, progress) -> str:
    """One line per batch: id, rows, rates, and the source's offsets (recording id -> position)."""
    source = progress["sources"][0] if progress.get("sources") else {}
    input_rate = source.get("inputRowsPerSecond") or 0.0
    processed_rate = source.get("processedRowsPerSecond") or 0.0
    return (f"{name}: batch {progress['batchId']}: {progress['numInputRows']} rows "
            f"({input_rate:.0f} rows/s in, {processed_rate:.0f} rows/s processed), "
            f"end offset {source.get('endOffset')}, latest {source.get('latestOffset')}")


# --- main -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trades", type=int, default=20_000, help="trades to publish (default 20000)")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="publish them evenly over this many seconds (default 30)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.trades <= 0 or args.seconds <= 0:
        parser.error("--trades and --seconds must be positive")
    return args


def start_queries(spark, archive_dir: Path, trades_channel: str, checkpoints: Path) -> dict:
    """Two queries over the same pipeline: VWAP windows -> console, and -> a new recording."""
    from pyspark.sql import functions as F

    def vwap(checkpoint: Path):
        trades = (spark.readStream.format("aeron-archive")
                  .option("archive.dir", str(archive_dir))
                  .option("channel", trades_channel).option("streamId", TRADES_STREAM_ID)
                  .option("startingPositions", "earliest")
                  .option("checkpointLocation", str(checkpoint))
                  .load())
        return vwap_per_window(trades)

    console_checkpoint = checkpoints / "console"
    console = (vwap(console_checkpoint).writeStream.format("console").outputMode("append")
               .option("truncate", "false").option("numRows", 100)
               .option("checkpointLocation", str(console_checkpoint))
               .trigger(processingTime=TRIGGER_INTERVAL).queryName("vwap->console").start())
    # One message per window and symbol: the row as JSON; the reserved value is the window start
    # (epoch ns), so includeTimestamp=true reads it back as the `timestamp` column.
    sink_checkpoint = checkpoints / "sink"
    rows = vwap(sink_checkpoint).select(
        F.to_json(F.struct("window_start", "symbol", "vwap", "volume", "trades")).alias("payload"),
        (F.unix_micros("window_start") * 1000).alias("reserved_value"))
    sink = (rows.writeStream.format("aeron-archive").outputMode("append")
            .option("archive.dir", str(archive_dir))
            .option("channel", RESULT_CHANNEL).option("streamId", RESULT_STREAM_ID)
            .option("sink.id", SINK_ID)
            .option("checkpointLocation", str(sink_checkpoint))
            .trigger(processingTime=TRIGGER_INTERVAL).start())  # no queryName: the sink rejects it as an option
    return {"vwap->console": console, "vwap->aeron-archive": sink}


def await_recording(archive, channel: str, stream_id: int, timeout_s: float = 10.0):
    """The recording of ``channel``/``stream_id`` (it exists once the publication's image does)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = archive.list_recordings_for_uri(0, None, channel, stream_id)
        if found:
            return found[-1]
        time.sleep(0.05)
    raise TimeoutError(f"the sidecar did not start recording {channel} stream {stream_id} within {timeout_s:.0f} s")


def run_until_drained(queries: dict, publisher: TradePublisher, timeout_s: float) -> None:
    """Prints each new progress; returns once every query has read the whole trades recording
    and run one more batch (which emits the windows the final watermark closed)."""
    last_batch = {name: -1 for name in queries}
    drained_at: dict[str, int] = {}
    final_position: int | None = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if publisher.error is not None:
            raise RuntimeError(f"the trade publisher failed: {publisher.error!r}")
        if final_position is None and not publisher.is_alive():
            final_position = publisher.publication.position
            say(f"publisher done: {publisher.published} trades, stream position {final_position}")
        for name, query in queries.items():
            if query.exception() is not None:
                raise RuntimeError(f"query {name} failed: {query.exception()}")
            progress = query.lastProgress
            if not progress or progress["batchId"] == last_batch[name]:
                continue
            last_batch[name] = progress["batchId"]
            say(describe_progress(name, progress))
            ends = [int(p) for s in progress.get("sources", []) for p in json.loads(s.get("endOffset") or "{}").values()]
            if final_position is not None and name not in drained_at and ends and max(ends) >= final_position:
                drained_at[name] = progress["batchId"]
        if len(drained_at) == len(queries) and all(last_batch[n] > b for n, b in drained_at.items()):
            return
        time.sleep(0.25)
    raise TimeoutError(f"the queries did not read all trades within {timeout_s:.0f} s "
                       f"(last batches {last_batch}, drained at {drained_at})")


def describe_result(archive, spark, archive_dir: Path) -> None:
    """The sink recording's descriptor, then its rows read back with spark.read."""
    from aeron_spark.connector.commit_markers import sink_id_of_channel
    from pyspark.sql import functions as F

    results = [d for d in archive.list_recordings() if sink_id_of_channel(d.original_channel) == SINK_ID]
    if not results:
        raise RuntimeError(f"no sink recording for sink id {SINK_ID} in the archive")
    result = results[-1]
    say(f"result recording {result.recording_id}: startPosition={result.start_position} "
        f"stopPosition={result.stop_position} streamId={result.stream_id} channel={result.original_channel}")
    rows = (spark.read.format("aeron-archive").option("recordingIds", str(result.recording_id))
            .option("includeTimestamp", "true").load(str(archive_dir)))
    schema = "window_start TIMESTAMP, symbol STRING, vwap DOUBLE, volume BIGINT, trades BIGINT"
    # The source reads a sink recording up to its last commit marker and drops the markers.
    parsed = (rows.select("position", F.from_json(F.col("payload").cast("string"), schema).alias("r"),
                          F.col("timestamp").alias("reserved_value_as_time"))
              .select("position", "r.*", "reserved_value_as_time"))
    count = parsed.count()
    say(f"read back {count} row{'s' if count != 1 else ''} of recording {result.recording_id} "
        "with spark.read.format(\"aeron-archive\") (position = stream position after the message):")
    parsed.orderBy("position").show(12, truncate=False)


def _exit_on_sigterm(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop everything


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    from aeron_spark.archive.client.archive_client import ArchiveClient

    work = Path(tempfile.mkdtemp(prefix="aeron-spark-demo-"))
    archive_dir = work / "archive"
    trades_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    sidecar = publisher = spark = archive = None
    queries: dict = {}
    started = time.monotonic()
    try:
        say(f"starting the archive sidecar on {archive_dir}")
        with open(work / "sidecar.log", "w") as log:  # the child keeps its own copy of the descriptor
            # terminate_with_parent is safe here: the demo has started no other thread yet.
            sidecar = SidecarProcess.start(archive_dir, "--control-channel", "aeron:ipc", "--control-stream-id", "10",
                                           "--segment-length", "16m", "--log-level", "WARNING", stderr=log,
                                           timeout_s=SIDECAR_START_TIMEOUT_S, terminate_with_parent=True)
        say(f"sidecar pid {sidecar.pid}: {sidecar.ready_line}")
        archive = ArchiveClient.from_mark_file(archive_dir)
        archive.start_recording(trades_channel, TRADES_STREAM_ID)
        publisher = TradePublisher(archive.aeron, trades_channel, TRADES_STREAM_ID, args.trades, args.seconds)
        trades_recording = await_recording(archive, trades_channel, TRADES_STREAM_ID)
        say(f"the sidecar records {trades_channel} stream {TRADES_STREAM_ID} as recording "
            f"{trades_recording.recording_id} from position {trades_recording.start_position}")

        say("starting Spark (local[2])")
        spark = spark_session()
        queries = start_queries(spark, archive_dir, trades_channel, work / "checkpoints")
        say(f"queries running: {', '.join(queries)}; VWAP per symbol over {WINDOW} event-time windows, "
            f"watermark {WATERMARK_DELAY}, trigger every {TRIGGER_INTERVAL}")
        publisher.start()
        say(f"publishing {args.trades} trades over {args.seconds:g} s, one JSON message each")
        run_until_drained(queries, publisher, timeout_s=args.seconds + 120)
        for query in queries.values():
            query.stop()
        describe_result(archive, spark, archive_dir)
        say(f"done in {time.monotonic() - started:.0f} s")
        return 0
    finally:
        for name, query in queries.items():
            try:
                query.stop()
            except Exception as error:  # noqa: BLE001 - keep stopping the rest
                say(f"stopping query {name} failed: {error}")
        if spark is not None:
            spark.stop()
        if publisher is not None:
            publisher.close()
        if archive is not None:
            archive.close()
        if sidecar is not None:
            sidecar.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
