"""The recording request handlers (`RecordingRequests`): StartRecording, ExtendRecording, the
StopRecording family and the Images, over a real catalog, with fakes for Aeron and the recorder."""

from __future__ import annotations

import errno

import pytest

from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    BooleanType,
    ExtendRecordingRequest,
    ExtendRecordingRequest2,
    RecordingSignal,
    SourceLocation,
    StartRecordingRequest,
    StartRecordingRequest2,
    StopRecordingByIdentityRequest,
    StopRecordingRequest,
    StopRecordingSubscriptionRequest,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.archive.service.conductor_events import RecordingImageAvailable
from aeron_spark.archive.storage import segment

from tests.unit.archive.service.request_handler_parts import (
    CONTROL_SESSION_ID,
    IPC_CHANNEL,
    STREAM_ID,
    UDP_CHANNEL,
    FakeImage,
    Handlers,
    error,
    opened_handlers,
    ok,
    refused,
    signal,
)
from tests.unit.archive.storage.test_maintenance import SEGMENT, make_recording


@pytest.fixture()
def h(tmp_path):
    with opened_handlers(tmp_path) as handlers:
        yield handlers


def start(h: Handlers, correlation_id: int = 10, channel: str = IPC_CHANNEL, stream_id: int = STREAM_ID,
          *, local: bool = False, auto_stop: bool | None = None) -> int:
    """StartRecording (StartRecordingRequest2 when ``auto_stop`` is given); the subscription id."""
    location = SourceLocation.LOCAL if local else SourceLocation.REMOTE
    if auto_stop is None:
        h.recordings.start_recording(h.session, StartRecordingRequest(
            CONTROL_SESSION_ID, correlation_id, stream_id, location, channel), auto_stop=False)
    else:
        message = StartRecordingRequest2(CONTROL_SESSION_ID, correlation_id, stream_id, location,
                                         BooleanType.TRUE if auto_stop else BooleanType.FALSE, channel)
        h.recordings.start_recording(h.session, message, auto_stop=message.auto_stop == BooleanType.TRUE)
    return h.aeron.subscriptions[-1].registration_id


def announce(h: Handlers, image: FakeImage, subscription_index: int = -1) -> None:
    """The driver announces ``image`` on a recording subscription; the conductor hands it on."""
    subscription = h.aeron.subscriptions[subscription_index]
    subscription.on_available_image(image)
    event = h.events.pop()
    assert isinstance(event, RecordingImageAvailable) and event.image is image
    h.recordings.on_image(event.subscription_id["id"], event.image)


def stop_session(h: Handlers, recording_id: int) -> None:
    """The recorder stops the recording's session and reports it (its listener, then the conductor)."""
    session = next(s for s in h.recorder.sessions if s.recording_id == recording_id)
    session.abort("stop recording")
    session.do_work()
    h.recordings.on_recording_stopped(session)


# ---------------------------------------------------------------- StartRecording

def test_start_recording_subscribes_and_answers_with_the_subscription_id(h):
    subscription_id = start(h, correlation_id=11)
    subscription = h.aeron.subscriptions[0]
    assert (subscription.channel, subscription.stream_id) == (IPC_CHANNEL, STREAM_ID)
    assert h.sent() == [ok(11, subscription_id)]
    [entry] = h.recordings.open_subscriptions()
    assert (entry.subscription_id, entry.channel, entry.auto_stop) == (subscription_id, IPC_CHANNEL, False)
    assert not h.recordings.has_active_recordings


def test_a_local_udp_recording_subscribes_by_spy(h):
    start(h, channel=UDP_CHANNEL, local=True)
    assert h.aeron.subscriptions[0].channel == "aeron-spy:" + UDP_CHANNEL


def test_an_image_becomes_a_catalog_entry_a_session_and_a_start_signal(h):
    subscription_id = start(h, correlation_id=12, channel=UDP_CHANNEL)
    h.sent()
    image = FakeImage(join_position=4096, session_id=99)
    announce(h, image)
    [session] = h.recorder.sessions
    recording_id = session.recording_id
    d = h.catalog.descriptor(recording_id)
    assert (d.start_position, d.stop_position, d.session_id, d.stream_id) == (4096, NULL_POSITION, 99, STREAM_ID)
    assert (d.original_channel, d.source_identity, d.segment_file_length) == (UDP_CHANNEL, image.source_identity,
                                                                               SEGMENT)
    assert h.sent() == [signal(12, recording_id, subscription_id, 4096, RecordingSignal.START)]
    [counter] = h.aeron.counters
    assert counter.value == 4096 and session.counter_id == counter.counter_id
    assert h.recordings.is_active(recording_id) and h.recordings.active_recording_ids == [recording_id]
    assert h.recordings.live_position(recording_id) == 4096
    assert h.recordings.position_counter_id(recording_id) == counter.counter_id


