"""Reading a catalog file as it lies on disk, for `Catalog`: its header (which layout and version,
checked), the frames of the variable-length layout and the slots of the old 1 KiB slot layout
(handed over undecoded, read in large chunks, for `Catalog` to decode and index under its lock;
what is damaged becomes a `CatalogProblem`), and the stored descriptor bodies a listing sends as
they are (`read_stored_bodies`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.storage.catalog_entries import (
    MIN_DESCRIPTOR_LENGTH,
    VALID,
    CatalogError,
    CatalogProblem,
    OldCatalogVersionError,
)
from aeron_spark.archive.storage.catalog_index import EntryFrame

_WALK_CHUNK = 1024 * 1024
_OLD_SLOTS_PER_READ = 4096
#: Frames at most this far apart are read with one pread (the bytes between are read and skipped).
_BODY_READ_GAP = 8 * 1024

#: ``(frame bytes, offset, descriptor length, state, stored checksum, slot id or None)``
OnEntry = Callable[[memoryview, int, int, int, int, int | None], None]


@dataclass(frozen=True)
class CatalogHeader:
    version: int
    old_layout: bool  # 1 KiB slots (versions 0-2.x, Aeron <= 1.31): read-only
    alignment: int
    next_recording_id: int  # the header's (old layout: 0, derived from the slots by the walk)


def read_header(fd: int, path: Path, *, read_only: bool) -> CatalogHeader:
    """The checked header of the catalog open on ``fd``; an old layout only ``read_only``."""
    size = os.fstat(fd).st_size
    if size < layout.OLD_HEADER.size:
        raise CatalogError(f"{path}: {size} bytes is too short for a catalog header")
    version, header_length = layout.OLD_HEADER.unpack(os.pread(fd, layout.OLD_HEADER.size, 0))
    if layout.is_old_layout(version, header_length):
        if not read_only:
            raise OldCatalogVersionError(
                f"{path}: catalog file version {layout.version_text(version)} (fixed 1 KiB slots, "
                f"Aeron <= 1.31) is not served by this archive, which writes "
                f"{layout.version_text(layout.ARCHIVE_FILE_VERSION)} (Aeron >= 1.32); run "
                f"`aeron-archive migrate --dir {path.parent}` to upgrade the directory in place")
        return CatalogHeader(version, True, layout.OLD_ENTRY_LENGTH, 0)
    if version >> 16 != layout.ARCHIVE_FILE_MAJOR:
        raise CatalogError(
            f"{path}: incompatible catalog file version {layout.version_text(version)}; this "
            f"archive reads and writes {layout.version_text(layout.ARCHIVE_FILE_VERSION)} and reads "
            f"the 1 KiB slot catalogs of versions 0-2.x")
    if header_length != layout.HEADER_LENGTH or size < layout.HEADER_LENGTH:
        raise CatalogError(f"{path}: catalog header length {header_length} (file {size} bytes) "
                           f"is not {layout.HEADER_LENGTH}")
    _, _, next_id, alignment = layout.CATALOG_HEADER.unpack(os.pread(fd, layout.HEADER_LENGTH, 0))
    if alignment <= 0 or alignment & (alignment - 1) or alignment % 32:
        raise CatalogError(f"{path}: catalog alignment {alignment} is not a power of two >= 32")
    return CatalogHeader(version, False, alignment, next_id)


def walk_frames(fd: int, offset: int, alignment: int, problems: list[CatalogProblem],
                on_entry: OnEntry) -> tuple[int, bool]:
    """Hands each frame from ``offset`` to the terminating length 0 (or the end of the file) to
    ``on_entry``; returns (where the frames end: the next append offset, whether a damaged frame
    length ended the walk early)."""
    size = os.fstat(fd).st_size
    buffer = b""
    buffer_at = offset
    while offset + layout.DESCRIPTOR_HEADER_LENGTH <= size:
        if offset + layout.DESCRIPTOR_HEADER_LENGTH > buffer_at + len(buffer):
            buffer_at, buffer = offset, os.pread(fd, _WALK_CHUNK, offset)
        length, state, stored_checksum = layout.DESCRIPTOR_HEADER.unpack_from(buffer, offset - buffer_at)
        if length == 0:
            break
        frame = layout.DESCRIPTOR_HEADER_LENGTH + length
        if length < 0 or frame % alignment or offset + frame > size:
            problems.append(CatalogProblem(
                None, f"frame at offset {offset} has length {length}: not a multiple of the "
                      f"alignment {alignment} inside the file; entries after it are not read"))
            return offset, True
        if offset + frame > buffer_at + len(buffer):
            buffer_at, buffer = offset, os.pread(fd, max(_WALK_CHUNK, frame), offset)
        at = offset - buffer_at
        on_entry(memoryview(buffer)[at:at + frame], offset, length, state, stored_checksum, None)
        offset += frame
    return offset, False


def walk_old_slots(fd: int, problems: list[CatalogProblem], on_entry: OnEntry) -> int:
    """Hands each used slot of a 1 KiB slot catalog to ``on_entry`` (its slot id is the recording
    id it must hold); returns the file's length."""
    size = os.fstat(fd).st_size
    slots = size // layout.OLD_ENTRY_LENGTH - 1
    if size % layout.OLD_ENTRY_LENGTH:
        problems.append(CatalogProblem(None, f"file length {size} is not a multiple of "
                                             f"{layout.OLD_ENTRY_LENGTH}; the partial last slot is ignored"))
    for first_id in range(0, max(slots, 0), _OLD_SLOTS_PER_READ):
        count = min(_OLD_SLOTS_PER_READ, slots - first_id)
        data = os.pread(fd, count * layout.OLD_ENTRY_LENGTH, layout.old_slot_offset(first_id))
        whole = len(data) // layout.OLD_ENTRY_LENGTH
        table = np.frombuffer(data, dtype=np.uint8, count=whole * layout.OLD_ENTRY_LENGTH).reshape(
            whole, layout.OLD_ENTRY_LENGTH)
        lengths = table[:, :4].copy().view("<i4").reshape(whole)
        for index in np.flatnonzero(lengths != 0).tolist():
            recording_id = first_id + index
            slot = memoryview(data)[index * layout.OLD_ENTRY_LENGTH:(index + 1) * layout.OLD_ENTRY_LENGTH]
            length, valid = layout.OLD_DESCRIPTOR_HEADER.unpack_from(slot, 0)
            if not MIN_DESCRIPTOR_LENGTH <= length <= layout.OLD_MAX_BODY_LENGTH:
                problems.append(CatalogProblem(recording_id, f"descriptor length {length} outside "
                                                             f"[{MIN_DESCRIPTOR_LENGTH}, {layout.OLD_MAX_BODY_LENGTH}]"))
                continue
            if valid not in (0, 1):
                problems.append(CatalogProblem(recording_id, f"valid flag {valid} is neither 0 nor 1"))
                continue
            on_entry(slot, layout.old_slot_offset(recording_id), length, valid, 0, recording_id)
    return size


