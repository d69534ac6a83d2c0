"""Bad replay, truncate, purge and extend requests to the real sidecar get useful errors (unknown
recording, misaligned position, position beyond stop, not a frame start, active recording), and
the session and recordings are intact afterwards. Uses the ``sidecar`` and ``local_aeron``
fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import pytest
from aeron_spark.archive.codecs import ArchiveErrorCode, SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import (
    IPC_RECORDED,
    RECORDED_STREAM,
    TIMEOUT,
    as_pairs,
    error_of,
    expected,
    ipc_archive,
    payloads,
    record_ipc,
)

pytestmark = pytest.mark.timeout(120)


def test_bad_replay_truncate_and_purge_requests_get_useful_errors(sidecar: Sidecar, local_aeron: AeronClient):
    with ipc_archive(local_aeron) as archive:
        stopped_id, published, _ = record_ipc(archive, payloads(60, seed=9))
        big = next(i for i, m in enumerate(published.messages) if len(m) > 1408)
        inside_a_message = published.starts[big] + 64  # 32-aligned, inside a frame's payload
        channel = "aeron:ipc"

        unknown = error_of(lambda: archive.start_replay(4242, 0, 64, channel, 2001))
        assert unknown.error_code == ArchiveErrorCode.UNKNOWN_RECORDING
        assert "unknown recording id: 4242" in unknown.archive_message
        for call in (lambda: archive.truncate_recording(4242, 0), lambda: archive.purge_recording(4242),
                     lambda: archive.extend_recording(4242, IPC_RECORDED, RECORDED_STREAM, SourceLocation.LOCAL)):
            error = error_of(call)
            assert error.error_code == ArchiveErrorCode.UNKNOWN_RECORDING and "4242" in error.archive_message

        misaligned = error_of(lambda: archive.start_replay(stopped_id, 16, 64, channel, 2001))
        assert "position=16 is not a multiple of FRAME_ALIGNMENT (32)" in misaligned.archive_message

        beyond = error_of(lambda: archive.start_replay(stopped_id, published.end + 32, 64, channel, 2001))
        assert beyond.error_code == ArchiveErrorCode.INVALID_POSITION
        assert f"position={published.end + 32} must be less than the limit position={published.end}" \
            in beyond.archive_message

        not_a_frame = error_of(lambda: archive.start_replay(stopped_id, inside_a_message, 64, channel, 2001))
        assert not_a_frame.error_code == ArchiveErrorCode.INVALID_POSITION
        assert f"replayPosition={inside_a_message} does not point to a valid frame" in not_a_frame.archive_message

        truncate_beyond = error_of(lambda: archive.truncate_recording(stopped_id, published.end + 32))
        assert truncate_beyond.error_code == ArchiveErrorCode.INVALID_POSITION
        assert str(published.end + 32) in truncate_beyond.archive_message
        truncate_misaligned = error_of(lambda: archive.truncate_recording(stopped_id, 40))
        assert truncate_misaligned.error_code == ArchiveErrorCode.INVALID_POSITION

        active_id, _, publication = record_ipc(archive, payloads(10, seed=10), stream_id=1002, keep_open=True)
        try:
            truncate_active = error_of(lambda: archive.truncate_recording(active_id, 0))
            assert truncate_active.error_code == ArchiveErrorCode.ACTIVE_RECORDING
            assert f"cannot truncate active recording {active_id}" in truncate_active.archive_message
            purge_active = error_of(lambda: archive.purge_recording(active_id))
            assert purge_active.error_code == ArchiveErrorCode.ACTIVE_RECORDING
            assert f"cannot purge active recording {active_id}" in purge_active.archive_message
            extend_active = error_of(lambda: archive.extend_recording(
                active_id, IPC_RECORDED, 1002, SourceLocation.LOCAL))
            assert extend_active.error_code == ArchiveErrorCode.ACTIVE_RECORDING
        finally:
            publication.close()
        # the session and the recordings are intact after all that
        assert archive.stop_position(stopped_id) == published.end
        with archive.replay(stopped_id, 0, published.end, channel, 2003) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)


@pytest.mark.parametrize("channel, named", [
    ("aeron:udp?endpoint=localhost:40999|term-length=3", "term-length='3' is not a power of two"),
    ("aeron:ipc?mtu=7", "mtu='7' is not a multiple of 32"),
    ("aeron:ipc?init-term-id=x|term-id=1|term-offset=0", "init-term-id='x' is not an int32"),
    ("aeron:udp?endpoint=localhost:-1", "endpoint='localhost:-1' is not <host>:<port>"),
])
def test_a_recording_or_replay_channel_with_a_bad_value_is_refused_naming_the_parameter(
        sidecar: Sidecar, local_aeron: AeronClient, channel: str, named: str):
    with ipc_archive(local_aeron) as archive:
        stopped_id, published, _ = record_ipc(archive, payloads(3, seed=4))
        refused = error_of(lambda: archive.start_recording(channel, 4001))
        assert f"invalid channel {channel!r}: {named}" in refused.archive_message
        assert archive.list_recording_subscriptions(0, 10, "", 0, False) == []
        replay = error_of(lambda: archive.start_replay(stopped_id, 0, published.end, channel, 2001))
        assert f"invalid replay channel {channel!r}: {named}" in replay.archive_message
        assert [d.recording_id for d in archive.list_recordings(0, 10)] == [stopped_id]  # the session still serves
