"""The source's replays against the REAL sidecar (`aeron-archive serve`): failures that used to
wait for replay.idleTimeoutMs (30 s) or lost the archive's reason now fail at once and say why.

* a range end inside a frame (endingPositions 4096 in a recording of 1,056-byte frames): the
  archive replays whole frames only, so the replay stalls at the last whole frame; the source
  now probes that frame and fails naming the option, the recording and both frame boundaries;
* an ERROR the archive sends for a replay after accepting it (here: a frame it cannot read) now
  carries the archive's own text, and a refused start position is a ReplayFailed too;
* replays on a channel/stream the archive records fail naming the recording subscription (they
  would each become a recording), and the default replay stream no longer collides with a
  user's recording of ``aeron:ipc`` stream 1001.

Reads call ``read_range`` directly (no Spark); each test uses its own stream ids.
"""

from __future__ import annotations

import glob
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import SourceLocation
from aeron_spark.connector.replay_errors import ReplayEndInsideFrame, ReplayFailed, ReplayStreamRecorded
from aeron_spark.connector.options import DEFAULT_REPLAY_STREAM_ID
from aeron_spark.connector.source.archive_access import open_archive
from aeron_spark.connector.source.batch_reader import plan_batch
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range

from tests.support.sidecar import running_sidecar
from tests.spark.source_fixtures import RecordingArchive

PAYLOAD = 1024
FRAME = 1056  # 32-byte header + 1,024 bytes, already 32-aligned
MESSAGES = 20
FAST_S = 5.0  # far below the 30 s default replay.idleTimeoutMs these failures used to wait for


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingArchive]:
    with running_sidecar(tmp_path_factory.mktemp("replay-errors") / "archive") as sidecar:
        recording_archive = RecordingArchive(sidecar)
        try:
            yield recording_archive
        finally:
            recording_archive.close()


def options(archive: RecordingArchive, recording_id: int, **extra: str) -> SourceOptions:
    return SourceOptions.parse({"archive.dir": archive.archive_dir, "recordingIds": str(recording_id),
                                **extra}, ReadMode.BATCH)


def record(archive: RecordingArchive, *, stop: bool = True) -> tuple[int, int]:
    recorded, _ = archive.record([bytes([index]) * PAYLOAD for index in range(MESSAGES)], stop=stop)
    assert recorded.messages[0][0] == FRAME and recorded.end == MESSAGES * FRAME
    return recorded.recording_id, recorded.end


def read_rows(replay_range: ReplayRange, source: SourceOptions) -> list[int]:
    access = open_archive(source.connection)
    try:
        return [position for batch in read_range(replay_range, source, access)
                for position in batch.column("position").to_pylist()]
    finally:
        access.close()


def batch_read(source: SourceOptions) -> list[int]:
    access = open_archive(source.connection)
    try:
        ranges = plan_batch(source, OffsetReader(source, lambda: access))
        return [position for replay_range in ranges for batch in read_range(replay_range, source, access)
                for position in batch.column("position").to_pylist()]
    finally:
        access.close()


@pytest.mark.parametrize("stopped", [True, False], ids=["stopped", "active"])
def test_an_ending_position_inside_a_frame_fails_fast_naming_the_option_and_the_boundaries(
        archive: RecordingArchive, stopped: bool) -> None:
    recording_id, _ = record(archive, stop=stopped)
    assert 4096 % 32 == 0 and 3 * FRAME < 4096 < 4 * FRAME
    source = options(archive, recording_id, startingPositions="earliest",
                     endingPositions=json.dumps({str(recording_id): 4096}))
    assert source.replay.idle_timeout_ms == 30_000
    started = time.monotonic()
    with pytest.raises(ReplayEndInsideFrame) as raised:
        batch_read(source)
    elapsed = time.monotonic() - started
    assert elapsed < FAST_S, elapsed
    message = str(raised.value)
    assert f"recording {recording_id}" in message and "endingPositions" in message
    assert f"[{3 * FRAME}, {4 * FRAME})" in message and "4096" in message
    assert (raised.value.frame_start, raised.value.frame_end) == (3 * FRAME, 4 * FRAME)
    # Either boundary the message names is a valid endingPositions.
    for boundary in (3 * FRAME, 4 * FRAME):
        fixed = options(archive, recording_id, startingPositions="earliest",
                        endingPositions=json.dumps({str(recording_id): boundary}))
        assert batch_read(fixed) == list(range(FRAME, boundary + 1, FRAME))


