"""Aeron Archive control protocol (SBE schema 101), sans-IO.

Typical use::

    from aeron_spark.archive import codecs

    message = codecs.decode(fragment_bytes)          # server: any request, any version
    reply = codecs.encode(codecs.ControlResponse(
        session_id, message.correlation_id, 0, codecs.ControlResponseCode.OK,
        codecs.PROTOCOL_SEMANTIC_VERSION, ""))        # modern layout (schema v13)
    legacy = codecs.encode(request, version=0)       # client of a real 1.15.1 archive

See docs/protocol.md for the templates, versions and legacy rules.
"""

from aeron_spark.archive.codecs.codec import (
    MAX_VAR_FIELD_LENGTH,
    EncodedMessage,
    block_length_for,
    decode,
    decode_body,
    decode_header,
    encode,
    encode_body,
    encode_into,
    encoded_length,
)
from aeron_spark.archive.codecs.constants import *  # noqa: F403 - the enums and constants
from aeron_spark.archive.codecs.constants import __all__ as _constants_all
from aeron_spark.archive.codecs.errors import (
    CodecError,
    EncodeError,
    SchemaIdMismatchError,
    UnknownTemplateError,
)
from aeron_spark.archive.codecs.header import HEADER_LENGTH, MessageHeader
from aeron_spark.archive.codecs.messages import (  # the message dataclasses
    ConnectRequest, AuthConnectRequest, ChallengeResponse, CloseSessionRequest,
    KeepAliveRequest, StartRecordingRequest, StartRecordingRequest2, StopRecordingRequest,
    StopRecordingSubscriptionRequest, StopRecordingByIdentityRequest, ReplayRequest,
    BoundedReplayRequest, StopReplayRequest, StopAllReplaysRequest, ListRecordingsRequest,
    ListRecordingsForUriRequest, ListRecordingRequest, ExtendRecordingRequest,
    ExtendRecordingRequest2, RecordingPositionRequest, StopPositionRequest,
    StartPositionRequest, MaxRecordedPositionRequest, TruncateRecordingRequest,
    PurgeRecordingRequest, ListRecordingSubscriptionsRequest, FindLastMatchingRecordingRequest,
    DetachSegmentsRequest, DeleteDetachedSegmentsRequest, PurgeSegmentsRequest,
    AttachSegmentsRequest, MigrateSegmentsRequest, ReplicateRequest, TaggedReplicateRequest,
    ReplicateRequest2, StopReplicationRequest, ArchiveIdRequest, ReplayTokenRequest,
    UpdateChannelRequest, ControlResponse, Challenge, RecordingDescriptorMessage,
    RecordingSubscriptionDescriptor, RecordingSignalEvent, Ping, RecordingStarted,
    RecordingProgress, RecordingStopped,
)
from aeron_spark.archive.codecs.messages import (
    MESSAGE_SPECS,
    RECORDING_EVENT_TEMPLATE_IDS,
    REQUEST_TEMPLATE_IDS,
    RESPONSE_TEMPLATE_IDS,
    SPEC_BY_TYPE,
    ControlMessage,
)

MESSAGE_TYPES: dict[int, type] = {
    template_id: spec.message_type for template_id, spec in MESSAGE_SPECS.items()}

__all__ = [
    *_constants_all,
    "decode", "decode_header", "encode", "encode_into", "encoded_length", "block_length_for",
    "encode_body", "decode_body", "EncodedMessage",
    "MAX_VAR_FIELD_LENGTH", "HEADER_LENGTH", "MessageHeader",
    "CodecError", "UnknownTemplateError", "SchemaIdMismatchError", "EncodeError",
    "MESSAGE_SPECS", "SPEC_BY_TYPE", "MESSAGE_TYPES", "ControlMessage",
    "REQUEST_TEMPLATE_IDS", "RESPONSE_TEMPLATE_IDS", "RECORDING_EVENT_TEMPLATE_IDS",
    *(spec.message_type.__name__ for spec in MESSAGE_SPECS.values()),
]
