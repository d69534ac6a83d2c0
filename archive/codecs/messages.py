"""The schema-101 wire messages: the table that describes their bytes, and their dataclasses.

Field names are the SBE names snake_cased, in wire order (fixed fields, then var-length
fields). Enum-typed fields hold the enum member when the value is known, else a plain int.
Fields that a decoded message's version or block did not carry hold their null value
(NULL_VALUE -1, or 0 for ``version``); absent var fields hold "" / b"".

The template 22 wire message is :class:`RecordingDescriptorMessage` (SBE name
``RecordingDescriptor``), so that it does not shadow the shared
:class:`aeron_spark.archive.codecs.recording_descriptor.RecordingDescriptor` it converts to and from.

The dataclasses live in `wire_messages`; this module holds the schema table that describes their
bytes and re-exports them (``from aeron_spark.archive.codecs.messages
import X`` keeps working).
"""

from __future__ import annotations

from aeron_spark.archive.codecs.constants import (
    LAST_NARROW_ENUM_SCHEMA_VERSION as NARROW,
    BooleanType,
    ControlResponseCode,
    RecordingSignal,
    SourceLocation,
)
from aeron_spark.archive.codecs.schema import (
    MessageSpec,
    WireMessage,
    ascii_text,
    enum32,
    int32,
    int64,
    raw_bytes,
    version_t,
)
from aeron_spark.archive.codecs.wire_messages import (  # re-exported: the public import path
    ConnectRequest,
    AuthConnectRequest,
    ChallengeResponse,
    CloseSessionRequest,
    KeepAliveRequest,
    StartRecordingRequest,
    StartRecordingRequest2,
    StopRecordingRequest,
    StopRecordingSubscriptionRequest,
    StopRecordingByIdentityRequest,
    ReplayRequest,
    BoundedReplayRequest,
    StopReplayRequest,
    StopAllReplaysRequest,
    ListRecordingsRequest,
    ListRecordingsForUriRequest,
    ListRecordingRequest,
    ExtendRecordingRequest,
    ExtendRecordingRequest2,
    RecordingPositionRequest,
    StopPositionRequest,
    StartPositionRequest,
    MaxRecordedPositionRequest,
    TruncateRecordingRequest,
    PurgeRecordingRequest,
    ListRecordingSubscriptionsRequest,
    FindLastMatchingRecordingRequest,
    DetachSegmentsRequest,
    DeleteDetachedSegmentsRequest,
    PurgeSegmentsRequest,
    AttachSegmentsRequest,
    MigrateSegmentsRequest,
    ReplicateRequest,
    TaggedReplicateRequest,
    ReplicateRequest2,
    StopReplicationRequest,
    ArchiveIdRequest,
    ReplayTokenRequest,
    UpdateChannelRequest,
)
from aeron_spark.archive.codecs.wire_messages import (  # re-exported: the public import path
    ControlResponse,
    Challenge,
    RecordingDescriptorMessage,
    RecordingSubscriptionDescriptor,
    RecordingSignalEvent,
    Ping,
    RecordingStarted,
    RecordingProgress,
    RecordingStopped,
)


ControlMessage = (
    ConnectRequest | AuthConnectRequest | ChallengeResponse | CloseSessionRequest
    | KeepAliveRequest | StartRecordingRequest | StartRecordingRequest2 | StopRecordingRequest
    | StopRecordingSubscriptionRequest | StopRecordingByIdentityRequest | ReplayRequest
    | BoundedReplayRequest | StopReplayRequest | StopAllReplaysRequest | ListRecordingsRequest
    | ListRecordingsForUriRequest | ListRecordingRequest | ExtendRecordingRequest
    | ExtendRecordingRequest2 | RecordingPositionRequest | StopPositionRequest
    | StartPositionRequest | MaxRecordedPositionRequest | TruncateRecordingRequest
    | PurgeRecordingRequest | ListRecordingSubscriptionsRequest
    | FindLastMatchingRecordingRequest | DetachSegmentsRequest | DeleteDetachedSegmentsRequest
    | PurgeSegmentsRequest | AttachSegmentsRequest | MigrateSegmentsRequest | ReplicateRequest
    | TaggedReplicateRequest | ReplicateRequest2 | StopReplicationRequest | ArchiveIdRequest
    | ReplayTokenRequest | UpdateChannelRequest | ControlResponse | Challenge
    | RecordingDescriptorMessage | RecordingSubscriptionDescriptor | RecordingSignalEvent | Ping
    | RecordingStarted | RecordingProgress | RecordingStopped
)


