"""The layout of `archive-mark.dat`'s header and error log: decoding only, no file access.

Layout written (Aeron 1.47+, what the Java 1.47-1.52 archive and ArchiveTool read): an 8-byte
SBE message header {blockLength 128, templateId 200, schemaId 100, version 2} at 0, then the
MarkFileHeader block at 8 (offsets below are absolute):

=================  ======  =================================================
field              offset  notes
=================  ======  =================================================
SBE header         0       blockLength 128, templateId 200, schemaId 100, version 2
version:i32        8       archive file version 3.1.0, written last ("ready")
activityTs:i64     16      epoch ms, refreshed every second; -1 after a clean stop
startTs:i64        24
pid:i64            32
controlStreamId    40      i32
localControlStrId  44      i32
eventsStreamId     48      i32
headerLength       52      i32, 8192
errorBufferLength  56      i32
archiveId:i64      64
strings            136     controlChannel, localControlChannel, eventsChannel,
                           aeronDirectory: each u32 length + ASCII
aeron-spark area   7936    ``ASPKEXT1`` + u32 length + ASCII ``key=value``
                           lines: ``threadingMode=dedicated|shared``
error log          8192    Agrona DistinctErrorLog records
=================  ======  =================================================

The aeron-spark area holds what this project writes that Aeron's MarkFileHeader (mark schema
version 2, 1.47-1.52) has no field for: the threading mode. It sits in the header's unused tail,
past the four strings and before the error log: Java's ArchiveMarkFile and ArchiveTool read the
block and the strings only, so they read the file unchanged, and the area stays clear of both
places a later schema could grow into (new block fields inside the 128 bytes, new var fields
after aeronDirectory). Files without it (Java's, older ones) decode with ``threading_mode`` None.

Readers also accept the 1.24-1.46 layout (the same block at offset 0, no SBE header; what this
project wrote before it wrote 3.1.0) and the <= 1.23 one (block at 0 up to eventsStreamId,
strings at 128, no error log).

The file itself (claiming, lock, activity updates, error log writes) is
``aeron_spark.archive.storage.mark_file``; clients find an archive from it through
``aeron_spark.archive.client.archive_location``.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

MARK_FILE_NAME = "archive-mark.dat"
HEADER_LENGTH = 8192
STRINGS_OFFSET = 128
DEFAULT_ERROR_BUFFER_LENGTH = 64 * 1024
MIN_ERROR_BUFFER_LENGTH = 4096
PAGE_SIZE = 4096
UPDATE_INTERVAL_MS = 1_000   # Aeron's MARK_FILE_UPDATE_INTERVAL_MS
LIVENESS_TIMEOUT_MS = 10_000  # Aeron's LIVENESS_TIMEOUT_MS
NULL_TIMESTAMP = -1

BLOCK = struct.Struct("<i4xqqqiiiii4xq")  # version .. archiveId, with the block's two 4-byte gaps
BLOCK_LENGTH = 128
U32 = struct.Struct("<I")
SBE_HEADER = struct.Struct("<HHHH")
_MODERN_TEMPLATE_ID = 200
_MODERN_SCHEMA_ID = 100
_MODERN_SCHEMA_VERSION = 2
MODERN_BLOCK_OFFSET = 8
#: The 1.47+ message header this project writes at offset 0.
MODERN_SBE_HEADER = SBE_HEADER.pack(BLOCK_LENGTH, _MODERN_TEMPLATE_ID, _MODERN_SCHEMA_ID, _MODERN_SCHEMA_VERSION)
#: Absolute offsets in the file this project writes (the block at `MODERN_BLOCK_OFFSET`).
VERSION_OFFSET = MODERN_BLOCK_OFFSET + 0
ACTIVITY_OFFSET = MODERN_BLOCK_OFFSET + 8
WRITTEN_STRINGS_OFFSET = MODERN_BLOCK_OFFSET + STRINGS_OFFSET  # 136
#: The error log starts at the header length (8192), absolute, in the 1.24+ layouts.
ERROR_LOG_OFFSET = HEADER_LENGTH
#: The aeron-spark area at the end of the header (see the module docstring): magic, u32 length, text.
EXTENSION_OFFSET = HEADER_LENGTH - 256
EXTENSION_MAGIC = b"ASPKEXT1"
EXTENSION_MAX_TEXT = HEADER_LENGTH - EXTENSION_OFFSET - len(EXTENSION_MAGIC) - U32.size

# Agrona DistinctErrorLog record: length, observationCount, lastObservationTs, firstObservationTs.
ERROR_RECORD = struct.Struct("<iiqq")
ERROR_RECORD_ALIGNMENT = 8


class MarkFileError(Exception):
    """A mark file that is missing, damaged or not ours to take."""


class ArchiveRunningError(MarkFileError):
    """Another archive is live on the directory."""


@dataclass(frozen=True, slots=True)
class ArchiveMarkInfo:
    """What a mark file says about the archive that wrote it."""

    path: Path
    version: int
    activity_timestamp: int
    start_timestamp: int
    pid: int
    control_stream_id: int
    local_control_stream_id: int
    events_stream_id: int
    header_length: int
    error_buffer_length: int
    archive_id: int
    control_channel: str
    local_control_channel: str
    events_channel: str
    aeron_directory: str
    threading_mode: str | None = None  # from the aeron-spark area; None: not written (e.g. by Java)

    @property
    def terminated(self) -> bool:
        """True after a clean shutdown (activity timestamp -1)."""
        return self.activity_timestamp == NULL_TIMESTAMP

    def activity_age_ms(self, now_ms: int | None = None) -> int:
        return (epoch_ms() if now_ms is None else now_ms) - self.activity_timestamp

    def is_live(self, now_ms: int | None = None) -> bool:
        """Running: not terminated, activity within 10 s, and the process still exists."""
        if self.terminated or self.activity_timestamp <= 0:
            return False
        return self.activity_age_ms(now_ms) <= LIVENESS_TIMEOUT_MS and pid_is_alive(self.pid)

    @property
    def aeron_dir(self) -> str | None:
        """The Aeron directory, None when the archive did not record one."""
        return self.aeron_directory or None

    @property
    def version_text(self) -> str:
        v = self.version
        return f"{v >> 16}.{(v >> 8) & 0xFF}.{v & 0xFF}"

    def to_dict(self, now_ms: int | None = None) -> dict:
        return {
            "path": str(self.path), "version": self.version_text,
            "activityTimestamp": self.activity_timestamp, "startTimestamp": self.start_timestamp,
            "pid": self.pid, "archiveId": self.archive_id,
            "controlChannel": self.control_channel, "controlStreamId": self.control_stream_id,
            "localControlChannel": self.local_control_channel,
            "localControlStreamId": self.local_control_stream_id,
            "eventsChannel": self.events_channel, "eventsStreamId": self.events_stream_id,
            "aeronDirectory": self.aeron_directory, "headerLength": self.header_length,
            "errorBufferLength": self.error_buffer_length, "live": self.is_live(now_ms),
            **({"threadingMode": self.threading_mode} if self.threading_mode is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class ErrorObservation:
    observation_count: int
    first_observation_timestamp: int
    last_observation_timestamp: int
    error: str


# --------------------------------------------------------------------------- reading (sans-IO core)

def decode_mark_file(data: bytes, path: Path = Path(MARK_FILE_NAME)) -> ArchiveMarkInfo:
    """Decodes the header of a mark file (either the 1.24-1.46 or the 1.47+ layout)."""
    base = block_offset(data)
    if len(data) < base + STRINGS_OFFSET:
        raise MarkFileError(f"{path}: {len(data)} bytes is too short for a mark file header "
                            f"({base + STRINGS_OFFSET} bytes)")
    (version, activity, start, pid, control_stream_id, local_control_stream_id, events_stream_id,
     header_length, error_buffer_length, archive_id) = BLOCK.unpack_from(data, base)
    cursor = base + STRINGS_OFFSET
    limit = min(len(data), base + (header_length if header_length > 0 else HEADER_LENGTH))
    texts = []
    for name in ("controlChannel", "localControlChannel", "eventsChannel", "aeronDirectory"):
        if cursor + 4 > limit:
            raise MarkFileError(f"{path}: {name} length runs past the header")
        (size,) = U32.unpack_from(data, cursor)
        cursor += 4
        if cursor + size > limit:
            raise MarkFileError(f"{path}: {name} of {size} bytes runs past the header")
        texts.append(data[cursor:cursor + size].decode("ascii", errors="replace"))
        cursor += size
    return ArchiveMarkInfo(
        path=path, version=version, activity_timestamp=activity, start_timestamp=start, pid=pid,
        control_stream_id=control_stream_id, local_control_stream_id=local_control_stream_id,
        events_stream_id=events_stream_id, header_length=header_length,
        error_buffer_length=error_buffer_length, archive_id=archive_id,
        control_channel=texts[0], local_control_channel=texts[1], events_channel=texts[2],
        aeron_directory=texts[3], threading_mode=decode_extension(data, base).get("threadingMode"))


def encode_extension(fields: dict[str, str]) -> bytes:
    """The aeron-spark area's bytes (written at `EXTENSION_OFFSET`)."""
    text = "".join(f"{key}={value}\n" for key, value in fields.items()).encode("ascii")
    if len(text) > EXTENSION_MAX_TEXT:
        raise ValueError(f"mark file aeron-spark fields take {len(text)} bytes; room for {EXTENSION_MAX_TEXT}")
    return EXTENSION_MAGIC + U32.pack(len(text)) + text


