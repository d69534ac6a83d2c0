"""The Spark source and sink against the REAL modern Java Aeron Archive (1.51.0, protocol 1.12.0), on
one host (``local[2]``, the tests' shared session): what a user does first, pointing Spark at the
archive they already run.

One Java archive (its own Java media driver) serves the module; Spark is given
``archive.controlChannel`` (and once ``archive.dir``, the Java archive's directory, read through its
mark file). Spark's Python workers run on their own embedded C drivers, so everything crosses UDP:
control, responses, replays (bounded by length: the archive cannot read their counters), and the
sink's publications (``sourceLocation=remote``). Recordings are made by the real Java client and by
a Java publisher (the peer's ``start-recording`` + ``publish``); rows are checked byte for byte
against the peer's deterministic payloads (digests). The cluster layout against the Java archive is
in tests/cluster/test_cluster_layout.py (``modern-java`` layout).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from aeron_spark.connector.sink import archive_access as sink_archive
from aeron_spark.connector.sink.commit import CommitOutcome
from aeron_spark.connector.sink.commit_job import commit_staged
from aeron_spark.connector.sink.sink_archive import SinkConflict
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import streaming_batch_key
from aeron_spark.connector.sink.writer import TaskInfo, stage_task_output
from aeron_spark.connector.source.archive_access import open_archive
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range

from tests.interop.peer.modern_peer import (
    JavaServer,
    ModernArchiveEndpoint,
    ModernPeerClient,
    RecordResult,
    RunningModernJavaArchive,
    ensure_modern_peer_built,
    expected_digest,
    running_modern_java_archive,
    start_modern_java_archive,
)
from tests.interop.peer.interop_peer import PeerError, shm_tempdir
from tests.integration.connector.test_sink_committer_sidecar import race_two_commits, winner_and_loser
from tests.support.ports import udp_channel

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SIZE = 200
WAIT_S = 90.0


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningModernJavaArchive]:
    with running_modern_java_archive(ensure_modern_peer_built(), tmp_path_factory.mktemp("spark-modern-java")) as a:
        yield a


@pytest.fixture(scope="module")
def java_recording(java: RunningModernJavaArchive) -> RecordResult:
    """1,500 × 200 B recorded by the real Java client over UDP (64 KiB terms: padding at term ends)."""
    return java.client.record(f"{udp_channel()}|term-length=64k", 7001, 1_500, SIZE)


def endpoint_of(channel: str) -> str:
    return channel.split("?")[1].split("|")[0]  # endpoint=localhost:P


def read_options(java: RunningModernJavaArchive, channel_fragment: str, stream_id: int) -> dict[str, str]:
    return {"archive.controlChannel": java.control_channel, "channel": channel_fragment, "streamId": str(stream_id)}


def collect(frame) -> list[tuple[int, int, bytes]]:
    return sorted((r.recording_id, r.position, bytes(r.payload))
                  for r in frame.select("recording_id", "position", "payload").collect())


def digest(rows) -> str:
    hashed = hashlib.sha256()
    for row in rows:
        hashed.update(row[2])
    return hashed.hexdigest()


def check_recording(rows, recording_id: int, first_index: int, count: int, stop_position: int) -> None:
    mine = [row for row in rows if row[0] == recording_id]
    assert len(mine) == count, f"recording {recording_id}: {len(mine)} rows, expected {count}"
    assert digest(mine) == expected_digest(first_index, count, SIZE)
    assert int.from_bytes(mine[0][2][:8], "little") == first_index
    assert mine[-1][1] == stop_position  # a row's position is where its message ends
    assert len({row[1] for row in mine}) == count


def test_batch_read_of_a_java_recording(spark_source, java: RunningModernJavaArchive,
                                        java_recording: RecordResult) -> None:
    channel = endpoint_of(java_recording.fields["recordingChannel"])
    frame = spark_source.read.format("aeron-archive").options(
        **read_options(java, channel, 7001), maxBytesPerPartition="64k", minPartitions="3").load()
    assert frame.rdd.getNumPartitions() >= 3
    rows = collect(frame)
    check_recording(rows, java_recording.recording_id, 0, 1_500, java_recording.stop_position)
    assert digest(rows) == java_recording.digest

    # The archive's directory alone: its (Java 1.51) mark file gives the control channel and its
    # driver, which this host's workers then use (counters, IPC replays).
    by_dir = spark_source.read.format("aeron-archive").option("archive.dir", str(java.archive_dir)).option(
        "recordingIds", str(java_recording.recording_id)).load()
    assert collect(by_dir) == rows


def test_available_now_reads_every_java_recording_of_the_stream_once(spark_source, java: RunningModernJavaArchive,
                                                                     tmp_path: Path) -> None:
    channel = f"{udp_channel()}|term-length=64k"
    first = java.client.record(channel, 7002, 300, SIZE)
    second = java.client.record(channel, 7002, 200, SIZE, first_index=300)
    checkpoint = tmp_path / "chk"
    got: list = []
    query = (spark_source.readStream.format("aeron-archive")
             .options(**read_options(java, endpoint_of(channel), 7002), startingPositions="earliest",
                      maxBytesPerPartition="16k", checkpointLocation=str(checkpoint))
             .load().writeStream.foreachBatch(lambda frame, _batch: got.extend(collect(frame)))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(WAIT_S), "the AvailableNow query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    rows = sorted(got)
    check_recording(rows, first.recording_id, 0, 300, first.stop_position)
    check_recording(rows, second.recording_id, 300, 200, second.stop_position)
    assert len(rows) == 500


def test_a_query_discovers_recordings_of_a_java_publisher(spark_source, java: RunningModernJavaArchive,
                                                          tmp_path: Path) -> None:
    """The Java archive records a stream a Java publisher (another process) publishes; a running
    query finds each new session's recording while it runs and reads it whole."""
    channel, stream_id = udp_channel(), 7003
    java.client.start_recording(channel, stream_id)
    recordings: dict[int, tuple[int, int, int]] = {}  # recording id -> (first index, count, stop)

    def publish(first_index: int, count: int) -> None:
        published = java.client.publish(channel, stream_id, count, SIZE, first_index=first_index)
        [descriptor] = [d for d in java.client.list_recordings()
                        if d["sessionId"] == published.session_id and d["streamId"] == stream_id]
        recordings[descriptor["recordingId"]] = (first_index, count, published.position)

    publish(0, 100)
    checkpoint = tmp_path / "chk"
    query = (spark_source.readStream.format("aeron-archive")
             .options(**read_options(java, endpoint_of(channel), stream_id), startingPositions="earliest",
                      discoveryIntervalMs="200", checkpointLocation=str(checkpoint))
             .load().writeStream.format("memory").queryName("modern_java_discovery")
             .option("checkpointLocation", str(checkpoint)).trigger(processingTime="200 milliseconds").start())
    try:
        wait_rows(spark_source, "modern_java_discovery", 100, query)
        publish(100, 150)  # new sessions, new recordings, while the query runs
        publish(250, 50)
        rows = wait_rows(spark_source, "modern_java_discovery", 300, query)
    finally:
        query.stop()
        java.client.stop_recording(channel, stream_id)
    assert len(rows) == 300 and len(recordings) == 3
    for recording_id, (first_index, count, stop) in recordings.items():
        check_recording(rows, recording_id, first_index, count, stop)