# ---------------------------------------------------------------------------------------------
# The schema table: offsets inside the root block (after the 8-byte header), sinceVersion of
# fields, and the first schema version of each message (1.15 = 0, 1.16-1.21 = 2, 1.22-1.23 = 3,
# 1.24-1.31 = 4, 1.32 = 5, 1.33 = 6, 1.44 = 9, 1.45 = 10, 1.48 = 11, 1.49 = 13).
# ---------------------------------------------------------------------------------------------

def _session_correlation_recording(message_type: type[WireMessage], since: int = 0) -> MessageSpec:
    """The many requests whose block is exactly controlSessionId, correlationId, recordingId."""
    return MessageSpec(
        message_type.TEMPLATE_ID, message_type,
        (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16)),
        (), since)


def _session_correlation_recording_position(
    message_type: type[WireMessage], position_name: str, since: int
) -> MessageSpec:
    return MessageSpec(
        message_type.TEMPLATE_ID, message_type,
        (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16),
         int64(position_name, 24)),
        (), since)


_SPECS: tuple[MessageSpec, ...] = (
    # -- requests
    MessageSpec(2, ConnectRequest,
                (int64("correlationId", 0), int32("responseStreamId", 8),
                 version_t("version", 12, since=2)),
                (ascii_text("responseChannel"),),
                since_version=0, removed_in=14),
    MessageSpec(58, AuthConnectRequest,
                (int64("correlationId", 0), int32("responseStreamId", 8), version_t("version", 12)),
                (ascii_text("responseChannel"), raw_bytes("encodedCredentials"),
                 ascii_text("clientInfo", since=12)),
                since_version=4),
    MessageSpec(60, ChallengeResponse,
                (int64("controlSessionId", 0), int64("correlationId", 8)),
                (raw_bytes("encodedCredentials"),),
                since_version=4),
    MessageSpec(3, CloseSessionRequest, (int64("controlSessionId", 0),), ()),
    MessageSpec(61, KeepAliveRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8)), (), since_version=4),
    MessageSpec(4, StartRecordingRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8), int32("streamId", 16),
                 enum32("sourceLocation", 20, SourceLocation, narrow_until=NARROW)),
                (ascii_text("channel"),)),
    MessageSpec(63, StartRecordingRequest2,
                (int64("controlSessionId", 0), int64("correlationId", 8), int32("streamId", 16),
                 enum32("sourceLocation", 20, SourceLocation),
                 enum32("autoStop", 24, BooleanType)),
                (ascii_text("channel"),),
                since_version=4),
    MessageSpec(5, StopRecordingRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8), int32("streamId", 16)),
                (ascii_text("channel"),)),
    MessageSpec(14, StopRecordingSubscriptionRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("subscriptionId", 16)),
                ()),
    _session_correlation_recording(StopRecordingByIdentityRequest, since=4),
    MessageSpec(6, ReplayRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16),
                 int64("position", 24), int64("length", 32), int32("replayStreamId", 40),
                 int32("fileIoMaxLength", 44, since=7), int64("replayToken", 48, since=10)),
                (ascii_text("replayChannel"),)),
    MessageSpec(18, BoundedReplayRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16),
                 int64("position", 24), int64("length", 32), int32("limitCounterId", 40),
                 int32("replayStreamId", 44), int32("fileIoMaxLength", 48, since=7),
                 int64("replayToken", 52, since=10)),
                (ascii_text("replayChannel"),),
                since_version=2),
    MessageSpec(7, StopReplayRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("replaySessionId", 16)),
                ()),
    _session_correlation_recording(StopAllReplaysRequest, since=2),
    MessageSpec(8, ListRecordingsRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("fromRecordingId", 16), int32("recordCount", 24)),
                ()),
    MessageSpec(9, ListRecordingsForUriRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("fromRecordingId", 16), int32("recordCount", 24), int32("streamId", 28)),
                (ascii_text("channel"),)),
    _session_correlation_recording(ListRecordingRequest),
    MessageSpec(11, ExtendRecordingRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16),
                 int32("streamId", 24),
                 enum32("sourceLocation", 28, SourceLocation, narrow_until=NARROW)),
                (ascii_text("channel"),)),
    MessageSpec(64, ExtendRecordingRequest2,
                (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16),
                 int32("streamId", 24), enum32("sourceLocation", 28, SourceLocation),
                 enum32("autoStop", 32, BooleanType)),
                (ascii_text("channel"),),
                since_version=4),
    _session_correlation_recording(RecordingPositionRequest),
    _session_correlation_recording(StopPositionRequest),
    _session_correlation_recording(StartPositionRequest, since=3),
    _session_correlation_recording(MaxRecordedPositionRequest, since=9),
    _session_correlation_recording_position(TruncateRecordingRequest, "position", since=0),
    _session_correlation_recording(PurgeRecordingRequest, since=5),
    MessageSpec(17, ListRecordingSubscriptionsRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8), int32("pseudoIndex", 16),
                 int32("subscriptionCount", 20),
                 enum32("applyStreamId", 24, BooleanType, narrow_until=NARROW),
                 int32("streamId", 28)),
                (ascii_text("channel"),),
                since_version=2),
    MessageSpec(16, FindLastMatchingRecordingRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("minRecordingId", 16), int32("sessionId", 24), int32("streamId", 28)),
                (ascii_text("channel"),)),
    _session_correlation_recording_position(DetachSegmentsRequest, "newStartPosition", since=3),
    _session_correlation_recording(DeleteDetachedSegmentsRequest, since=3),
    _session_correlation_recording_position(PurgeSegmentsRequest, "newStartPosition", since=3),
    _session_correlation_recording(AttachSegmentsRequest, since=3),
    MessageSpec(57, MigrateSegmentsRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("srcRecordingId", 16), int64("dstRecordingId", 24)),
                (),
                since_version=3),
    MessageSpec(50, ReplicateRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("srcRecordingId", 16), int64("dstRecordingId", 24),
                 int32("srcControlStreamId", 32)),
                (ascii_text("srcControlChannel"), ascii_text("liveDestination")),
                since_version=3),
    MessageSpec(62, TaggedReplicateRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("srcRecordingId", 16), int64("dstRecordingId", 24),
                 int64("channelTagId", 32), int64("subscriptionTagId", 40),
                 int32("srcControlStreamId", 48)),
                (ascii_text("srcControlChannel"), ascii_text("liveDestination")),
                since_version=4),
    MessageSpec(66, ReplicateRequest2,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("srcRecordingId", 16), int64("dstRecordingId", 24),
                 int64("stopPosition", 32), int64("channelTagId", 40),
                 int64("subscriptionTagId", 48), int32("srcControlStreamId", 56),
                 int32("fileIoMaxLength", 60, since=7), int32("replicationSessionId", 64, since=8)),
                (ascii_text("srcControlChannel"), ascii_text("liveDestination"),
                 ascii_text("replicationChannel"), raw_bytes("encodedCredentials", since=8),
                 ascii_text("srcResponseChannel", since=10)),
                since_version=6),
    MessageSpec(51, StopReplicationRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("replicationId", 16)),
                (),
                since_version=3),
    MessageSpec(68, ArchiveIdRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8)), (), since_version=9),
    _session_correlation_recording(ReplayTokenRequest, since=10),
    MessageSpec(107, UpdateChannelRequest,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("recordingId", 16)),
                (ascii_text("channel"),),
                since_version=13),
    # -- responses and events
    MessageSpec(1, ControlResponse,
                (int64("controlSessionId", 0), int64("correlationId", 8), int64("relevantId", 16),
                 enum32("code", 24, ControlResponseCode), version_t("version", 28, since=4)),
                (ascii_text("errorMessage"),)),
    MessageSpec(59, Challenge,
                (int64("controlSessionId", 0), int64("correlationId", 8), version_t("version", 16)),
                (raw_bytes("encodedChallenge"),),
                since_version=4),
    MessageSpec(22, RecordingDescriptorMessage,
                (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16),
                 int64("startTimestamp", 24), int64("stopTimestamp", 32),
                 int64("startPosition", 40), int64("stopPosition", 48),
                 int32("initialTermId", 56), int32("segmentFileLength", 60),
                 int32("termBufferLength", 64), int32("mtuLength", 68), int32("sessionId", 72),
                 int32("streamId", 76)),
                (ascii_text("strippedChannel"), ascii_text("originalChannel"),
                 ascii_text("sourceIdentity"))),
    MessageSpec(23, RecordingSubscriptionDescriptor,
                (int64("controlSessionId", 0), int64("correlationId", 8),
                 int64("subscriptionId", 16), int32("streamId", 24)),
                (ascii_text("strippedChannel"),),
                since_version=2),
    MessageSpec(24, RecordingSignalEvent,
                (int64("controlSessionId", 0), int64("correlationId", 8), int64("recordingId", 16),
                 int64("subscriptionId", 24), int64("position", 32),
                 enum32("signal", 40, RecordingSignal)),
                (),
                since_version=3),
    MessageSpec(106, Ping, (int64("controlSessionId", 0),), (), since_version=11),
    MessageSpec(101, RecordingStarted,
                (int64("recordingId", 0), int64("startPosition", 8), int32("sessionId", 16),
                 int32("streamId", 20)),
                (ascii_text("channel"), ascii_text("sourceIdentity"))),
    MessageSpec(102, RecordingProgress,
                (int64("recordingId", 0), int64("startPosition", 8), int64("position", 16)), ()),
    MessageSpec(103, RecordingStopped,
                (int64("recordingId", 0), int64("startPosition", 8), int64("stopPosition", 16)),
                ()),
)

