"""The Spark driver program of the cluster-layout tests: ``python -m tests.cluster.cluster_app ARGS_JSON``.

It stands for an application on the Spark driver host. In the ``cluster`` layout its process runs
on a media driver of its own (``AERON_DIR`` in its environment), Spark runs ``local-cluster``
executors whose Python workers start embedded drivers (``spark.executorEnv.AERON_DIR`` names a
directory where no driver runs), and the archive sidecar runs on a third driver: only UDP reaches
it and the queries are given ``archive.controlChannel`` alone. In the ``single-host`` layout the
same scenarios run on ``local[2]`` with ``archive.dir`` alone.

The data comes as a trading system's would: this program publishes over UDP to a channel the
archive records (REMOTE), from its own driver. Each scenario checks exact bytes and positions
(every message once, in order) and prints one JSON line ``{"scenario": ..., "ok": ..., "detail": ...}``;
tests/cluster/test_cluster_layout.py asserts on those lines.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from aeron_spark.archive.client.archive_client import ArchiveClient, SourceLocation
from aeron_spark.connector.data_source import register
from aeron_spark.driver_integration import AeronClient

from tests.spark.source_fixtures import numbered_payloads
from tests.support.process_tree import descendant_pids

WAIT_S = 90.0
TERM_LENGTH = 64 * 1024


class UdpRecorder:
    """Records UDP streams on the archive and publishes to them from this process's driver."""

    def __init__(self, aeron_dir: str | None, control_channel: str, record_port: int) -> None:
        self.aeron = AeronClient(aeron_dir, client_name="cluster-app") if aeron_dir else AeronClient(
            os.environ["AERON_DIR"], client_name="cluster-app")
        self.client = ArchiveClient.connect(control_channel=control_channel, aeron=self.aeron,
                                            response_channel="aeron:udp?endpoint=127.0.0.1:0")
        self.channel = f"aeron:udp?endpoint=127.0.0.1:{record_port}|term-length={TERM_LENGTH // 1024}k"
        self._publications: list = []
        self._lock = threading.Lock()

    def start(self, stream_id: int) -> None:
        with self._lock:
            self.client.start_recording(self.channel, stream_id, SourceLocation.REMOTE)

    def publication(self, stream_id: int):
        publication = self.aeron.add_exclusive_publication(self.channel, stream_id)
        self._publications.append(publication)
        deadline = time.monotonic() + WAIT_S
        while not publication.is_connected:
            if time.monotonic() > deadline:
                raise AssertionError("the archive's recording subscription did not connect")
            time.sleep(0.01)
        return publication

    def recording_of(self, publication) -> int:
        deadline = time.monotonic() + WAIT_S
        while True:
            with self._lock:
                found = [d.recording_id for d in self.client.list_recordings_for_uri(
                    0, None, "aeron:udp", publication.stream_id) if d.session_id == publication.session_id]
            if found:
                return found[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no recording of session {publication.session_id}")
            time.sleep(0.01)

    def publish(self, publication, recording_id: int, payloads: list[bytes], expected: list) -> None:
        for payload in payloads:
            position = publication.offer_with_retry(payload, timeout=WAIT_S)
            expected.append((recording_id, position, payload))

    def await_recorded(self, recording_id: int, position: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while True:
            with self._lock:
                recorded = self.client.max_recorded_position(recording_id)
            if recorded >= position:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"recording {recording_id} reached {recorded}, not {position}")
            time.sleep(0.005)

    def record(self, stream_id: int, payloads: list[bytes]) -> tuple[list, object, int]:
        self.start(stream_id)
        publication = self.publication(stream_id)
        recording_id = self.recording_of(publication)
        expected: list = []
        self.publish(publication, recording_id, payloads, expected)
        self.await_recorded(recording_id, expected[-1][1])
        return expected, publication, recording_id

    def close(self) -> None:
        for publication in self._publications:
            publication.close()
        self.client.close()
        self.aeron.close()


class App:
    def __init__(self, args: dict) -> None:
        self.args = args
        self.work = Path(args["work_dir"])
        self.options = dict(args["options"])
        self.recorder = UdpRecorder(args.get("publisher_aeron_dir"), args["control_channel"], args["record_port"])
        self.stream_ids = iter(range(args["first_stream_id"], args["first_stream_id"] + 1000))
        self.spark = self._session()

    def _session(self):
        # Built here, not by pytest-spark (tests/spark's session): this is another process, whose
        # master (local-cluster or local[2]), AERON_DIR and spark_conf differ per run, while
        # pytest-spark gives one in-process session of one fixed configuration.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        builder = (SparkSession.builder.master(self.args["master"]).appName("aeron-spark-cluster-tests")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
                   .config("spark.sql.catalogImplementation", "in-memory")
                   .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
        for name, value in self.args.get("spark_conf", {}).items():
            builder = builder.config(name, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        # pyspark copies spark.executorEnv.* into sc.environment and ships it with every Python
        # command, to driver-side workers too: without this, planning and the sink's commit would run
        # on the executors' AERON_DIR (embedded drivers) instead of this host's driver.
        session.sparkContext.environment.pop("AERON_DIR", None)
        register(session)
        return session

    # -- helpers ----------------------------------------------------------------------------------
    def reader(self, stream_id: int, streaming: bool = False, **extra):
        source = self.spark.readStream if streaming else self.spark.read
        source = source.format("aeron-archive")
        for name, value in {**self.options, "channel": "aeron:udp", "streamId": str(stream_id), **extra}.items():
            source = source.option(name, value)
        return source.load()

    @staticmethod
    def rows(dataframe) -> list:
        return sorted((r.recording_id, r.position, bytes(r.payload))
                      for r in dataframe.select("recording_id", "position", "payload").collect())

    def checkpoint(self, name: str) -> str:
        return str(self.work / "checkpoints" / name)

    def run_available_now(self, stream_id: int, name: str, collected: list) -> None:
        """One AvailableNow run; its rows appended to ``collected`` (foreachBatch, which, unlike the
        memory sink, restarts from a checkpoint)."""
        checkpoint = self.checkpoint(name)
        query = (self.reader(stream_id, streaming=True, checkpointLocation=checkpoint,
                             startingPositions="earliest", maxBytesPerPartition="16k")
                 .writeStream.foreachBatch(lambda frame, _batch_id: collected.extend(self.rows(frame)))
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            if not query.awaitTermination(WAIT_S):
                raise AssertionError("the AvailableNow query did not finish")
        finally:
            if query.isActive:
                query.stop()

    def start_tailing(self, stream_id: int, name: str, **extra):
        """A query reading the stream from its start every 200 ms into the memory table ``name``."""
        checkpoint = self.checkpoint(name)
        return (self.reader(stream_id, streaming=True, checkpointLocation=checkpoint, startingPositions="earliest",
                            **extra)
                .writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
                .trigger(processingTime="200 milliseconds").start())

    def wait_rows(self, table: str, count: int, query) -> list:
        deadline = time.monotonic() + WAIT_S
        while True:
            rows = self.rows(self.spark.table(table))
            if len(rows) >= count:
                return rows
            if query.exception() is not None:
                raise AssertionError(f"the query failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(rows)} of {count} rows after {WAIT_S} s")
            time.sleep(0.2)

    # -- scenarios --------------------------------------------------------------------------------
    def batch_read(self) -> str:
        stream_id = next(self.stream_ids)
        expected, _, _ = self.recorder.record(stream_id, numbered_payloads(0, 600))
        rows = self.rows(self.reader(stream_id, maxBytesPerPartition="16k", minPartitions="4"))
        check(rows, expected)
        return f"{len(rows)} rows, {sum(len(r[2]) for r in rows)} payload bytes, exact"

    def available_now(self) -> str:
        stream_id = next(self.stream_ids)
        expected, _, _ = self.recorder.record(stream_id, numbered_payloads(0, 400))
        collected: list = []
        self.run_available_now(stream_id, "available_now", collected)
        check(sorted(collected), expected)
        return f"{len(expected)} rows exact"

    def tail_live(self) -> str:
        stream_id = next(self.stream_ids)
        expected, publication, recording_id = self.recorder.record(stream_id, numbered_payloads(0, 50))
        query = self.start_tailing(stream_id, "tail")
        try:
            self.wait_rows("tail", len(expected), query)
            batches_before = len(query.recentProgress)
            for start in range(50, 450, 40):  # written while the query tails the recording
                self.recorder.publish(publication, recording_id, numbered_payloads(start, 40), expected)
                time.sleep(0.1)
            rows = self.wait_rows("tail", len(expected), query)
            check(rows, expected)
            batches = len(query.recentProgress) - batches_before
        finally:
            query.stop()
        return f"{len(expected)} rows exact, {batches} micro-batches while writing"

    def discovery(self) -> str:
        stream_id = next(self.stream_ids)
        expected, _, _ = self.recorder.record(stream_id, numbered_payloads(0, 60))
        query = self.start_tailing(stream_id, "discovery", discoveryIntervalMs="200")
        try:
            self.wait_rows("discovery", len(expected), query)
            second = self.recorder.publication(stream_id)  # a new session: a new recording, mid-query
            second_id = self.recorder.recording_of(second)
            self.recorder.publish(second, second_id, numbered_payloads(1000, 80), expected)
            check(self.wait_rows("discovery", len(expected), query), expected)
        finally:
            query.stop()
        return f"new recording {second_id} discovered, {len(expected)} rows exact"

    def restart_from_checkpoint(self) -> str:
        stream_id = next(self.stream_ids)
        expected, publication, recording_id = self.recorder.record(stream_id, numbered_payloads(0, 200))
        first: list = []
        self.run_available_now(stream_id, "restart", first)
        self.recorder.publish(publication, recording_id, numbered_payloads(200, 300), expected)
        self.recorder.await_recorded(recording_id, expected[-1][1])
        second: list = []
        self.run_available_now(stream_id, "restart", second)
        if not first or not second:
            raise AssertionError(f"each run must read something: {len(first)} then {len(second)} rows")
        check(sorted(first + second), expected)
        return f"{len(first)} rows, then {len(second)} after the restart: no gap, no duplicate"

    def executor_killed_mid_read(self) -> str:
        stream_id = next(self.stream_ids)
        expected, _, _ = self.recorder.record(stream_id, numbered_payloads(0, 800))
        frame = self.reader(stream_id, maxBytesPerPartition="8k", minPartitions="12")

        def slow(batches):  # keeps each task running long enough to be killed mid-read
            import time as _time
            for batch in batches:
                _time.sleep(0.4)
                yield batch

        result: dict = {}

        def collect() -> None:
            try:
                result["rows"] = self.rows(frame.mapInArrow(slow, frame.schema))
            except BaseException as error:  # noqa: BLE001 - reported below
                result["error"] = error

        reader = threading.Thread(target=collect, daemon=True)
        reader.start()
        victims = wait_for_executors(2)
        time.sleep(2.0)
        if not reader.is_alive():
            raise AssertionError("the read finished before an executor could be killed; make it slower")
        os.kill(victims[0], signal.SIGKILL)
        reader.join(WAIT_S * 2)
        if "error" in result:
            raise AssertionError(f"the read failed after the executor was killed: {result['error']}")
        check(result["rows"], expected)
        return f"executor {victims[0]} killed mid-read; {len(expected)} rows exact after the retry"

    def sink_batch_write(self) -> str:
        staging = self.args.get("staging_uri")  # None: the sink's default (under archive.dir)
        stream_id = next(self.stream_ids)
        sink_channel = f"aeron:udp?endpoint=127.0.0.1:{self.args['sink_port']}"
        payloads = numbered_payloads(0, 300)
        frame = self.spark.createDataFrame([(p,) for p in payloads], "payload binary").repartition(3)
        writer = frame.write.format("aeron-archive").mode("append")
        staged = {"sink.stagingDir": staging} if staging else {}
        for name, value in {**self.options, **staged, "channel": sink_channel, "streamId": str(stream_id),
                            "sink.id": f"cluster-batch-{stream_id}"}.items():
            writer = writer.option(name, value)
        writer.save()
        back = self.reader(stream_id).select("payload").collect()
        got = sorted(bytes(r.payload) for r in back)
        if got != sorted(payloads):
            raise AssertionError(f"read back {len(got)} payloads, {len(set(got) & set(payloads))} of "
                                 f"{len(payloads)} expected")
        where = staging.split("?")[0] if staging else "the default staging directory"
        return f"{len(payloads)} rows written from {frame.rdd.getNumPartitions()} tasks, staged on {where}"

    def close(self) -> None:
        try:
            self.spark.stop()
        finally:
            self.recorder.close()


def check(rows: list, expected: list) -> None:
    expected = sorted(expected)
    if rows == expected:
        return
    got, wanted = set(rows), set(expected)
    raise AssertionError(f"{len(rows)} rows read, {len(expected)} expected: {len(wanted - got)} missing, "
                         f"{len(got - wanted)} unexpected, {len(rows) - len(got)} duplicates")


def wait_for_executors(count: int) -> list[int]:
    """PIDs of this application's executor JVMs (descendants of this process)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = executor_pids()
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(found)} executors running, expected {count}")
        time.sleep(0.2)


def executor_pids() -> list[int]:
    """Read from /proc, not ``ps``: under pytest-xdist COLUMNS=80 is set, and ``ps`` cuts each
    command line to that width, well before an executor JVM's class name (after its classpath)."""
    executors = []
    for pid in descendant_pids(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"CoarseGrainedExecutorBackend" in cmdline.read():
                    executors.append(pid)
        except OSError:
            continue  # exited meanwhile
    return sorted(executors)


def main() -> int:
    args = json.loads(sys.argv[1])
    app = App(args)
    failed = False
    try:
        for scenario in args["scenarios"]:
            started = time.monotonic()
            try:
                detail = getattr(app, scenario)()
                ok = True
            except BaseException as error:  # noqa: BLE001 - reported per scenario
                detail = "".join(traceback.format_exception(error))[-4000:]
                ok = False
                failed = True
            print(json.dumps({"scenario": scenario, "ok": ok, "detail": detail,
                              "seconds": round(time.monotonic() - started, 1)}), flush=True)
    finally:
        app.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
