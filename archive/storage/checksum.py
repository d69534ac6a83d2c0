"""Archive frame checksums: CRC-32C (or CRC-32) stored in the session-id field of DATA frames.

As Aeron's RecordingWriter/ReplaySession: for each DATA frame the checksum
covers ``alignedLength - 32`` bytes after the header (the payload plus the term's alignment
padding, which the file stores verbatim) and replaces the frame's session id *in the file*. PAD
frames are never stamped. On replay each DATA frame's stored value is verified, then the replay
publication's session id is put back.

The value is stored as a signed little-endian int32 (Java's ``int`` result of
``Checksum.compute``). Stamping mutates the block it is given, so the caller must pass a buffer
it owns (:func:`stamp_checksums_copy` copies first) - never the driver's log buffer.

Speed: frame offsets come from the numpy frame scan. Small frames (<= 96 checksummed bytes,
the common 64 B case) are checksummed many at a time with a table-driven CRC vectorised across
frames in numpy; larger frames take one hardware-accelerated C call each. Measured in the
segment writer (copy + stamp + write): 64 B frames ~3.7 M frames/s, 1 KiB frames ~0.6 M
frames/s (~600 MB/s); a C loop over the offsets would reach the ~4 GB/s of one crc32c call.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import crc32c as _crc32c
import numpy as np

from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA, HEADER_LENGTH, SESSION_ID_OFFSET, TYPE_OFFSET, StopReason, aligned_frame_length,
    scan_frames)

_INT32 = struct.Struct("<i")


class ChecksumError(Exception):
    """A block whose frames cannot be checksummed (malformed) or whose checksum does not match."""


class ChecksumMismatchError(ChecksumError):
    def __init__(self, position: int, recorded: int, computed: int, checksum_name: str) -> None:
        super().__init__(f"{checksum_name} checksum mismatch at position={position}: "
                         f"recorded checksum={recorded}, computed checksum={computed}")
        self.position = position
        self.recorded = recorded
        self.computed = computed


def _to_int32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def _reflected_crc_table(polynomial: int) -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(polynomial), table >> 1).astype(np.uint32)
    return table


@dataclass(frozen=True)
class FrameChecksum:
    """A named 32-bit checksum over bytes, returning a signed int32 like Aeron's ``Checksum``.

    ``table`` is the byte table of the same (reflected, init/xor-out ~0) CRC, used to checksum
    many equal-length frames at once.
    """

    name: str
    _function: Callable[[memoryview], int]
    table: np.ndarray | None = None

    def compute(self, data) -> int:
        return _to_int32(self._function(data) & 0xFFFFFFFF)

    def compute_many(self, rows: np.ndarray) -> np.ndarray:
        """Checksums (int32) of each row of a 2-D uint8 array, vectorised across rows."""
        if self.table is None:
            return np.array([self.compute(row.tobytes()) for row in rows], dtype=np.int32)
        crc = np.full(len(rows), 0xFFFFFFFF, dtype=np.uint32)
        for column in range(rows.shape[1]):
            crc = self.table[(crc ^ rows[:, column]) & 0xFF] ^ (crc >> 8)
        return (~crc).view(np.int32)


CRC32C = FrameChecksum("CRC-32C", _crc32c.crc32c, _reflected_crc_table(0x82F63B78))
CRC32 = FrameChecksum("CRC-32", zlib.crc32, _reflected_crc_table(0xEDB88320))

# Frames whose checksummed part is at most this long go through ``compute_many``, and only when
# at least this many share a length (per-frame C calls win for long frames and small groups).
_VECTOR_MAX_LENGTH = 96
_VECTOR_MIN_FRAMES = 32

_ALIASES = {
    "CRC-32C": CRC32C, "io.aeron.archive.checksum.Crc32c": CRC32C, "org.agrona.checksum.Crc32c": CRC32C,
    "CRC-32": CRC32, "io.aeron.archive.checksum.Crc32": CRC32, "org.agrona.checksum.Crc32": CRC32,
}


def checksum_from_name(name: str) -> FrameChecksum:
    """The checksum Aeron's ``aeron.archive.record.checksum``/``replay.checksum`` value names."""
    try:
        return _ALIASES[name]
    except KeyError:
        raise ValueError(f"unknown checksum {name!r}: accepted values are "
                         f"{', '.join(sorted(_ALIASES))}") from None


def _frame_offsets(view: memoryview, what: str) -> np.ndarray:
    """Offsets of the block's frames; the block must be whole frames exactly."""
    scan = scan_frames(view)
    if scan.stop_reason is not StopReason.END:
        raise ChecksumError(f"{what}: block of {len(view)} bytes is not whole frames: the chain "
                            f"stops at offset {scan.end} ({scan.stop_reason.value})")
    return scan.offsets