def test_reading_a_java_archive_that_authenticates(spark_source, tmp_path: Path) -> None:
    """A Java archive with Aeron's SimpleAuthenticator (the peer's ``--credentials``) takes the
    credentials bytes as they are: ``archive.credentialsEncoding=plain`` sends ``principal:secret``
    so; the default (our HMAC challenge scheme, principal only) is refused at once, by name."""
    peer = ensure_modern_peer_built()
    with running_modern_java_archive(peer, tmp_path, credentials="spark:s3cret") as secured:
        recorded = ModernPeerClient(peer, secured.endpoint, credentials="spark:s3cret").record(
            udp_channel(), 7040, 50, SIZE)
        options = {**read_options(secured, "aeron:udp", 7040), "archive.credentials": "spark:s3cret"}
        rows = collect(spark_source.read.format("aeron-archive")
                       .options(**options, **{"archive.credentialsEncoding": "plain"}).load())
        check_recording(rows, recorded.recording_id, 0, 50, recorded.stop_position)
        with pytest.raises(Exception, match="AUTHENTICATION_REJECTED") as refused:
            spark_source.read.format("aeron-archive").options(**options).load().collect()
        assert "archive.credentialsEncoding=plain" in str(refused.value) and "s3cret" not in str(refused.value)


def wait_rows(spark, table: str, count: int, query) -> list:
    deadline = time.monotonic() + WAIT_S
    while True:
        rows = collect(spark.table(table))
        if len(rows) >= count:
            return rows
        assert query.exception() is None, f"the query failed: {query.exception()}"
        assert time.monotonic() < deadline, f"{len(rows)} of {count} rows after {WAIT_S} s"
        time.sleep(0.2)


