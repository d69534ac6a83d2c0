"""Encode and decode schema-101 control messages (sans-IO: bytes in, bytes out).

``decode`` honours the received header (blockLength and version) exactly as the Java archive
does, so 1.15.x and modern senders are both understood. ``encode`` writes the layout of one
schema version: by default :data:`SCHEMA_VERSION` (13), or e.g. ``version=0`` to speak to a real
Aeron Archive 1.15.1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from aeron_spark.archive.codecs.constants import (
    MAX_KNOWN_SCHEMA_VERSION,
    SCHEMA_ID,
    SCHEMA_VERSION,
)
from aeron_spark.archive.codecs.errors import (
    CodecError,
    EncodeError,
    SchemaIdMismatchError,
    UnknownTemplateError,
)
from aeron_spark.archive.codecs.header import HEADER, HEADER_LENGTH, MessageHeader
from aeron_spark.archive.codecs.messages import MESSAGE_SPECS, SPEC_BY_TYPE, ControlMessage
from aeron_spark.archive.codecs.schema import (
    BlockLayout,
    MessageSpec,
    WireMessage,
    compile_layout,
    encoding_block_length,
)

_VAR_LENGTH = struct.Struct("<I")
_VAR_LENGTH_SIZE = _VAR_LENGTH.size
#: varAsciiEncoding / varDataEncoding maxValue in the schema.
MAX_VAR_FIELD_LENGTH = 1 << 30
_COMMON_PREFIX = struct.Struct("<qq")  # controlSessionId, correlationId of most requests

# Layouts met while decoding, by (template, blockLength, version). Real peers produce a handful
# of combinations; the cap keeps hostile input from growing the cache without bound.
_DECODE_LAYOUTS: dict[tuple[int, int, int], BlockLayout] = {}
_DECODE_LAYOUT_CACHE_LIMIT = 1024
_ENCODE_LAYOUTS: dict[tuple[int, int], BlockLayout] = {}
_BODY_BLOCK_LENGTHS: dict[tuple[int, int], int] = {}  # (template, version) -> block length


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

def decode(buffer, offset: int = 0, length: int | None = None) -> ControlMessage:
    """Decode the one message in ``buffer[offset:offset + length]`` (default: to the end).

    ``buffer`` is any bytes-like object (bytes, bytearray, memoryview, a cffi buffer). Raises
    :class:`CodecError` (:class:`UnknownTemplateError` for an unknown template id,
    :class:`SchemaIdMismatchError` for a schema id other than 101) and nothing else.
    """
    length = _checked_length(buffer, offset, length)
    block_length, template_id, schema_id, version = HEADER.unpack_from(buffer, offset)
    if schema_id != SCHEMA_ID:
        raise SchemaIdMismatchError(
            f"expected schemaId={SCHEMA_ID}, actual={schema_id}",
            template_id=template_id, schema_id=schema_id, block_length=block_length,
            version=version)

    spec = MESSAGE_SPECS.get(template_id)
    if spec is None:
        raise _unknown_template(buffer, offset, length, block_length, template_id, version)

    if HEADER_LENGTH + block_length > length:
        raise _malformed(
            spec, buffer, offset, length, block_length, version,
            f"{spec.name} needs {HEADER_LENGTH + block_length} bytes for its header and "
            f"block, the message has {length}")

    message, _ = _decode_fields(spec, buffer, offset, length, block_length, version, HEADER_LENGTH)
    return message


def decode_body[M: WireMessage](message_type: type[M], buffer, offset: int = 0, length: int | None = None, *,
                                version: int = SCHEMA_VERSION) -> tuple[M, int]:
    """Decode a message body written by :func:`encode_body` (root block and var fields, no
    header) from ``buffer[offset:offset + length]``; return the message and the bytes it used.

    The block length is the one a schema-``version`` sender writes; bytes after the body are
    ignored. Raises :class:`CodecError` and nothing else.
    """
    spec = SPEC_BY_TYPE.get(message_type)
    if spec is None:
        raise CodecError(f"{message_type.__name__} is not a schema-{SCHEMA_ID} message")
    length = _bounded_length(buffer, offset, length)
    block_length = _BODY_BLOCK_LENGTHS.get((spec.template_id, version))
    if block_length is None:
        block_length = _BODY_BLOCK_LENGTHS[spec.template_id, version] = encoding_block_length(spec, version)
    if block_length > length:
        raise _malformed(
            spec, buffer, offset, length, block_length, version,
            f"{spec.name} needs {block_length} bytes for its block, the body has {length}",
            header_length=0)
    message, end = _decode_fields(spec, buffer, offset, length, block_length, version, 0)
    if not isinstance(message, message_type):  # the spec of message_type builds message_type
        raise CodecError(f"{spec.name} decoded as {type(message).__name__}")
    return message, end - offset


def _decode_fields(spec: MessageSpec, buffer, offset: int, length: int, block_length: int,
                   version: int, header_length: int) -> tuple[ControlMessage, int]:
    """The message whose root block starts at ``offset + header_length``; with the offset just
    after its last var field."""
    layout = _decode_layout(spec, block_length, version)
    values = layout.block.unpack_from(buffer, offset + header_length)
    if layout.all_present:  # every fixed field, in declaration order (most messages)
        args = [*values, *layout.defaults[len(values):]]
    else:
        args = list(layout.defaults)
        for position, value in zip(layout.present_positions, values):
            args[position] = value
    for index, enum in layout.enum_slots:
        position = layout.present_positions[index]
        args[position] = enum._value2member_map_.get(args[position], args[position])

    cursor = offset + header_length + block_length
    if layout.var_fields:
        end = offset + length
        position = len(spec.fields)
        for var_field in spec.var_fields:
            if var_field.since_version > version:
                position += 1
                continue
            if cursor + _VAR_LENGTH_SIZE > end:
                raise _malformed(
                    spec, buffer, offset, length, block_length, version,
                    f"{spec.name}.{var_field.wire_name} length prefix at byte {cursor - offset} "
                    f"runs past the end of the {length}-byte message", header_length=header_length)
            (field_length,) = _VAR_LENGTH.unpack_from(buffer, cursor)
            cursor += _VAR_LENGTH_SIZE
            if field_length > MAX_VAR_FIELD_LENGTH or cursor + field_length > end:
                raise _malformed(
                    spec, buffer, offset, length, block_length, version,
                    f"{spec.name}.{var_field.wire_name} of {field_length} bytes at byte "
                    f"{cursor - offset} runs past the end of the {length}-byte message",
                    header_length=header_length)
            raw = bytes(buffer[cursor:cursor + field_length])
            cursor += field_length
            if var_field.is_text:
                try:
                    args[position] = raw.decode("ascii")
                except UnicodeDecodeError as error:
                    raise _malformed(
                        spec, buffer, offset, length, block_length, version,
                        f"{spec.name}.{var_field.wire_name} is not US-ASCII (byte "
                        f"0x{raw[error.start]:02x} at index {error.start})",
                        header_length=header_length) from None
            else:
                args[position] = raw
            position += 1
    return spec.message_type(*args), cursor


def decode_header(buffer, offset: int = 0, length: int | None = None) -> MessageHeader:
    """The header only, checked for length but not for schema id or template."""
    _checked_length(buffer, offset, length)
    return MessageHeader._make(HEADER.unpack_from(buffer, offset))


def _checked_length(buffer, offset: int, length: int | None) -> int:
    length = _bounded_length(buffer, offset, length)
    if length < HEADER_LENGTH:
        raise CodecError(
            f"message of {length} bytes is shorter than the {HEADER_LENGTH}-byte SBE header")
    return length


def _bounded_length(buffer, offset: int, length: int | None) -> int:
    available = len(buffer) - offset
    if length is None:
        length = available
    if offset < 0 or length < 0 or length > available:
        raise CodecError(
            f"offset {offset} and length {length} do not lie inside the {len(buffer)}-byte "
            f"buffer")
    return length


def _decode_layout(spec: MessageSpec, block_length: int, version: int) -> BlockLayout:
    key = (spec.template_id, block_length, version)
    layout = _DECODE_LAYOUTS.get(key)
    if layout is None:
        layout = compile_layout(spec, block_length, version, pad_to_block=False)
        if len(_DECODE_LAYOUTS) < _DECODE_LAYOUT_CACHE_LIMIT:
            _DECODE_LAYOUTS[key] = layout
    return layout


def _readable_ids(
    spec: MessageSpec, buffer, offset: int, length: int, block_length: int,
    header_length: int = HEADER_LENGTH,
) -> dict[str, int]:
    """controlSessionId / correlationId if they lie inside the bytes that did arrive."""
    readable_end = min(block_length, length - header_length)
    ids: dict[str, int] = {}
    for wire_name, attr in (("controlSessionId", "control_session_id"),
                            ("correlationId", "correlation_id")):
        fixed = spec.field_named(wire_name)
        if fixed is not None and fixed.offset + fixed.type.size <= readable_end:
            (ids[attr],) = struct.unpack_from("<q", buffer, offset + header_length + fixed.offset)
    return ids


def _malformed(
    spec: MessageSpec, buffer, offset: int, length: int, block_length: int, version: int,
    reason: str, *, header_length: int = HEADER_LENGTH,
) -> CodecError:
    return CodecError(
        reason, template_id=spec.template_id, schema_id=SCHEMA_ID, block_length=block_length,
        version=version, **_readable_ids(spec, buffer, offset, length, block_length, header_length))


def _unknown_template(
    buffer, offset: int, length: int, block_length: int, template_id: int, version: int
) -> UnknownTemplateError:
    ids: dict[str, int] = {}
    if min(block_length, length - HEADER_LENGTH) >= _COMMON_PREFIX.size:
        ids["control_session_id"], ids["correlation_id"] = _COMMON_PREFIX.unpack_from(
            buffer, offset + HEADER_LENGTH)
    return UnknownTemplateError(
        f"unknown templateId={template_id} for schema {SCHEMA_ID}",
        template_id=template_id, schema_id=SCHEMA_ID, block_length=block_length,
        version=version, **ids)


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class EncodedMessage:
    """A message already encoded, header included, in the layout of SCHEMA_VERSION (e.g. a
    RecordingDescriptor made from the catalog's stored bytes): `encode` hands its bytes on."""

    data: bytes


def encode(message: ControlMessage | EncodedMessage, *, version: int = SCHEMA_VERSION) -> bytes:
    """The message's bytes (header included) in the layout of schema ``version``."""
    if isinstance(message, EncodedMessage):
        if version != SCHEMA_VERSION:
            raise EncodeError(f"an already encoded message is in the schema version {SCHEMA_VERSION} "
                              f"layout, not {version}")
        return message.data
    buffer = bytearray(encoded_length(message, version=version))
    encode_into(buffer, 0, message, version=version)
    return bytes(buffer)


def encoded_length(message: ControlMessage, *, version: int = SCHEMA_VERSION) -> int:
    """How many bytes ``encode`` / ``encode_into`` write for ``message`` at ``version``."""
    spec, layout = _encode_layout(message, version)
    total = HEADER_LENGTH + layout.block_length
    for var_field in layout.var_fields:
        total += _VAR_LENGTH_SIZE + len(getattr(message, var_field.attr))
    return total


def encode_into(
    buffer, offset: int, message: ControlMessage, *, version: int = SCHEMA_VERSION
) -> int:
    """Write ``message`` into a writable ``buffer`` at ``offset``; return the bytes written.

    The buffer must have ``encoded_length(message, version=...)`` bytes free at ``offset``.
    Raises :class:`EncodeError` if the message cannot be represented at ``version``.
    """
    spec, layout = _encode_layout(message, version)
    _check_absent_fields_unset(spec, layout, message)
    HEADER.pack_into(buffer, offset, layout.block_length, spec.template_id, SCHEMA_ID, version)
    return HEADER_LENGTH + _encode_fields(buffer, offset + HEADER_LENGTH, spec, layout, message)


def encode_body(message: ControlMessage, *, version: int = SCHEMA_VERSION) -> bytes:
    """The message's root block and var fields without the 8-byte header: the bytes Aeron's
    catalog stores for a RecordingDescriptor. :func:`decode_body` reads them back."""
    spec, layout = _encode_layout(message, version)
    _check_absent_fields_unset(spec, layout, message)
    buffer = bytearray(encoded_length(message, version=version) - HEADER_LENGTH)
    _encode_fields(buffer, 0, spec, layout, message)
    return bytes(buffer)


def _encode_fields(buffer, offset: int, spec: MessageSpec, layout: BlockLayout, message) -> int:
    """Root block and var fields at ``offset``; returns the bytes written."""
    values = [getattr(message, fixed.attr) for fixed in layout.present]
    try:
        layout.block.pack_into(buffer, offset, *values)
    except struct.error:
        raise _field_range_error(spec, layout, message) from None

    cursor = offset + layout.block_length
    for var_field in layout.var_fields:
        value = getattr(message, var_field.attr)
        if var_field.is_text:
            if not isinstance(value, str):
                raise EncodeError(
                    f"{spec.name}.{var_field.attr} must be str, got {type(value).__name__}")
            try:
                data = value.encode("ascii")
            except UnicodeEncodeError as error:
                raise EncodeError(
                    f"{spec.name}.{var_field.attr} must be US-ASCII; {value[error.start]!r} at "
                    f"index {error.start} is not") from None
        else:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise EncodeError(
                    f"{spec.name}.{var_field.attr} must be bytes, got {type(value).__name__}")
            data = bytes(value)
        if len(data) > MAX_VAR_FIELD_LENGTH:
            raise EncodeError(
                f"{spec.name}.{var_field.attr} is {len(data)} bytes; the limit is "
                f"{MAX_VAR_FIELD_LENGTH}")
        _VAR_LENGTH.pack_into(buffer, cursor, len(data))
        cursor += _VAR_LENGTH_SIZE
        buffer[cursor:cursor + len(data)] = data
        cursor += len(data)
    return cursor - offset


def block_length_for(template_id: int, version: int = SCHEMA_VERSION) -> int:
    """The block length a schema-``version`` sender writes for ``template_id``."""
    spec = MESSAGE_SPECS.get(template_id)
    if spec is None:
        raise KeyError(f"unknown templateId={template_id}; known: {sorted(MESSAGE_SPECS)}")
    return encoding_block_length(spec, version)


def _encode_layout(message: ControlMessage, version: int) -> tuple[MessageSpec, BlockLayout]:
    spec = SPEC_BY_TYPE.get(type(message))
    if spec is None:
        raise EncodeError(f"{type(message).__name__} is not a schema-{SCHEMA_ID} message")
    key = (spec.template_id, version)
    layout = _ENCODE_LAYOUTS.get(key)
    if layout is None:
        if not 0 <= version <= MAX_KNOWN_SCHEMA_VERSION:
            raise EncodeError(
                f"schema version {version} is not one this codec knows "
                f"(0..{MAX_KNOWN_SCHEMA_VERSION})")
        if version < spec.since_version:
            raise EncodeError(
                f"{spec.name} (template {spec.template_id}) does not exist before schema "
                f"version {spec.since_version}; asked for version {version}")
        if spec.removed_in is not None and version >= spec.removed_in:
            raise EncodeError(
                f"{spec.name} (template {spec.template_id}) was removed in schema version "
                f"{spec.removed_in}; asked for version {version}")
        layout = compile_layout(
            spec, encoding_block_length(spec, version), version, pad_to_block=True)
        _ENCODE_LAYOUTS[key] = layout
    return spec, layout


def _check_absent_fields_unset(spec: MessageSpec, layout: BlockLayout, message) -> None:
    """Refuse to drop a value silently: a field the version lacks must hold its null value."""
    for fixed in layout.absent:
        value = getattr(message, fixed.attr)
        if value != fixed.absent:
            raise EncodeError(
                f"{spec.name}.{fixed.attr}={value} cannot be sent at schema version "
                f"{layout.version} (the field needs version {fixed.since_version}+); set it to "
                f"{fixed.absent} to leave it out")
    for var_field in layout.absent_var_fields:
        value = getattr(message, var_field.attr)
        if len(value) != 0:
            raise EncodeError(
                f"{spec.name}.{var_field.attr} cannot be sent at schema version "
                f"{layout.version} (the field needs version {var_field.since_version}+); leave "
                f"it empty")


_RANGES = {
    "q": (-(1 << 63), (1 << 63) - 1),
    "i": (-(1 << 31), (1 << 31) - 1),
    "B": (0, 255),
}


def _field_range_error(spec: MessageSpec, layout: BlockLayout, message) -> EncodeError:
    for fixed in layout.present:
        value = getattr(message, fixed.attr)
        narrow = fixed.is_narrow(layout.block_length, layout.version)
        code = "B" if narrow else fixed.type.struct_code
        low, high = _RANGES[code]
        if not isinstance(value, int):
            return EncodeError(
                f"{spec.name}.{fixed.attr} must be an int, got {type(value).__name__}")
        if not low <= value <= high:
            type_name = "uint8" if narrow else fixed.type.name
            return EncodeError(
                f"{spec.name}.{fixed.attr}={value} does not fit {type_name} "
                f"({low}..{high}) at schema version {layout.version}")
    return EncodeError(f"{spec.name} could not be packed")
