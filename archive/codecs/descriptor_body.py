"""The recording descriptor body: the RecordingDescriptor message (template 22) without its header.

Aeron's catalog stores each recording's descriptor as these bytes, and ListRecordings answers
carry them after the 8-byte message header; both are encoded and decoded here by the one
schema-101 codec (`codec.encode_body` / `codec.decode_body` over the template-22 row of
`messages.MESSAGE_SPECS`). Layout (little-endian): an 80-byte root block (controlSessionId,
correlationId, recordingId, startTimestamp, stopTimestamp, startPosition, stopPosition: i64;
initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId, streamId: i32), then
strippedChannel, originalChannel and sourceIdentity, each a u32 length and ASCII bytes.

The field offsets let the catalog update a stored descriptor in place, and `stored_body_length`
+ `descriptor_message` let a listing send a stored body as it is (as Aeron's archive does),
with only the two id fields of the response written, instead of decoding and encoding it again.
"""

from __future__ import annotations

import struct

from aeron_spark.archive.codecs.codec import EncodedMessage, decode_body, encode_body
from aeron_spark.archive.codecs.constants import SCHEMA_ID, SCHEMA_VERSION
from aeron_spark.archive.codecs.header import HEADER, HEADER_LENGTH
from aeron_spark.archive.codecs.messages import SPEC_BY_TYPE, RecordingDescriptorMessage
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

_SPEC = SPEC_BY_TYPE[RecordingDescriptorMessage]

ROOT_BLOCK_LENGTH = _SPEC.block_length  # 80
VAR_LENGTH_PREFIX = 4
VAR_FIELD_COUNT = len(_SPEC.var_fields)  # 3
#: A body with three empty strings.
MIN_BODY_LENGTH = ROOT_BLOCK_LENGTH + VAR_FIELD_COUNT * VAR_LENGTH_PREFIX  # 92


def _offset(wire_name: str) -> int:
    fixed = _SPEC.field_named(wire_name)
    if fixed is None:
        raise TypeError(f"RecordingDescriptor has no field {wire_name}")
    return fixed.offset


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


_MESSAGE_HEADER = HEADER.pack(ROOT_BLOCK_LENGTH, _SPEC.template_id, SCHEMA_ID, SCHEMA_VERSION)
_RESPONSE_IDS = struct.Struct("<qq")  # controlSessionId, correlationId: the block's first 16 bytes
_RECORDING_ID = struct.Struct("<q")
_STREAM_ID = struct.Struct("<i")
_VAR_LENGTH = struct.Struct("<I")
RECORDING_ID_OFFSET = _offset("recordingId")  # i64
STREAM_ID_OFFSET = _offset("streamId")  # i32
assert (CONTROL_SESSION_ID_OFFSET, CORRELATION_ID_OFFSET) == (0, 8)


def stored_body_length(body, recording_id: int) -> int | None:
    """Whether ``body`` (bytes-like, exactly the stored descriptor) is a well-formed body of
    ``recording_id`` that `decode_descriptor_body` would read using all of it: its length then,
    else None. The checks `decode_descriptor_body` and the catalog make, without building
    anything: lengths that fit, ASCII strings, the recording id."""
    used = used_body_length(body, recording_id)
    return used if used == len(body) else None


def used_body_length(body, recording_id: int) -> int | None:
    """The bytes a well-formed body of ``recording_id`` at the start of ``body`` uses (bytes after
    it, e.g. a modern catalog frame's alignment padding, are ignored), or None when it is not one."""
    length = len(body)
    if length < MIN_BODY_LENGTH or _RECORDING_ID.unpack_from(body, RECORDING_ID_OFFSET)[0] != recording_id:
        return None
    cursor = ROOT_BLOCK_LENGTH
    for _ in range(VAR_FIELD_COUNT):
        if cursor + VAR_LENGTH_PREFIX > length:
            return None
        field_length = _VAR_LENGTH.unpack_from(body, cursor)[0]
        cursor += VAR_LENGTH_PREFIX
        if cursor + field_length > length or not bytes(body[cursor:cursor + field_length]).isascii():
            return None
        cursor += field_length
    return cursor


def channels(body) -> tuple[bytes, bytes]:
    """(strippedChannel, originalChannel) of a body `stored_body_length` accepted, as ASCII bytes."""
    stripped_length = _VAR_LENGTH.unpack_from(body, ROOT_BLOCK_LENGTH)[0]
    original_at = ROOT_BLOCK_LENGTH + VAR_LENGTH_PREFIX + stripped_length
    original_length = _VAR_LENGTH.unpack_from(body, original_at)[0]
    stripped = bytes(body[ROOT_BLOCK_LENGTH + VAR_LENGTH_PREFIX:original_at])
    original = bytes(body[original_at + VAR_LENGTH_PREFIX:original_at + VAR_LENGTH_PREFIX + original_length])
    return stripped, original


def stream_id(body) -> int:
    return _STREAM_ID.unpack_from(body, STREAM_ID_OFFSET)[0]


def descriptor_message(body, control_session_id: int, correlation_id: int) -> EncodedMessage:
    """The RecordingDescriptor response for a stored ``body``: the header, then the body with
    this response's control session and correlation ids; the same bytes as encoding the decoded
    descriptor with those ids."""
    message = bytearray(_MESSAGE_HEADER)
    message += body
    _RESPONSE_IDS.pack_into(message, HEADER_LENGTH, control_session_id, correlation_id)
    return EncodedMessage(bytes(message))