# --------------------------------------------------------------------------------------------- sink


def sink_rows(spark, java: RunningModernJavaArchive, sink_id: str, stream_id: int) -> list[bytes]:
    rows = (spark.read.format("aeron-archive")
            .options(**read_options(java, f"alias=aeron-spark-sink:{sink_id}", stream_id)).load()
            .orderBy("recording_id", "position").select("payload").collect())
    return [bytes(row.payload) for row in rows]


def test_write_stream_into_the_java_archive_exactly_once_with_a_replayed_batch(
        spark_source, java: RunningModernJavaArchive, tmp_path: Path) -> None:
    spark = spark_source
    source_dir, checkpoint, stream_id = tmp_path / "in", tmp_path / "chk", 7010
    sink_channel = udp_channel()

    def run() -> object:
        stream = (spark.readStream.format("text").option("maxFilesPerTrigger", "1").load(str(source_dir))
                  .selectExpr("value AS payload"))
        query = (stream.writeStream.format("aeron-archive")
                 .options(**{"archive.controlChannel": java.control_channel, "channel": sink_channel,
                             "streamId": str(stream_id), "sink.termLength": "64k",
                             "checkpointLocation": str(checkpoint)})
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(WAIT_S), "the sink query did not finish"
        finally:
            query.stop()
        assert query.exception() is None
        return query

    for index in range(3):
        write_input(source_dir, index, lines_of(index))
    query = run()
    expected = [line for index in range(3) for line in lines_of(index)]
    assert sink_rows(spark, java, query.id, stream_id) == expected

    # Spark forgets that batch 2 was committed: it replays it and calls commit(..., 2) again.
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    write_input(source_dir, 3, lines_of(3))
    again = run()
    assert again.id == query.id
    assert sink_rows(spark, java, query.id, stream_id) == expected + lines_of(3)

    # The Java client sees one sink recording, stopped at the end of the last commit marker.
    [descriptor] = [d for d in java.client.list_recordings()
                    if f"alias=aeron-spark-sink:{query.id}" in d["originalChannel"]]
    assert descriptor["stopPosition"] > 0 and descriptor["streamId"] == stream_id


def write_input(directory: Path, index: int, lines: list[bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".part-{index:03d}.txt"
    temporary.write_bytes(b"\n".join(lines) + b"\n")
    os.utime(temporary, (1_700_000_000 + index, 1_700_000_000 + index))  # file source order
    temporary.rename(directory / f"part-{index:03d}.txt")


def lines_of(index: int, count: int = 150) -> list[bytes]:
    return [f"file{index}-line{j}".encode() for j in range(count)]


class Crash(RuntimeError):
    pass


def sink_options(java: RunningModernJavaArchive, staging: Path, stream_id: int) -> SinkOptions:
    return SinkOptions.parse({"channel": udp_channel(), "streamId": str(stream_id),
                              "archive.controlChannel": java.control_channel, "sink.stagingDir": str(staging),
                              "sink.termLength": "64k", "sink.mtu": "1408", "sink.commitTimeoutMs": "4000",
                              "archive.timeoutMs": "3000"}, streaming=True)


def staged(opts: SinkOptions, batch_id: int, payloads: list[bytes], attempt: int = 0):
    table = pa.table({"payload": pa.array(payloads, pa.binary())})
    return stage_task_output(opts, iter(table.to_batches()), TaskInfo(0, attempt, attempt, batch_id, "q-crash"),
                             streaming_batch_key(batch_id))


def visible_rows(java: RunningModernJavaArchive, recording_id: int) -> list[bytes]:
    return rows_visible_at(java.control_channel, recording_id)


def visible_rows_at(opts: SinkOptions, recording_id: int) -> list[bytes]:
    return rows_visible_at(opts.connection.control_channel, recording_id)


def rows_visible_at(control_channel: str, recording_id: int) -> list[bytes]:
    source = SourceOptions.parse({"recordingIds": str(recording_id), "archive.controlChannel": control_channel},
                                 ReadMode.BATCH)
    access = open_archive(source.connection)
    try:
        end = OffsetReader(source, lambda: access).latest_positions([recording_id])[0][recording_id]
        batches = list(read_range(ReplayRange(recording_id, 0, end), source, access)) if end else []
    finally:
        access.close()
    return pa.Table.from_batches(batches).column("payload").to_pylist() if batches else []


def rows(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}-".encode().ljust(100, b".") for i in range(n)]


def test_a_commit_dying_before_its_marker_is_skipped_in_the_java_archive(
        java: RunningModernJavaArchive, tmp_path: Path, monkeypatch) -> None:
    """The committer alone (no Spark): a commit that dies mid-data and leaves its recording active
    (as after kill -9) is invisible to readers; the retry stops the recording by identity, extends
    it in the Java archive after the debris (never truncated: sink/commit.py), appends the batch
    once, and readers skip the debris; a duplicated commit of it is skipped."""
    opts = sink_options(java, tmp_path / "staging", 7020)
    first = commit_staged(opts, [staged(opts, 0, rows(300, "a"))], 0)
    assert first.outcome is CommitOutcome.COMMITTED
    recording_id = first.recording_id

    real_append = sink_archive.ClientAppender.append
    calls = {"n": 0}

    def dying_append(self, block):
        calls["n"] += 1
        if calls["n"] > 3:
            raise Crash("driver died mid-commit")
        real_append(self, block)

    monkeypatch.setattr(sink_archive.ClientAppender, "append", dying_append)
    monkeypatch.setattr(sink_archive.ClientAppender, "abandon", lambda self: None)  # left active
    # A fresh connection: a commit failing on a reused one is re-run at once (which would already
    # recover); this one must die and leave its debris.
    sink_archive.forget_shared_sink_archive(opts)
    with pytest.raises(Crash):
        commit_staged(opts, [staged(opts, 1, rows(3000, "b"))], 1)
    monkeypatch.undo()
    debris = java.client.positions(recording_id)
    assert debris.active and debris.max_recorded_position > first.end  # the dead commit's frames

    assert visible_rows(java, recording_id) == rows(300, "a")
    again = commit_staged(opts, [staged(opts, 1, rows(3000, "b"), attempt=1)], 1)
    assert again.outcome is CommitOutcome.COMMITTED and again.data_start >= debris.max_recorded_position
    assert visible_rows(java, recording_id) == rows(300, "a") + rows(3000, "b")
    duplicate = commit_staged(opts, [staged(opts, 1, rows(3000, "b"), attempt=2)], 1)
    assert duplicate.outcome is CommitOutcome.ALREADY_COMMITTED
    assert visible_rows(java, recording_id) == rows(300, "a") + rows(3000, "b")
    assert java.client.positions(recording_id).stop_position == again.end


def sink_recording_ids(java: RunningModernJavaArchive, stream_id: int) -> list[int]:
    return [d["recordingId"] for d in java.client.list_recordings()
            if "alias=aeron-spark-sink:q-crash" in d["originalChannel"] and d["streamId"] == stream_id]


def test_two_committers_starting_the_sink_recording_at_once_leave_one_recording(
        java: RunningModernJavaArchive, tmp_path: Path, monkeypatch) -> None:
    """One writer per sink, arbitrated by the Java archive: the higher recording id loses and is purged."""
    opts = sink_options(java, tmp_path / "staging", 7030)
    outcomes = race_two_commits(opts, monkeypatch, 0, ("A", "B"))
    won, lost = winner_and_loser(outcomes)
    assert isinstance(outcomes[lost], SinkConflict)
    assert sink_recording_ids(java, 7030) == [outcomes[won].recording_id]  # the loser's was purged
    assert visible_rows(java, outcomes[won].recording_id) == race_rows(won)
    retried = commit_staged(opts, [staged(opts, 0, race_rows(lost), attempt=5)], 0)  # Spark retries the batch
    assert retried.outcome is CommitOutcome.ALREADY_COMMITTED
    assert visible_rows(java, outcomes[won].recording_id) == race_rows(won)


def test_two_committers_extending_the_sink_recording_at_once_append_one_batch(
        java: RunningModernJavaArchive, tmp_path: Path, monkeypatch) -> None:
    """The Java archive refuses the second extension (ACTIVE_RECORDING, or INVALID_EXTENSION for its
    image): one batch appended, the loser's SinkConflict, its retry skipped."""
    opts = sink_options(java, tmp_path / "staging", 7031)
    first = commit_staged(opts, [staged(opts, 0, rows(300, "zero"))], 0)
    outcomes = race_two_commits(opts, monkeypatch, 1, ("C", "D"))
    won, lost = winner_and_loser(outcomes)
    assert "refused to extend recording" in str(outcomes[lost]), outcomes[lost]
    assert sink_recording_ids(java, 7031) == [first.recording_id]
    assert visible_rows(java, first.recording_id) == rows(300, "zero") + race_rows(won)
    retried = commit_staged(opts, [staged(opts, 1, race_rows(lost), attempt=5)], 1)
    assert retried.outcome is CommitOutcome.ALREADY_COMMITTED
    assert visible_rows(java, first.recording_id) == rows(300, "zero") + race_rows(won)


def race_rows(tag: str) -> list[bytes]:
    """What race_two_commits stages for a committer (its rows(400, tag))."""
    return [f"{tag}-{i}-".encode().ljust(100, b".") for i in range(400)]


def test_an_ipc_sink_on_the_java_archive_driver_through_archive_dir(java: RunningModernJavaArchive,
                                                                     tmp_path: Path) -> None:
    """``archive.dir`` = the Java archive's directory: the committer attaches to its Java driver (the
    mark file names it), publishes over IPC, the archive records LOCAL and the rec-pos counter says
    when the batch is recorded."""
    opts = SinkOptions.parse({"channel": "aeron:ipc", "streamId": "7060", "archive.dir": str(java.archive_dir),
                              "sink.stagingDir": str(tmp_path / "staging"), "sink.commitTimeoutMs": "8000"},
                             streaming=True)
    assert opts.source_location_local
    first = commit_staged(opts, [staged(opts, 0, rows(1000, "x"))], 0)
    second = commit_staged(opts, [staged(opts, 1, rows(1000, "y"))], 1)
    assert second.recording_id == first.recording_id and second.data_start == first.end
    assert commit_staged(opts, [staged(opts, 1, rows(1000, "y"), attempt=1)], 1).outcome is \
        CommitOutcome.ALREADY_COMMITTED
    [descriptor] = [d for d in java.client.list_recordings() if d["recordingId"] == first.recording_id]
    assert descriptor["originalChannel"].startswith("aeron:ipc") and descriptor["stopPosition"] == second.end
    assert visible_rows(java, first.recording_id) == rows(1000, "x") + rows(1000, "y")


def test_the_java_archive_killed_mid_commit_recovers_to_exactly_once(tmp_path: Path, monkeypatch) -> None:
    """SIGKILL of the Java archive (and its driver) while a commit appends, before its marker; the
    archive restarted on the same directory stops the recording at what it had recorded (debris after
    the last marker), and the commit re-run cuts the debris and appends the batch once."""
    peer = ensure_modern_peer_built()
    archive_dir, sink_channel = tmp_path / "archive", udp_channel()
    servers: list[JavaServer] = []
    aeron_dirs: list[Path] = []

    def start() -> tuple[JavaServer, SinkOptions]:
        deadline = time.monotonic() + 60
        while True:  # a killed archive's mark file looks active for a few seconds
            try:
                aeron_dirs.append(Path(shm_tempdir("aeron-modern-killed-")))
                server = start_modern_java_archive(peer, archive_dir=archive_dir, log_dir=tmp_path,
                                                   aeron_dir=aeron_dirs[-1])
                break
            except PeerError as error:
                assert "active mark file" in str(error) and time.monotonic() < deadline, error
                time.sleep(0.5)
        servers.append(server)
        return server, SinkOptions.parse({
            "channel": sink_channel, "streamId": "7050", "archive.controlChannel": server.ready["controlChannel"],
            "sink.stagingDir": str(tmp_path / "staging"), "sink.termLength": "64k",
            "sink.commitTimeoutMs": "4000", "archive.timeoutMs": "3000"}, streaming=True)

    try:
        server, opts = start()
        first = commit_staged(opts, [staged(opts, 0, rows(300, "a"))], 0)
        real_append = sink_archive.ClientAppender.append
        calls = {"n": 0}

        def append_then_kill(self, block):
            real_append(self, block)
            calls["n"] += 1
            if calls["n"] == 4:
                deadline = time.monotonic() + 5
                while (self._live_position(self.recording_id) or 0) < self.position and time.monotonic() < deadline:
                    time.sleep(0.01)  # let the archive record the debris
                os.kill(server.pid, signal.SIGKILL)
                raise Crash("archive killed")

        monkeypatch.setattr(sink_archive.ClientAppender, "append", append_then_kill)
        with pytest.raises(Exception):  # noqa: B017 - Crash, or ArchiveUnavailable from the retry on a new connection
            commit_staged(opts, [staged(opts, 1, rows(5000, "b"))], 1)
        monkeypatch.undo()
        server.stop()

        server, opts = start()
        restarted = ModernPeerClient(peer, ModernArchiveEndpoint(control_channel=server.ready["controlChannel"],
                                                                 aeron_dir=Path(server.ready["aeronDir"])))
        [descriptor] = restarted.list_recordings()
        assert descriptor["stopPosition"] > first.end  # stopped at what it recorded: debris after the marker
        again = commit_staged(opts, [staged(opts, 1, rows(5000, "b"), attempt=1)], 1)
        assert again.outcome is CommitOutcome.COMMITTED and again.data_start == descriptor["stopPosition"]
        assert visible_rows_at(opts, first.recording_id) == rows(300, "a") + rows(5000, "b")
        assert commit_staged(opts, [staged(opts, 1, rows(5000, "b"), attempt=2)], 1).outcome is \
            CommitOutcome.ALREADY_COMMITTED
    finally:
        for started in servers:
            started.stop()
        for directory in aeron_dirs:
            shutil.rmtree(directory, ignore_errors=True)