def test_an_image_of_an_unknown_or_closing_subscription_is_ignored(h):
    h.recordings.on_image(12345, FakeImage())
    start(h)
    h.recordings.stop_recording_subscription(h.session, StopRecordingSubscriptionRequest(
        CONTROL_SESSION_ID, 13, h.aeron.subscriptions[0].registration_id))
    h.recordings.on_image(h.aeron.subscriptions[0].registration_id, FakeImage())
    assert h.recorder.sessions == [] and h.catalog.next_recording_id == 0


def test_the_same_channel_and_stream_cannot_be_recorded_twice(h):
    start(h)
    refused(lambda: start(h, correlation_id=20), ArchiveErrorCode.ACTIVE_SUBSCRIPTION,
            "recording exists for streamId=1001")
    start(h, correlation_id=21, stream_id=STREAM_ID + 1)  # another stream is another recording


def test_an_invalid_channel_is_refused_before_subscribing(h):
    refused(lambda: start(h, channel="aeron:tcp?endpoint=x"), ArchiveErrorCode.GENERIC, "invalid channel")
    assert h.aeron.subscriptions == []


def test_max_concurrent_recordings_refuses_a_start_and_an_extend(tmp_path):
    with opened_handlers(tmp_path, max_concurrent_recordings=1) as h:
        stopped = make_recording(h.catalog, tmp_path, 0, 4096)
        start(h)
        announce(h, FakeImage())
        refused(lambda: start(h, channel=UDP_CHANNEL), ArchiveErrorCode.MAX_RECORDINGS,
                "max concurrent recordings reached 1")
        refused(lambda: h.recordings.extend_recording(h.session, ExtendRecordingRequest(
            CONTROL_SESSION_ID, 30, stopped, STREAM_ID, SourceLocation.REMOTE, UDP_CHANNEL), auto_stop=False),
            ArchiveErrorCode.MAX_RECORDINGS)
        assert len(h.aeron.subscriptions) == 1


def test_low_storage_space_refuses_a_start(h, monkeypatch):
    monkeypatch.setattr(segment, "low_storage_space", lambda directory, threshold: "low storage space: 0 bytes")
    refused(lambda: start(h), ArchiveErrorCode.STORAGE_SPACE, "low storage space")
    assert h.aeron.subscriptions == []


def test_a_catalog_write_failure_is_reported_and_closes_an_auto_stop_subscription(h, monkeypatch):
    start(h, correlation_id=14, auto_stop=True)
    h.sent()

    def disk_full(**fields):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(h.catalog, "add_recording", disk_full)
    announce(h, FakeImage())
    [answer] = h.sent()
    assert (answer.correlation_id, answer.relevant_id) == (14, ArchiveErrorCode.STORAGE_SPACE)
    assert "catalog write failed" in answer.error_message
    assert h.aeron.subscriptions[0].closed and h.recordings.open_subscriptions() == []


# ---------------------------------------------------------------- the recording stops

def test_a_stopped_recording_stores_its_stop_then_signals_stop(h):
    subscription_id = start(h, correlation_id=15)
    announce(h, FakeImage(join_position=2048))
    recording_id = h.recorder.sessions[0].recording_id
    h.sent()
    stop_session(h, recording_id)
    assert h.catalog.descriptor(recording_id).stop_position == 2048
    assert h.sent() == [signal(15, recording_id, subscription_id, 2048, RecordingSignal.STOP)]
    assert h.aeron.counters[0].closed and not h.recordings.is_active(recording_id)
    assert not h.aeron.subscriptions[0].closed  # not auto-stop: the subscription records the next image


def test_an_auto_stop_subscription_closes_with_its_last_recording(h):
    start(h, auto_stop=True)
    announce(h, FakeImage())
    stop_session(h, h.recorder.sessions[0].recording_id)
    assert h.aeron.subscriptions[0].closed and h.recordings.open_subscriptions() == []


def test_a_failed_recording_sends_its_error_before_stop(tmp_path):
    with opened_handlers(tmp_path, archive_dir=tmp_path / "missing") as h:  # no directory for segments
        subscription_id = start(h, correlation_id=16)
        announce(h, FakeImage())
        session = h.recorder.sessions[0]
        h.sent()
        session.do_work()  # the segment writer cannot be made: the session stops with an error
        h.recordings.on_recording_stopped(session)
        sent = h.sent()
        assert [type(m).__name__ for m in sent] == ["ControlResponse", "RecordingSignalEvent"]
        assert (sent[0].correlation_id, sent[0].relevant_id) == (16, ArchiveErrorCode.GENERIC)
        assert "FileNotFoundError" in sent[0].error_message
        assert sent[1] == signal(16, session.recording_id, subscription_id, 0, RecordingSignal.STOP)
        assert h.catalog.descriptor(session.recording_id).stop_position == 0


