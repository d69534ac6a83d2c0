"""StartRecording's subscription asked of the media driver without waiting (`RecordingRequests`
with an Aeron port that has ``async_add_subscription``): the request is answered when the driver
added it (OK with its registration id) or refused it (ERROR), and a subscription stopped while it
is still being added is closed when it arrives."""

from __future__ import annotations

import pytest

from aeron_spark.archive.codecs import SourceLocation, StartRecordingRequest, StopRecordingRequest
from aeron_spark.driver_integration.errors import AeronError

from tests.unit.archive.service.request_handler_parts import (
    CONTROL_SESSION_ID,
    IPC_CHANNEL,
    STREAM_ID,
    FakeAeron,
    FakeSubscription,
    error,
    ok,
    opened_handlers,
)


class HeldSubscription:
    """An async add the test settles: ``poll`` returns None until released."""

    def __init__(self, subscription: FakeSubscription) -> None:
        self.registration_id = subscription.registration_id
        self.subscription = subscription
        self.released = False
        self.refusal: Exception | None = None
        self.discarded = False

    def poll(self) -> FakeSubscription | None:
        if self.refusal is not None:
            raise self.refusal
        return self.subscription if self.released else None

    def discard(self) -> bool:
        if not self.released:
            return False
        self.subscription.close()
        self.discarded = True
        return True


class AsyncAeron(FakeAeron):
    def __init__(self) -> None:
        super().__init__()
        self.held: list[HeldSubscription] = []

    def async_add_subscription(self, channel: str, stream_id: int, *, on_available_image=None,
                               on_unavailable_image=None) -> HeldSubscription:
        held = HeldSubscription(self.add_subscription(channel, stream_id, on_available_image=on_available_image))
        self.held.append(held)
        return held


@pytest.fixture()
def h(tmp_path):
    with opened_handlers(tmp_path) as handlers:
        aeron = AsyncAeron()
        handlers.aeron = aeron
        handlers.recordings.aeron = aeron
        yield handlers


def start(h, correlation_id: int = 10) -> None:
    h.recordings.start_recording(h.session, StartRecordingRequest(
        CONTROL_SESSION_ID, correlation_id, STREAM_ID, SourceLocation.LOCAL, IPC_CHANNEL), auto_stop=False)


def test_start_recording_is_answered_once_the_driver_added_the_subscription(h):
    start(h)
    assert h.sent() == [] and h.recordings.poll_pending() == 0
    (held,) = h.aeron.held
    held.released = True
    assert h.recordings.poll_pending() == 1
    assert h.sent() == [ok(10, held.registration_id)]
    assert [e.subscription_id for e in h.recordings.open_subscriptions()] == [held.registration_id]


def test_a_subscription_the_driver_refuses_is_answered_with_its_reason_and_forgotten(h):
    reports: list = []
    h.recordings.report_failure = lambda name, correlation_id, failure, text: reports.append((name, text))
    start(h)
    h.aeron.held[0].refusal = AeronError("add_subscription: no such interface")
    assert h.recordings.poll_pending() == 1
    (answer,) = h.sent()
    assert answer == error(10, 0, "StartRecordingRequest: media driver refused: add_subscription: no such interface")
    assert reports == [("StartRecordingRequest", answer.error_message)]
    assert h.recordings.open_subscriptions() == []
    start(h, correlation_id=11)  # the same channel and stream may be recorded again
    assert len(h.aeron.held) == 2


def test_a_subscription_stopped_while_being_added_is_answered_and_closed_when_it_arrives(h):
    start(h)
    h.recordings.stop_recording(h.session, StopRecordingRequest(CONTROL_SESSION_ID, 12, STREAM_ID, IPC_CHANNEL))
    (held,) = h.aeron.held
    assert h.sent() == [ok(10, held.registration_id), ok(12, 0)]
    assert h.recordings.open_subscriptions() == []
    h.recordings.poll_pending()
    assert not held.discarded  # the driver has not answered yet
    held.released = True
    h.recordings.poll_pending()
    assert held.discarded and held.subscription.closed
