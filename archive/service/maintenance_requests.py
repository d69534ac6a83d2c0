"""Maintenance requests: TruncateRecording, PurgeRecording, the segment requests
(DetachSegments, DeleteDetachedSegments, PurgeSegments, AttachSegments, MigrateSegments) and
UpdateChannel.

The file and catalog work is `storage.maintenance`'s; here are the request rules: truncate and
purge need a stopped recording (ACTIVE_RECORDING otherwise) and purge one no replay reads, a
truncate position must be 32-byte aligned inside the recording (INVALID_POSITION), a detach
(and purge-segments) position passes Aeron's isValidDetach (GENERIC, Aeron's texts), truncate
stops the recording's replays first, and every request that deleted files sends the DELETE
signal after its OK (Aeron's RecordingSignal.DELETE).

UpdateChannel (107, Aeron 1.49+: ArchiveConductor.updateChannel and UpdateChannelSession) stores
a new original channel and its stripped form in a valid recording's descriptor, active or
stopped, and answers OK (relevantId 0) with no signal; ACTIVE_LISTING while a listing of the
session is in progress; for an id with no valid entry the response code RECORDING_UNKNOWN
(relevantId the id, as Aeron's sendRecordingUnknown; not an ERROR). A channel that does not
parse gets ERROR GENERIC (Aeron's URI parse error escapes its handler: no response at all).
"""

from __future__ import annotations

from collections.abc import Callable

from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal
from aeron_spark.archive.codecs.messages import (
    AttachSegmentsRequest,
    DeleteDetachedSegmentsRequest,
    DetachSegmentsRequest,
    MigrateSegmentsRequest,
    PurgeRecordingRequest,
    PurgeSegmentsRequest,
    TruncateRecordingRequest,
    UpdateChannelRequest,
)
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.replay_requests import ReplayRequests
from aeron_spark.archive.service.request_errors import (
    NULL_VALUE,
    ArchiveRequestError,
    in_catalog_range,
    known_recording,
)
from aeron_spark.archive.storage import maintenance
from aeron_spark.archive.storage.catalog import Catalog, CatalogError
from aeron_spark.driver_integration import channel_uri
from aeron_spark.driver_integration.channel_params import check_channel_params


def segment_base(start_position: int, position: int, term_length: int, segment_length: int) -> int:
    """Aeron's segmentFileBasePosition, also for positions below the start's term (two's-complement
    masking floors them, as Java's long arithmetic does; driver_integration's refuses them)."""
    start_term_base = start_position - (start_position & (term_length - 1))
    length = position - start_term_base
    return start_term_base + length - (length & (segment_length - 1))


