"""The replay request handlers (`ReplayRequests`): Replay and BoundedReplay set-up, StopReplay,
StopAllReplays and the replayer's reports, over a real catalog and segment files, with fakes for
Aeron, the replayer and the counters."""

from __future__ import annotations

import pytest

from aeron_spark.archive.codecs import (
    REPLAY_ALL_AND_FOLLOW,
    REPLAY_ALL_AND_STOP,
    ArchiveErrorCode,
    BoundedReplayRequest,
    ReplayRequest,
    StopAllReplaysRequest,
    StopReplayRequest,
)
from aeron_spark.archive.service.limit_counter import RECORD_RECLAIMED
from aeron_spark.archive.service.replay_plan import INT64_MAX, make_replay_session_id
from aeron_spark.archive.service.replay_session import ReplayError

from tests.unit.archive.service.request_handler_parts import (
    CONTROL_SESSION_ID,
    STREAM_ID,
    FakeImage,
    Handlers,
    error,
    ok,
    opened_handlers,
    refused,
)
from tests.unit.archive.service.test_recording_requests import announce, start
from tests.unit.archive.storage.test_maintenance import SEGMENT, make_recording

REPLAY_CHANNEL = "aeron:udp?endpoint=localhost:40124"
REPLAY_STREAM = 2002


@pytest.fixture()
def h(tmp_path):
    with opened_handlers(tmp_path) as handlers:
        yield handlers


def replay(h: Handlers, recording_id: int, position: int = -1, length: int = REPLAY_ALL_AND_STOP, *,
           correlation_id: int = 60, channel: str = REPLAY_CHANNEL, file_io_max_length: int = -1) -> None:
    h.replays.replay(h.session, ReplayRequest(CONTROL_SESSION_ID, correlation_id, recording_id, position, length,
                                              REPLAY_STREAM, file_io_max_length, -1, channel))


def bounded(h: Handlers, recording_id: int, limit_counter_id: int, position: int = -1,
            length: int = REPLAY_ALL_AND_FOLLOW, correlation_id: int = 61) -> None:
    h.replays.replay(h.session, BoundedReplayRequest(CONTROL_SESSION_ID, correlation_id, recording_id, position,
                                                     length, limit_counter_id, REPLAY_STREAM, -1, -1,
                                                     REPLAY_CHANNEL))


# ---------------------------------------------------------------- a replay starts

