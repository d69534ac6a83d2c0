"""Listing requests: ListRecordings, ListRecordingsForUri (paged, one `RecordingListingSession`
per listing in progress), ListRecording and ListRecordingSubscriptions (answered at once).

A control session has at most one listing in progress (`ControlSession.active_listing`; a second
listing request gets ERROR ACTIVE_LISTING). The control demuxer continues it each duty cycle while
the session is ACTIVE and its outbox is short: at most `LISTING_BATCH` descriptors are scanned per
cycle, as Aeron's ListRecordingsSession.

ListRecordings uses the modern semantics (count = descriptors sent, RECORDING_UNKNOWN at the end
with the id where the scan stopped) for every client, including 1.15.x ones: the 1.15.1 client
stops on whichever comes first (count descriptors or RECORDING_UNKNOWN), so it reads the modern
answer correctly. ListRecordingsForUri matches streamId and a substring of the original or the
stripped channel. ListRecordingSubscriptions sends the matching subscription descriptors from
pseudoIndex on, then SUBSCRIPTION_UNKNOWN unless subscriptionCount were sent.
"""

from __future__ import annotations

from collections.abc import Callable

from aeron_spark.archive.codecs import ArchiveErrorCode, BooleanType
from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.messages import (
    ListRecordingRequest,
    ListRecordingSubscriptionsRequest,
    ListRecordingsForUriRequest,
    ListRecordingsRequest,
)
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.request_errors import ArchiveRequestError, in_catalog_range
from aeron_spark.archive.storage.catalog import Catalog

LISTING_BATCH = 64  # descriptors scanned per session per duty cycle, as Aeron


class RecordingListingSession:
    """One ListRecordings / ListRecordingsForUri in progress: a cursor over the catalog.

    The catalog's in-memory index picks the candidates (valid, and of ``stream_id`` when given), so
    recordings of other streams cost nothing; only candidates are read and matched, at most
    `LISTING_BATCH` per duty cycle. Their stored descriptor bodies are matched and sent as they
    are (as Aeron does), never decoded into descriptors and encoded again."""

    __slots__ = ("session", "catalog", "correlation_id", "next_recording_id", "remaining", "matches",
                 "stream_id")

    def __init__(self, session: ControlSession, catalog: Catalog, correlation_id: int,
                 from_recording_id: int, count: int,
                 matches: Callable[[memoryview], bool] | None, stream_id: int | None = None) -> None:
        self.session = session
        self.catalog = catalog
        self.correlation_id = correlation_id
        self.next_recording_id = max(0, from_recording_id)
        self.remaining = count
        self.matches = matches  # over a stored body; None: every recording
        self.stream_id = stream_id

    def do_work(self) -> int:
        """Reads up to `LISTING_BATCH` candidates; at the end leaves the session's listing slot."""
        session = self.session
        end = self.catalog.next_recording_id
        if self.remaining <= 0:
            session.active_listing = None
            return 1
        candidates = self.catalog.listable_ids(self.next_recording_id, end, self.stream_id)
        batch = candidates[:LISTING_BATCH].tolist()
        if batch:
            self.next_recording_id = batch[-1] + 1
        matches = self.matches
        for read, (recording_id, body) in enumerate(self.catalog.stored_bodies(batch), start=1):
            if matches is None or matches(body):
                session.send_stored_descriptor(self.correlation_id, body)
                self.remaining -= 1
                if self.remaining <= 0:
                    self.next_recording_id = recording_id + 1
                    session.active_listing = None
                    return read + 1
        if len(candidates) > LISTING_BATCH:
            return LISTING_BATCH
        # The scan reached the end of the catalog: say where, as Aeron does.
        self.next_recording_id = max(self.next_recording_id, end)
        session.send_recording_unknown(self.correlation_id, self.next_recording_id)
        session.active_listing = None
        return len(batch) + 1


class ListingRequests:
    """The listing request handlers (see the module docstring)."""

    def __init__(self, *, catalog: Catalog, recordings: RecordingRequests) -> None:
        self.catalog = catalog
        self.recordings = recordings

    def list_recordings(self, session: ControlSession, message: ListRecordingsRequest) -> None:
        self._begin_listing(session, message.correlation_id, message.from_recording_id,
                            message.record_count, None)

    def list_recordings_for_uri(self, session: ControlSession, message: ListRecordingsForUriRequest) -> None:
        stream_id, fragment = message.stream_id, message.channel
        # Stored channels are ASCII: a fragment that is not matches none of them.
        wanted = fragment.encode("ascii") if fragment.isascii() else None

        def matches(body: memoryview) -> bool:
            if wanted is None or descriptor_body.stream_id(body) != stream_id:
                return False
            stripped, original = descriptor_body.channels(body)
            return wanted in original or wanted in stripped

        self._begin_listing(session, message.correlation_id, message.from_recording_id,
                            message.record_count, matches, stream_id)

    def list_recording(self, session: ControlSession, message: ListRecordingRequest) -> None:
        _no_listing_in_progress(session)
        recording_id = message.recording_id
        stored = self.catalog.stored_bodies([recording_id]) if in_catalog_range(self.catalog, recording_id) else []
        if stored:
            session.send_stored_descriptor(message.correlation_id, stored[0][1])
        else:
            session.send_recording_unknown(message.correlation_id, recording_id)

    def list_recording_subscriptions(self, session: ControlSession,
                                     message: ListRecordingSubscriptionsRequest) -> None:
        _no_listing_in_progress(session)
        entries = self.recordings.open_subscriptions()
        apply_stream_id = int(message.apply_stream_id) == BooleanType.TRUE
        sent = 0
        if 0 <= message.pseudo_index < len(entries) and message.subscription_count > 0:
            for entry in entries[message.pseudo_index:]:
                if (not apply_stream_id or entry.stream_id == message.stream_id) \
                        and message.channel in entry.subscribed_channel:
                    session.send_subscription_descriptor(message.correlation_id, entry.subscription_id,
                                                         entry.stream_id, entry.subscribed_channel)
                    sent += 1
                    if sent >= message.subscription_count:
                        return
        session.send_subscription_unknown(message.correlation_id)

    def _begin_listing(self, session: ControlSession, correlation_id: int, from_recording_id: int,
                       count: int, matches: Callable[[memoryview], bool] | None,
                       stream_id: int | None = None) -> None:
        _no_listing_in_progress(session)
        session.active_listing = RecordingListingSession(session, self.catalog, correlation_id,
                                                         from_recording_id, count, matches, stream_id)


def _no_listing_in_progress(session: ControlSession) -> None:
    if session.active_listing is not None:
        raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_LISTING, "active listing already in progress")
