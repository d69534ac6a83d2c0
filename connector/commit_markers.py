"""The sink's durable batch log: commit markers inside the sink recording (sans-IO).

A sink recording (see docs/exactly-once.md) is a sequence of committed batches, each the batch's
messages followed by one COMMIT MARKER: a fixed-size, single-frame message whose frame reserved
value is ``MARKER_RESERVED_VALUE`` and whose 64-byte payload is::

    0   magic            8 bytes  b"AeSkMrk1"
    8   format_version   u16      1
    10  flags            u16      bit 0: written by a batch write (spark.write), else streaming
    12  marker_crc       u32      CRC-32C of the 64 payload bytes with this field zeroed
    16  sink_id_hash     u64      first 8 bytes (little-endian) of SHA-256(sink id, UTF-8)
    24  batch_id         i64      Spark's micro-batch id (batch writes: previous + 1)
    32  data_start       i64      stream position where this batch's first message begins
    40  row_count        i64      messages of this batch
    48  payload_bytes    i64      their payload bytes
    56  data_crc         u32      CRC-32C of the batch's payloads, concatenated in order
    60  reserved         u32      0

The marker frame is 32 + 64 = 96 bytes, aligned, so the recording's committed end is the end of
its last marker frame and ``stop_position - MARKER_FRAME_LENGTH`` is where a tail marker starts.
Everything after the last marker is the debris of a commit that did not finish; readers never read
past the last marker. The next commit does not truncate it (a late truncate could cut another
committer's batch: ``sink/commit.py``) but appends after it, so its ``data_start`` is the end of the
debris, and readers skip [previous marker end, data_start) (``source/message_batches.py``). Without
debris ``data_start`` is the previous marker's end (or the recording's start).

This module decodes markers from whole-frame buffers with numpy (a mask over frame headers, then
Python only for the few frames that are markers).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import crc32c
import numpy as np
from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA,
    HEADER_LENGTH,
    UNFRAGMENTED,
)

if TYPE_CHECKING:  # an annotation: the executor's staging imports this module, and needs no archive client
    from aeron_spark.archive.client import RecordingDescriptor

SINK_ALIAS_PREFIX = "aeron-spark-sink:"
MARKER_MAGIC = b"AeSkMrk1"
# The reserved value of a marker frame: the magic read as a little-endian int64. Data rows may not
# use it (the writer rejects them), so the source can drop markers by reserved value alone.
MARKER_RESERVED_VALUE = struct.unpack("<q", MARKER_MAGIC)[0]
MARKER_FORMAT_VERSION = 1
MARKER_PAYLOAD_LENGTH = 64
MARKER_FRAME_LENGTH = HEADER_LENGTH + MARKER_PAYLOAD_LENGTH  # 96, already 32-aligned
FLAG_BATCH_WRITE = 0x1

_LAYOUT = struct.Struct("<8sHHIQqqqqII")
assert _LAYOUT.size == MARKER_PAYLOAD_LENGTH
_CRC_OFFSET = 12


class MarkerError(ValueError):
    """Bytes that claim to be a commit marker but are not a valid one."""


def sink_id_hash(sink_id: str) -> int:
    return int.from_bytes(hashlib.sha256(sink_id.encode()).digest()[:8], "little")


@dataclass(frozen=True)
class CommitMarker:
    sink_id_hash: int
    batch_id: int
    data_start: int
    row_count: int
    payload_bytes: int
    data_crc: int
    flags: int = 0
    format_version: int = MARKER_FORMAT_VERSION

    @property
    def is_batch_write(self) -> bool:
        return bool(self.flags & FLAG_BATCH_WRITE)

    def encode(self) -> bytes:
        """The 64-byte marker payload (CRC filled in)."""
        unsigned = _LAYOUT.pack(MARKER_MAGIC, self.format_version, self.flags, 0, self.sink_id_hash,
                                self.batch_id, self.data_start, self.row_count, self.payload_bytes,
                                self.data_crc, 0)
        crc = crc32c.crc32c(unsigned)
        return unsigned[:_CRC_OFFSET] + struct.pack("<I", crc) + unsigned[_CRC_OFFSET + 4:]

    @classmethod
    def decode(cls, payload: bytes | memoryview) -> CommitMarker:
        data = bytes(payload)
        if len(data) != MARKER_PAYLOAD_LENGTH:
            raise MarkerError(f"a commit marker payload is {MARKER_PAYLOAD_LENGTH} bytes, got {len(data)}")
        (magic, version, flags, crc, sink_hash, batch_id, data_start, rows, payload_bytes, data_crc,
         _reserved) = _LAYOUT.unpack(data)
        if magic != MARKER_MAGIC:
            raise MarkerError(f"commit marker magic {magic!r} != {MARKER_MAGIC!r}")
        expected = crc32c.crc32c(data[:_CRC_OFFSET] + b"\0\0\0\0" + data[_CRC_OFFSET + 4:])
        if crc != expected:
            raise MarkerError(f"commit marker CRC {crc:#010x} != computed {expected:#010x}")
        if version != MARKER_FORMAT_VERSION:
            raise MarkerError(f"commit marker format version {version} is not supported "
                              f"(this connector writes and reads version {MARKER_FORMAT_VERSION})")
        return cls(sink_hash, batch_id, data_start, rows, payload_bytes, data_crc, flags, version)


@dataclass(frozen=True)
class LocatedMarker:
    """A marker and where its frame lies in the recording."""

    marker: CommitMarker
    position: int  # where the marker frame begins

    @property
    def end(self) -> int:
        """The committed end: the position just after the marker frame."""
        return self.position + MARKER_FRAME_LENGTH


def marker_at_tail(block: bytes | memoryview | np.ndarray, block_position: int, stop_position: int,
                   expected_sink_hash: int | None = None) -> LocatedMarker | None:
    """The marker whose frame ends exactly at ``stop_position``, if the block holds one.

    ``block`` holds frames starting at ``block_position`` (a replay of the recording's last
    ``MARKER_FRAME_LENGTH`` bytes). Anything else there (data, a marker of another sink) -> None.
    """
    data = np.frombuffer(block, dtype=np.uint8) if not isinstance(block, np.ndarray) else block
    start = stop_position - MARKER_FRAME_LENGTH - block_position
    if start < 0 or start + MARKER_FRAME_LENGTH > data.size or block_position + data.size < stop_position:
        return None
    found = _decode_frame(data, start, expected_sink_hash)
    return None if found is None else LocatedMarker(found, block_position + start)


def markers_in_frames(block: bytes | np.ndarray, block_position: int, frame_offsets: np.ndarray,
                      expected_sink_hash: int | None = None) -> list[LocatedMarker]:
    """Every valid marker among the frames at ``frame_offsets`` of ``block`` (numpy pre-filter)."""
    data = np.frombuffer(block, dtype=np.uint8) if not isinstance(block, np.ndarray) else block
    if frame_offsets.size == 0:
        return []
    words = data.view("<i4") if data.size % 4 == 0 else np.frombuffer(data[: data.size // 4 * 4], "<i4")
    lengths = words[frame_offsets // 4]
    types = data[frame_offsets + 6].astype(np.uint16) | (data[frame_offsets + 7].astype(np.uint16) << 8)
    reserved = data[: data.size // 8 * 8].view("<i8")[frame_offsets // 8 + 3]
    candidates = frame_offsets[(lengths == MARKER_FRAME_LENGTH) & (types == HDR_TYPE_DATA)
                               & (reserved == MARKER_RESERVED_VALUE)]
    located: list[LocatedMarker] = []
    for offset in candidates.tolist():
        marker = _decode_frame(data, offset, expected_sink_hash)
        if marker is not None:
            located.append(LocatedMarker(marker, block_position + offset))
    return located


def _decode_frame(data: np.ndarray, offset: int, expected_sink_hash: int | None) -> CommitMarker | None:
    header = data[offset:offset + HEADER_LENGTH].tobytes()
    if len(header) < HEADER_LENGTH:
        return None
    frame_length, _version, flags, frame_type = struct.unpack_from("<iBBH", header)
    reserved = struct.unpack_from("<q", header, 24)[0]
    if (frame_length != MARKER_FRAME_LENGTH or frame_type != HDR_TYPE_DATA or flags & UNFRAGMENTED != UNFRAGMENTED
            or reserved != MARKER_RESERVED_VALUE):
        return None
    try:
        marker = CommitMarker.decode(data[offset + HEADER_LENGTH:offset + MARKER_FRAME_LENGTH].tobytes())
    except MarkerError:
        return None
    if expected_sink_hash is not None and marker.sink_id_hash != expected_sink_hash:
        return None
    return marker


# --- recognising sink recordings from their descriptor -----------------------------------------


def sink_alias(sink_id: str) -> str:
    return f"{SINK_ALIAS_PREFIX}{sink_id}"


def channel_alias(channel: str) -> str | None:
    """The ``alias`` param of an Aeron channel URI, None when it has none."""
    _, _, params = channel.partition("?")
    for param in params.split("|"):
        key, _, value = param.partition("=")
        if key == "alias":
            return value
    return None


def sink_id_of_channel(channel: str) -> str | None:
    """The sink id a sink recording's original channel names, None for any other recording."""
    alias = channel_alias(channel)
    if alias is None or not alias.startswith(SINK_ALIAS_PREFIX):
        return None
    return alias[len(SINK_ALIAS_PREFIX):]


def is_sink_recording(descriptor: RecordingDescriptor) -> bool:
    return sink_id_of_channel(descriptor.original_channel) is not None
