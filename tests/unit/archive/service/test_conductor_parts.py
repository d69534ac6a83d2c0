"""The conductor's parts without Aeron: a paged listing, coalesced progress events, event types."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ControlResponseCode
from aeron_spark.archive.service import conductor_events
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.listing_sessions import LISTING_BATCH, ListingRequests
from aeron_spark.archive.service.recording_events_publisher import RecordingEventsPublisher
from aeron_spark.archive.service.request_errors import ArchiveRequestError
from aeron_spark.driver_integration.publication import OfferResult


class Catalog:
    def __init__(self, count: int) -> None:
        self.next_recording_id = count

    def descriptor(self, recording_id: int):
        if not 0 <= recording_id < self.next_recording_id:
            return None
        return SimpleNamespace(recording_id=recording_id, stream_id=recording_id % 2)

    def listable_ids(self, from_recording_id: int, end: int, stream_id: int | None = None):
        return np.array([i for i in range(max(0, from_recording_id), min(end, self.next_recording_id))
                         if stream_id is None or i % 2 == stream_id], dtype=np.int64)

    def stored_bodies(self, recording_ids: list[int]):
        return [(i, i) for i in recording_ids if 0 <= i < self.next_recording_id]  # the id stands for the body


def outbox(session: ControlSession) -> list:
    sent: list = []
    session.drain(lambda message: sent.append(message) or 0, 0, limit=10_000)
    return sent


def test_a_listing_pages_through_the_catalog_and_ends_with_recording_unknown(monkeypatch):
    session = ControlSession(control_session_id=1, connect_correlation_id=1, client_version=0,
                             response_channel="aeron:ipc", response_stream_id=20, now_ms=0)
    monkeypatch.setattr(session, "send_stored_descriptor",
                        lambda correlation_id, body: session._queue(("descriptor", body)))
    listings = ListingRequests(catalog=Catalog(150), recordings=None)
    listings.list_recordings(session, SimpleNamespace(correlation_id=9, from_recording_id=10, record_count=1000))
    with pytest.raises(ArchiveRequestError, match="active listing"):
        listings.list_recording(session, SimpleNamespace(correlation_id=10, recording_id=0))
    listing = session.active_listing
    assert listing.do_work() == LISTING_BATCH  # one batch per duty cycle
    assert listing.do_work() == LISTING_BATCH
    assert listing.do_work() == 150 - 10 - 2 * LISTING_BATCH + 1
    assert session.active_listing is None
    sent = outbox(session)
    assert [m for m in sent if isinstance(m, tuple)] == [("descriptor", i) for i in range(10, 150)]
    end = sent[-1]
    assert (end.code, end.relevant_id, end.correlation_id) == (ControlResponseCode.RECORDING_UNKNOWN, 150, 9)


def test_progress_events_are_coalesced_and_dropped_after_a_stop():
    offered: list = []
    results = [OfferResult.BACK_PRESSURED, 64, 64, 64]

    class Publication:
        def offer(self, data: bytes) -> int:
            offered.append(codecs.decode(data))
            return results.pop(0) if results else 64

    events = RecordingEventsPublisher(Publication())
    events.recording_progressed(1, 0, 100)
    events.recording_progressed(1, 0, 200)
    events.recording_progressed(2, 0, 50)
    events.forget_progress(2)
    assert events.flush_progress_events() == 1
    assert offered == [codecs.RecordingProgress(1, 0, 200)] * 2  # retried once when back-pressured
    assert events.flush_progress_events() == 0
    assert RecordingEventsPublisher(None).flush_progress_events() == 0


def test_conductor_events_are_frozen_slotted_dataclasses():
    for event_type in (conductor_events.ControlImageUnavailable, conductor_events.RecordingImageAvailable,
                       conductor_events.RecordingSessionStarted, conductor_events.RecordingSessionProgressed,
                       conductor_events.RecordingSessionStopped, conductor_events.ReplaySessionReady,
                       conductor_events.ReplaySessionEnded, conductor_events.StopAllRecordings):
        assert dataclasses.is_dataclass(event_type) and event_type.__dataclass_params__.frozen
        assert hasattr(event_type, "__slots__")
