"""`archive.catalog`: Aeron's variable-length catalog (archive file version 3.1.0, Aeron 1.32-1.52).

Layout (`aeron_spark.archive.codecs.catalog_layout`, little-endian): a 32-byte CatalogHeader
``{version 3.1.0, length 32, nextRecordingId:i64, alignment:i32 (64)}``, then the entries packed
from offset 32, each a frame of a 32-byte RecordingDescriptorHeader ``{length = frameLength - 32,
state INVALID 0 / VALID 1 / DELETED 2, checksum, reserved}`` and the RecordingDescriptor body
(`codecs.descriptor_body`) zero-padded to the alignment; ``length`` 0 ends the entries. The
descriptor checksum is the record checksum (when one is configured, else 0) over the frame's
descriptor bytes, recomputed on every update.

The file has no index: opening walks the frames and keeps ``id -> (offset, frame length)`` in
memory; a read-only opener re-walks only the frames appended since. A new file is sparse at 1 MiB
and grows by x1.5 when an append does not fit. The file is read and written with
``pread``/``pwrite`` on one descriptor (read-only readers in other processes see updates through
the page cache).

Entries move only in `replace_channels` (UpdateChannel, Aeron's Catalog.replaceRecording): a
descriptor that no longer fits its frame makes every later entry shift right. Aeron moves them in
place (a crash in the middle leaves a torn catalog); here the whole catalog is written to
``archive.catalog.replace``, fsynced and renamed over ``archive.catalog`` (then the directory is
fsynced): a crash leaves either the old or the new catalog, never a mix (a leftover
``.replace`` file is deleted by the next writer). The writer switches its descriptor to the new
file with ``dup2`` (threads reading it see the old or the new file, and a read at a moved offset is
retried under the lock); a read-only opener in another process notices the new inode and re-walks.

Old catalogs (fixed 1 KiB slots: versions 0, 1.x, 2.x; Aeron <= 1.31) are read (``read_only``:
describe, dump, verify --dry-run, migrate); opening one for writing fails with a message to run
``aeron-archive migrate``.

The class stays whole: every method reads or moves the in-memory ``id -> frame`` index and the
file offsets it names, under one lock. Around it, by role: `catalog_entries` (the descriptor body
IO, the entry and problem records, the errors), `catalog_index` (the frame and listing index
records), `catalog_walk` (reading the header and walking the frames or old slots on disk, handing
each entry to the index), `catalog_file` (creating, growing and copying the file; the directory
fsync). Opening an archive directory (recovery included) is `archive_opening`, which imports this
module (not the other way round); migration (`storage.migration`) and maintenance
(`storage.maintenance`) are their own modules.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, NULL_TIMESTAMP, RecordingDescriptor
from aeron_spark.archive.configuration import DEFAULT_CATALOG_FILE_SYNC, FILE_SYNC_LEVELS
from aeron_spark.archive.storage.catalog_entries import (  # re-exported: the public import path
    DELETED, INVALID, MAX_DESCRIPTOR_LENGTH, MAX_STRINGS_LENGTH, MIN_DESCRIPTOR_LENGTH, VALID, CatalogEntry, CatalogError,
    CatalogProblem, DescriptorChecksum, DescriptorDecodingError, DescriptorEncodingError, OldCatalogVersionError,
    UnknownRecordingError, check_lengths, check_position, decode_recording_descriptor, encode_recording_descriptor,
    fit_source_identity)
from aeron_spark.archive.storage.catalog_file import (  # re-exported: the public import path
    CATALOG_FILE_NAME, REPLACE_FILE_NAME, copy_range, grown_capacity, now_ms, remove_uncommitted_replace, sync_directory,
    write_new_catalog_file)
from aeron_spark.archive.storage.catalog_index import EntryFrame, ListingIndex
from aeron_spark.archive.storage.catalog_walk import read_header, read_stored_bodies, walk_frames, walk_old_slots
from aeron_spark.archive.storage.fault_injection import fault_point

__all__ = [
    "ARCHIVE_FILE_VERSION", "CATALOG_FILE_NAME", "DEFAULT_CAPACITY", "DELETED", "DESCRIPTOR_HEADER_LENGTH",
    "INVALID", "MAX_DESCRIPTOR_LENGTH", "MAX_STRINGS_LENGTH", "MIN_DESCRIPTOR_LENGTH",
    "REPLACE_FILE_NAME", "VALID", "Catalog", "CatalogEntry", "CatalogError",
    "CatalogProblem", "DescriptorChecksum", "DescriptorDecodingError", "DescriptorEncodingError",
    "OldCatalogVersionError", "UnknownRecordingError", "decode_recording_descriptor",
    "encode_recording_descriptor", "fit_source_identity", "semantic_version",
    "sync_directory",
]

log = logging.getLogger(__name__)

ARCHIVE_FILE_VERSION = layout.ARCHIVE_FILE_VERSION  # 3.1.0 = 196864
DEFAULT_CAPACITY = layout.DEFAULT_CAPACITY
DESCRIPTOR_HEADER_LENGTH = layout.DESCRIPTOR_HEADER_LENGTH
semantic_version = layout.semantic_version

# Offsets inside the descriptor body, for in-place updates.
_CONTROL_SESSION_ID = descriptor_body.CONTROL_SESSION_ID_OFFSET
_CORRELATION_ID = descriptor_body.CORRELATION_ID_OFFSET
_STOP_TIMESTAMP = descriptor_body.STOP_TIMESTAMP_OFFSET
_START_POSITION = descriptor_body.START_POSITION_OFFSET
_STOP_POSITION = descriptor_body.STOP_POSITION_OFFSET
_SESSION_ID = descriptor_body.SESSION_ID_OFFSET  # the only i32 of them
_RECORDING_ID = descriptor_body.RECORDING_ID_OFFSET
_I64 = struct.Struct("<q")
_I32 = struct.Struct("<i")


class Catalog:
    """The archive catalog. Open with `Catalog.open`; one writer per directory (see mark_file)."""

    def __init__(self, path: Path, fd: int, *, read_only: bool, file_sync: int, old_layout: bool,
                 version: int, alignment: int, checksum: DescriptorChecksum | None) -> None:
        self.path = path
        self._fd = fd
        self.read_only = read_only
        self.file_sync = file_sync
        self.old_layout = old_layout
        self.version = version
        self.alignment = alignment
        self.checksum = checksum
        self.problems: list[CatalogProblem] = []
        self._frames: dict[int, EntryFrame] = {}
        self._end = layout.HEADER_LENGTH  # the next append offset (modern layout)
        self._walk_stopped = False  # a damaged frame length ended the walk early
        self._header_next_id = 0
        self._last_id = -1
        self._valid_count = 0
        self._lock = threading.RLock()
        self._index = None if read_only else ListingIndex(1024)
        self._inode = os.fstat(fd).st_ino

    # ---- opening

    @classmethod
    def open(cls, archive_dir: str | os.PathLike, *, file_sync: int = DEFAULT_CATALOG_FILE_SYNC, read_only: bool = False,
             capacity: int = DEFAULT_CAPACITY, checksum: DescriptorChecksum | None = None) -> "Catalog":
        """Opens (or, for writing, creates) ``archive_dir/archive.catalog``.

        ``capacity`` is the initial length in bytes of a new file (Aeron's
        ``aeron.archive.catalog.capacity``, default 1 MiB); an existing file keeps its length and
        grows by x1.5 when an append does not fit. ``checksum`` is the record checksum, also
        used for each descriptor's checksum (None: 0). Problems found in existing entries are
        logged and listed in ``problems``; such entries are never reported as valid recordings.
        """
        if file_sync not in FILE_SYNC_LEVELS:
            raise ValueError(f"file_sync must be one of {FILE_SYNC_LEVELS}, got {file_sync!r}")
        if not layout.MIN_CAPACITY <= capacity <= layout.MAX_CAPACITY:
            raise ValueError(f"capacity must be in [{layout.MIN_CAPACITY}, {layout.MAX_CAPACITY}] bytes, "
                             f"got {capacity}")
        directory = Path(archive_dir)
        path = directory / CATALOG_FILE_NAME
        if read_only:
            if not path.exists():
                raise CatalogError(f"no catalog in {directory}: {path.name} is missing")
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        else:
            if not directory.is_dir():
                raise CatalogError(f"archive directory {directory} does not exist or is not a directory")
            if (directory / layout.MIGRATION_JOURNAL_FILE_NAME).exists():
                raise OldCatalogVersionError(
                    f"{directory}: an `aeron-archive migrate` was interrupted "
                    f"({layout.MIGRATION_JOURNAL_FILE_NAME} exists); run `aeron-archive migrate --dir "
                    f"{directory}` again to finish it")
            remove_uncommitted_replace(directory)
            created = not path.exists()
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            if created or os.fstat(fd).st_size == 0:
                write_new_catalog_file(fd, capacity, file_sync, directory)
        try:
            return cls._from_fd(path, fd, read_only=read_only, file_sync=file_sync, checksum=checksum)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def _from_fd(cls, path: Path, fd: int, *, read_only: bool, file_sync: int,
                 checksum: DescriptorChecksum | None) -> "Catalog":
        header = read_header(fd, path, read_only=read_only)
        catalog = cls(path, fd, read_only=read_only, file_sync=file_sync,
                      old_layout=header.old_layout, version=header.version, alignment=header.alignment,
                      checksum=checksum)
        if header.old_layout:
            catalog._walk_old()
        else:
            catalog._header_next_id = header.next_recording_id
            catalog._walk()
            if not read_only:
                catalog._check_for_writing()
        for problem in catalog.problems:
            log.warning("%s: %s", path, problem)
        return catalog

    def _check_for_writing(self) -> None:
        if self._walk_stopped:
            raise CatalogError(f"{self.path}: the entries end in a damaged frame at offset {self._end}; "
                               f"refusing to append to a damaged catalog")
        if self._header_next_id < self._last_id + 1:
            if self._header_next_id != 0:
                self.problems.append(CatalogProblem(
                    None, f"nextRecordingId {self._header_next_id} is below the last id "
                          f"{self._last_id} + 1; set to {self._last_id + 1}"))
            self._header_next_id = self._last_id + 1
            os.pwrite(self._fd, _I64.pack(self._header_next_id), layout.NEXT_RECORDING_ID_OFFSET)
            self._sync()

    def _walk(self) -> None:
        """Indexes the frames from ``self._end`` to the terminating length 0 (or the end of the
        file); called on open and, read-only, to pick up frames appended since."""
        self._end, self._walk_stopped = walk_frames(self._fd, self._end, self.alignment, self.problems,
                                                    self._index_frame)

    def _index_frame(self, data: memoryview, offset: int, length: int, state: int, stored_checksum: int,
                     slot_id: int | None = None) -> None:
        start = DESCRIPTOR_HEADER_LENGTH
        recording_id = (_I64.unpack_from(data, start + _RECORDING_ID)[0]
                        if len(data) >= start + _RECORDING_ID + 8 else slot_id)
        if slot_id is not None and recording_id != slot_id:
            self.problems.append(CatalogProblem(slot_id, f"slot holds a descriptor for recording {recording_id}"))
            return
        where = slot_id if slot_id is not None else recording_id
        if state not in layout.STATE_NAMES:
            self.problems.append(CatalogProblem(where, f"state {state} is none of INVALID 0, VALID 1, DELETED 2"))
            return
        try:
            descriptor, _ = decode_recording_descriptor(data, start, length)
        except DescriptorDecodingError as error:
            self.problems.append(CatalogProblem(where, f"at offset {offset}: {error}"))
            return
        recording_id = descriptor.recording_id  # the id read above, now known to be there
        if recording_id in self._frames:
            self.problems.append(CatalogProblem(recording_id, f"a second entry at offset {offset}; the first is used"))
            return
        self._frames[recording_id] = EntryFrame(offset, length)
        self._last_id = max(self._last_id, recording_id)
        if state == VALID:
            self._valid_count += 1
        if self._index is not None:
            self._index.store(descriptor, state == VALID)

    def _walk_old(self) -> None:
        """Indexes the used slots of a 1 KiB slot catalog (read-only)."""
        self._end = walk_old_slots(self._fd, self.problems, self._index_frame)
        self._header_next_id = self._last_id + 1

    def _refresh(self) -> None:
        """Read-only, modern layout: picks up frames another process appended, or the whole
        catalog again if the writer replaced the file (`replace_channels`)."""
        if self.read_only and not self.old_layout:
            self._reopen_if_replaced()
        if self.read_only and not self.old_layout and not self._walk_stopped:
            self._walk()
            self._header_next_id = _I64.unpack(os.pread(self._fd, 8, layout.NEXT_RECORDING_ID_OFFSET))[0]

    def _reopen_if_replaced(self) -> bool:
        """Read-only: if ``archive.catalog`` is now another file (renamed into place by the
        writer's `replace_channels`), reads that one from the start. Call under the lock."""
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            return False
        if inode == self._inode:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            os.dup2(fd, self._fd)  # threads reading the old descriptor see one file or the other
            self._inode = os.fstat(self._fd).st_ino
        finally:
            os.close(fd)
        self._frames = {}
        self._end = layout.HEADER_LENGTH
        self._walk_stopped = False
        self._last_id = -1
        self._valid_count = 0
        self.problems = []
        return True

    # ---- reading

    @property
    def next_recording_id(self) -> int:
        """The id the next new recording gets (the header's nextRecordingId)."""
        if self.read_only:
            with self._lock:
                self._refresh()
        return max(self._header_next_id, self._last_id + 1)

    def capacity(self) -> int:
        """The file's length in bytes (it grows when an append does not fit)."""
        return os.fstat(self._fd).st_size

    def max_entries(self) -> int:
        """Entries the file holds now plus those of the smallest frame that still fit (the old
        slot catalog's fixed count; a 3.x catalog's real bound is its byte `capacity`)."""
        if self.old_layout:
            return self.capacity() // layout.OLD_ENTRY_LENGTH - 1
        with self._lock:
            self._refresh()
            smallest = layout.frame_length(MIN_DESCRIPTOR_LENGTH, self.alignment)
            return len(self._frames) + max(0, self.capacity() - self._end) // smallest

    def count_entries(self) -> int:
        """Number of valid recordings."""
        if self.read_only:
            return sum(1 for entry in self.entries() if entry.valid)
        return self._valid_count

    def descriptor(self, recording_id: int) -> RecordingDescriptor | None:
        """The descriptor of a valid recording; None for unknown, invalid, deleted or damaged entries."""
        entry = self.entry(recording_id)
        return entry.descriptor if entry is not None and entry.valid else None

    def _frame(self, recording_id: int) -> EntryFrame | None:
        frame = self._frames.get(recording_id)
        if self.read_only and not self.old_layout and recording_id >= 0:
            with self._lock:
                if frame is None or self._reopen_if_replaced():
                    self._refresh()
                    frame = self._frames.get(recording_id)
        return frame

    def entry(self, recording_id: int) -> CatalogEntry | None:
        """The entry whatever its state; None for unknown or damaged entries."""
        frame = self._frame(recording_id)
        if frame is None:
            return None
        entry = self._read_entry(frame, recording_id)
        if entry is None and not self.old_layout:
            # The frame may have moved since it was looked up (replace_channels on another thread
            # or in the writer's process): look again under the lock, which the move holds.
            with self._lock:
                self._refresh()
                moved = self._frames.get(recording_id)
                if moved is not None and moved != frame:
                    entry = self._read_entry(moved, recording_id)
        return entry

    def _read_entry(self, frame: EntryFrame, recording_id: int) -> CatalogEntry | None:
        data = os.pread(self._fd, DESCRIPTOR_HEADER_LENGTH + frame.descriptor_length, frame.offset)
        return self._decode_entry(memoryview(data), recording_id)

    def _decode_entry(self, data: memoryview, recording_id: int) -> CatalogEntry | None:
        if self.old_layout:
            length, state = layout.OLD_DESCRIPTOR_HEADER.unpack_from(data, 0)
            stored_checksum = 0
        else:
            length, state, stored_checksum = layout.DESCRIPTOR_HEADER.unpack_from(data, 0)
        if length <= 0 or state not in layout.STATE_NAMES:
            return None
        try:
            descriptor, _ = decode_recording_descriptor(data, DESCRIPTOR_HEADER_LENGTH, length)
        except DescriptorDecodingError:
            return None
        if descriptor.recording_id != recording_id:
            return None
        return CatalogEntry(descriptor, state == VALID, state, stored_checksum)

    def stored_bodies(self, recording_ids: list[int]) -> list[tuple[int, memoryview]]:
        """(id, stored descriptor body) of each of ``recording_ids`` (ascending) that is valid and
        well formed, as `descriptor` would decode it, but not decoded (and without the frame's
        padding): a listing sends these bytes as they are (`catalog_walk.read_stored_bodies`)."""
        frames = [(recording_id, frame) for recording_id in recording_ids
                  if (frame := self._frame(recording_id)) is not None]
        return read_stored_bodies(self._fd, frames, old_layout=self.old_layout)

    def listable_ids(self, from_recording_id: int, end: int | None = None,
                     stream_id: int | None = None) -> np.ndarray:
        """Ids in [from_recording_id, end) of valid recordings (of ``stream_id`` only, if given), in
        order: the ones a listing may return. The writer answers from its in-memory index."""
        start = max(0, from_recording_id)
        stop = self.next_recording_id if end is None else min(end, self.next_recording_id)
        if start >= stop:
            return np.empty(0, dtype=np.int64)
        if self._index is None:
            return np.array([d.recording_id for d in self.descriptors(start)
                             if d.recording_id < stop and (stream_id is None or d.stream_id == stream_id)],
                            dtype=np.int64)
        self._index.ensure(stop - 1)
        wanted = self._index.listable[start:stop]
        if stream_id is not None:
            wanted = wanted & (self._index.stream_ids[start:stop] == stream_id)
        return np.flatnonzero(wanted).astype(np.int64) + start

    def active_recording_ids(self) -> list[int]:
        """Valid recordings with stop position -1 (being recorded, or left so by a crash)."""
        if self._index is None:
            return [d.recording_id for d in self.descriptors() if d.is_active]
        end = self.next_recording_id
        self._index.ensure(end)
        return (np.flatnonzero(self._index.active[:end] & self._index.listable[:end])).tolist()

    def descriptors(self, from_recording_id: int = 0,
                    count: int | None = None) -> Iterator[RecordingDescriptor]:
        """Valid descriptors in id order, starting at ``from_recording_id``, at most ``count``."""
        produced = 0
        for entry in self.entries(from_recording_id):
            if count is not None and produced >= count:
                return
            if entry.valid:
                produced += 1
                yield entry.descriptor

    def __iter__(self) -> Iterator[RecordingDescriptor]:
        return self.descriptors()

    def entries(self, from_recording_id: int = 0) -> Iterator[CatalogEntry]:
        """Every readable entry (any state: valid, invalid, deleted) in id order."""
        with self._lock:
            self._refresh()
            ids = sorted(recording_id for recording_id in self._frames if recording_id >= from_recording_id)
        for recording_id in ids:
            entry = self.entry(recording_id)
            if entry is not None:
                yield entry

    def frame_offset(self, recording_id: int) -> int | None:
        """The file offset of the entry's frame (tests, tools)."""
        frame = self._frame(recording_id)
        return None if frame is None else frame.offset

    # ---- writing

    @property
    def _listing_index(self) -> ListingIndex:
        """The writer's index (a write on a read-only catalog is refused before it gets here)."""
        if self._index is None:
            raise CatalogError(f"{self.path} is open read-only; it keeps no listing index")
        return self._index

    def add_recording(self, *, start_position: int, initial_term_id: int, segment_file_length: int,
                      term_buffer_length: int, mtu_length: int, session_id: int, stream_id: int,
                      stripped_channel: str, original_channel: str, source_identity: str,
                      start_timestamp: int | None = None, stop_timestamp: int = NULL_TIMESTAMP,
                      stop_position: int = NULL_POSITION) -> int:
        """Appends a new valid recording and returns its id.

        Defaults are those of a new recording (Aeron's Catalog.addNewRecording): start timestamp now,
        stop timestamp and stop position -1. Replicated recordings pass their own timestamps and
        stop position.
        """
        self._require_writable("add a recording")
        check_lengths(term_buffer_length, segment_file_length, mtu_length)
        check_position("start position", start_position)
        if stop_position != NULL_POSITION:
            check_position("stop position", stop_position)
            if stop_position < start_position:
                raise ValueError(f"stop position {stop_position} is below start position {start_position}")
        with self._lock:
            recording_id = self.next_recording_id
            descriptor = RecordingDescriptor(
                recording_id=recording_id,
                start_timestamp=now_ms() if start_timestamp is None else start_timestamp,
                stop_timestamp=stop_timestamp, start_position=start_position,
                stop_position=stop_position, initial_term_id=initial_term_id,
                segment_file_length=segment_file_length, term_buffer_length=term_buffer_length,
                mtu_length=mtu_length, session_id=session_id, stream_id=stream_id,
                stripped_channel=stripped_channel, original_channel=original_channel,
                source_identity=fit_source_identity(stripped_channel, original_channel, source_identity),
                control_session_id=0, correlation_id=0)
            body = encode_recording_descriptor(descriptor)
            length = layout.frame_length(len(body), self.alignment)
            padded = body + bytes(length - DESCRIPTOR_HEADER_LENGTH - len(body))
            offset = self._end
            # Order: the header's nextRecordingId first (an id handed out but never used is
            # harmless; one used but not yet in the header would make Java refuse the file), then
            # the body with 32 zero bytes after it (the terminator stays 0 even over the bytes of an
            # append a crash cut short), the frame header (length) last: until then the frame is
            # not there.
            try:
                fault_point("catalog-add")
                self._ensure_capacity(offset + length + DESCRIPTOR_HEADER_LENGTH)
                os.pwrite(self._fd, _I64.pack(recording_id + 1), layout.NEXT_RECORDING_ID_OFFSET)
                os.pwrite(self._fd, padded + bytes(DESCRIPTOR_HEADER_LENGTH), offset + DESCRIPTOR_HEADER_LENGTH)
                os.pwrite(self._fd, layout.DESCRIPTOR_HEADER.pack(
                    length - DESCRIPTOR_HEADER_LENGTH, VALID, self._checksum_of(padded)), offset)
                self._sync()
            except OSError:
                # ENOSPC or EIO: leave no entry that the caller was told failed (best effort).
                try:
                    os.pwrite(self._fd, bytes(DESCRIPTOR_HEADER_LENGTH), offset)
                    os.pwrite(self._fd, _I64.pack(recording_id), layout.NEXT_RECORDING_ID_OFFSET)
                except OSError:
                    pass
                raise
            self._frames[recording_id] = EntryFrame(offset, length - DESCRIPTOR_HEADER_LENGTH)
            self._end = offset + length
            self._header_next_id = recording_id + 1
            self._last_id = recording_id
            self._valid_count += 1
            self._listing_index.store(descriptor, True)
            return recording_id

    def update_stop_position(self, recording_id: int, stop_position: int) -> None:
        self._update_fields(recording_id, ((_STOP_POSITION, stop_position),))

    def update_stop_timestamp(self, recording_id: int, stop_timestamp: int) -> None:
        self._update_fields(recording_id, ((_STOP_TIMESTAMP, stop_timestamp),))

    def recording_stopped(self, recording_id: int, stop_position: int,
                          stop_timestamp: int | None = None) -> None:
        """Stop position and stop timestamp (default: now) in one update."""
        timestamp = now_ms() if stop_timestamp is None else stop_timestamp
        self._update_fields(recording_id, ((_STOP_POSITION, stop_position), (_STOP_TIMESTAMP, timestamp)))

    def update_start_position(self, recording_id: int, start_position: int) -> None:
        self._update_fields(recording_id, ((_START_POSITION, start_position),))

    def extend(self, recording_id: int, *, control_session_id: int, correlation_id: int,
               session_id: int) -> None:
        """Marks a stopped recording active again for an extension by a new image (Aeron's
        Catalog.extendRecording)."""
        self._update_fields(recording_id, (
            (_CONTROL_SESSION_ID, control_session_id), (_CORRELATION_ID, correlation_id),
            (_STOP_TIMESTAMP, NULL_TIMESTAMP), (_SESSION_ID, session_id),
            (_STOP_POSITION, NULL_POSITION)))

    def invalidate(self, recording_id: int) -> None:
        """VALID -> INVALID (verify, ArchiveTool mark-invalid); the entry keeps its id and bytes."""
        self._set_state(recording_id, INVALID, (VALID,))

    def delete(self, recording_id: int) -> None:
        """VALID or INVALID -> DELETED (purge); the frame stays in the file."""
        self._set_state(recording_id, DELETED, (VALID, INVALID))

    def mark_valid(self, recording_id: int) -> None:
        """INVALID -> VALID (archive tool, verify)."""
        self._set_state(recording_id, VALID, (INVALID,))

    def _set_state(self, recording_id: int, state: int, allowed_from: tuple[int, ...]) -> None:
        self._require_writable("change a recording's state")
        with self._lock:
            entry = self.entry(recording_id)
            if entry is None:
                raise UnknownRecordingError(recording_id, "no readable entry with this id")
            if entry.state not in allowed_from:
                raise CatalogError(f"recording {recording_id} is {entry.state_name}; cannot make it "
                                   f"{layout.STATE_NAMES[state]}")
            os.pwrite(self._fd, _I32.pack(state), self._frames[recording_id].offset + layout.STATE_OFFSET)
            self._sync()
            self._valid_count += (state == VALID) - entry.valid
            self._listing_index.store(entry.descriptor, state == VALID)

    def _update_fields(self, recording_id: int, fields: tuple[tuple[int, int], ...]) -> None:
        self._require_writable("update a recording")
        with self._lock:
            frame = self._frames.get(recording_id)
            if frame is None or not self._listing_index.listable[recording_id]:
                raise UnknownRecordingError(recording_id)
            base = frame.offset + DESCRIPTOR_HEADER_LENGTH
            for field_offset, value in fields:
                packer = _I32 if field_offset == _SESSION_ID else _I64
                os.pwrite(self._fd, packer.pack(value), base + field_offset)
                if field_offset == _STOP_POSITION:
                    self._listing_index.active[recording_id] = value == NULL_POSITION
            if self.checksum is not None:
                self._write_checksum(frame)
            self._sync()

    def replace_channels(self, recording_id: int, *, stripped_channel: str,
                         original_channel: str) -> RecordingDescriptor:
        """Stores new stripped and original channels in the entry (UpdateChannel; Aeron's
        Catalog.replaceRecording); every other field, the state and the id stay. Returns the new
        descriptor.

        As Aeron: a descriptor that still fits its frame keeps the frame (its length field and
        offset; the rest zero-padded); a longer one gets a longer frame and every later entry moves
        right by the difference (Aeron skips the move when the entry is the last *valid* one, and
        so overwrites INVALID or DELETED entries after it; here they move too). The state is kept
        (Aeron's callers only pass VALID entries) and the checksum covers the whole descriptor
        area the length field names (Aeron's covers only the new descriptor's frame when the entry
        shrinks). The file is rewritten and renamed into place (module docstring): crash-atomic.
        """
        self._require_writable("update a recording's channel")
        with self._lock:
            frame = self._frames.get(recording_id)
            entry = self._read_entry(frame, recording_id) if frame is not None else None
            if frame is None or entry is None:
                raise UnknownRecordingError(recording_id, "no readable entry with this id")
            old = entry.descriptor
            descriptor = dataclasses.replace(
                old, stripped_channel=stripped_channel, original_channel=original_channel,
                source_identity=fit_source_identity(stripped_channel, original_channel,
                                                    old.source_identity, recording_id))
            body = encode_recording_descriptor(descriptor)
            old_frame_length = DESCRIPTOR_HEADER_LENGTH + frame.descriptor_length
            frame_length = max(old_frame_length, layout.frame_length(len(body), self.alignment))
            area = body + bytes(frame_length - DESCRIPTOR_HEADER_LENGTH - len(body))
            frame_bytes = layout.DESCRIPTOR_HEADER.pack(
                frame_length - DESCRIPTOR_HEADER_LENGTH, entry.state, self._checksum_of(area)) + area
            shift = frame_length - old_frame_length
            self._rewrite(frame.offset, old_frame_length, frame_bytes)
            if shift:
                self._frames = {rid: (EntryFrame(f.offset + shift, f.descriptor_length) if f.offset > frame.offset else f)
                                for rid, f in self._frames.items()}
                self._end += shift
            self._frames[recording_id] = EntryFrame(frame.offset, frame_length - DESCRIPTOR_HEADER_LENGTH)
            self._listing_index.store(descriptor, entry.valid)
            fault_point("catalog-replace-committed")
            return descriptor

    def _rewrite(self, offset: int, old_frame_length: int, frame_bytes: bytes) -> None:
        """Writes the catalog with the frame at ``offset`` replaced by ``frame_bytes`` (the
        following frames moved by the length difference) to `REPLACE_FILE_NAME`, fsyncs it,
        renames it over the catalog, fsyncs the directory and switches ``self._fd`` to it."""
        end = self._end
        new_end = end + len(frame_bytes) - old_frame_length
        size = os.fstat(self._fd).st_size
        capacity = grown_capacity(size, new_end + DESCRIPTOR_HEADER_LENGTH, self.path)
        temporary = self.path.with_name(REPLACE_FILE_NAME)
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            try:
                os.ftruncate(fd, capacity)  # sparse; the terminating zero length after new_end
                copy_range(self._fd, fd, 0, offset, 0)
                os.pwrite(fd, frame_bytes, offset)
                copy_range(self._fd, fd, offset + old_frame_length, end, offset + len(frame_bytes))
                os.fsync(fd)  # whatever file_sync says: the rename must never expose a partial file
                fault_point("catalog-replace-written")
                os.rename(temporary, self.path)
            except BaseException:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
                raise
            sync_directory(self.path.parent)
            os.dup2(fd, self._fd)  # threads reading the catalog see the old file or the new one
            self._inode = os.fstat(self._fd).st_ino
        finally:
            os.close(fd)
        if capacity != size:
            log.info("%s: grown from %d to %d bytes", self.path, size, capacity)

    def restamp_checksums(self) -> int:
        """Recomputes every entry's descriptor checksum with `checksum` (0 without one), as
        ArchiveTool ``checksum`` does; returns the number of entries."""
        self._require_writable("store descriptor checksums")
        with self._lock:
            for frame in self._frames.values():
                self._write_checksum(frame)
            self._sync()
            return len(self._frames)

    def _write_checksum(self, frame: EntryFrame) -> None:
        descriptor_bytes = os.pread(self._fd, frame.descriptor_length, frame.offset + DESCRIPTOR_HEADER_LENGTH)
        os.pwrite(self._fd, _I32.pack(self._checksum_of(descriptor_bytes)), frame.offset + layout.CHECKSUM_OFFSET)

    def _checksum_of(self, descriptor_bytes: bytes) -> int:
        return 0 if self.checksum is None else self.checksum.compute(descriptor_bytes)

    def _ensure_capacity(self, needed: int) -> None:
        size = os.fstat(self._fd).st_size
        new_size = grown_capacity(size, needed, self.path)
        if new_size == size:
            return
        os.ftruncate(self._fd, new_size)
        log.info("%s: grown from %d to %d bytes", self.path, size, new_size)

    def _sync(self) -> None:
        if self.file_sync == 1:
            os.fdatasync(self._fd)
        elif self.file_sync == 2:
            os.fsync(self._fd)

    def _require_writable(self, action: str) -> None:
        if self.read_only:
            raise CatalogError(f"{self.path} is open read-only; cannot {action}")
        if self._fd < 0:
            raise CatalogError(f"{self.path} is closed; cannot {action}")

    # ---- lifetime

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                if not self.read_only and self.file_sync:
                    os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