def _data_frame_checksums(view: memoryview, checksum: FrameChecksum,
                          what: str) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, checksums) of the block's DATA frames, in order."""
    offsets = _frame_offsets(view, what)
    types = np.frombuffer(view, dtype="<u2", count=len(view) // 2)[(offsets + TYPE_OFFSET) // 2]
    offsets = offsets[types == HDR_TYPE_DATA]
    words = np.frombuffer(view, dtype="<i4", count=len(view) // 4)
    spans = ((words[offsets // 4].astype(np.int64) + 31) & -32) - HEADER_LENGTH
    values = np.empty(len(offsets), dtype=np.int32)
    remaining = np.ones(len(offsets), dtype=bool)
    if checksum.table is not None and len(offsets) >= _VECTOR_MIN_FRAMES:
        data = np.frombuffer(view, dtype=np.uint8)
        lengths, counts = np.unique(spans, return_counts=True)
        for length, count in zip(lengths.tolist(), counts.tolist()):
            if length > _VECTOR_MAX_LENGTH or count < _VECTOR_MIN_FRAMES:
                continue
            group = np.flatnonzero(spans == length)
            starts = offsets[group] + HEADER_LENGTH
            rows = data[starts[:, None] + np.arange(length)]
            values[group] = checksum.compute_many(rows)
            remaining[group] = False
    rest = np.flatnonzero(remaining)
    if len(rest):
        starts = offsets[rest] + HEADER_LENGTH
        function = checksum._function
        raw = [function(view[a:b]) for a, b in zip(starts.tolist(), (starts + spans[rest]).tolist())]
        values[rest] = np.array(raw, dtype=np.uint32).view(np.int32)
    return offsets, values


def _writable(block, what: str) -> memoryview:
    view = memoryview(block).cast("B")
    if view.readonly:
        raise ChecksumError(f"{what}: needs a writable buffer owned by the caller (got read-only "
                            f"{type(block).__name__}); use stamp_checksums_copy")
    return view


def stamp_checksums(block, checksum: FrameChecksum = CRC32C) -> None:
    """Overwrite each DATA frame's session id in ``block`` (writer-owned!) with its checksum."""
    view = _writable(block, "stamp checksums")
    offsets, values = _data_frame_checksums(view, checksum, "stamp checksums")
    # Whole frames, so the block is a multiple of 32 bytes: view it as int32 words.
    np.frombuffer(view, dtype="<i4")[(offsets + SESSION_ID_OFFSET) // 4] = values


def stamp_checksums_copy(block, checksum: FrameChecksum = CRC32C, out: bytearray | None = None) -> memoryview:
    """Copy ``block`` (e.g. a view of the driver's log buffer) into ``out`` and stamp the copy."""
    source = memoryview(block).cast("B")
    if out is None or len(out) < len(source):
        out = bytearray(len(source))
    target = memoryview(out)[: len(source)]
    target[:] = source
    stamp_checksums(target, checksum)
    return target


def verify_and_restore(block, session_id: int, checksum: FrameChecksum = CRC32C, *,
                       block_position: int = 0) -> None:
    """Check each DATA frame's stored checksum, then put ``session_id`` back in its header.

    ``block`` is writable (the replayer's read buffer). Raises :class:`ChecksumMismatchError`
    naming the stream position of the first bad frame (``block_position`` + its offset); frames
    before it have already been restored.
    """
    view = _writable(block, "verify checksums")
    offsets, computed = _data_frame_checksums(view, checksum, "verify checksums")
    words = np.frombuffer(view, dtype="<i4", count=len(view) // 4)
    fields = (offsets + SESSION_ID_OFFSET) // 4
    bad = np.flatnonzero(words[fields] != computed)
    good = fields[: bad[0]] if len(bad) else fields
    words[good] = session_id  # frames before a bad one are restored, as a frame loop would
    if len(bad):
        index = int(bad[0])
        raise ChecksumMismatchError(block_position + int(offsets[index]), int(words[fields[index]]),
                                    int(computed[index]), checksum.name)
    words[fields] = session_id


def frame_checksum_matches(frame, checksum: FrameChecksum = CRC32C) -> bool:
    """Whether one whole frame's stored session-id field equals its checksum (recovery, verify)."""
    view = memoryview(frame).cast("B")
    if len(view) < HEADER_LENGTH:
        return False
    aligned = aligned_frame_length(_INT32.unpack_from(view, 0)[0])
    if aligned < HEADER_LENGTH or aligned > len(view):
        return False
    return checksum.compute(view[HEADER_LENGTH:aligned]) == _INT32.unpack_from(view, SESSION_ID_OFFSET)[0]