# ---------------------------------------------------------------- StopRecording family

def test_stop_recording_by_channel_stops_its_recordings_then_closes(h):
    start(h, channel=UDP_CHANNEL)
    announce(h, FakeImage())
    recording_id = h.recorder.sessions[0].recording_id
    h.sent()
    h.recordings.stop_recording(h.session, StopRecordingRequest(CONTROL_SESSION_ID, 17, STREAM_ID, UDP_CHANNEL))
    assert h.sent() == [ok(17, 0)]
    assert h.recorder.stop_requests == [recording_id]
    assert not h.aeron.subscriptions[0].closed  # closes once the recording reports its stop
    stop_session(h, recording_id)
    assert h.aeron.subscriptions[0].closed


def test_stop_recording_of_a_subscription_without_images_closes_it_at_once(h):
    start(h)
    h.recordings.stop_recording(h.session, StopRecordingRequest(CONTROL_SESSION_ID, 18, STREAM_ID, IPC_CHANNEL))
    assert h.aeron.subscriptions[0].closed and h.recorder.stop_requests == []


def test_stop_recording_refuses_an_unknown_or_invalid_channel(h):
    refused(lambda: h.recordings.stop_recording(h.session, StopRecordingRequest(
        CONTROL_SESSION_ID, 19, STREAM_ID, UDP_CHANNEL)), ArchiveErrorCode.UNKNOWN_SUBSCRIPTION,
        "no recording found for streamId=1001")
    refused(lambda: h.recordings.stop_recording(h.session, StopRecordingRequest(
        CONTROL_SESSION_ID, 20, STREAM_ID, "not a channel")), ArchiveErrorCode.GENERIC, "invalid channel")


def test_stop_recording_subscription_by_id_and_twice(h):
    subscription_id = start(h)
    h.sent()
    stop = StopRecordingSubscriptionRequest(CONTROL_SESSION_ID, 21, subscription_id)
    h.recordings.stop_recording_subscription(h.session, stop)
    assert h.sent() == [ok(21, 0)] and h.aeron.subscriptions[0].closed
    refused(lambda: h.recordings.stop_recording_subscription(h.session, stop),
            ArchiveErrorCode.UNKNOWN_SUBSCRIPTION, f"subscriptionId={subscription_id}")


def test_stop_recording_by_identity(h):
    refused(lambda: h.recordings.stop_recording_by_identity(h.session, StopRecordingByIdentityRequest(
        CONTROL_SESSION_ID, 22, 0)), ArchiveErrorCode.UNKNOWN_RECORDING, "unknown recording id: 0")
    stopped = make_recording(h.catalog, h.directory, 0, 4096)
    h.recordings.stop_recording_by_identity(h.session, StopRecordingByIdentityRequest(CONTROL_SESSION_ID, 23, stopped))
    assert h.sent() == [ok(23, 0)]  # known, not recording: nothing to stop
    start(h)
    announce(h, FakeImage())
    active = h.recorder.sessions[0].recording_id
    h.sent()
    h.recordings.stop_recording_by_identity(h.session, StopRecordingByIdentityRequest(CONTROL_SESSION_ID, 24, active))
    assert h.sent() == [ok(24, 1)]
    assert h.recorder.stop_requests == [active]
    assert h.recordings.open_subscriptions() == []  # its only recording: the subscription goes too


def test_stop_recording_by_identity_of_one_of_several_recordings_keeps_the_subscription(h):
    start(h, channel=UDP_CHANNEL)
    announce(h, FakeImage(session_id=1))
    announce(h, FakeImage(session_id=2))
    first, second = (s.recording_id for s in h.recorder.sessions)
    h.recordings.stop_recording_by_identity(h.session, StopRecordingByIdentityRequest(CONTROL_SESSION_ID, 25, first))
    assert h.recorder.stop_requests == [first]
    assert len(h.recordings.open_subscriptions()) == 1 and h.recordings.is_active(second)


def test_stop_all_and_close(h):
    start(h)
    announce(h, FakeImage())
    start(h, channel=UDP_CHANNEL)
    h.recordings.stop_all_recordings()
    assert h.recorder.stop_requests == [h.recorder.sessions[0].recording_id]
    assert h.aeron.subscriptions[1].closed  # had no recording
    h.recordings.close()
    assert all(s.closed for s in h.aeron.subscriptions)