class MaintenanceRequests:
    """See the module docstring."""

    def __init__(self, *, catalog: Catalog, settings: ConductorSettings,
                 recordings: RecordingRequests, replays: ReplayRequests) -> None:
        self.catalog = catalog
        self.settings = settings
        self.recordings = recordings
        self.replays = replays

    def truncate_recording(self, session: ControlSession, message: TruncateRecordingRequest) -> None:
        descriptor = self._stopped(message.recording_id, "truncate")
        if message.position % 32 or not descriptor.start_position <= message.position <= descriptor.stop_position:
            raise ArchiveRequestError(
                ArchiveErrorCode.INVALID_POSITION,
                f"invalid truncate position {message.position}: recording {message.recording_id} "
                f"spans [{descriptor.start_position}, {descriptor.stop_position}] and positions are "
                f"32-byte aligned")
        self.replays.stop_all_replays_of(message.recording_id)
        result = self._maintenance(lambda: maintenance.truncate_recording(
            self.catalog, self.settings.archive_dir, message.recording_id, message.position))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def purge_recording(self, session: ControlSession, message: PurgeRecordingRequest) -> None:
        self._stopped(message.recording_id, "purge")
        if self.replays.has_replays(message.recording_id):
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_RECORDING,
                                      f"cannot purge recording {message.recording_id} with active replay")
        result = self._maintenance(lambda: maintenance.purge_recording(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def detach_segments(self, session: ControlSession, message: DetachSegmentsRequest) -> None:
        self._valid_detach(known_recording(self.catalog, message.recording_id), message.new_start_position)
        self._maintenance(lambda: maintenance.detach_segments(
            self.catalog, self.settings.archive_dir, message.recording_id, message.new_start_position,
            recorded_position=self.recordings.live_position(message.recording_id)))
        session.send_ok(message.correlation_id, 0)

    def delete_detached_segments(self, session: ControlSession,
                                 message: DeleteDetachedSegmentsRequest) -> None:
        known_recording(self.catalog, message.recording_id)
        result = self._maintenance(lambda: maintenance.delete_detached_segments(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def purge_segments(self, session: ControlSession, message: PurgeSegmentsRequest) -> None:
        self._valid_detach(known_recording(self.catalog, message.recording_id), message.new_start_position)
        self._maintenance(lambda: maintenance.detach_segments(
            self.catalog, self.settings.archive_dir, message.recording_id, message.new_start_position,
            recorded_position=self.recordings.live_position(message.recording_id)))
        result = self._maintenance(lambda: maintenance.delete_detached_segments(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def attach_segments(self, session: ControlSession, message: AttachSegmentsRequest) -> None:
        known_recording(self.catalog, message.recording_id)
        result = self._maintenance(lambda: maintenance.attach_segments(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.attached_files))

    def migrate_segments(self, session: ControlSession, message: MigrateSegmentsRequest) -> None:
        """Aeron's migrateSegments: both ids known (UNKNOWN_RECORDING), src stopped (GENERIC, as
        Aeron), the rest is `storage.maintenance.migrate_segments`' (GENERIC); OK with the moved
        segment count, then DELETE for src when anything was moved or deleted."""
        source = known_recording(self.catalog, message.src_recording_id)
        known_recording(self.catalog, message.dst_recording_id)
        if self.recordings.is_active(message.src_recording_id) or source.is_active:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"recording {message.src_recording_id} is still active")
        result = self._maintenance(lambda: maintenance.migrate_segments(
            self.catalog, self.settings.archive_dir, message.src_recording_id, message.dst_recording_id))
        session.send_ok(message.correlation_id, len(result.attached_files))
        if result.attached_files or result.deleted_files:
            self._send_delete_signal(session, message.correlation_id, message.src_recording_id)

    def update_channel(self, session: ControlSession, message: UpdateChannelRequest) -> None:
        """Aeron's updateChannel: see the module docstring. The catalog entry is rewritten (and
        the entries after it moved when it grows) by `Catalog.replace_channels`."""
        if session.active_listing is not None:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_LISTING, "active listing already in progress")
        recording_id = message.recording_id
        if not in_catalog_range(self.catalog, recording_id) or self.catalog.descriptor(recording_id) is None:
            # Aeron's sendRecordingUnknown: ControlResponse RECORDING_UNKNOWN, relevantId = the id
            # (not an ERROR; Aeron's client throws "unexpected response code", GENERIC).
            session.send_recording_unknown(message.correlation_id, recording_id)
            return
        channel = message.channel
        try:
            check_channel_params(channel_uri.parse(channel))
            stripped = channel_uri.strip_channel(channel)
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, f"invalid channel {channel!r}: {error}") from None
        try:
            self.catalog.replace_channels(recording_id, stripped_channel=stripped,
                                          original_channel=channel)
        except CatalogError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, str(error)) from None
        session.send_ok(message.correlation_id, 0)

    def _valid_detach(self, descriptor: RecordingDescriptor, position: int) -> None:
        """Aeron's isValidDetach, in its order and with its texts (all ERROR GENERIC): the new start
        must be a segment base, at least one segment above the start's segment (detaching nothing
        is refused), not above the segment holding the stop (or, live, the recorded) position, and
        not above the segment a replay of the recording is reading."""
        def base(at: int) -> int:
            return segment_base(descriptor.start_position, at, descriptor.term_buffer_length,
                                descriptor.segment_file_length)

        if position != base(position):
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, f"invalid segment start: newStartPosition={position}")
        lower_bound = base(descriptor.start_position) + descriptor.segment_file_length
        if position < lower_bound:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"invalid detach: newStartPosition={position} lowerBound={lower_bound}")
        end = descriptor.stop_position
        if descriptor.is_active or self.recordings.is_active(descriptor.recording_id):
            live = self.recordings.live_position(descriptor.recording_id)
            end = live if live is not None else descriptor.start_position
        upper_bound = base(end)
        if position > upper_bound:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"invalid detach: in use, newStartPosition={position} upperBound={upper_bound}")
        lowest = getattr(getattr(self.replays, "replayer", None), "lowest_replay_position", None)
        replaying = lowest(descriptor.recording_id) if lowest is not None else None
        if replaying is not None and position > base(replaying):
            raise ArchiveRequestError(
                ArchiveErrorCode.GENERIC,
                f"invalid detach: replay in progress - newStartPosition={position} upperBound={base(replaying)} "
                f"recordingId={descriptor.recording_id}")

    def _stopped(self, recording_id: int, action: str) -> RecordingDescriptor:
        descriptor = known_recording(self.catalog, recording_id)
        if self.recordings.is_active(recording_id) or descriptor.is_active:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_RECORDING,
                                      f"cannot {action} active recording {recording_id}")
        return descriptor

    @staticmethod
    def _maintenance(action: Callable[[], maintenance.MaintenanceResult]) -> maintenance.MaintenanceResult:
        try:
            return action()
        except maintenance.MaintenanceError as error:
            text = str(error)
            code = ArchiveErrorCode.GENERIC
            if "not aligned" in text or "outside the recording" in text:
                code = ArchiveErrorCode.INVALID_POSITION
            elif "active" in text:
                code = ArchiveErrorCode.ACTIVE_RECORDING
            raise ArchiveRequestError(code, text) from None

    @staticmethod
    def _send_delete_signal(session: ControlSession, correlation_id: int, recording_id: int) -> None:
        session.send_signal(correlation_id, recording_id, NULL_VALUE, NULL_VALUE, RecordingSignal.DELETE)
