"""The 8-byte SBE message header: blockLength u16, templateId u16, schemaId u16, version u16 (LE)."""

from __future__ import annotations

import struct
from typing import NamedTuple

from aeron_spark.archive.codecs.errors import CodecError

HEADER = struct.Struct("<HHHH")
HEADER_LENGTH = HEADER.size  # 8


class MessageHeader(NamedTuple):
    block_length: int
    template_id: int
    schema_id: int
    version: int


def decode_header(buffer, offset: int = 0, length: int | None = None) -> MessageHeader:
    """Read the header at ``offset``; ``length`` is the message length (default: to the end)."""
    if length is None:
        length = len(buffer) - offset
    if length < HEADER_LENGTH:
        raise CodecError(
            f"message of {length} bytes is shorter than the {HEADER_LENGTH}-byte SBE header")
    return MessageHeader._make(HEADER.unpack_from(buffer, offset))


def encode_header(
    buffer, offset: int, block_length: int, template_id: int, schema_id: int, version: int
) -> None:
    HEADER.pack_into(buffer, offset, block_length, template_id, schema_id, version)
