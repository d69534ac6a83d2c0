"""The recording descriptor body: the RecordingDescriptor message (template 22) without its header.

Aeron's catalog stores each recording's descriptor as these bytes, and ListRecordings answers
carry them after the 8-byte message header; both are encoded and decoded here by the one
schema-101 codec (`codec.encode_body` / `codec.decode_body` over the template-22 row of
`messages.MESSAGE_SPECS`). Layout (little-endian): an 80-byte root block (controlSessionId,
correlationId, recordingId, startTimestamp, stopTimestamp, startPosition, stopPosition: i64;
initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId, streamId: i32), then
strippedChannel, originalChannel and sourceIdentity, each a u32 length and ASCII bytes.

The field offsets let the catalog update a stored descriptor in place.
"""

from __future__ import annotations

from aeron_spark.archive.codecs.codec import decode_body, encode_body
from aeron_spark.archive.codecs.messages import SPEC_BY_TYPE, RecordingDescriptorMessage
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

_SPEC = SPEC_BY_TYPE[RecordingDescriptorMessage]

ROOT_BLOCK_LENGTH = _SPEC.block_length  # 80
VAR_LENGTH_PREFIX = 4
VAR_FIELD_COUNT = len(_SPEC.var_fields)  # 3
#: A body with three empty strings.
MIN_BODY_LENGTH = ROOT_BLOCK_LENGTH + VAR_FIELD_COUNT * VAR_LENGTH_PREFIX  # 92


def _offset(wire_name: str) -> int:
    return _SPEC.field_named(wire_name).offset


CONTROL_SESSION_ID_OFFSET = _offset("controlSessionId")  # i64
CORRELATION_ID_OFFSET = _offset("correlationId")  # i64
STOP_TIMESTAMP_OFFSET = _offset("stopTimestamp")  # i64
START_POSITION_OFFSET = _offset("startPosition")  # i64
STOP_POSITION_OFFSET = _offset("stopPosition")  # i64
SESSION_ID_OFFSET = _offset("sessionId")  # i32


def encode_descriptor_body(descriptor: RecordingDescriptor) -> bytes:
    """The body for ``descriptor`` (its own control session and correlation ids). Raises
    `EncodeError` for a string that is not ASCII or a number outside its field's range."""
    return encode_body(RecordingDescriptorMessage.from_descriptor(descriptor))


def decode_descriptor_body(buffer, offset: int = 0,
                           length: int | None = None) -> tuple[RecordingDescriptor, int]:
    """The descriptor in ``buffer[offset:offset + length]`` (default: to the end) and the bytes
    its body used; bytes after it are ignored. Raises `CodecError` for malformed bytes."""
    message, used = decode_body(RecordingDescriptorMessage, buffer, offset, length)
    return message.to_descriptor(), used