# ---------------------------------------------------------------- ExtendRecording

def extend(h: Handlers, recording_id: int, correlation_id: int = 40, stream_id: int = STREAM_ID,
           auto_stop: bool = False) -> None:
    if auto_stop:
        h.recordings.extend_recording(h.session, ExtendRecordingRequest2(
            CONTROL_SESSION_ID, correlation_id, recording_id, stream_id, SourceLocation.REMOTE, BooleanType.TRUE,
            UDP_CHANNEL), auto_stop=True)
    else:
        h.recordings.extend_recording(h.session, ExtendRecordingRequest(
            CONTROL_SESSION_ID, correlation_id, recording_id, stream_id, SourceLocation.REMOTE, UDP_CHANNEL),
            auto_stop=False)


def test_extend_continues_a_stopped_recording_from_its_stop(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 8192)
    extend(h, recording_id, correlation_id=41)
    subscription_id = h.aeron.subscriptions[0].registration_id
    assert h.sent() == [ok(41, subscription_id)]
    announce(h, FakeImage(join_position=8192, session_id=55))
    d = h.catalog.descriptor(recording_id)
    assert (d.start_position, d.stop_position, d.session_id) == (0, NULL_POSITION, 55)
    assert (d.control_session_id, d.correlation_id) == (CONTROL_SESSION_ID, 41)
    assert h.sent() == [signal(41, recording_id, subscription_id, 8192, RecordingSignal.EXTEND)]
    assert h.recordings.live_position(recording_id) == 8192
    stop_session(h, recording_id)
    assert h.catalog.descriptor(recording_id).stop_position == 8192


def test_extend_refuses_unknown_active_and_other_stream_recordings(h):
    refused(lambda: extend(h, 3), ArchiveErrorCode.UNKNOWN_RECORDING, "unknown recording id: 3")
    left_active = make_recording(h.catalog, h.directory, 0, 4096, active=True)
    refused(lambda: extend(h, left_active), ArchiveErrorCode.ACTIVE_RECORDING,
            f"cannot extend active recording {left_active}")
    stopped = make_recording(h.catalog, h.directory, 0, 4096)
    refused(lambda: extend(h, stopped, stream_id=STREAM_ID + 1), ArchiveErrorCode.UNKNOWN_RECORDING,
            "streamId=1002 != existing streamId=1001")
    assert h.aeron.subscriptions == []


def test_extend_refuses_a_recording_being_recorded(h):
    stopped = make_recording(h.catalog, h.directory, 0, 4096)
    extend(h, stopped, auto_stop=True)
    announce(h, FakeImage(join_position=4096))
    h.recordings.stop_recording_subscription(h.session, StopRecordingSubscriptionRequest(
        CONTROL_SESSION_ID, 42, h.aeron.subscriptions[0].registration_id))
    refused(lambda: extend(h, stopped, correlation_id=43), ArchiveErrorCode.ACTIVE_RECORDING)


@pytest.mark.parametrize("image, problem", [
    (FakeImage(join_position=1024), "image joinPosition=1024 != stopPosition=4096"),
    (FakeImage(join_position=4096, initial_term_id=9), "image initialTermId=9 != initialTermId=5"),
    (FakeImage(join_position=4096, term_buffer_length=2 * 64 * 1024), "termBufferLength=131072 != "),
    (FakeImage(join_position=4096, mtu_length=4096), "image mtuLength=4096 != mtuLength=1408"),
])
def test_an_image_that_does_not_continue_the_recording_is_an_invalid_extension(h, image, problem):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    extend(h, recording_id, correlation_id=44)
    h.sent()
    announce(h, image)
    [answer] = h.sent()
    assert (answer.correlation_id, answer.relevant_id) == (44, ArchiveErrorCode.INVALID_EXTENSION)
    assert problem in answer.error_message
    assert h.recorder.sessions == [] and h.catalog.descriptor(recording_id).stop_position == 4096


def test_a_second_image_of_an_extension_is_refused(h):
    recording_id = make_recording(h.catalog, h.directory, 0, 4096)
    extend(h, recording_id, correlation_id=45)
    announce(h, FakeImage(join_position=4096))
    h.sent()
    announce(h, FakeImage(join_position=4096, session_id=7))
    assert h.sent() == [error(45, ArchiveErrorCode.INVALID_EXTENSION,
                              f"recording {recording_id} is already being extended")]
    assert len(h.recorder.sessions) == 1