def decode_extension(data: bytes, base: int = MODERN_BLOCK_OFFSET) -> dict[str, str]:
    """The aeron-spark area's fields; empty when absent (an older layout, or a Java-written file)."""
    start = EXTENSION_OFFSET
    if base != MODERN_BLOCK_OFFSET or len(data) < start + len(EXTENSION_MAGIC) + U32.size \
            or data[start:start + len(EXTENSION_MAGIC)] != EXTENSION_MAGIC:
        return {}
    (size,) = U32.unpack_from(data, start + len(EXTENSION_MAGIC))
    if size > EXTENSION_MAX_TEXT:
        return {}
    text_start = start + len(EXTENSION_MAGIC) + U32.size
    text = data[text_start:text_start + size].decode("ascii", errors="replace")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def decode_error_log(buffer: bytes | memoryview) -> list[ErrorObservation]:
    """Walks DistinctErrorLog records until the first zero length."""
    view = memoryview(buffer)
    observations = []
    offset = 0
    while offset + ERROR_RECORD.size <= len(view):
        length, count, last, first = ERROR_RECORD.unpack_from(view, offset)
        if length <= 0:
            break
        end = min(offset + length, len(view))
        text = bytes(view[offset + ERROR_RECORD.size:end]).decode("utf-8", errors="replace")
        observations.append(ErrorObservation(count, first, last, text))
        offset += align(length, ERROR_RECORD_ALIGNMENT)
    return observations


def block_offset(data: bytes) -> int:
    if len(data) >= SBE_HEADER.size:
        _, template_id, schema_id, _ = SBE_HEADER.unpack_from(data, 0)
        if template_id == _MODERN_TEMPLATE_ID and schema_id == _MODERN_SCHEMA_ID:
            return MODERN_BLOCK_OFFSET
    return 0


def pid_is_alive(pid: int) -> bool:
    """Whether a process with this id exists and is not a zombie (same host assumed)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    state = stat.rsplit(")", 1)[-1].split()[0:1]
    return state != ["Z"]


def align(value: int, alignment: int) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


def epoch_ms() -> int:
    return time.time_ns() // 1_000_000
