"""Offline catalog housekeeping of Aeron's ArchiveTool: ``compact`` and ``delete-orphaned-segments``.

`compact_catalog` keeps only the VALID entries of a 3.x catalog (INVALID and DELETED frames go,
with every segment file of their recordings), as Aeron's ``ArchiveTool compact`` does: the kept
frames are copied byte for byte (states, checksums and ids unchanged) behind a header with the
same version, nextRecordingId and alignment, and the file is cut to its last frame.

Crash safety (SIGKILL at any point): the new catalog is written to ``archive.catalog.compact``,
fsynced and renamed over ``archive.catalog`` (then the directory is fsynced); only then are the
dropped recordings' segment files deleted. A crash before the rename leaves the old catalog (the
leftover ``.compact`` file is deleted by the next compaction); a crash after it leaves segment
files whose id is below nextRecordingId but has no entry, which the next compaction deletes.

`delete_orphaned_segments` deletes, per catalog entry, the ``<id>-<base>.rec`` files outside the
segments from the one holding the start position to the one holding the stop position (detached
segments never deleted, files past a stop), as Aeron's ``ArchiveTool delete-orphaned-segments``.

Both change files: callers hold `mark_file.maintenance_lock` (no archive may run on the directory).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.archive.storage.catalog import CATALOG_FILE_NAME, Catalog, CatalogError, sync_directory
from aeron_spark.archive.storage.fault_injection import fault_point
from aeron_spark.driver_integration import position as positions

COMPACT_FILE_NAME = CATALOG_FILE_NAME + ".compact"  # Aeron's name for the catalog being compacted
_I64 = struct.Struct("<q")


@dataclass(frozen=True)
class CompactionResult:
    deleted_records: int
    reclaimed_bytes: int
    removed_recording_ids: list[int] = field(default_factory=list)
    deleted_files: list[Path] = field(default_factory=list)


def compact_catalog(archive_dir: str | os.PathLike[str]) -> CompactionResult:
    """Removes every non-VALID entry from the catalog and deletes its recording's segment files."""
    directory = Path(archive_dir)
    path = directory / CATALOG_FILE_NAME
    if not path.exists():
        raise CatalogError(f"no archive in {directory}: {CATALOG_FILE_NAME} is missing")
    data = path.read_bytes()
    version, header_length = layout.OLD_HEADER.unpack_from(data, 0)
    if layout.is_old_layout(version, header_length):
        raise CatalogError(f"{path}: catalog file version {layout.version_text(version)} (1 KiB slots) "
                           f"cannot be compacted; run `aeron-archive migrate --dir {directory}` first")
    _, _, next_recording_id, alignment = layout.CATALOG_HEADER.unpack_from(data, 0)
    kept = [data[:layout.HEADER_LENGTH]]
    kept_ids: set[int] = set()
    removed: list[int] = []
    reclaimed = 0
    for offset, frame_length, state, recording_id in _frames(data, alignment, path):
        if state == layout.VALID:
            kept.append(data[offset:offset + frame_length])
            kept_ids.add(recording_id)
        else:
            removed.append(recording_id)
            reclaimed += frame_length
    temporary = directory / COMPACT_FILE_NAME
    temporary.unlink(missing_ok=True)  # an earlier compaction killed before its rename
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, b"".join(kept))
        os.fsync(fd)
    finally:
        os.close(fd)
    fault_point("compact-written")
    os.replace(temporary, path)
    sync_directory(directory)
    fault_point("compact-committed")
    doomed = set(removed)
    deleted = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        parsed = _segment_file_id(entry.name)
        if parsed is None:
            continue
        # Ids below nextRecordingId without an entry: files a compaction killed after its rename left.
        if parsed in doomed or (parsed < next_recording_id and parsed not in kept_ids):
            Path(entry.path).unlink(missing_ok=True)
            deleted.append(Path(entry.path))
    return CompactionResult(len(removed), reclaimed, removed, deleted)


def delete_orphaned_segments(archive_dir: str | os.PathLike[str], catalog: Catalog,
                             recording_id: int | None = None) -> list[Path]:
    """Deletes each recording's segment files outside [segment of start, segment of stop] (all of
    them from the start's segment on while it is active); only ``recording_id``'s when given."""
    directory = Path(archive_dir)
    by_id: dict[int, list[str]] = {}
    for entry in os.scandir(directory):
        parsed = _segment_file_id(entry.name)
        if parsed is not None:
            by_id.setdefault(parsed, []).append(entry.name)
    found = False
    deleted = []
    for catalog_entry in catalog.entries():
        d = catalog_entry.descriptor
        if recording_id is not None and d.recording_id != recording_id:
            continue
        found = True
        first = positions.segment_file_base_position(d.start_position, d.start_position,
                                                     d.term_buffer_length, d.segment_file_length)
        last = (None if d.stop_position == NULL_POSITION else
                positions.segment_file_base_position(d.start_position, d.stop_position,
                                                     d.term_buffer_length, d.segment_file_length))
        for name in sorted(by_id.get(d.recording_id, [])):
            base = _segment_file_base(name)
            # An unparsable position is no segment of the recording: Aeron deletes it too.
            if base is None or base < first or (last is not None and base > last):
                (directory / name).unlink(missing_ok=True)
                deleted.append(directory / name)
    if recording_id is not None and not found:
        raise CatalogError(f"no recording found with recordingId: {recording_id}")
    return deleted


def used_catalog_bytes(archive_dir: str | os.PathLike[str]) -> int:
    """Bytes of a 3.x catalog taken by its header and frames (the rest is room for new entries)."""
    path = Path(archive_dir) / CATALOG_FILE_NAME
    data = path.read_bytes()
    _, _, _, alignment = layout.CATALOG_HEADER.unpack_from(data, 0)
    frames = _frames(data, alignment, path)
    return frames[-1][0] + frames[-1][1] if frames else layout.HEADER_LENGTH


def _frames(data: bytes, alignment: int, path: Path) -> list[tuple[int, int, int, int]]:
    """``(offset, frame length, state, recording id)`` of each frame up to the length-0 end."""
    frames = []
    offset = layout.HEADER_LENGTH
    header_length = layout.DESCRIPTOR_HEADER.size
    while offset + header_length <= len(data):
        length, state, _ = layout.DESCRIPTOR_HEADER.unpack_from(data, offset)
        if length == 0:
            break
        frame_length = header_length + length
        if length < 0 or frame_length % alignment or offset + frame_length > len(data):
            raise CatalogError(f"{path}: damaged frame at offset {offset} (length {length}); "
                               f"refusing to compact a damaged catalog")
        (recording_id,) = _I64.unpack_from(data, offset + header_length + descriptor_body.RECORDING_ID_OFFSET)
        frames.append((offset, frame_length, state, recording_id))
        offset += frame_length
    return frames


def _segment_file_id(name: str) -> int | None:
    """The recording id of a ``<id>-<anything>.rec`` name (as Aeron indexes them), None otherwise."""
    if not name.endswith(positions.SEGMENT_FILE_SUFFIX):
        return None
    head, dash, _ = name.partition("-")
    return int(head) if dash and head.isdigit() else None


def _segment_file_base(name: str) -> int | None:
    """The base position of a ``<id>-<base>.rec`` name (signed, as Java's parseLong), None if unparsable."""
    text = name[:-len(positions.SEGMENT_FILE_SUFFIX)].partition("-")[2]
    try:
        return int(text)
    except ValueError:
        return None
