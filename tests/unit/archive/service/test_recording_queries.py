"""The read-only request handlers (`RecordingQueries`) over a real catalog: ArchiveId, the
positions, FindLastMatchingRecording."""

from __future__ import annotations

import pytest

from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    ArchiveIdRequest,
    FindLastMatchingRecordingRequest,
    MaxRecordedPositionRequest,
    RecordingPositionRequest,
    StartPositionRequest,
    StopPositionRequest,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION

from tests.unit.archive.service.request_handler_parts import (
    ARCHIVE_ID,
    CONTROL_SESSION_ID,
    STREAM_ID,
    FakeImage,
    ok,
    opened_handlers,
    refused,
)
from tests.unit.archive.service.test_recording_requests import announce, start
from tests.unit.archive.storage.test_maintenance import make_recording


@pytest.fixture()
def h(tmp_path):
    with opened_handlers(tmp_path) as handlers:
        yield handlers


def test_archive_id(h):
    h.queries.archive_id_request(h.session, ArchiveIdRequest(CONTROL_SESSION_ID, 120))
    assert h.sent() == [ok(120, ARCHIVE_ID)]


def test_positions_of_a_stopped_and_of_an_active_recording(h):
    stopped = make_recording(h.catalog, h.directory, 1024, 8192)
    start(h)
    announce(h, FakeImage(join_position=0, published_position=4096))
    [session] = h.recorder.sessions
    while session.do_work():
        pass
    active = session.recording_id
    q = h.queries
    for recording_id, correlation_id in ((stopped, 121), (active, 122)):
        q.recording_position(h.session, RecordingPositionRequest(CONTROL_SESSION_ID, correlation_id, recording_id))
        q.start_position(h.session, StartPositionRequest(CONTROL_SESSION_ID, correlation_id, recording_id))
        q.stop_position(h.session, StopPositionRequest(CONTROL_SESSION_ID, correlation_id, recording_id))
        q.max_recorded_position(h.session, MaxRecordedPositionRequest(CONTROL_SESSION_ID, correlation_id,
                                                                      recording_id))
    assert h.sent()[-8:] == [ok(121, NULL_POSITION), ok(121, 1024), ok(121, 8192), ok(121, 8192),
                             ok(122, 4096), ok(122, 0), ok(122, NULL_POSITION), ok(122, 4096)]


def test_a_recording_left_active_by_a_crash_has_its_start_as_max_recorded_position(h):
    left_active = make_recording(h.catalog, h.directory, 2048, 4096, active=True)
    h.queries.max_recorded_position(h.session, MaxRecordedPositionRequest(CONTROL_SESSION_ID, 123, left_active))
    assert h.sent() == [ok(123, 2048)]


def test_position_queries_refuse_unknown_recordings(h):
    q = h.queries
    for request in (lambda: q.recording_position(h.session, RecordingPositionRequest(CONTROL_SESSION_ID, 124, 9)),
                    lambda: q.start_position(h.session, StartPositionRequest(CONTROL_SESSION_ID, 124, 9)),
                    lambda: q.stop_position(h.session, StopPositionRequest(CONTROL_SESSION_ID, 124, 9)),
                    lambda: q.max_recorded_position(h.session, MaxRecordedPositionRequest(CONTROL_SESSION_ID, 124, 9))):
        refused(request, ArchiveErrorCode.UNKNOWN_RECORDING, "unknown recording id: 9")


def find(h, min_recording_id: int, session_id: int = 77, stream_id: int = STREAM_ID, channel: str = "ipc",
         correlation_id: int = 125) -> None:
    h.queries.find_last_matching_recording(h.session, FindLastMatchingRecordingRequest(
        CONTROL_SESSION_ID, correlation_id, min_recording_id, session_id, stream_id, channel))


def test_find_last_matching_recording(h):
    first = make_recording(h.catalog, h.directory, 0, 4096)
    second = make_recording(h.catalog, h.directory, 0, 4096)
    find(h, 0)
    find(h, first, channel="udp")  # no recording's channel contains it
    find(h, first, session_id=78)
    find(h, second + 1)
    assert h.sent() == [ok(125, second), ok(125, -1), ok(125, -1), ok(125, -1)]
    refused(lambda: find(h, -1), ArchiveErrorCode.UNKNOWN_RECORDING, "minRecordingId=-1 < 0")
