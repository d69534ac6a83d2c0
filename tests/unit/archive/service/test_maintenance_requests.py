"""The maintenance request handlers (`MaintenanceRequests`): truncate, purge, the segment requests
(detach, delete detached, purge segments, attach, migrate) and UpdateChannel, over a real catalog
and real segment files, with fakes for Aeron, the recorder and the replayer."""

from __future__ import annotations

import pytest

from aeron_spark.archive.codecs import (
    PROTOCOL_SEMANTIC_VERSION,
    ArchiveErrorCode,
    AttachSegmentsRequest,
    ControlResponse,
    ControlResponseCode,
    DeleteDetachedSegmentsRequest,
    DetachSegmentsRequest,
    MigrateSegmentsRequest,
    PurgeRecordingRequest,
    PurgeSegmentsRequest,
    RecordingSignal,
    TruncateRecordingRequest,
    UpdateChannelRequest,
)
from aeron_spark.archive.service.maintenance_requests import segment_base
from aeron_spark.archive.storage.catalog import DELETED
from aeron_spark.archive.storage.maintenance import segment_files

from tests.unit.archive.service.request_handler_parts import (
    CONTROL_SESSION_ID,
    UDP_CHANNEL,
    FakeImage,
    Handlers,
    ok,
    opened_handlers,
    refused,
    signal,
)
from tests.unit.archive.service.test_recording_requests import announce, start
from tests.unit.archive.service.test_replay_requests import replay
from tests.unit.archive.storage.test_maintenance import SEGMENT, TERM, make_recording

NULL_VALUE = -1


@pytest.fixture()
def h(tmp_path):
    with opened_handlers(tmp_path) as handlers:
        yield handlers


def deleted(correlation_id: int, recording_id: int):
    return signal(correlation_id, recording_id, NULL_VALUE, NULL_VALUE, RecordingSignal.DELETE)


def bases(h: Handlers, recording_id: int) -> list[int]:
    return list(segment_files(h.directory, recording_id))


def four_segments(h: Handlers) -> int:
    """A stopped recording in segments 0, 128K, 256K and 384K."""
    return make_recording(h.catalog, h.directory, 0, 3 * SEGMENT + 4096)


# ---------------------------------------------------------------- truncate

