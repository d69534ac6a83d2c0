"""Archive frame checksums: CRC-32C (or CRC-32) stored in the session-id field of DATA frames.

As Aeron's RecordingWriter/ReplaySession (reference §4.5, §4.6): for each DATA frame the checksum
covers ``alignedLength - 32`` bytes after the header (the payload plus the term's alignment
padding, which the file stores verbatim) and replaces the frame's session id *in the file*. PAD
frames are never stamped. On replay each DATA frame's stored value is verified, then the replay
publication's session id is put back.

The value is stored as a signed little-endian int32 (Java's ``int`` result of
``Checksum.compute``). Stamping mutates the block it is given, so the caller must pass a buffer
it owns (:func:`stamp_checksums_copy` copies first) - never the driver's log buffer.

Speed: frame offsets come from the numpy frame scan, but the CRC call is one C call per frame
from Python (~1-3 M frames/s); a C helper looping over offsets would be needed to go faster.
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


@dataclass(frozen=True)
class FrameChecksum:
    """A named 32-bit checksum over bytes, returning a signed int32 like Aeron's ``Checksum``."""

    name: str
    _function: Callable[[memoryview], int]

    def compute(self, data) -> int:
        return _to_int32(self._function(data) & 0xFFFFFFFF)


CRC32C = FrameChecksum("CRC-32C", _crc32c.crc32c)
CRC32 = FrameChecksum("CRC-32", zlib.crc32)

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


def _data_frame_offsets(view: memoryview, what: str) -> list[int]:
    offsets = _frame_offsets(view, what)
    types = np.frombuffer(view, dtype="<u2", count=len(view) // 2)[(offsets + TYPE_OFFSET) // 2]
    return offsets[types == HDR_TYPE_DATA].tolist()


def _writable(block, what: str) -> memoryview:
    view = memoryview(block).cast("B")
    if view.readonly:
        raise ChecksumError(f"{what}: needs a writable buffer owned by the caller (got read-only "
                            f"{type(block).__name__}); use stamp_checksums_copy")
    return view


def stamp_checksums(block, checksum: FrameChecksum = CRC32C) -> None:
    """Overwrite each DATA frame's session id in ``block`` (writer-owned!) with its checksum."""
    view = _writable(block, "stamp checksums")
    for offset in _data_frame_offsets(view, "stamp checksums"):
        aligned = aligned_frame_length(_INT32.unpack_from(view, offset)[0])
        value = checksum.compute(view[offset + HEADER_LENGTH: offset + aligned])
        _INT32.pack_into(view, offset + SESSION_ID_OFFSET, value)


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
    for offset in _data_frame_offsets(view, "verify checksums"):
        aligned = aligned_frame_length(_INT32.unpack_from(view, offset)[0])
        computed = checksum.compute(view[offset + HEADER_LENGTH: offset + aligned])
        recorded = _INT32.unpack_from(view, offset + SESSION_ID_OFFSET)[0]
        if computed != recorded:
            raise ChecksumMismatchError(block_position + offset, recorded, computed, checksum.name)
        _INT32.pack_into(view, offset + SESSION_ID_OFFSET, session_id)


def frame_checksum_matches(frame, checksum: FrameChecksum = CRC32C) -> bool:
    """Whether one whole frame's stored session-id field equals its checksum (recovery, verify)."""
    view = memoryview(frame).cast("B")
    if len(view) < HEADER_LENGTH:
        return False
    aligned = aligned_frame_length(_INT32.unpack_from(view, 0)[0])
    if aligned < HEADER_LENGTH or aligned > len(view):
        return False
    return checksum.compute(view[HEADER_LENGTH:aligned]) == _INT32.unpack_from(view, SESSION_ID_OFFSET)[0]