def test_a_replay_publishes_from_the_recording_and_answers_when_ready(h):
    recording_id = make_recording(h.catalog, h.directory, 1024, 3 * SEGMENT // 2)
    replay(h, recording_id, position=4096, length=8192, correlation_id=62)
    [publication] = h.aeron.publications
    assert publication.stream_id == REPLAY_STREAM
    assert publication.channel.startswith("aeron:udp?endpoint=localhost:40124")
    assert "init-term-id=5" in publication.channel and "term-offset=4096" in publication.channel
    [session] = h.replayer.sessions
    assert session.replay_session_id == make_replay_session_id(1, publication.session_id)
    assert (session.recording_id, session.replay_position, session.replay_limit) == (recording_id, 4096, 4096 + 8192)
    assert h.replays.has_replays(recording_id)
    assert h.sent() == []  # the OK waits for the replayer: the start checked against the files
    h.replays.on_replay_ready(session)
    assert h.sent() == [ok(62, session.replay_session_id)]
    h.replays.on_replay_ended(session)
    assert h.sent() == [] and not h.replays.has_replays(recording_id)


def test_without_a_position_a_replay_starts_at_the_start_and_stops_at_the_stop(h):
    recording_id = make_recording(h.catalog, h.directory, 2048, 3 * SEGMENT // 2)
    replay(h, recording_id)
    [session] = h.replayer.sessions
    assert (session.replay_position, session.replay_limit) == (2048, 3 * SEGMENT // 2)


def test_a_replay_of_an_active_recording_follows_its_position_counter(h):
    start(h)
    announce(h, FakeImage(join_position=0))
    recording_id = h.recorder.sessions[0].recording_id
    counter = h.aeron.counters[0]
    h.counters.allocate(counter.counter_id, value=8192)
    replay(h, recording_id, length=REPLAY_ALL_AND_FOLLOW)
    [session] = h.replayer.sessions
    assert (session.replay_position, session.replay_limit) == (0, INT64_MAX)
    refused(lambda: replay(h, recording_id, position=16384, length=REPLAY_ALL_AND_FOLLOW, correlation_id=63),
            ArchiveErrorCode.INVALID_POSITION, "must be less than the limit position=8192")


def test_a_replay_of_an_active_recording_needs_the_counters(tmp_path):
    with opened_handlers(tmp_path, with_counters=False) as h:
        start(h)
        announce(h, FakeImage())
        refused(lambda: replay(h, h.recorder.sessions[0].recording_id, length=REPLAY_ALL_AND_FOLLOW),
                ArchiveErrorCode.GENERIC, "reads no counters")


def test_a_bounded_replay_stops_at_its_limit_counter(h):
    recording_id = make_recording(h.catalog, h.directory, 0, SEGMENT)
    h.counters.allocate(7, value=4096)
    bounded(h, recording_id, limit_counter_id=7, position=1024)
    [session] = h.replayer.sessions
    assert (session.replay_position, session.replay_limit) == (1024, INT64_MAX)


@pytest.mark.parametrize("counter_id, problem", [
    (-1, "limit counter id -1 is invalid"),
    (3, "limit counter id 3 is out of range"),
    (4, "limit counter id 4 is not allocated"),
])
def test_a_bounded_replay_needs_an_allocated_limit_counter(h, counter_id, problem):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    h.counters.records[4] = (RECORD_RECLAIMED, 0, b"", 0)
    refused(lambda: bounded(h, recording_id, limit_counter_id=counter_id), ArchiveErrorCode.GENERIC, problem)
    assert h.aeron.publications == [] and h.replayer.sessions == []


# ---------------------------------------------------------------- refusals

def test_an_archive_without_a_replayer_refuses_replays(tmp_path):
    with opened_handlers(tmp_path, with_replayer=False) as h:
        refused(lambda: replay(h, 0), ArchiveErrorCode.GENERIC, "replay is not available")
        h.replays.stop_replay(h.session, StopReplayRequest(CONTROL_SESSION_ID, 64, 123))
        assert h.sent() == [ok(64, 0)]


def test_max_concurrent_replays(tmp_path):
    with opened_handlers(tmp_path, max_concurrent_replays=1) as h:
        recording_id = make_recording(h.catalog, tmp_path, 0, 4096)
        replay(h, recording_id)
        refused(lambda: replay(h, recording_id, correlation_id=65), ArchiveErrorCode.MAX_REPLAYS,
                "max concurrent replays reached 1")
        h.replays.on_replay_ended(h.replayer.sessions[0])
        replay(h, recording_id, correlation_id=66)  # a slot again


def test_an_unknown_recording_is_refused(h):
    refused(lambda: replay(h, 0), ArchiveErrorCode.UNKNOWN_RECORDING, "unknown recording id: 0")
    make_recording(h.catalog, h.directory, 0, 4096)
    refused(lambda: replay(h, 1), ArchiveErrorCode.UNKNOWN_RECORDING)
    refused(lambda: replay(h, (1 << 63) - 1), ArchiveErrorCode.UNKNOWN_RECORDING)


@pytest.mark.parametrize("position, length, code, problem", [
    (1056 + 16, 1024, ArchiveErrorCode.GENERIC, "is not a multiple of FRAME_ALIGNMENT"),
    (0, 1024, ArchiveErrorCode.INVALID_POSITION, "is less than recording start position=1024"),
    (8192, 1024, ArchiveErrorCode.INVALID_POSITION, "must be less than the limit position=8192"),
    (9216, 1024, ArchiveErrorCode.INVALID_POSITION, "must be less than the limit position=8192"),
])
def test_a_replay_position_outside_the_recording_or_unaligned_is_refused(h, position, length, code, problem):
    recording_id = make_recording(h.catalog, h.directory, 1024, 8192)
    refused(lambda: replay(h, recording_id, position, length), code, problem)
    assert h.aeron.publications == []


def test_replaying_an_empty_recording_to_its_stop_is_refused(h):
    recording_id = make_recording(h.catalog, h.directory, 4096, 4096)
    refused(lambda: replay(h, recording_id), ArchiveErrorCode.EMPTY_RECORDING, "non-zero")


def test_a_file_io_max_length_below_the_mtu_is_refused(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    refused(lambda: replay(h, recording_id, file_io_max_length=1024), ArchiveErrorCode.GENERIC,
            "fileIoMaxLength=1024 < mtuLength=1408")


def test_an_invalid_replay_channel_is_refused_before_publishing(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    refused(lambda: replay(h, recording_id, channel="aeron:tcp?endpoint=x"), ArchiveErrorCode.GENERIC,
            "invalid replay channel")
    assert h.aeron.publications == []


def test_a_replay_channel_mtu_at_least_the_recordings_is_the_publications_mtu(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    replay(h, recording_id, channel=REPLAY_CHANNEL + "|mtu=8k")
    [publication] = h.aeron.publications
    assert "|mtu=8192|" in publication.channel and "1408" not in publication.channel


def test_a_replay_channel_mtu_below_the_recordings_is_refused_naming_both(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    refused(lambda: replay(h, recording_id, channel=REPLAY_CHANNEL + "|mtu=1024"), ArchiveErrorCode.GENERIC,
            "mtu 1024 is smaller than the recording's mtu 1408")
    assert h.aeron.publications == []


def test_a_length_past_the_stop_is_cut_to_the_stop(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 8192)
    replay(h, recording_id, position=4096, length=1 << 40)
    assert h.replayer.sessions[0].replay_limit == 8192


# ---------------------------------------------------------------- the replayer's reports, stops

def test_a_replay_that_ends_before_it_was_ready_is_answered_with_an_error(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    replay(h, recording_id, correlation_id=67)
    session = h.replayer.sessions[0]
    session.end_reason = "stop replay"
    h.replays.on_replay_ended(session)
    [answer] = h.sent()
    assert (answer.correlation_id, answer.relevant_id) == (67, ArchiveErrorCode.GENERIC)
    assert answer.error_message == (f"replay {session.replay_session_id} of recording {recording_id} "
                                    f"stopped before it started: stop replay")
    h.replays.on_replay_ready(session)  # too late: every request gets one answer
    assert h.sent() == []


def test_a_replay_error_after_the_ok_is_sent_as_an_error(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    replay(h, recording_id, correlation_id=68)
    session = h.replayer.sessions[0]
    h.replays.on_replay_ready(session)
    session.error = ReplayError(int(ArchiveErrorCode.GENERIC), "segment file gone")
    h.replays.on_replay_ended(session)
    assert h.sent() == [ok(68, session.replay_session_id), error(68, ArchiveErrorCode.GENERIC, "segment file gone")]


def test_stop_replay_and_stop_all_replays_are_passed_to_the_replayer(h):
    h.replays.stop_replay(h.session, StopReplayRequest(CONTROL_SESSION_ID, 69, 1234))
    h.replays.stop_all_replays(h.session, StopAllReplaysRequest(CONTROL_SESSION_ID, 70, 3))
    assert h.replayer.stopped_replays == [1234] and h.replayer.stopped_recordings == [3]
    assert h.sent() == [ok(69, 0), ok(70, 0)]


def test_replay_session_ids_count_up(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    replay(h, recording_id)
    replay(h, recording_id, correlation_id=71)
    first, second = h.replayer.sessions
    assert first.replay_session_id >> 32 == 1 and second.replay_session_id >> 32 == 2
    assert STREAM_ID != REPLAY_STREAM  # the replay has its own stream


# ---------------------------------------------------------------- the publication added without waiting

def test_a_replay_waits_for_its_publication_without_blocking_then_starts_and_answers_when_ready(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 8192)
    h.aeron.hold_publications = True
    replay(h, recording_id, correlation_id=80)
    [pending] = h.aeron.pending
    assert pending.polls == 1 and h.replayer.sessions == [] and h.sent() == []  # asked, not waited for
    assert h.replays.pending_count == 1 and h.replays.has_replays(recording_id)
    assert h.replays.poll_pending() == 0 and h.replayer.sessions == []
    pending.held = False
    assert h.replays.poll_pending() == 1 and h.replays.pending_count == 0
    [session] = h.replayer.sessions
    assert session.publication is pending.publication
    assert session.replay_session_id == make_replay_session_id(1, pending.publication.session_id)
    assert h.sent() == []  # the OK still waits for the replayer, as before
    h.replays.on_replay_ready(session)
    assert h.sent() == [ok(80, session.replay_session_id)]
    assert h.replays.poll_pending() == 0


def test_pending_publications_count_towards_max_concurrent_replays(tmp_path):
    with opened_handlers(tmp_path, max_concurrent_replays=1) as h:
        recording_id = make_recording(h.catalog, tmp_path, 0, 4096)
        h.aeron.hold_publications = True
        replay(h, recording_id)
        refused(lambda: replay(h, recording_id, correlation_id=81), ArchiveErrorCode.MAX_REPLAYS,
                "max concurrent replays reached 1")


def test_a_publication_the_driver_refuses_is_answered_with_its_reason_and_reported(tmp_path):
    from aeron_spark.driver_integration.errors import AeronError

    reported = []
    with opened_handlers(tmp_path) as h:
        h.replays.report_failure = lambda *args: reported.append(args)
        recording_id = make_recording(h.catalog, tmp_path, 0, 4096)
        h.aeron.hold_publications = True
        h.aeron.refusal = AeronError("add_exclusive_publication('aeron:udp?endpoint=localhost:1', 2002): (-1) "
                                     "invalid channel\n[aeron_driver_conductor.c:3898] port out of range\n")
        replay(h, recording_id, correlation_id=82)
        assert h.sent() == []
        h.aeron.pending[0].held = False
        assert h.replays.poll_pending() == 1
        [answer] = h.sent()
        assert (answer.correlation_id, answer.relevant_id) == (82, ArchiveErrorCode.GENERIC)
        assert answer.error_message.startswith("ReplayRequest: media driver refused: add_exclusive_publication(")
        assert "port out of range" in answer.error_message and "\n" not in answer.error_message
        [(request_name, correlation_id, error_raised, text)] = reported
        assert (request_name, correlation_id, text) == ("ReplayRequest", 82, answer.error_message)
        assert error_raised is h.aeron.refusal
        assert h.replayer.sessions == [] and not h.replays.has_replays(recording_id)


def test_a_publication_refused_at_once_is_answered_in_the_request(h):
    from aeron_spark.driver_integration.errors import AeronError

    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    h.aeron.refusal = AeronError("add_exclusive_publication: (-1) invalid channel")
    bounded_replay = BoundedReplayRequest(CONTROL_SESSION_ID, 83, recording_id, -1, REPLAY_ALL_AND_STOP, 7,
                                          REPLAY_STREAM, -1, -1, REPLAY_CHANNEL)
    h.counters.allocate(7, value=4096)
    h.replays.replay(h.session, bounded_replay)
    [answer] = h.sent()
    assert answer.correlation_id == 83
    assert answer.error_message == "BoundedReplayRequest: media driver refused: add_exclusive_publication: (-1) " \
                                   "invalid channel"
    assert h.replays.pending_count == 0


@pytest.mark.parametrize("stopped_recording", [-1, "its own"])
def test_stop_all_replays_stops_a_pending_replay_whose_publication_is_closed_when_it_arrives(h, stopped_recording):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    other = make_recording(h.catalog, h.directory, 0, 4096)
    h.aeron.hold_publications = True
    replay(h, recording_id, correlation_id=84)
    replay(h, other, correlation_id=85)
    stopped = recording_id if stopped_recording == "its own" else -1
    h.replays.stop_all_replays(h.session, StopAllReplaysRequest(CONTROL_SESSION_ID, 86, stopped))
    assert h.sent() == [ok(86, 0)]
    assert not h.replays.has_replays(recording_id)
    for pending in h.aeron.pending:
        pending.held = False
    assert h.replays.poll_pending() == 2
    first, second = h.aeron.pending
    assert first.publication.closed
    answers = h.sent()
    assert answers[0] == error(84, ArchiveErrorCode.GENERIC,
                               f"replay of recording {recording_id} stopped before it started: stop all replays")
    if stopped == -1:
        assert second.publication.closed and h.replayer.sessions == []
        assert answers[1].correlation_id == 85 and "stopped before it started" in answers[1].error_message
    else:
        assert not second.publication.closed and [s.recording_id for s in h.replayer.sessions] == [other]
        assert answers[1:] == []


def test_a_session_that_cannot_be_built_closes_its_publication_and_answers(h, monkeypatch):
    from aeron_spark.archive.service import replay_requests

    def failing_session(**_kwargs):
        raise OSError("segment file unreadable")

    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    h.aeron.hold_publications = True
    replay(h, recording_id, correlation_id=88)
    monkeypatch.setattr(replay_requests, "ReplaySession", failing_session)
    h.aeron.pending[0].held = False
    assert h.replays.poll_pending() == 1
    assert h.sent() == [error(88, ArchiveErrorCode.GENERIC,
                              "ReplayRequest failed: OSError: segment file unreadable")]
    assert h.aeron.pending[0].publication.closed and not h.replays.has_replays(recording_id)