def test_an_error_the_archive_sends_during_the_replay_fails_with_its_text(archive: RecordingArchive) -> None:
    recording_id, end = record(archive)
    segment = glob.glob(str(Path(archive.archive_dir) / f"{recording_id}-*.rec"))
    assert len(segment) == 1
    with open(segment[0], "r+b") as file:  # frame 10's length field: nothing valid recorded there
        file.seek(10 * FRAME)
        file.write(b"\0\0\0\0")
    started = time.monotonic()
    with pytest.raises(ReplayFailed) as raised:
        read_rows(ReplayRange(recording_id, 0, end), options(archive, recording_id))
    assert time.monotonic() - started < FAST_S
    message = str(raised.value)
    assert f"recording {recording_id}" in message
    assert f"unexpected end of recording at position={10 * FRAME}" in message  # the archive's own words


def test_a_start_position_inside_a_frame_is_a_replay_failure_with_the_archive_text(
        archive: RecordingArchive) -> None:
    recording_id, end = record(archive)
    with pytest.raises(ReplayFailed) as raised:
        read_rows(ReplayRange(recording_id, 4096, end), options(archive, recording_id))
    assert f"recording {recording_id}: the archive refused the replay of [4096, {end})" in str(raised.value)
    assert "replayPosition=4096 does not point to a valid frame" in str(raised.value)


def recordings_of_stream(archive: RecordingArchive, stream_id: int) -> list[int]:
    return [d.recording_id for d in archive.client.list_recordings_for_uri(0, None, "aeron:ipc", stream_id)]


def test_replays_on_a_stream_the_archive_records_fail_naming_the_recording_subscription(
        archive: RecordingArchive) -> None:
    recording_id, end = record(archive)
    replay_stream = archive.new_stream_id()
    source = options(archive, recording_id, **{"replay.streamId": str(replay_stream)})
    archive.client.start_recording("aeron:ipc", replay_stream, SourceLocation.LOCAL)
    try:
        started = time.monotonic()
        with pytest.raises(ReplayStreamRecorded) as raised:
            read_rows(ReplayRange(recording_id, 0, end), source)
        assert time.monotonic() - started < FAST_S
        message = str(raised.value)
        assert f"replay.channel=aeron:ipc and replay.streamId={replay_stream}" in message
        assert f"on aeron:ipc stream {replay_stream}" in message and "recording subscription" in message
        assert recordings_of_stream(archive, replay_stream) == []  # nothing was replayed into it
    finally:
        archive.client.stop_recording("aeron:ipc", replay_stream)
    assert read_rows(ReplayRange(recording_id, 0, end), source) == list(range(FRAME, end + 1, FRAME))


def test_the_default_replay_stream_leaves_a_users_recording_of_ipc_stream_1001_alone(
        archive: RecordingArchive) -> None:
    recording_id, end = record(archive)
    assert DEFAULT_REPLAY_STREAM_ID != 1001
    archive.client.start_recording("aeron:ipc", 1001, SourceLocation.LOCAL)
    try:
        before = recordings_of_stream(archive, 1001)
        for _ in range(2):
            assert read_rows(ReplayRange(recording_id, 0, end), options(archive, recording_id)) == \
                list(range(FRAME, end + 1, FRAME))
        time.sleep(0.2)  # a recorded replay would have shown up by now
        assert recordings_of_stream(archive, 1001) == before
    finally:
        archive.client.stop_recording("aeron:ipc", 1001)
