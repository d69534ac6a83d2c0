"""The first message at or after a time inside one recording, by bisecting its terms (sans-IO).

Reading a recording to find 09:30 would cost as much as reading it. Aeron's log gives a cheaper
way: a term boundary is always a frame start and a message start (a message never crosses a
term; the appender pads the rest of the term instead), so a replay may start at any term
boundary and its first whole message is right there. Assuming message times do not decrease
along the recording (a publisher's clock), the terms are bisected:

1. ``probe(i)``: the first timed message at or after the start of term ``i`` (one replay of that
   term, normally stopped after its first message; terms with no timed message are skipped
   forward one replay each);
2. binary search for the first term ``j`` whose probe is at or after the time (or has none);
3. the answer is in term ``j - 1`` after its first message, or is term ``j``'s probe: one replay
   scans term ``j - 1`` to its end.

So about ``log2(terms) + 2`` replays, each at most one term long, instead of the whole recording.
The recording's first "term" starts at its start position, which may be any frame boundary and
even a continuation fragment (the archive joined the stream mid-message): frames of a message
that began before a replay's start are skipped, as Aeron's FragmentAssembler does.

IO is one function, ``read_frames(start, end)``: a context manager giving the recording's frames
of ``[start, end)`` as contiguous ``(position, block)`` pairs of whole frames (``ArchiveAccess
.replay``); ``start`` and ``end`` are always frame boundaries (term boundaries, the recording's
start, its recorded end). Leaving the context early stops the replay.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from aeron_spark.driver_integration.frame import (
    BEGIN_FRAG_FLAG,
    END_FRAG_FLAG,
    FLAGS_OFFSET,
    HDR_TYPE_DATA,
    HEADER_LENGTH,
    RESERVED_VALUE_OFFSET,
    TYPE_OFFSET,
    aligned_frame_length,
)

from aeron_spark.connector.source.message_time import MessageTime

ReadFrames = Callable[[int, int], AbstractContextManager[Iterable[tuple[int, bytes]]]]

_FRAME_LENGTH = struct.Struct("<i")
_RESERVED_VALUE = struct.Struct("<q")


@dataclass(frozen=True)
class TimedMessage:
    position: int  # where the message's first frame starts: a valid replay start
    time_ns: int


@dataclass(frozen=True)
class RecordedSpan:
    """What may be replayed of a recording: ``[start, end)``, both frame boundaries."""

    start: int
    end: int
    term_length: int

    @property
    def term_count(self) -> int:
        """Terms (pieces between consecutive boundaries) in the span; the first may be partial."""
        if self.end <= self.start:
            return 0
        first_full = self._first_term_boundary_after_start()
        if first_full >= self.end:
            return 1
        return 1 + (self.end - first_full + self.term_length - 1) // self.term_length

    def boundary(self, index: int) -> int:
        """Start of piece ``index``: the span's start, then every term boundary after it."""
        if index == 0:
            return self.start
        return self._first_term_boundary_after_start() + (index - 1) * self.term_length

    def piece_end(self, index: int) -> int:
        return min(self.boundary(index + 1), self.end)

    def _first_term_boundary_after_start(self) -> int:
        return (self.start // self.term_length + 1) * self.term_length


def messages_in(blocks: Iterable[tuple[int, bytes]], message_time: MessageTime) -> Iterator[TimedMessage | int]:
    """Whole messages of contiguous frames: a TimedMessage for a message with a time, its start
    position (an int) for one without. Padding is skipped; so are continuation fragments before
    the first BEGIN, and a message the blocks end in the middle of."""
    begin: int | None = None
    reserved = 0
    parts: list[memoryview] = []
    for block_position, block in blocks:
        view = memoryview(block)
        offset = 0
        while offset + HEADER_LENGTH <= len(view):
            frame_length = _FRAME_LENGTH.unpack_from(view, offset)[0]
            if frame_length <= 0:
                break  # nothing more written (a replay sends whole frames only)
            frame_type = view[TYPE_OFFSET + offset] | (view[TYPE_OFFSET + offset + 1] << 8)
            if frame_type == HDR_TYPE_DATA:
                flags = view[offset + FLAGS_OFFSET]
                if flags & BEGIN_FRAG_FLAG:
                    begin = block_position + offset
                    reserved = _RESERVED_VALUE.unpack_from(view, offset + RESERVED_VALUE_OFFSET)[0]
                    parts = []
                if begin is not None:
                    parts.append(view[offset + HEADER_LENGTH:offset + frame_length])
                    if flags & END_FRAG_FLAG:
                        payload = parts[0] if len(parts) == 1 else b"".join(parts)
                        time_ns = message_time(reserved, payload)
                        yield begin if time_ns is None else TimedMessage(begin, time_ns)
                        begin, parts = None, []
            offset += aligned_frame_length(frame_length)


class TermBisection:
    """Finds the first timed message at or after a time in one recording span (module docstring)."""

    def __init__(self, span: RecordedSpan, read_frames: ReadFrames, message_time: MessageTime) -> None:
        self.span = span
        self._read_frames = read_frames
        self._message_time = message_time
        self._probes: dict[int, TimedMessage | None] = {}

    def first_at_or_after(self, time_ns: int) -> TimedMessage | None:
        """None: no message of the span has a time at or after ``time_ns``."""
        count = self.span.term_count
        if count == 0:
            return None
        low, high = 0, count  # invariant: the answer's term index is in [low, high]
        while low < high:
            middle = (low + high) // 2
            if self._reaches(middle, time_ns):
                high = middle
            else:
                low = middle + 1
        if low > 0:
            found = self._scan(low - 1, time_ns)
            if found is not None:
                return found
        if low == count:
            return None
        probe = self._probe(low)
        return probe if probe is not None and probe.time_ns >= time_ns else None

    def _reaches(self, index: int, time_ns: int) -> bool:
        """Monotone: the first timed message from term ``index`` on is at/after the time, or none is."""
        probe = self._probe(index)
        return probe is None or probe.time_ns >= time_ns

    def _probe(self, index: int) -> TimedMessage | None:
        if index in self._probes:
            return self._probes[index]
        found: TimedMessage | None = None
        for term in range(index, self.span.term_count):
            found = self._first_in_piece(term, lambda message: True)
            if found is not None:
                break
        self._probes[index] = found
        return found

    def _scan(self, index: int, time_ns: int) -> TimedMessage | None:
        return self._first_in_piece(index, lambda message: message.time_ns >= time_ns)

    def _first_in_piece(self, index: int, wanted: Callable[[TimedMessage], bool]) -> TimedMessage | None:
        start, end = self.span.boundary(index), self.span.piece_end(index)
        with self._read_frames(start, end) as blocks:
            for message in messages_in(blocks, self._message_time):
                if isinstance(message, TimedMessage) and wanted(message):
                    return message
        return None
