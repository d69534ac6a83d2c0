"""Builds Aeron term logs byte by byte the way a publication appends them, for connector tests.

Messages longer than mtu - 32 are fragmented (BEGIN / middle / END), a message that does not fit
in the rest of a term is preceded by a PAD frame filling the term (frame_length = remainder),
and frames are 32-byte aligned. Header fields: frame_length, version 0, flags, type, term_offset,
session_id, stream_id, term_id, reserved_value.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

HEADER_FORMAT = "<iBBHiiiiq"  # a format string, not a Struct: Spark tests ship this module by value


@dataclass(frozen=True)
class LoggedMessage:
    payload: bytes
    begin_position: int
    end_position: int  # after the last frame, aligned
    reserved_value: int


@dataclass
class SyntheticLog:
    term_length: int = 64 * 1024
    mtu: int = 1408
    initial_term_id: int = 7
    session_id: int = 4321
    stream_id: int = 1001
    start_position: int = 0
    data: bytearray = field(default_factory=bytearray)
    messages: list[LoggedMessage] = field(default_factory=list)

    @property
    def position(self) -> int:
        return self.start_position + len(self.data)

    def append(self, payload: bytes, reserved_value: int = 0) -> LoggedMessage:
        max_payload = self.mtu - 32
        chunks = [payload[i:i + max_payload] for i in range(0, len(payload), max_payload)] or [b""]
        needed = sum(_aligned(32 + len(chunk)) for chunk in chunks)
        term_offset = self.position % self.term_length
        if term_offset + needed > self.term_length:
            self._pad(self.term_length - term_offset)
        begin = self.position
        for index, chunk in enumerate(chunks):
            flags = (0x80 if index == 0 else 0) | (0x40 if index == len(chunks) - 1 else 0)
            self._frame(flags, 1, chunk, reserved_value)
        message = LoggedMessage(payload, begin, self.position, reserved_value)
        self.messages.append(message)
        return message

    def append_raw_fragment(self, payload: bytes, flags: int, reserved_value: int = 0) -> None:
        """One frame with given flags (to model a log cut mid-message)."""
        self._frame(flags, 1, payload, reserved_value)

    def bytes_between(self, start: int, end: int) -> bytes:
        return bytes(self.data[start - self.start_position:end - self.start_position])

    def frame_boundaries(self) -> list[int]:
        boundaries, offset = [], 0
        while offset < len(self.data):
            boundaries.append(self.start_position + offset)
            length = struct.unpack_from("<i", self.data, offset)[0]
            offset += _aligned(length)
        boundaries.append(self.position)
        return boundaries

    def _pad(self, length: int) -> None:
        position = self.position
        header = struct.pack(HEADER_FORMAT, length, 0, 0xC0, 0, position % self.term_length, self.session_id,
                             self.stream_id, self._term_id(position), 0)
        self.data += header + bytes(length - 32)

    def _frame(self, flags: int, frame_type: int, payload: bytes, reserved_value: int) -> None:
        position = self.position
        length = 32 + len(payload)
        header = struct.pack(HEADER_FORMAT, length, 0, flags, frame_type, position % self.term_length, self.session_id,
                             self.stream_id, self._term_id(position), reserved_value)
        self.data += header + payload + bytes(_aligned(length) - length)

    def _term_id(self, position: int) -> int:
        return self.initial_term_id + position // self.term_length


def _aligned(length: int) -> int:
    return (length + 31) // 32 * 32


def blocks(data: bytes, start_position: int, frame_boundaries: list[int], max_block: int):
    """Split [start, ...) into blocks ending on frame boundaries, as Image.blockPoll would."""
    out, position, end = [], start_position, start_position + len(data)
    candidates = [b for b in frame_boundaries if start_position < b <= end]
    while position < end:
        limit = position + max_block
        fitting = [b for b in candidates if position < b <= limit]
        stop = fitting[-1] if fitting else next(b for b in candidates if b > position)
        out.append((position, data[position - start_position:stop - start_position]))
        position = stop
    return out
