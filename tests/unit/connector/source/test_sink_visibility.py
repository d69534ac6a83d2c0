"""The source reads a sink recording only up to its last commit marker, and never the markers."""

from __future__ import annotations

import pyarrow as pa
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range
from aeron_spark.connector.sink.commit_job import commit_staged
from aeron_spark.connector.commit_markers import MARKER_RESERVED_VALUE
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import streaming_batch_key
from aeron_spark.connector.sink.writer import TaskInfo, stage_task_output
from tests.support.fake_sink_archive import FakeSinkArchive, FakeSinkRecording
from tests.support.synthetic_log import SyntheticLog


def sink_options(tmp_path) -> SinkOptions:
    return SinkOptions.parse({"channel": "aeron:ipc", "streamId": "1001", "archive.controlChannel":
                              "aeron:udp?endpoint=localhost:1", "sink.stagingDir": str(tmp_path)}, streaming=True)


def source_options(recording_id: int) -> SourceOptions:
    return SourceOptions.parse({"recordingIds": str(recording_id),
                                "archive.controlChannel": "aeron:udp?endpoint=localhost:1"}, ReadMode.BATCH)


def commit_rows(tmp_path, archive, batch_id: int, rows: list[bytes]) -> None:
    opts = sink_options(tmp_path)
    message = stage_task_output(opts, iter(pa.table({"payload": pa.array(rows, pa.binary())}).to_batches()),
                                TaskInfo(0, 0, 1, batch_id, "q"), streaming_batch_key(batch_id))
    commit_staged(opts, [message], batch_id, open_archive=lambda _o: archive)


def rows(n: int, tag: str) -> list[bytes]:
    return [f"{tag}{i}".encode() * 3 for i in range(n)]


def read_all(archive, recording_id: int, start: int, end: int) -> list[bytes]:
    batches = list(read_range(ReplayRange(recording_id, start, end), source_options(recording_id), archive))
    table = pa.Table.from_batches(batches) if batches else None
    if table is None:
        return []
    assert MARKER_RESERVED_VALUE not in table.column("reserved_value").to_pylist()
    return table.column("payload").to_pylist()


def test_a_stopped_sink_recording_is_read_to_its_last_marker_without_markers(tmp_path):
    archive = FakeSinkArchive()
    commit_rows(tmp_path, archive, 0, rows(100, "a"))
    commit_rows(tmp_path, archive, 1, rows(50, "b"))
    rid = next(iter(archive.recordings))
    reader = OffsetReader(source_options(rid), lambda: archive)
    latest, vanished = reader.latest_positions([rid])
    recording = archive.recordings[rid]
    assert latest == {rid: recording.position} and not vanished
    assert read_all(archive, rid, 0, latest[rid]) == rows(100, "a") + rows(50, "b")


def test_debris_after_the_last_marker_is_not_visible(tmp_path):
    archive = FakeSinkArchive()
    commit_rows(tmp_path, archive, 0, rows(100, "a"))
    rid = next(iter(archive.recordings))
    recording = archive.recordings[rid]
    committed = recording.position
    recording.data += bytes(recording.data[:2048])  # a dead commit's frames, recording stopped
    reader = OffsetReader(source_options(rid), lambda: archive)
    assert reader.latest_positions([rid])[0] == {rid: committed}
    assert read_all(archive, rid, 0, committed) == rows(100, "a")


def test_while_a_commit_runs_only_the_known_committed_end_is_readable(tmp_path):
    archive = FakeSinkArchive()
    commit_rows(tmp_path, archive, 0, rows(10, "a"))
    rid = next(iter(archive.recordings))
    recording = archive.recordings[rid]
    committed = recording.position
    fresh = OffsetReader(source_options(rid), lambda: archive)
    recording.active = True
    recording.data += bytes(recording.data[:512])  # the next commit is appending
    assert fresh.latest_positions([rid])[0] == {rid: committed}  # never saw it stopped: one scan
    replays = archive.calls["replay"]
    assert fresh.latest_positions([rid])[0] == {rid: committed} and archive.calls["replay"] == replays
    recording.active = False
    recording.data = recording.data[:committed]
    seen = OffsetReader(source_options(rid), lambda: archive)
    assert seen.latest_positions([rid])[0] == {rid: committed}
    recording.active = True
    recording.data += bytes(recording.data[:512])
    assert seen.latest_positions([rid])[0] == {rid: committed}
    replays = archive.calls["replay"]
    recording.active = False
    recording.data = recording.data[:committed]
    assert seen.latest_positions([rid])[0] == {rid: committed}
    assert archive.calls["replay"] == replays  # same stop position: cached, no replay


def test_other_recordings_keep_rows_with_the_marker_reserved_value(tmp_path):
    archive = FakeSinkArchive()
    log = SyntheticLog(stream_id=1001)
    log.append(b"user row", MARKER_RESERVED_VALUE)
    log.append(b"another", 5)
    archive.recordings[9] = FakeSinkRecording(9, "aeron:udp?endpoint=localhost:4000", 1001, log.initial_term_id,
                                              log.term_length, log.mtu, log.session_id, data=log.data, active=False)
    reader = OffsetReader(source_options(9), lambda: archive)
    end = reader.latest_positions([9])[0][9]
    batches = list(read_range(ReplayRange(9, 0, end), source_options(9), archive))
    assert pa.Table.from_batches(batches).column("payload").to_pylist() == [b"user row", b"another"]
