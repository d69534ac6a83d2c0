"""`RecordingRequests`: the requests about recordings, by family: listings, positions,
starting and stopping recordings, and segment maintenance (truncate, purge, detach, attach,
migrate, update channel). A base of `ArchiveClient`; each method sends one request (or one page
of them) over the `ArchiveSession`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aeron_spark.archive import codecs
from aeron_spark.archive.client.client_session import ARCHIVE_ID_MIN_VERSION, ArchiveSession
from aeron_spark.archive.client.response_routing import (
    ArchiveError,
    AwaitDescriptors,
    AwaitSubscriptionDescriptors,
    CollectDescriptors,
)
from aeron_spark.archive.codecs import (
    BooleanType,
    ControlResponse,
    RecordingSubscriptionDescriptor,
    SourceLocation,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor

#: ListRecordings page size when listing everything (``count=None``).
LIST_PAGE_SIZE = 1000


@dataclass(frozen=True)
class ListingPage:
    """One ListRecordings / ListRecordingsForUri answer.

    ``scanned_to``: the relevantId of the RECORDING_UNKNOWN that ended the listing, i.e. the id where
    the archive's scan of its catalog stopped (every archive, 1.15.1 included, sends the first id
    past its catalog there); None when the listing ended with ``count`` descriptors.
    """

    descriptors: list[RecordingDescriptor]
    scanned_to: int | None

    def next_from(self, from_id: int) -> int:
        """Where the next listing continues: past every recording this one returned or scanned."""
        after_listed = self.descriptors[-1].recording_id + 1 if self.descriptors else from_id
        return max(from_id, after_listed, self.scanned_to if self.scanned_to is not None else from_id)


@dataclass
class AwaitListingPage(CollectDescriptors[ListingPage]):
    """A listing that also keeps where the archive's scan ended (`ListingPage.scanned_to`)."""

    scanned_to: int | None = None

    def on_control_response(self, response: ControlResponse) -> None:
        if response.code == codecs.ControlResponseCode.RECORDING_UNKNOWN and not self.done:
            self.scanned_to = response.relevant_id
        super().on_control_response(response)

    def value(self) -> ListingPage:
        return ListingPage(list(self.descriptors), self.scanned_to)


