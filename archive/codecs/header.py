"""The 8-byte SBE message header: blockLength u16, templateId u16, schemaId u16, version u16 (LE).

Reading it from received bytes (with length checks) is ``codecs.decode_header``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER = struct.Struct("<HHHH")
HEADER_LENGTH = HEADER.size  # 8


class MessageHeader(NamedTuple):
    block_length: int
    template_id: int
    schema_id: int
    version: int
