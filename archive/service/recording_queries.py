"""Requests that only read: ArchiveId, RecordingPosition, StopPosition, StartPosition,
MaxRecordedPosition and FindLastMatchingRecording.

Each is answered at once with one OK whose relevantId is the answer (docs/protocol.md).
RecordingPosition is the live recorded position (NULL_POSITION for a recording not being
recorded; an unknown id is UNKNOWN_RECORDING, but NULL_POSITION for a 1.15.x client, as Aeron
1.15.1); MaxRecordedPosition is that, or the stop position of a stopped recording.
FindLastMatchingRecording scans down from the newest recording to minRecordingId for the same
session id, stream id and a channel containing the request's channel (NULL_VALUE if none).
"""

from __future__ import annotations

from aeron_spark.archive.codecs import ArchiveErrorCode
from aeron_spark.archive.codecs.messages import (
    ArchiveIdRequest,
    FindLastMatchingRecordingRequest,
    MaxRecordedPositionRequest,
    RecordingPositionRequest,
    StartPositionRequest,
    StopPositionRequest,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.request_errors import NULL_VALUE, ArchiveRequestError, known_recording
from aeron_spark.archive.storage.catalog import Catalog


class RecordingQueries:
    """See the module docstring."""

    def __init__(self, *, catalog: Catalog, archive_id: int, recordings: RecordingRequests) -> None:
        self.catalog = catalog
        self.archive_id = archive_id
        self.recordings = recordings

    def archive_id_request(self, session: ControlSession, message: ArchiveIdRequest) -> None:
        session.send_ok(message.correlation_id, self.archive_id)

    def recording_position(self, session: ControlSession, message: RecordingPositionRequest) -> None:
        try:
            known_recording(self.catalog, message.recording_id)
        except ArchiveRequestError:
            if not session.is_legacy_client:
                raise
            # Aeron 1.15.x answers NULL_POSITION for any recording that is not active, known or
            # not (later archives: UNKNOWN_RECORDING); a 1.15.x client gets what it expects.
        live = self.recordings.live_position(message.recording_id)
        session.send_ok(message.correlation_id, NULL_POSITION if live is None else live)

    def stop_position(self, session: ControlSession, message: StopPositionRequest) -> None:
        session.send_ok(message.correlation_id, known_recording(self.catalog, message.recording_id).stop_position)

    def start_position(self, session: ControlSession, message: StartPositionRequest) -> None:
        session.send_ok(message.correlation_id, known_recording(self.catalog, message.recording_id).start_position)

    def max_recorded_position(self, session: ControlSession, message: MaxRecordedPositionRequest) -> None:
        descriptor = known_recording(self.catalog, message.recording_id)
        live = self.recordings.live_position(message.recording_id)
        if live is None:
            live = descriptor.stop_position if not descriptor.is_active else descriptor.start_position
        session.send_ok(message.correlation_id, live)

    def find_last_matching_recording(self, session: ControlSession,
                                     message: FindLastMatchingRecordingRequest) -> None:
        if message.min_recording_id < 0:
            raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_RECORDING,
                                      f"minRecordingId={message.min_recording_id} < 0")
        fragment = message.channel
        found = NULL_VALUE
        # Newest first, over the recordings of this stream only (the catalog's index picks them).
        for recording_id in reversed(self.catalog.listable_ids(message.min_recording_id, None,
                                                               message.stream_id).tolist()):
            d = self.catalog.descriptor(recording_id)
            if d is not None and d.session_id == message.session_id and d.stream_id == message.stream_id \
                    and fragment in d.original_channel:
                found = recording_id
                break
        session.send_ok(message.correlation_id, found)
