"""One frozen dataclass per schema-101 wire message: the requests (client -> archive), then the
responses and events (archive -> client; 101-103 on the recording-events stream).

Field names are the SBE names snake_cased, in wire order (fixed fields, then var-length fields);
their byte layout is the table in `messages`. Enum-typed fields hold the enum member when the
value is known, else a plain int.

The template 22 wire message is :class:`RecordingDescriptorMessage` (SBE name
``RecordingDescriptor``), so that it does not shadow the shared
:class:`aeron_spark.archive.codecs.recording_descriptor.RecordingDescriptor` it converts to and from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, dataclass_transform

from aeron_spark.archive.codecs.constants import BooleanType, ControlResponseCode, RecordingSignal, SourceLocation
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

@dataclass_transform(frozen_default=True)
def _wire_message[T](cls: type[T]) -> type[T]:
    """Makes ``cls`` a frozen, slotted dataclass (one decorator, so that mypy sees each message's
    constructor as the dataclass it is)."""
    return dataclass(frozen=True, slots=True)(cls)


# The message and the shared descriptor carry the same fields under the same names (the message in
# wire order); the conversions copy them by name.
_DESCRIPTOR_FIELDS: tuple[str, ...] = tuple(field.name for field in fields(RecordingDescriptor))


# ---------------------------------------------------------------------------------------------
# Requests (client -> archive)
# ---------------------------------------------------------------------------------------------

@_wire_message
class ConnectRequest:
    TEMPLATE_ID: ClassVar[int] = 2
    correlation_id: int
    response_stream_id: int
    version: int  # protocol semantic version; 0 (null) from 1.15.x clients
    response_channel: str


@_wire_message
class AuthConnectRequest:
    TEMPLATE_ID: ClassVar[int] = 58
    correlation_id: int
    response_stream_id: int
    version: int
    response_channel: str
    encoded_credentials: bytes
    client_info: str  # schema v12+


@_wire_message
class ChallengeResponse:
    TEMPLATE_ID: ClassVar[int] = 60
    control_session_id: int
    correlation_id: int
    encoded_credentials: bytes


@_wire_message
class CloseSessionRequest:
    TEMPLATE_ID: ClassVar[int] = 3
    control_session_id: int


@_wire_message
class KeepAliveRequest:
    TEMPLATE_ID: ClassVar[int] = 61
    control_session_id: int
    correlation_id: int


@_wire_message
class StartRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 4
    control_session_id: int
    correlation_id: int
    stream_id: int
    source_location: SourceLocation | int
    channel: str


@_wire_message
class StartRecordingRequest2:
    TEMPLATE_ID: ClassVar[int] = 63
    control_session_id: int
    correlation_id: int
    stream_id: int
    source_location: SourceLocation | int
    auto_stop: BooleanType | int
    channel: str


@_wire_message
class StopRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 5
    control_session_id: int
    correlation_id: int
    stream_id: int
    channel: str


@_wire_message
class StopRecordingSubscriptionRequest:
    TEMPLATE_ID: ClassVar[int] = 14
    control_session_id: int
    correlation_id: int
    subscription_id: int


@_wire_message
class StopRecordingByIdentityRequest:
    TEMPLATE_ID: ClassVar[int] = 65
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class ReplayRequest:
    TEMPLATE_ID: ClassVar[int] = 6
    control_session_id: int
    correlation_id: int
    recording_id: int
    position: int
    length: int
    replay_stream_id: int
    file_io_max_length: int  # v7+
    replay_token: int  # v10+
    replay_channel: str


@_wire_message
class BoundedReplayRequest:
    TEMPLATE_ID: ClassVar[int] = 18
    control_session_id: int
    correlation_id: int
    recording_id: int
    position: int
    length: int
    limit_counter_id: int
    replay_stream_id: int
    file_io_max_length: int  # v7+
    replay_token: int  # v10+
    replay_channel: str


@_wire_message
class StopReplayRequest:
    TEMPLATE_ID: ClassVar[int] = 7
    control_session_id: int
    correlation_id: int
    replay_session_id: int


@_wire_message
class StopAllReplaysRequest:
    TEMPLATE_ID: ClassVar[int] = 19
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class ListRecordingsRequest:
    TEMPLATE_ID: ClassVar[int] = 8
    control_session_id: int
    correlation_id: int
    from_recording_id: int
    record_count: int


@_wire_message
class ListRecordingsForUriRequest:
    TEMPLATE_ID: ClassVar[int] = 9
    control_session_id: int
    correlation_id: int
    from_recording_id: int
    record_count: int
    stream_id: int
    channel: str


@_wire_message
class ListRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 10
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class ExtendRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 11
    control_session_id: int
    correlation_id: int
    recording_id: int
    stream_id: int
    source_location: SourceLocation | int
    channel: str


@_wire_message
class ExtendRecordingRequest2:
    TEMPLATE_ID: ClassVar[int] = 64
    control_session_id: int
    correlation_id: int
    recording_id: int
    stream_id: int
    source_location: SourceLocation | int
    auto_stop: BooleanType | int
    channel: str


@_wire_message
class RecordingPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 12
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class StopPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 15
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class StartPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 52
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class MaxRecordedPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 67
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class TruncateRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 13
    control_session_id: int
    correlation_id: int
    recording_id: int
    position: int


@_wire_message
class PurgeRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 104
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class ListRecordingSubscriptionsRequest:
    TEMPLATE_ID: ClassVar[int] = 17
    control_session_id: int
    correlation_id: int
    pseudo_index: int
    subscription_count: int
    apply_stream_id: BooleanType | int
    stream_id: int
    channel: str


@_wire_message
class FindLastMatchingRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 16
    control_session_id: int
    correlation_id: int
    min_recording_id: int
    session_id: int
    stream_id: int
    channel: str


@_wire_message
class DetachSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 53
    control_session_id: int
    correlation_id: int
    recording_id: int
    new_start_position: int


@_wire_message
class DeleteDetachedSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 54
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class PurgeSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 55
    control_session_id: int
    correlation_id: int
    recording_id: int
    new_start_position: int


@_wire_message
class AttachSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 56
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class MigrateSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 57
    control_session_id: int
    correlation_id: int
    src_recording_id: int
    dst_recording_id: int


@_wire_message
class ReplicateRequest:
    TEMPLATE_ID: ClassVar[int] = 50
    control_session_id: int
    correlation_id: int
    src_recording_id: int
    dst_recording_id: int
    src_control_stream_id: int
    src_control_channel: str
    live_destination: str


@_wire_message
class TaggedReplicateRequest:
    TEMPLATE_ID: ClassVar[int] = 62
    control_session_id: int
    correlation_id: int
    src_recording_id: int
    dst_recording_id: int
    channel_tag_id: int
    subscription_tag_id: int
    src_control_stream_id: int
    src_control_channel: str
    live_destination: str


@_wire_message
class ReplicateRequest2:
    TEMPLATE_ID: ClassVar[int] = 66
    control_session_id: int
    correlation_id: int
    src_recording_id: int
    dst_recording_id: int
    stop_position: int
    channel_tag_id: int
    subscription_tag_id: int
    src_control_stream_id: int
    file_io_max_length: int  # v7+
    replication_session_id: int  # v8+
    src_control_channel: str
    live_destination: str
    replication_channel: str
    encoded_credentials: bytes  # v8+
    src_response_channel: str  # v10+


@_wire_message
class StopReplicationRequest:
    TEMPLATE_ID: ClassVar[int] = 51
    control_session_id: int
    correlation_id: int
    replication_id: int


@_wire_message
class ArchiveIdRequest:
    TEMPLATE_ID: ClassVar[int] = 68
    control_session_id: int
    correlation_id: int


@_wire_message
class ReplayTokenRequest:
    TEMPLATE_ID: ClassVar[int] = 105
    control_session_id: int
    correlation_id: int
    recording_id: int


@_wire_message
class UpdateChannelRequest:
    TEMPLATE_ID: ClassVar[int] = 107
    control_session_id: int
    correlation_id: int
    recording_id: int
    channel: str


# ---------------------------------------------------------------------------------------------
# Responses and events (archive -> client; 101-103 on the recording-events stream)
# ---------------------------------------------------------------------------------------------

@_wire_message
class ControlResponse:
    TEMPLATE_ID: ClassVar[int] = 1
    control_session_id: int
    correlation_id: int
    relevant_id: int  # result for OK, ArchiveErrorCode for ERROR
    code: ControlResponseCode | int
    version: int  # v4+; 0 from a 1.15.x archive
    error_message: str


@_wire_message
class Challenge:
    TEMPLATE_ID: ClassVar[int] = 59
    control_session_id: int
    correlation_id: int
    version: int  # the Java archive leaves it 0
    encoded_challenge: bytes


@_wire_message
class RecordingDescriptorMessage:
    """Template 22 (SBE ``RecordingDescriptor``): one ListRecordings* answer."""

    TEMPLATE_ID: ClassVar[int] = 22
    control_session_id: int
    correlation_id: int
    recording_id: int
    start_timestamp: int
    stop_timestamp: int
    start_position: int
    stop_position: int
    initial_term_id: int
    segment_file_length: int
    term_buffer_length: int
    mtu_length: int
    session_id: int
    stream_id: int
    stripped_channel: str
    original_channel: str
    source_identity: str

    def to_descriptor(self) -> RecordingDescriptor:
        """The shared descriptor dataclass, keeping this message's session and correlation ids."""
        return RecordingDescriptor(**{name: getattr(self, name) for name in _DESCRIPTOR_FIELDS})

    @classmethod
    def from_descriptor(
        cls,
        descriptor: RecordingDescriptor,
        *,
        control_session_id: int | None = None,
        correlation_id: int | None = None,
    ) -> "RecordingDescriptorMessage":
        """The wire message for ``descriptor``; the archive overwrites the session and
        correlation ids with the requester's, so pass them here (default: the descriptor's)."""
        values = {name: getattr(descriptor, name) for name in _DESCRIPTOR_FIELDS}
        if control_session_id is not None:
            values["control_session_id"] = control_session_id
        if correlation_id is not None:
            values["correlation_id"] = correlation_id
        return cls(**values)


