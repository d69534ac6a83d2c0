"""Aeron data frame header layout, flags, types, alignment, padding frames and frame walking.

Pure functions over bytes (no I/O). The 32-byte little-endian header (Aeron's
DataHeaderFlyweight) is::

    0  frame_length  int32   header + payload, unaligned; 0 = nothing written yet,
                             negative = being written
    4  version       uint8
    5  flags         uint8   BEGIN 0x80, END 0x40, EOS 0x20, REVOKED 0x10
    6  type          uint16  PAD 0, DATA 1, ...
    8  term_offset   int32
    12 session_id    int32
    16 stream_id     int32
    20 term_id       int32
    24 reserved_value int64

Each frame occupies ``align(frame_length, 32)`` bytes of the term. Frame lengths chain (the
next frame starts where this one's aligned length ends), so finding frame starts is inherently
sequential. Two walkers:

* :func:`walk_frames` - a Python loop yielding decoded headers, for control paths
  (~0.4 M frames/s measured).
* :func:`scan_frames` / :func:`frame_offsets` / :func:`last_complete_frame_end` - the bulk path.
  It first tries "equal-length runs" (one strided numpy compare confirms a whole run of frames of
  the same aligned length, the common case), and for irregular data resolves the chain with
  pointer doubling over every 32-byte slot (O(n log n) numpy gathers, no per-frame Python).
  Measured on 1 MiB buffers (noisy 2-core VM): equal 64 B frames ~30 M frames/s (1.9 GB/s),
  equal 1 KiB frames ~6.7 M frames/s (6.8 GB/s), random 32-200 B frames ~3.7 M frames/s
  (0.5 GB/s). A small C helper (one loop adding aligned lengths) would reach memory speed for
  irregular frames; it is not needed for recording or recovery at these rates.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

# Field offsets inside the header.
FRAME_LENGTH_OFFSET = 0
VERSION_OFFSET = 4
FLAGS_OFFSET = 5
TYPE_OFFSET = 6
TERM_OFFSET_OFFSET = 8
SESSION_ID_OFFSET = 12
STREAM_ID_OFFSET = 16
TERM_ID_OFFSET = 20
RESERVED_VALUE_OFFSET = 24
HEADER_LENGTH = 32
FRAME_ALIGNMENT = 32

CURRENT_VERSION = 0

# Flags.
BEGIN_FRAG_FLAG = 0x80
END_FRAG_FLAG = 0x40
UNFRAGMENTED = BEGIN_FRAG_FLAG | END_FRAG_FLAG  # 0xC0
EOS_FLAG = 0x20
REVOKED_FLAG = 0x10

# Frame types.
HDR_TYPE_PAD = 0x00
HDR_TYPE_DATA = 0x01
HDR_TYPE_NAK = 0x02
HDR_TYPE_SM = 0x03
HDR_TYPE_ERR = 0x04
HDR_TYPE_SETUP = 0x05
HDR_TYPE_RTTM = 0x06
HDR_TYPE_RES = 0x07
HDR_TYPE_ATS_DATA = 0x08
HDR_TYPE_ATS_SM = 0x09
HDR_TYPE_ATS_SETUP = 0x0A
HDR_TYPE_RSP_SETUP = 0x0B
HDR_TYPE_EXT = 0xFFFF

HEADER_STRUCT = struct.Struct("<iBBHiiiiq")
_INT32 = struct.Struct("<i")
assert HEADER_STRUCT.size == HEADER_LENGTH

# Bulk scanning works on windows of this many bytes (bounded memory for the doubling tables).
SCAN_WINDOW = 1024 * 1024


def align(value: int, alignment: int) -> int:
    """``value`` rounded up to a multiple of ``alignment`` (a power of two)."""
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment {alignment} must be a positive power of two")
    return (value + alignment - 1) & -alignment


def aligned_frame_length(frame_length: int) -> int:
    """Bytes a frame of ``frame_length`` occupies in the term (32-byte aligned)."""
    return (frame_length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT


def compute_fragmented_frame_length(length: int, max_payload: int) -> int:
    """Term bytes taken by a message of ``length`` split into frames of ``max_payload``.

    Aeron's ``computeFragmentedFrameLength``; a message that fits in one frame (including an
    empty one) takes ``align(length + 32, 32)``.
    """
    if length < 0:
        raise ValueError(f"message length {length} is negative")
    if max_payload <= 0 or max_payload % FRAME_ALIGNMENT:
        raise ValueError(f"max payload {max_payload} must be a positive multiple of {FRAME_ALIGNMENT}")
    if length <= max_payload:
        return aligned_frame_length(length + HEADER_LENGTH)
    whole_frames, remainder = divmod(length, max_payload)
    last = aligned_frame_length(remainder + HEADER_LENGTH) if remainder else 0
    return whole_frames * (max_payload + HEADER_LENGTH) + last


@dataclass(frozen=True, slots=True)
class DataFrameHeader:
    frame_length: int
    version: int = CURRENT_VERSION
    flags: int = UNFRAGMENTED
    frame_type: int = HDR_TYPE_DATA
    term_offset: int = 0
    session_id: int = 0
    stream_id: int = 0
    term_id: int = 0
    reserved_value: int = 0

    def pack(self) -> bytes:
        return HEADER_STRUCT.pack(self.frame_length, self.version, self.flags, self.frame_type,
                                  self.term_offset, self.session_id, self.stream_id, self.term_id,
                                  self.reserved_value)

    def pack_into(self, buffer, offset: int = 0) -> None:
        HEADER_STRUCT.pack_into(buffer, offset, self.frame_length, self.version, self.flags,
                                self.frame_type, self.term_offset, self.session_id,
                                self.stream_id, self.term_id, self.reserved_value)

    @classmethod
    def unpack(cls, buffer, offset: int = 0) -> DataFrameHeader:
        size = memoryview(buffer).nbytes
        if offset < 0 or size - offset < HEADER_LENGTH:
            raise ValueError(f"no complete {HEADER_LENGTH}-byte frame header at offset {offset} "
                             f"of a {size}-byte buffer")
        return cls(*HEADER_STRUCT.unpack_from(buffer, offset))

    @property
    def aligned_length(self) -> int:
        return aligned_frame_length(self.frame_length)

    @property
    def payload_length(self) -> int:
        return self.frame_length - HEADER_LENGTH

    @property
    def is_padding(self) -> bool:
        return self.frame_type == HDR_TYPE_PAD

    @property
    def is_data(self) -> bool:
        return self.frame_type == HDR_TYPE_DATA

    @property
    def is_begin(self) -> bool:
        return bool(self.flags & BEGIN_FRAG_FLAG)

    @property
    def is_end(self) -> bool:
        return bool(self.flags & END_FRAG_FLAG)

    @property
    def is_eos(self) -> bool:
        return bool(self.flags & EOS_FLAG)


def padding_frame_header(term_offset: int, pad_length: int, session_id: int, stream_id: int,
                         term_id: int) -> DataFrameHeader:
    """Header of a PAD frame covering ``pad_length`` bytes (frame_length = whole padded region)."""
    if pad_length < HEADER_LENGTH or pad_length % FRAME_ALIGNMENT:
        raise ValueError(f"padding length {pad_length} must be at least {HEADER_LENGTH} and a "
                         f"multiple of {FRAME_ALIGNMENT}")
    return DataFrameHeader(frame_length=pad_length, flags=UNFRAGMENTED, frame_type=HDR_TYPE_PAD,
                           term_offset=term_offset, session_id=session_id, stream_id=stream_id,
                           term_id=term_id)


def write_padding_frame(buffer, offset: int, term_offset: int, pad_length: int, session_id: int,
                        stream_id: int, term_id: int) -> None:
    """Write only the 32-byte PAD header at ``offset`` (the padded payload is not meaningful)."""
    padding_frame_header(term_offset, pad_length, session_id, stream_id, term_id).pack_into(buffer, offset)


def frame_length_at(buffer, offset: int) -> int:
    return _INT32.unpack_from(buffer, offset)[0]


class StopReason(enum.Enum):
    """Why a frame scan ended where it did."""

    END = "reached the end of the range exactly"
    ZERO_LENGTH = "frame_length is 0 (nothing written here)"
    NEGATIVE_LENGTH = "frame_length is negative (frame still being written)"
    TOO_SHORT = "frame_length is below the 32-byte header length (corrupt header)"
    OVERRUN = "frame runs past the end of the range (incomplete or torn)"
    TRUNCATED_HEADER = "fewer than 32 bytes left, no room for a header"


@dataclass(frozen=True)
class FrameScan:
    """Result of scanning frames in ``[start, end)`` of a buffer.

    ``offsets``: buffer offsets of every complete frame, in order. ``end``: offset just after the
    last complete frame (== start when there is none). ``stop_reason``: why scanning stopped at
    ``end``. ``stop_frame_length``: the frame_length read at ``end`` when there was a header there.
    """

    offsets: np.ndarray
    end: int
    stop_reason: StopReason
    stop_frame_length: int | None


def _resolve_range(buffer, start: int, end: int | None) -> tuple[memoryview, int, int]:
    view = memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    size = len(view)
    end = size if end is None else end
    if not 0 <= start <= end <= size:
        raise ValueError(f"frame range [{start}, {end}) is outside the {size}-byte buffer")
    return view, start, end


def _classify(length: int, offset: int, end: int) -> StopReason | None:
    if length == 0:
        return StopReason.ZERO_LENGTH
    if length < 0:
        return StopReason.NEGATIVE_LENGTH
    if length < HEADER_LENGTH:
        return StopReason.TOO_SHORT
    if offset + aligned_frame_length(length) > end:
        return StopReason.OVERRUN
    return None


def walk_frames(buffer, start: int = 0, end: int | None = None) -> Iterator[tuple[int, DataFrameHeader]]:
    """Yield ``(offset, header)`` for each complete frame in ``[start, end)``, in order.

    Stops silently at the first incomplete frame; use :func:`scan_frames` to learn why. A plain
    Python loop: for control paths and tests, not for bulk data.
    """
    view, offset, end = _resolve_range(buffer, start, end)
    while end - offset >= HEADER_LENGTH:
        header = DataFrameHeader(*HEADER_STRUCT.unpack_from(view, offset))
        if _classify(header.frame_length, offset, end) is not None:
            return
        yield offset, header
        offset += aligned_frame_length(header.frame_length)


def _slot_lengths(view: memoryview, start: int, slots: int) -> np.ndarray:
    """frame_length field of each 32-byte slot from ``start``, as int64 (a strided view, then a copy)."""
    words = np.frombuffer(view, dtype="<i4", count=slots * (HEADER_LENGTH // 4), offset=start)
    return words.reshape(slots, HEADER_LENGTH // 4)[:, 0].astype(np.int64)


def _scan_window(view: memoryview, start: int, end: int) -> tuple[np.ndarray, int]:
    """Slot indexes of complete frames in one window and the slot where the chain stopped."""
    slots = (end - start) // HEADER_LENGTH
    lengths = _slot_lengths(view, start, slots)
    index = np.arange(slots, dtype=np.int64)
    step = (lengths + (FRAME_ALIGNMENT - 1)) // FRAME_ALIGNMENT
    successor = index + step
    complete = (lengths >= HEADER_LENGTH) & (successor <= slots)

    # Equal-length runs: confirm a whole run from slot 0 with one strided compare.
    found: list[np.ndarray] = []
    slot = 0
    for _ in range(4):
        if slot >= slots or not complete[slot]:
            break
        run_step = int(step[slot])
        candidates = np.arange(slot, slots, run_step)
        matches = complete[candidates] & (step[candidates] == run_step)
        mismatch = np.flatnonzero(~matches)
        run = len(candidates) if len(mismatch) == 0 else int(mismatch[0])
        found.append(candidates[:run])
        slot = slot + run * run_step
        if run < 8:
            break
    if slot >= slots or not complete[slot]:
        return (np.concatenate(found) if found else index[:0]), slot

    # Irregular remainder: pointer doubling. Node ``slots`` = reached the end; ``slots + 1`` = stop.
    table = np.empty(slots + 2, dtype=np.int64)
    table[:slots] = np.where(complete, successor, slots + 1)
    table[slots] = slots
    table[slots + 1] = slots + 1
    levels = [table]
    while levels[-1][slot] < slots:  # 2^k steps from ``slot`` have not yet left the window
        levels.append(levels[-1][levels[-1]])
    path = np.array([slot], dtype=np.int64)
    for level in reversed(levels[:-1]):
        expanded = np.empty(len(path) * 2, dtype=np.int64)
        expanded[0::2] = path
        expanded[1::2] = level[path]
        path = expanded
    path = path[: np.searchsorted(path, slots)]  # the path is increasing, then sentinels
    last = int(path[-1])
    if table[last] == slots + 1:  # the chain stopped on an incomplete frame
        found.append(path[:-1])
        return np.concatenate(found), last
    found.append(path)
    return np.concatenate(found), slots


def scan_frames(buffer, start: int = 0, end: int | None = None) -> FrameScan:
    """Offsets of all complete frames in ``[start, end)`` and where/why the chain stops.

    Bulk path, no per-frame Python (rates in the module docstring). A frame is complete when its
    aligned length fits before ``end``.
    """
    view, start, end = _resolve_range(buffer, start, end)
    offsets: list[np.ndarray] = []
    window_start = start
    while True:
        window_end = min(end, window_start + SCAN_WINDOW)
        slot_indexes, stop_slot = _scan_window(view, window_start, window_end)
        offsets.append(window_start + slot_indexes * HEADER_LENGTH)
        stop = window_start + stop_slot * HEADER_LENGTH
        if end - stop < HEADER_LENGTH:
            reason = StopReason.END if stop == end else StopReason.TRUNCATED_HEADER
            return FrameScan(np.concatenate(offsets), stop, reason, None)
        length = frame_length_at(view, stop)
        classified = _classify(length, stop, end)
        if classified is None:  # the frame only overran the window: continue with a wide enough one
            window_start = stop
            if aligned_frame_length(length) > SCAN_WINDOW:
                offsets.append(np.array([stop], dtype=np.int64))
                window_start = stop + aligned_frame_length(length)
            continue
        return FrameScan(np.concatenate(offsets), stop, classified, length)


def frame_offsets(buffer, start: int = 0, end: int | None = None) -> np.ndarray:
    """Buffer offsets (int64) of every complete frame in ``[start, end)``."""
    return scan_frames(buffer, start, end).offsets


def last_complete_frame_end(buffer, start: int = 0, end: int | None = None) -> int:
    """Offset just after the last complete frame in ``[start, end)`` (``start`` if none)."""
    return scan_frames(buffer, start, end).end
