"""The request dataclasses of schema 101 (client -> archive), one frozen dataclass per template.

Field names are the SBE names snake_cased, in wire order (fixed fields, then var-length fields);
their byte layout is the table in `messages`. Enum-typed fields hold the enum member when the
value is known, else a plain int.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from aeron_spark.archive.codecs.constants import BooleanType, SourceLocation


@dataclass(frozen=True, slots=True)
class ConnectRequest:
    TEMPLATE_ID: ClassVar[int] = 2
    correlation_id: int
    response_stream_id: int
    version: int  # protocol semantic version; 0 (null) from 1.15.x clients
    response_channel: str


@dataclass(frozen=True, slots=True)
class AuthConnectRequest:
    TEMPLATE_ID: ClassVar[int] = 58
    correlation_id: int
    response_stream_id: int
    version: int
    response_channel: str
    encoded_credentials: bytes
    client_info: str  # schema v12+


@dataclass(frozen=True, slots=True)
class ChallengeResponse:
    TEMPLATE_ID: ClassVar[int] = 60
    control_session_id: int
    correlation_id: int
    encoded_credentials: bytes


@dataclass(frozen=True, slots=True)
class CloseSessionRequest:
    TEMPLATE_ID: ClassVar[int] = 3
    control_session_id: int


@dataclass(frozen=True, slots=True)
class KeepAliveRequest:
    TEMPLATE_ID: ClassVar[int] = 61
    control_session_id: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class StartRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 4
    control_session_id: int
    correlation_id: int
    stream_id: int
    source_location: SourceLocation | int
    channel: str


@dataclass(frozen=True, slots=True)
class StartRecordingRequest2:
    TEMPLATE_ID: ClassVar[int] = 63
    control_session_id: int
    correlation_id: int
    stream_id: int
    source_location: SourceLocation | int
    auto_stop: BooleanType | int
    channel: str


@dataclass(frozen=True, slots=True)
class StopRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 5
    control_session_id: int
    correlation_id: int
    stream_id: int
    channel: str


@dataclass(frozen=True, slots=True)
class StopRecordingSubscriptionRequest:
    TEMPLATE_ID: ClassVar[int] = 14
    control_session_id: int
    correlation_id: int
    subscription_id: int


@dataclass(frozen=True, slots=True)
class StopRecordingByIdentityRequest:
    TEMPLATE_ID: ClassVar[int] = 65
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class StopReplayRequest:
    TEMPLATE_ID: ClassVar[int] = 7
    control_session_id: int
    correlation_id: int
    replay_session_id: int


@dataclass(frozen=True, slots=True)
class StopAllReplaysRequest:
    TEMPLATE_ID: ClassVar[int] = 19
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class ListRecordingsRequest:
    TEMPLATE_ID: ClassVar[int] = 8
    control_session_id: int
    correlation_id: int
    from_recording_id: int
    record_count: int


@dataclass(frozen=True, slots=True)
class ListRecordingsForUriRequest:
    TEMPLATE_ID: ClassVar[int] = 9
    control_session_id: int
    correlation_id: int
    from_recording_id: int
    record_count: int
    stream_id: int
    channel: str


@dataclass(frozen=True, slots=True)
class ListRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 10
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class ExtendRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 11
    control_session_id: int
    correlation_id: int
    recording_id: int
    stream_id: int
    source_location: SourceLocation | int
    channel: str


@dataclass(frozen=True, slots=True)
class ExtendRecordingRequest2:
    TEMPLATE_ID: ClassVar[int] = 64
    control_session_id: int
    correlation_id: int
    recording_id: int
    stream_id: int
    source_location: SourceLocation | int
    auto_stop: BooleanType | int
    channel: str


@dataclass(frozen=True, slots=True)
class RecordingPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 12
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class StopPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 15
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class StartPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 52
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class MaxRecordedPositionRequest:
    TEMPLATE_ID: ClassVar[int] = 67
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class TruncateRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 13
    control_session_id: int
    correlation_id: int
    recording_id: int
    position: int


@dataclass(frozen=True, slots=True)
class PurgeRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 104
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class ListRecordingSubscriptionsRequest:
    TEMPLATE_ID: ClassVar[int] = 17
    control_session_id: int
    correlation_id: int
    pseudo_index: int
    subscription_count: int
    apply_stream_id: BooleanType | int
    stream_id: int
    channel: str


@dataclass(frozen=True, slots=True)
class FindLastMatchingRecordingRequest:
    TEMPLATE_ID: ClassVar[int] = 16
    control_session_id: int
    correlation_id: int
    min_recording_id: int
    session_id: int
    stream_id: int
    channel: str


@dataclass(frozen=True, slots=True)
class DetachSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 53
    control_session_id: int
    correlation_id: int
    recording_id: int
    new_start_position: int


@dataclass(frozen=True, slots=True)
class DeleteDetachedSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 54
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class PurgeSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 55
    control_session_id: int
    correlation_id: int
    recording_id: int
    new_start_position: int


@dataclass(frozen=True, slots=True)
class AttachSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 56
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class MigrateSegmentsRequest:
    TEMPLATE_ID: ClassVar[int] = 57
    control_session_id: int
    correlation_id: int
    src_recording_id: int
    dst_recording_id: int


@dataclass(frozen=True, slots=True)
class ReplicateRequest:
    TEMPLATE_ID: ClassVar[int] = 50
    control_session_id: int
    correlation_id: int
    src_recording_id: int
    dst_recording_id: int
    src_control_stream_id: int
    src_control_channel: str
    live_destination: str


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class StopReplicationRequest:
    TEMPLATE_ID: ClassVar[int] = 51
    control_session_id: int
    correlation_id: int
    replication_id: int


@dataclass(frozen=True, slots=True)
class ArchiveIdRequest:
    TEMPLATE_ID: ClassVar[int] = 68
    control_session_id: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class ReplayTokenRequest:
    TEMPLATE_ID: ClassVar[int] = 105
    control_session_id: int
    correlation_id: int
    recording_id: int


@dataclass(frozen=True, slots=True)
class UpdateChannelRequest:
    TEMPLATE_ID: ClassVar[int] = 107
    control_session_id: int
    correlation_id: int
    recording_id: int
    channel: str