@_wire_message
class RecordingSubscriptionDescriptor:
    TEMPLATE_ID: ClassVar[int] = 23
    control_session_id: int
    correlation_id: int
    subscription_id: int
    stream_id: int
    stripped_channel: str


@_wire_message
class RecordingSignalEvent:
    TEMPLATE_ID: ClassVar[int] = 24
    control_session_id: int
    correlation_id: int
    recording_id: int
    subscription_id: int
    position: int
    signal: RecordingSignal | int


@_wire_message
class Ping:
    TEMPLATE_ID: ClassVar[int] = 106
    control_session_id: int


@_wire_message
class RecordingStarted:
    TEMPLATE_ID: ClassVar[int] = 101
    recording_id: int
    start_position: int
    session_id: int
    stream_id: int
    channel: str
    source_identity: str


@_wire_message
class RecordingProgress:
    TEMPLATE_ID: ClassVar[int] = 102
    recording_id: int
    start_position: int
    position: int


@_wire_message
class RecordingStopped:
    TEMPLATE_ID: ClassVar[int] = 103
    recording_id: int
    start_position: int
    stop_position: int


if {field.name for field in fields(RecordingDescriptorMessage)} != set(_DESCRIPTOR_FIELDS):
    raise TypeError("RecordingDescriptorMessage and RecordingDescriptor fields disagree")
