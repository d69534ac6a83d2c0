"""Replication requests: ReplicateRequest (50), TaggedReplicateRequest (62), ReplicateRequest2 (66)
and StopReplicationRequest (51); the replication sessions they start, driven by the conductor.

A replicate request is checked (destination known and not active, channels valid), then
answered OK with a replicationId (from the control sessions' id counter, as Aeron), and a
`ReplicationSession` does the rest on the conductor's duty cycle (`do_work`). The older requests
map onto ReplicateRequest2's fields (stop position, replication channel, credentials absent).

`RecordingReplicas` is the session's view of the local catalog and recordings: a replica's new
catalog entry and the autoStop extension through `RecordingRequests` (OK, EXTEND and STOP under
the replicationId, as Aeron's internal extend).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.codecs import ArchiveErrorCode, BooleanType, SourceLocation
from aeron_spark.archive.codecs.messages import (
    ExtendRecordingRequest2,
    ReplicateRequest,
    ReplicateRequest2,
    StopReplicationRequest,
    TaggedReplicateRequest,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.replication_link import LinkAeron, SourceArchiveLink
from aeron_spark.archive.service.replication_session import (
    ReplicaSubscription,
    ReplicationParams,
    ReplicationSession,
    ReplicationTimeouts,
)
from aeron_spark.archive.service.request_errors import NULL_VALUE, ArchiveRequestError, known_recording
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.driver_integration import channel_uri

log = logging.getLogger(__name__)

AnyReplicateRequest = ReplicateRequest | TaggedReplicateRequest | ReplicateRequest2


class RecordingReplicas:
    """`replication_session.ReplicaRecorder` over the catalog and `RecordingRequests`."""

    def __init__(self, catalog: Catalog, recordings: RecordingRequests, requester: ControlSession) -> None:
        self._catalog = catalog
        self._recordings = recordings
        self._requester = requester

    def add_replica(self, source: RecordingDescriptor) -> int:
        return self._catalog.add_recording(
            start_position=source.start_position, stop_position=source.start_position,
            start_timestamp=source.start_timestamp, stop_timestamp=source.start_timestamp,
            initial_term_id=source.initial_term_id, segment_file_length=source.segment_file_length,
            term_buffer_length=source.term_buffer_length, mtu_length=source.mtu_length,
            session_id=source.session_id, stream_id=source.stream_id,
            stripped_channel=source.stripped_channel, original_channel=source.original_channel,
            source_identity=source.source_identity)

    def descriptor(self, recording_id: int) -> RecordingDescriptor | None:
        return self._catalog.descriptor(recording_id)

    def extend(self, replication_id: int, recording_id: int, channel: str, stream_id: int) -> ReplicaSubscription:
        request = ExtendRecordingRequest2(
            self._requester.control_session_id, replication_id, recording_id, stream_id,
            SourceLocation.REMOTE, BooleanType.TRUE, channel)
        entry = self._recordings.open_extension(self._requester, request, auto_stop=True)
        return _ReplicaSubscription(entry.subscription_id, entry.subscription)

    def is_recording(self, recording_id: int) -> bool:
        return self._recordings.is_active(recording_id)

    def recorded_position(self, recording_id: int) -> int | None:
        return self._recordings.live_position(recording_id)

    def is_subscription_open(self, subscription_id: int) -> bool:
        return self._recordings.is_subscription_open(subscription_id)

    def stop_subscription(self, subscription_id: int) -> None:
        self._recordings.stop_subscription_by_id(subscription_id)

    def active_transport_count(self, recording_id: int) -> int:
        image = self._recordings.image_of(recording_id)
        return 0 if image is None else int(getattr(image, "active_transport_count", 0))


class _ReplicaSubscription:
    """The recording subscription of a replication (driver_integration's Subscription; the
    destination calls are its multi-destination ones, for a live merge)."""

    def __init__(self, subscription_id: int, subscription: Any) -> None:
        self.subscription_id = subscription_id
        self._subscription = subscription

    def resolved_channel(self) -> str | None:
        return cast(str | None, self._subscription.resolved_channel())

    def resolved_endpoint(self) -> str | None:
        return cast(str | None, self._subscription.resolved_endpoint())

    def add_destination(self, destination: str) -> None:
        self._subscription.add_destination(destination)

    def remove_destination(self, destination: str) -> None:
        self._subscription.remove_destination(destination)


class ReplicationRequests:
    """See the module docstring. Conductor thread only."""

    def __init__(self, *, aeron: LinkAeron, catalog: Catalog, settings: ConductorSettings,
                 recordings: RecordingRequests, next_replication_id: Callable[[], int],
                 clock: Callable[[], int]) -> None:
        self.aeron = aeron
        self.catalog = catalog
        self.settings = settings
        self.recordings = recordings
        self._next_replication_id = next_replication_id
        self._clock = clock
        self._sessions: dict[int, tuple[ReplicationSession, ControlSession]] = {}

    @property
    def sessions(self) -> dict[int, ReplicationSession]:
        return {replication_id: entry[0] for replication_id, entry in self._sessions.items()}

    # ------------------------------------------------------------------ requests

    def replicate(self, session: ControlSession, message: AnyReplicateRequest) -> None:
        if message.dst_recording_id != NULL_VALUE:
            known_recording(self.catalog, message.dst_recording_id)
            if self.recordings.is_active(message.dst_recording_id):
                raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_RECORDING,
                                          f"cannot replicate to active recording {message.dst_recording_id}")
        replication_channel, response_channel = self.settings.replication_channel, self.settings.replication_response_channel
        if isinstance(message, ReplicateRequest2):
            replication_channel = message.replication_channel or replication_channel
            response_channel = message.src_response_channel or response_channel
        try:
            channel_uri.parse(message.src_control_channel)
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"invalid srcControlChannel {message.src_control_channel!r}: {error}") from None
        for name, channel in (("replicationChannel", replication_channel), ("srcResponseChannel", response_channel)):
            try:
                uri = channel_uri.parse(channel)
            except ValueError as error:
                raise ArchiveRequestError(ArchiveErrorCode.GENERIC, f"invalid {name} {channel!r}: {error}") from None
            if uri.get("control-mode") == "response":
                raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                          f"{name} {channel!r}: control-mode=response is not supported for "
                                          "replication by this archive; use a UDP endpoint")
        replication_id = self._next_replication_id()
        params = _params_of(message, replication_id, replication_channel)
        credentials = bytes(message.encoded_credentials) if isinstance(message, ReplicateRequest2) else b""
        link = SourceArchiveLink(self.aeron, control_channel=message.src_control_channel,
                                 control_stream_id=message.src_control_stream_id,
                                 response_channel=response_channel,
                                 response_stream_id=defaults.DEFAULT_RESPONSE_STREAM_ID, credentials=credentials,
                                 clock=self._clock, legacy_fallback_ms=self.settings.connect_timeout_ms // 2)
        timeouts = ReplicationTimeouts(connect_ms=self.settings.connect_timeout_ms,
                                       action_ms=defaults.DEFAULT_REPLICATION_ACTION_TIMEOUT_MS,
                                       stop_ms=defaults.DEFAULT_REPLICATION_STOP_TIMEOUT_MS)
        replication = ReplicationSession(params, source=link,
                                         recorder=RecordingReplicas(self.catalog, self.recordings, session),
                                         requester=session, timeouts=timeouts, clock=self._clock)
        self._sessions[replication_id] = (replication, session)
        session.send_ok(message.correlation_id, replication_id)
        log.info("replication %d: source recording %d at %s stream %d into %s (stop %d, channel %s)",
                 replication_id, message.src_recording_id, message.src_control_channel,
                 message.src_control_stream_id,
                 "a new recording" if message.dst_recording_id == NULL_VALUE
                 else f"recording {message.dst_recording_id}", params.stop_position, replication_channel)

    def stop_replication(self, session: ControlSession, message: StopReplicationRequest) -> None:
        entry = self._sessions.get(message.replication_id)
        if entry is None or entry[0].state.value in ("STOPPING", "DONE"):
            raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_REPLICATION,
                                      f"unknown replication id {message.replication_id}")
        entry[0].abort("stop replication")
        session.send_ok(message.correlation_id, 0)

    # ------------------------------------------------------------------ duty cycle and shutdown

    def do_work(self) -> int:
        work = 0
        for replication_id, (replication, requester) in list(self._sessions.items()):
            if requester.is_done:
                replication.abort("the requesting control session closed")
            work += replication.do_work()
            if replication.is_done:
                del self._sessions[replication_id]
        return work

    def close(self) -> None:
        """The archive is closing: every replication stops (the links close)."""
        for replication, _requester in self._sessions.values():
            replication.abort("archive shutting down")
            replication.do_work()
        self._sessions.clear()


def _params_of(message: AnyReplicateRequest, replication_id: int, replication_channel: str) -> ReplicationParams:
    """ReplicateRequest2's fields; the older requests leave out what they do not carry."""
    stop_position, file_io_max_length, replication_session_id = NULL_POSITION, NULL_VALUE, NULL_VALUE
    channel_tag_id, subscription_tag_id = NULL_VALUE, NULL_VALUE
    if isinstance(message, ReplicateRequest2):
        stop_position = message.stop_position
        file_io_max_length = message.file_io_max_length
        replication_session_id = message.replication_session_id
    if isinstance(message, (TaggedReplicateRequest, ReplicateRequest2)):
        channel_tag_id, subscription_tag_id = message.channel_tag_id, message.subscription_tag_id
    return ReplicationParams(
        replication_id=replication_id, src_recording_id=message.src_recording_id,
        dst_recording_id=message.dst_recording_id, stop_position=stop_position,
        channel_tag_id=channel_tag_id, subscription_tag_id=subscription_tag_id,
        live_destination=message.live_destination, replication_channel=replication_channel,
        file_io_max_length=file_io_max_length, replication_session_id=replication_session_id)