#: Every wire template by id.
MESSAGE_SPECS: dict[int, MessageSpec] = {spec.template_id: spec for spec in _SPECS}
#: Message dataclass -> its spec.
SPEC_BY_TYPE: dict[type, MessageSpec] = {spec.message_type: spec for spec in _SPECS}

REQUEST_TEMPLATE_IDS: tuple[int, ...] = (
    2, 58, 60, 3, 61, 4, 63, 5, 14, 65, 6, 18, 7, 19, 8, 9, 10, 11, 64, 12, 15, 52, 67, 13, 104,
    17, 16, 53, 54, 55, 56, 57, 50, 62, 66, 51, 68, 105, 107,
)
RESPONSE_TEMPLATE_IDS: tuple[int, ...] = (1, 59, 22, 23, 24, 106)
RECORDING_EVENT_TEMPLATE_IDS: tuple[int, ...] = (101, 102, 103)


def _check_table() -> None:
    """Catch table typos at import: duplicate ids, ids that disagree with the class, gaps."""
    if len(MESSAGE_SPECS) != len(_SPECS):
        raise TypeError("duplicate template id in the schema-101 table")
    for spec in _SPECS:
        if spec.template_id != spec.message_type.TEMPLATE_ID:
            raise TypeError(f"{spec.name}: table id {spec.template_id} != class TEMPLATE_ID")
    listed = REQUEST_TEMPLATE_IDS + RESPONSE_TEMPLATE_IDS + RECORDING_EVENT_TEMPLATE_IDS
    if sorted(listed) != sorted(MESSAGE_SPECS):
        raise TypeError("request/response/event id lists disagree with the schema table")


_check_table()