def read_stored_bodies(fd: int, frames: list[tuple[int, EntryFrame]], *,
                       old_layout: bool) -> list[tuple[int, memoryview]]:
    """(id, stored descriptor body) of each of ``frames`` ((recording id, frame), ascending) that is
    valid and well formed, without the frame's padding; frames next to each other in the file are
    read with one pread."""
    found: list[tuple[int, memoryview]] = []
    header_length = layout.DESCRIPTOR_HEADER_LENGTH
    run: list[tuple[int, EntryFrame]] = []

    def flush() -> None:
        if not run:
            return
        first = run[0][1].offset
        last = run[-1][1]
        data = memoryview(os.pread(fd, last.offset + header_length + last.descriptor_length - first, first))
        for recording_id, frame in run:
            at = frame.offset - first
            header = data[at:at + header_length]
            if len(header) < header_length:
                continue
            if old_layout:
                length, state = layout.OLD_DESCRIPTOR_HEADER.unpack_from(header, 0)
            else:
                length, state, _ = layout.DESCRIPTOR_HEADER.unpack_from(header, 0)
            if state != VALID or length <= 0:
                continue
            area = data[at + header_length:at + header_length + length]
            used = descriptor_body.used_body_length(area, recording_id)
            if used is not None and (not old_layout or used == length):
                found.append((recording_id, area[:used]))
        run.clear()

    for recording_id, frame in frames:
        if run:
            previous = run[-1][1]
            previous_end = previous.offset + header_length + previous.descriptor_length
            if not 0 <= frame.offset - previous_end <= _BODY_READ_GAP:
                flush()
        run.append((recording_id, frame))
    flush()
    return found