class RecordingRequests(ArchiveSession):
    """Listing, positions, recording and maintenance requests (see the module docstring)."""

    # ------------------------------------------------------------------------------ listings
    def list_recordings(self, from_id: int = 0, count: int | None = None) -> list[RecordingDescriptor]:
        """Descriptors of recordings with id >= ``from_id``, at most ``count`` (None: all, fetched
        in pages of LIST_PAGE_SIZE)."""
        if count is not None:
            return self._call_expecting(lambda s, c: codecs.ListRecordingsRequest(s, c, from_id, count),
                                        _descriptors(count))
        return self._all_pages(lambda start: self.list_recordings(start, LIST_PAGE_SIZE), from_id)

    def list_recordings_for_uri(self, from_id: int, count: int | None, channel_fragment: str,
                                stream_id: int) -> list[RecordingDescriptor]:
        """Descriptors of recordings of ``stream_id`` whose channel contains ``channel_fragment``."""
        if count is not None:
            return self._call_expecting(lambda s, c: codecs.ListRecordingsForUriRequest(
                s, c, from_id, count, stream_id, channel_fragment), _descriptors(count))
        return self._all_pages(
            lambda start: self.list_recordings_for_uri(start, LIST_PAGE_SIZE, channel_fragment,
                                                       stream_id), from_id)

    def list_recordings_page(self, from_id: int, count: int) -> ListingPage:
        """`list_recordings` of at most ``count``, with where the archive's scan ended (`ListingPage`)."""
        return self._call_expecting(lambda s, c: codecs.ListRecordingsRequest(s, c, from_id, count),
                                    _listing_page(count))

    def list_recordings_for_uri_page(self, from_id: int, count: int, channel_fragment: str,
                                     stream_id: int) -> ListingPage:
        """`list_recordings_for_uri` of at most ``count``, with where the archive's scan ended, so
        that the next listing need not make the archive scan the same recordings again."""
        return self._call_expecting(lambda s, c: codecs.ListRecordingsForUriRequest(
            s, c, from_id, count, stream_id, channel_fragment), _listing_page(count))

    @staticmethod
    def _all_pages(page: Callable[[int], list[RecordingDescriptor]], from_id: int) -> list[RecordingDescriptor]:
        found: list[RecordingDescriptor] = []
        start = from_id
        while True:
            descriptors = page(start)
            found.extend(descriptors)
            if len(descriptors) < LIST_PAGE_SIZE:
                return found
            start = descriptors[-1].recording_id + 1

    def list_recording(self, recording_id: int) -> RecordingDescriptor | None:
        """The descriptor of ``recording_id``, or None when the archive does not know it."""
        found = self._call_expecting(lambda s, c: codecs.ListRecordingRequest(s, c, recording_id),
                                     _descriptors(1))
        return found[0] if found else None

    def list_recording_subscriptions(self, pseudo_index: int, subscription_count: int,
                                     channel_fragment: str, stream_id: int,
                                     apply_stream_id: bool) -> list[RecordingSubscriptionDescriptor]:
        """The archive's active recording subscriptions (Aeron's listRecordingSubscriptions)."""
        self._require_modern("ListRecordingSubscriptionsRequest")
        return self._call_expecting(lambda s, c: codecs.ListRecordingSubscriptionsRequest(
            s, c, pseudo_index, subscription_count,
            BooleanType.TRUE if apply_stream_id else BooleanType.FALSE, stream_id, channel_fragment),
            lambda request, ids: AwaitSubscriptionDescriptors(request, ids, count=subscription_count))

    def find_last_matching_recording(self, min_recording_id: int, channel_fragment: str,
                                     stream_id: int, session_id: int) -> int:
        """The newest recording id >= ``min_recording_id`` matching, or -1."""
        return self._call(lambda s, c: codecs.FindLastMatchingRecordingRequest(
            s, c, min_recording_id, session_id, stream_id, channel_fragment))

    # ------------------------------------------------------------------------------ positions
    def recording_position(self, recording_id: int) -> int:
        """The live recorded position, or -1 (NULL_POSITION) when the recording is not active."""
        return self._call(lambda s, c: codecs.RecordingPositionRequest(s, c, recording_id))

    def stop_position(self, recording_id: int) -> int:
        """The stop position, -1 while the recording is active."""
        return self._call(lambda s, c: codecs.StopPositionRequest(s, c, recording_id))

    def start_position(self, recording_id: int) -> int:
        if self._legacy:
            return self._require_descriptor(recording_id).start_position
        return self._call(lambda s, c: codecs.StartPositionRequest(s, c, recording_id))

    def max_recorded_position(self, recording_id: int) -> int:
        """The live position while recording, else the stop position (falls back to
        RecordingPosition + StopPosition on archives without MaxRecordedPositionRequest)."""
        if not self._legacy and self.archive_protocol_version >= ARCHIVE_ID_MIN_VERSION:
            return self._call(lambda s, c: codecs.MaxRecordedPositionRequest(s, c, recording_id))
        position = self.recording_position(recording_id)
        if position == NULL_POSITION:
            position = self.stop_position(recording_id)
            if position == NULL_POSITION:  # it became active again between the two requests
                position = self.recording_position(recording_id)
        return position

    def _require_descriptor(self, recording_id: int) -> RecordingDescriptor:
        descriptor = self.list_recording(recording_id)
        if descriptor is None:
            raise ArchiveError(f"unknown recording id {recording_id} at {self.description}",
                               code=codecs.ControlResponseCode.RECORDING_UNKNOWN,
                               error_code=codecs.ArchiveErrorCode.UNKNOWN_RECORDING,
                               request="ListRecordingRequest")
        return descriptor

    # ------------------------------------------------------------------------------ recording
    def start_recording(self, channel: str, stream_id: int,
                        source_location: SourceLocation = SourceLocation.REMOTE,
                        auto_stop: bool = False) -> int:
        """Starts recording ``channel``/``stream_id``; returns the recording subscription id.
        Each image on it becomes a recording (signal START when there are signals)."""
        location = SourceLocation(source_location)
        if auto_stop:
            self._require_modern("StartRecordingRequest2 (auto_stop)")
            return self._call(lambda s, c: codecs.StartRecordingRequest2(
                s, c, stream_id, location, BooleanType.TRUE, channel))
        return self._call(lambda s, c: codecs.StartRecordingRequest(s, c, stream_id, location, channel))

    def extend_recording(self, recording_id: int, channel: str, stream_id: int,
                         source_location: SourceLocation = SourceLocation.REMOTE,
                         auto_stop: bool = False) -> int:
        """Records a new image of ``channel``/``stream_id`` onto the end of ``recording_id``;
        returns the subscription id."""
        location = SourceLocation(source_location)
        if auto_stop:
            self._require_modern("ExtendRecordingRequest2 (auto_stop)")
            return self._call(lambda s, c: codecs.ExtendRecordingRequest2(
                s, c, recording_id, stream_id, location, BooleanType.TRUE, channel))
        return self._call(lambda s, c: codecs.ExtendRecordingRequest(
            s, c, recording_id, stream_id, location, channel))

    def stop_recording(self, channel: str, stream_id: int) -> None:
        """Stops the recording subscription of ``channel``/``stream_id`` (same key as started)."""
        self._call(lambda s, c: codecs.StopRecordingRequest(s, c, stream_id, channel))

    def stop_recording_subscription(self, subscription_id: int) -> None:
        self._call(lambda s, c: codecs.StopRecordingSubscriptionRequest(s, c, subscription_id))

    def stop_recording_by_identity(self, recording_id: int) -> bool:
        """Stops the active recording ``recording_id``; False when it was not active."""
        self._require_modern("StopRecordingByIdentityRequest")
        return self._call(lambda s, c: codecs.StopRecordingByIdentityRequest(s, c, recording_id)) != 0

    # ------------------------------------------------------------------------------ maintenance
    def truncate_recording(self, recording_id: int, position: int) -> int:
        """Truncates a stopped recording at ``position``; the number of segment files deleted."""
        return self._call(lambda s, c: codecs.TruncateRecordingRequest(s, c, recording_id, position))

    def purge_recording(self, recording_id: int) -> int:
        """Deletes a stopped recording and its files; the number of segment files deleted."""
        self._require_modern("PurgeRecordingRequest")
        return self._call(lambda s, c: codecs.PurgeRecordingRequest(s, c, recording_id))

    def detach_segments(self, recording_id: int, new_start_position: int) -> None:
        self._require_modern("DetachSegmentsRequest")
        self._call(lambda s, c: codecs.DetachSegmentsRequest(s, c, recording_id, new_start_position))

    def delete_detached_segments(self, recording_id: int) -> int:
        self._require_modern("DeleteDetachedSegmentsRequest")
        return self._call(lambda s, c: codecs.DeleteDetachedSegmentsRequest(s, c, recording_id))

    def purge_segments(self, recording_id: int, new_start_position: int) -> int:
        self._require_modern("PurgeSegmentsRequest")
        return self._call(lambda s, c: codecs.PurgeSegmentsRequest(s, c, recording_id, new_start_position))

    def attach_segments(self, recording_id: int) -> int:
        self._require_modern("AttachSegmentsRequest")
        return self._call(lambda s, c: codecs.AttachSegmentsRequest(s, c, recording_id))

    def migrate_segments(self, src_recording_id: int, dst_recording_id: int) -> int:
        """Moves the segments of stopped ``src_recording_id`` onto the start or the end of
        ``dst_recording_id`` (Aeron's migrateSegments); the number of segment files moved."""
        self._require_modern("MigrateSegmentsRequest")
        return self._call(lambda s, c: codecs.MigrateSegmentsRequest(s, c, src_recording_id, dst_recording_id))

    def update_channel(self, recording_id: int, channel: str) -> None:
        """Stores ``channel`` (and its stripped form) as the recording's channel in the archive's
        catalog (Aeron 1.49+'s updateChannel; the archive answers OK, no signal). An unknown
        recording (the archive's RECORDING_UNKNOWN response) raises ArchiveError with
        ``error_code`` UNKNOWN_RECORDING."""
        self._require_modern("UpdateChannelRequest")
        try:
            self._call(lambda s, c: codecs.UpdateChannelRequest(s, c, recording_id, channel))
        except ArchiveError as error:
            if error.code != codecs.ControlResponseCode.RECORDING_UNKNOWN:
                raise
            raise ArchiveError(f"unknown recording id {recording_id} at {self.description}",
                               code=error.code, error_code=codecs.ArchiveErrorCode.UNKNOWN_RECORDING,
                               correlation_id=error.correlation_id,
                               request="UpdateChannelRequest") from None



def _descriptors(count: int) -> Callable[[str, frozenset[int]], AwaitDescriptors]:
    return lambda request, ids: AwaitDescriptors(request, ids, count=count)


def _listing_page(count: int) -> Callable[[str, frozenset[int]], AwaitListingPage]:
    return lambda request, ids: AwaitListingPage(request, ids, count=count)