def test_truncate_cuts_the_recording_stops_its_replays_and_signals_delete(h):
    recording_id = make_recording(h.catalog, h.directory, 1024, 5 * SEGMENT // 2)
    position = SEGMENT + 10 * 1024
    h.maintenance.truncate_recording(h.session, TruncateRecordingRequest(CONTROL_SESSION_ID, 80, recording_id, position))
    assert h.sent() == [ok(80, 1), deleted(80, recording_id)]  # one segment file deleted
    assert h.catalog.descriptor(recording_id).stop_position == position
    assert bases(h, recording_id) == [0, SEGMENT]
    assert h.replayer.stopped_recordings == [recording_id]


def test_truncate_refuses_unknown_and_active_recordings(h):
    truncate = TruncateRecordingRequest(CONTROL_SESSION_ID, 81, 0, 0)
    refused(lambda: h.maintenance.truncate_recording(h.session, truncate), ArchiveErrorCode.UNKNOWN_RECORDING)
    left_active = make_recording(h.catalog, h.directory, 0, 4096, active=True)
    refused(lambda: h.maintenance.truncate_recording(h.session, TruncateRecordingRequest(
        CONTROL_SESSION_ID, 82, left_active, 0)), ArchiveErrorCode.ACTIVE_RECORDING,
        f"cannot truncate active recording {left_active}")
    start(h)
    announce(h, FakeImage())
    recording = h.recorder.sessions[0].recording_id
    refused(lambda: h.maintenance.truncate_recording(h.session, TruncateRecordingRequest(
        CONTROL_SESSION_ID, 83, recording, 0)), ArchiveErrorCode.ACTIVE_RECORDING)


@pytest.mark.parametrize("position, code, problem", [
    (2048 + 16, ArchiveErrorCode.INVALID_POSITION, "invalid truncate position 2064"),
    (0, ArchiveErrorCode.INVALID_POSITION, "spans \\[1024, 8192\\]"),
    (8192 + 1024, ArchiveErrorCode.INVALID_POSITION, "32-byte aligned"),
    (2048 + 32, ArchiveErrorCode.GENERIC, "not at the start of a recorded frame"),
])
def test_truncate_positions_must_be_aligned_frame_starts_inside_the_recording(h, position, code, problem):
    recording_id = make_recording(h.catalog, h.directory, 1024, 8192)
    refused(lambda: h.maintenance.truncate_recording(h.session, TruncateRecordingRequest(
        CONTROL_SESSION_ID, 84, recording_id, position)), code, problem)
    assert h.catalog.descriptor(recording_id).stop_position == 8192 and h.sent() == []


# ---------------------------------------------------------------- purge

def test_purge_deletes_the_files_and_the_entry(h):
    recording_id = make_recording(h.catalog, h.directory, 0, SEGMENT + 4096)
    h.maintenance.purge_recording(h.session, PurgeRecordingRequest(CONTROL_SESSION_ID, 85, recording_id))
    assert h.sent() == [ok(85, 2), deleted(85, recording_id)]
    assert h.catalog.descriptor(recording_id) is None and h.catalog.entry(recording_id).state == DELETED
    assert bases(h, recording_id) == []


def test_purge_refuses_a_replayed_or_active_recording(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    replay(h, recording_id)
    refused(lambda: h.maintenance.purge_recording(h.session, PurgeRecordingRequest(
        CONTROL_SESSION_ID, 86, recording_id)), ArchiveErrorCode.ACTIVE_RECORDING, "with active replay")
    left_active = make_recording(h.catalog, h.directory, 0, 4096, active=True)
    refused(lambda: h.maintenance.purge_recording(h.session, PurgeRecordingRequest(
        CONTROL_SESSION_ID, 87, left_active)), ArchiveErrorCode.ACTIVE_RECORDING, "cannot purge active recording")
    refused(lambda: h.maintenance.purge_recording(h.session, PurgeRecordingRequest(
        CONTROL_SESSION_ID, 88, 99)), ArchiveErrorCode.UNKNOWN_RECORDING)
    assert h.catalog.descriptor(recording_id) is not None


# ---------------------------------------------------------------- detach, delete, purge segments, attach

def detach(h: Handlers, recording_id: int, position: int, correlation_id: int = 90) -> None:
    h.maintenance.detach_segments(h.session, DetachSegmentsRequest(CONTROL_SESSION_ID, correlation_id, recording_id,
                                                                   position))


def test_detach_then_delete_then_nothing_left_to_attach(h):
    recording_id = four_segments(h)
    detach(h, recording_id, 2 * SEGMENT)
    assert h.sent() == [ok(90, 0)]  # no file deleted, no signal
    assert h.catalog.descriptor(recording_id).start_position == 2 * SEGMENT
    assert bases(h, recording_id) == [0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT]
    h.maintenance.delete_detached_segments(h.session, DeleteDetachedSegmentsRequest(CONTROL_SESSION_ID, 91,
                                                                                     recording_id))
    assert h.sent() == [ok(91, 2), deleted(91, recording_id)]
    assert bases(h, recording_id) == [2 * SEGMENT, 3 * SEGMENT]
    h.maintenance.attach_segments(h.session, AttachSegmentsRequest(CONTROL_SESSION_ID, 92, recording_id))
    assert h.sent() == [ok(92, 0)]


def test_attach_takes_back_detached_segments(h):
    recording_id = four_segments(h)
    detach(h, recording_id, 2 * SEGMENT)
    h.sent()
    h.maintenance.attach_segments(h.session, AttachSegmentsRequest(CONTROL_SESSION_ID, 93, recording_id))
    assert h.sent() == [ok(93, 2)]
    assert h.catalog.descriptor(recording_id).start_position == 0


def test_purge_segments_detaches_and_deletes_in_one(h):
    recording_id = four_segments(h)
    h.maintenance.purge_segments(h.session, PurgeSegmentsRequest(CONTROL_SESSION_ID, 94, recording_id, 3 * SEGMENT))
    assert h.sent() == [ok(94, 3), deleted(94, recording_id)]
    assert h.catalog.descriptor(recording_id).start_position == 3 * SEGMENT
    assert bases(h, recording_id) == [3 * SEGMENT]


@pytest.mark.parametrize("position, problem", [
    (SEGMENT + 1024, f"invalid segment start: newStartPosition={SEGMENT + 1024}"),
    (0, f"invalid detach: newStartPosition=0 lowerBound={SEGMENT}"),
    (4 * SEGMENT, f"invalid detach: in use, newStartPosition={4 * SEGMENT} upperBound={3 * SEGMENT}"),
])
def test_detach_and_purge_segments_positions_follow_aeron_s_rules(h, position, problem):
    recording_id = four_segments(h)
    refused(lambda: detach(h, recording_id, position), ArchiveErrorCode.GENERIC, problem)
    refused(lambda: h.maintenance.purge_segments(h.session, PurgeSegmentsRequest(
        CONTROL_SESSION_ID, 95, recording_id, position)), ArchiveErrorCode.GENERIC, problem)
    assert h.catalog.descriptor(recording_id).start_position == 0
    assert bases(h, recording_id) == [0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT]


def test_detach_may_not_pass_a_replay(h):
    recording_id = four_segments(h)
    h.replayer.lowest_positions[recording_id] = SEGMENT + 4096
    refused(lambda: detach(h, recording_id, 2 * SEGMENT), ArchiveErrorCode.GENERIC,
            f"invalid detach: replay in progress - newStartPosition={2 * SEGMENT} upperBound={SEGMENT} "
            f"recordingId={recording_id}")
    detach(h, recording_id, SEGMENT)  # up to the replay's segment is allowed


def test_detach_of_an_active_recording_is_bounded_by_its_recorded_position(h):
    left_active = make_recording(h.catalog, h.directory, 0, 2 * SEGMENT, active=True)
    refused(lambda: detach(h, left_active, SEGMENT), ArchiveErrorCode.GENERIC, "in use")  # nothing recorded now
    start(h, channel=UDP_CHANNEL)
    announce(h, FakeImage(join_position=0, published_position=2 * SEGMENT + 1024))
    [session] = h.recorder.sessions
    while session.do_work():  # the recorder writes what the image has
        pass
    assert h.recordings.live_position(session.recording_id) == 2 * SEGMENT + 1024
    refused(lambda: detach(h, session.recording_id, 3 * SEGMENT), ArchiveErrorCode.GENERIC,
            f"upperBound={2 * SEGMENT}")
    detach(h, session.recording_id, 2 * SEGMENT)
    assert h.catalog.descriptor(session.recording_id).start_position == 2 * SEGMENT
    session.abort()
    session.do_work()
    h.recordings.on_recording_stopped(session)
    assert h.catalog.descriptor(session.recording_id).stop_position == 2 * SEGMENT + 1024


def test_segment_requests_refuse_unknown_recordings(h):
    for request in (
            lambda: detach(h, 5, SEGMENT),
            lambda: h.maintenance.delete_detached_segments(h.session, DeleteDetachedSegmentsRequest(
                CONTROL_SESSION_ID, 96, 5)),
            lambda: h.maintenance.purge_segments(h.session, PurgeSegmentsRequest(CONTROL_SESSION_ID, 97, 5, SEGMENT)),
            lambda: h.maintenance.attach_segments(h.session, AttachSegmentsRequest(CONTROL_SESSION_ID, 98, 5))):
        refused(request, ArchiveErrorCode.UNKNOWN_RECORDING, "unknown recording id: 5")


def test_segment_base_counts_from_the_start_term_and_floors_positions_below_it():
    assert segment_base(TERM + 1024, 3 * SEGMENT + 32, TERM, SEGMENT) == TERM + 2 * SEGMENT
    assert segment_base(TERM + 1024, 0, TERM, SEGMENT) == TERM - SEGMENT  # as Java's long arithmetic


# ---------------------------------------------------------------- migrate

def migrate(h: Handlers, src: int, dst: int, correlation_id: int = 100) -> None:
    h.maintenance.migrate_segments(h.session, MigrateSegmentsRequest(CONTROL_SESSION_ID, correlation_id, src, dst))


def test_migrate_moves_the_source_s_segments_and_signals_its_delete(h):
    src = make_recording(h.catalog, h.directory, 0, 2 * SEGMENT)
    dst = make_recording(h.catalog, h.directory, 2 * SEGMENT, 3 * SEGMENT - 1024)
    migrate(h, src, dst)
    assert h.sent() == [ok(100, 2), deleted(100, src)]
    assert bases(h, dst) == [0, SEGMENT, 2 * SEGMENT] and bases(h, src) == []
    assert h.catalog.descriptor(dst).start_position == 0


def test_migrate_refuses_unknown_active_and_non_contiguous_recordings(h):
    src = make_recording(h.catalog, h.directory, 0, SEGMENT)
    refused(lambda: migrate(h, src, 7), ArchiveErrorCode.UNKNOWN_RECORDING, "unknown recording id: 7")
    refused(lambda: migrate(h, 7, src), ArchiveErrorCode.UNKNOWN_RECORDING, "unknown recording id: 7")
    left_active = make_recording(h.catalog, h.directory, SEGMENT, SEGMENT + 4096, active=True)
    refused(lambda: migrate(h, left_active, src), ArchiveErrorCode.GENERIC,
            f"recording {left_active} is still active")
    far = make_recording(h.catalog, h.directory, 4 * SEGMENT, 5 * SEGMENT)
    refused(lambda: migrate(h, src, far), ArchiveErrorCode.GENERIC, "not contiguous")
    assert h.sent() == []


# ---------------------------------------------------------------- UpdateChannel

NEW_CHANNEL = "aeron:udp?endpoint=localhost:40999|alias=renamed|term-length=65536"


def update(h: Handlers, recording_id: int, channel: str = NEW_CHANNEL, correlation_id: int = 110) -> None:
    h.maintenance.update_channel(h.session, UpdateChannelRequest(CONTROL_SESSION_ID, correlation_id, recording_id,
                                                                 channel))


def test_update_channel_stores_the_channel_and_its_stripped_form(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    update(h, recording_id)
    assert h.sent() == [ok(110, 0)]  # no signal
    d = h.catalog.descriptor(recording_id)
    assert (d.original_channel, d.stripped_channel) == (NEW_CHANNEL, "aeron:udp?endpoint=localhost:40999|alias=renamed")


def test_update_channel_of_an_unknown_recording_answers_recording_unknown(h):
    update(h, 3, correlation_id=111)
    assert h.sent() == [ControlResponse(CONTROL_SESSION_ID, 111, 3, ControlResponseCode.RECORDING_UNKNOWN,
                                        PROTOCOL_SEMANTIC_VERSION, "")]


def test_update_channel_refuses_a_bad_channel_and_a_listing_in_progress(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    refused(lambda: update(h, recording_id, channel="aeron:tcp?x"), ArchiveErrorCode.GENERIC, "invalid channel")
    h.session.active_listing = object()
    refused(lambda: update(h, recording_id), ArchiveErrorCode.ACTIVE_LISTING, "active listing")
    assert h.catalog.descriptor(recording_id).original_channel == "aeron:ipc"
