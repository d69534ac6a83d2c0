"""`archive.catalog`: Aeron's fixed 1 KiB slot catalog (archive file version 2.1.0, Aeron 1.24-1.31).

Layout (little-endian):

* slot 0 (file offset 0) holds the CatalogHeader: ``version:i32 @0`` (2.1.0), ``entryLength:i32 @4``
  (1024); the rest of the slot is zero.
* recording N lives in slot N+1, at file offset ``(N+1)*1024``: a 32-byte RecordingDescriptorHeader
  ``{length:i32 @0 = exact descriptor length (0 = empty slot), valid:i8 @4, reserved}``, then the
  RecordingDescriptor SBE body at +32 (`aeron_spark.archive.codecs.descriptor_body`: the 80-byte
  root block of template 22, then the three u32-length-prefixed ASCII strings, together at most
  900 bytes here).

Lookup by id is dead reckoning; the next recording id is the slot after the last used one. The
file is read and written with ``pread``/``pwrite`` on one descriptor (no mapping to remap when the
file grows, and read-only readers in other processes see updates through the page cache).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.errors import CodecError, EncodeError
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, NULL_TIMESTAMP, RecordingDescriptor
from aeron_spark.archive.storage.fault_injection import fault_point

log = logging.getLogger(__name__)

CATALOG_FILE_NAME = "archive.catalog"
ENTRY_LENGTH = 1024
DESCRIPTOR_HEADER_LENGTH = 32
MAX_DESCRIPTOR_LENGTH = ENTRY_LENGTH - DESCRIPTOR_HEADER_LENGTH  # 992
MIN_DESCRIPTOR_LENGTH = descriptor_body.MIN_BODY_LENGTH  # 92
MAX_STRINGS_LENGTH = MAX_DESCRIPTOR_LENGTH - MIN_DESCRIPTOR_LENGTH  # 900


def semantic_version(major: int, minor: int, patch: int) -> int:
    return (major << 16) | (minor << 8) | patch


ARCHIVE_FILE_VERSION = semantic_version(2, 1, 0)  # 131328: Aeron 1.24-1.31, `<id>-<base>.rec` naming
DEFAULT_MAX_ENTRIES = 8192  # Aeron's aeron.archive.max.catalog.entries default
GROWTH_FACTOR = 2

# Offsets inside the descriptor body, for in-place updates.
_CONTROL_SESSION_ID = descriptor_body.CONTROL_SESSION_ID_OFFSET
_CORRELATION_ID = descriptor_body.CORRELATION_ID_OFFSET
_STOP_TIMESTAMP = descriptor_body.STOP_TIMESTAMP_OFFSET
_START_POSITION = descriptor_body.START_POSITION_OFFSET
_STOP_POSITION = descriptor_body.STOP_POSITION_OFFSET
_SESSION_ID = descriptor_body.SESSION_ID_OFFSET  # the only i32 of them
_I64 = struct.Struct("<q")
_I32 = struct.Struct("<i")
_CATALOG_HEADER = struct.Struct("<ii")
_DESCRIPTOR_HEADER = struct.Struct("<ib")

FILE_SYNC_LEVELS = (0, 1, 2)


class CatalogError(Exception):
    """A catalog file that cannot be used as asked, or a request the catalog cannot serve."""


class UnknownRecordingError(CatalogError, LookupError):
    def __init__(self, recording_id: int, why: str = "no valid recording with this id") -> None:
        super().__init__(f"unknown recording {recording_id}: {why}")
        self.recording_id = recording_id


class DescriptorEncodingError(CatalogError, ValueError):
    """A descriptor that cannot be stored (non-ASCII text, strings longer than 900 bytes)."""


class DescriptorDecodingError(CatalogError, ValueError):
    """Bytes that are not a well-formed RecordingDescriptor body."""


# --------------------------------------------------------------------------- the descriptor body (codecs)

def encode_recording_descriptor(descriptor: RecordingDescriptor) -> bytes:
    """The RecordingDescriptor SBE body the catalog stores (`codecs.descriptor_body`)."""
    try:
        return descriptor_body.encode_descriptor_body(descriptor)
    except EncodeError as error:
        raise DescriptorEncodingError(f"recording {descriptor.recording_id}: {error}") from None


def decode_recording_descriptor(buffer: bytes | bytearray | memoryview, offset: int = 0,
                                length: int | None = None) -> tuple[RecordingDescriptor, int]:
    """Decodes a body written by `encode_recording_descriptor`; returns (descriptor, bytes used).

    ``length`` bounds the body (e.g. the catalog slot's descriptor length); by default the rest
    of the buffer.
    """
    end = len(buffer) if length is None else offset + length
    if end > len(buffer) or end - offset < MIN_DESCRIPTOR_LENGTH:
        raise DescriptorDecodingError(
            f"descriptor body at offset {offset} is {max(0, min(end, len(buffer)) - offset)} bytes, "
            f"needs at least {MIN_DESCRIPTOR_LENGTH}")
    try:
        return descriptor_body.decode_descriptor_body(buffer, offset, end - offset)
    except CodecError as error:
        raise DescriptorDecodingError(str(error)) from None


def fit_source_identity(stripped_channel: str, original_channel: str, source_identity: str,
                        recording_id: int | None = None) -> str:
    """Returns the source identity, cut so that the three strings fit a 1 KiB slot.

    Channels are never cut (they identify the recording); channels that alone exceed the
    900-byte budget are rejected.
    """
    label = "new recording" if recording_id is None else f"recording {recording_id}"
    channels = len(stripped_channel) + len(original_channel)
    if channels > MAX_STRINGS_LENGTH:
        raise DescriptorEncodingError(
            f"{label}: strippedChannel ({len(stripped_channel)} bytes) + originalChannel "
            f"({len(original_channel)} bytes) exceed the catalog's {MAX_STRINGS_LENGTH}-byte limit "
            f"for the three descriptor strings")
    room = MAX_STRINGS_LENGTH - channels
    if len(source_identity) > room:
        log.warning("%s: sourceIdentity of %d bytes truncated to %d to fit the 1 KiB catalog slot",
                    label, len(source_identity), room)
        return source_identity[:room]
    return source_identity


# --------------------------------------------------------------------------- the catalog file

@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One used slot: the descriptor and its valid flag (invalid entries keep their id)."""

    descriptor: RecordingDescriptor
    valid: bool


@dataclass(frozen=True, slots=True)
class CatalogProblem:
    """Something wrong found in the file; the slot is treated as unusable (never as valid)."""

    recording_id: int | None
    message: str

    def __str__(self) -> str:
        where = "catalog header" if self.recording_id is None else f"recording {self.recording_id}"
        return f"{where}: {self.message}"


class _ListingIndex:
    """Per recording id, in memory: its stream id, whether listings may return it (valid and
    readable) and whether it is active (stop position -1). Listings, finds and start-up select ids
    with numpy instead of reading and decoding every 1 KiB slot; only the writer keeps one (it
    sees every change)."""

    def __init__(self, capacity: int) -> None:
        self.stream_ids = np.zeros(capacity, dtype=np.int32)
        self.listable = np.zeros(capacity, dtype=bool)
        self.active = np.zeros(capacity, dtype=bool)

    def grow(self, capacity: int) -> None:
        for name in ("stream_ids", "listable", "active"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def store(self, descriptor: RecordingDescriptor, valid: bool) -> None:
        recording_id = descriptor.recording_id
        self.stream_ids[recording_id] = descriptor.stream_id
        self.listable[recording_id] = valid
        self.active[recording_id] = descriptor.stop_position == NULL_POSITION


class Catalog:
    """The archive catalog. Open with `Catalog.open`; one writer per directory (see mark_file)."""

    def __init__(self, path: Path, fd: int, *, read_only: bool, file_sync: int, max_entries: int,
                 next_recording_id: int, valid_count: int, problems: list[CatalogProblem]) -> None:
        self.path = path
        self._fd = fd
        self.read_only = read_only
        self.file_sync = file_sync
        self._max_entries = max_entries
        self._next_recording_id = next_recording_id
        self._valid_count = valid_count
        self.problems = problems
        self._damaged_ids: set[int | None] = set()
        self._lock = threading.Lock()
        self._index = None if read_only else _ListingIndex(max_entries)

    # ---- opening

    @classmethod
    def open(cls, archive_dir: str | os.PathLike, *, file_sync: int = 0, read_only: bool = False,
             max_entries: int = DEFAULT_MAX_ENTRIES) -> "Catalog":
        """Opens (or, for writing, creates) ``archive_dir/archive.catalog``.

        ``max_entries`` is the initial capacity of a new file; an existing file keeps its size
        and grows by x2 when full. Problems found in existing entries are logged and listed in
        ``problems``; such slots are never reported as valid recordings.
        """
        if file_sync not in FILE_SYNC_LEVELS:
            raise ValueError(f"file_sync must be one of {FILE_SYNC_LEVELS}, got {file_sync!r}")
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        directory = Path(archive_dir)
        path = directory / CATALOG_FILE_NAME
        if read_only:
            if not path.exists():
                raise CatalogError(f"no catalog in {directory}: {path.name} is missing")
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        else:
            if not directory.is_dir():
                raise CatalogError(f"archive directory {directory} does not exist or is not a directory")
            created = not path.exists()
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            if created or os.fstat(fd).st_size == 0:
                _write_new_file(fd, max_entries, file_sync, directory)
        try:
            return cls._from_fd(path, fd, read_only=read_only, file_sync=file_sync)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def _from_fd(cls, path: Path, fd: int, *, read_only: bool, file_sync: int) -> "Catalog":
        size = os.fstat(fd).st_size
        if size < ENTRY_LENGTH:
            raise CatalogError(f"{path}: {size} bytes is too short for a catalog header slot "
                               f"({ENTRY_LENGTH} bytes)")
        version, entry_length = _CATALOG_HEADER.unpack(os.pread(fd, _CATALOG_HEADER.size, 0))
        if entry_length != ENTRY_LENGTH:
            raise CatalogError(
                f"{path}: entry length {entry_length} is not the 1 KiB slot catalog this archive "
                f"reads (expected {ENTRY_LENGTH}); variable-length catalogs (Aeron >= 1.32, file "
                f"version 3.x) are not supported")
        if version >> 16 != ARCHIVE_FILE_VERSION >> 16:
            raise CatalogError(
                f"{path}: catalog file version {_version_text(version)} is not supported; this "
                f"archive reads and writes {_version_text(ARCHIVE_FILE_VERSION)} (Aeron 1.24-1.31 "
                f"layout with <recordingId>-<basePosition>.rec segments)")
        problems: list[CatalogProblem] = []
        if size % ENTRY_LENGTH:
            problems.append(CatalogProblem(None, f"file length {size} is not a multiple of "
                                                 f"{ENTRY_LENGTH}; the partial last slot is ignored"))
            if not read_only:
                raise CatalogError(f"{path}: file length {size} is not a multiple of {ENTRY_LENGTH}; "
                                   f"refusing to write to a damaged catalog")
        max_entries = size // ENTRY_LENGTH - 1
        catalog = cls(path, fd, read_only=read_only, file_sync=file_sync, max_entries=max_entries,
                      next_recording_id=0, valid_count=0, problems=problems)
        catalog._scan()
        for problem in catalog.problems:
            log.warning("%s: %s", path, problem)
        return catalog

    def _scan(self) -> None:
        """Finds the next id (after the last used slot) and counts valid entries; checks each."""
        used_ids: list[int] = []
        for first_id, lengths, valid in self._slot_headers(0, self._max_entries):
            used_ids.extend((first_id + np.flatnonzero(lengths != 0)).tolist())
        next_id = used_ids[-1] + 1 if used_ids else 0
        if len(used_ids) != next_id:
            holes = sorted(set(range(next_id)) - set(used_ids))
            self.problems.append(CatalogProblem(
                None, f"empty slots {_id_list(holes)} below the last used id {next_id - 1}; "
                      f"new recordings continue after {next_id - 1}"))
        valid_count = 0
        for entry_or_problem in self._entries_in(0, next_id, include_problems=True):
            if isinstance(entry_or_problem, CatalogProblem):
                self.problems.append(entry_or_problem)
                self._damaged_ids.add(entry_or_problem.recording_id)
            else:
                if self._index is not None:
                    self._index.store(entry_or_problem.descriptor, entry_or_problem.valid)
                valid_count += entry_or_problem.valid
        self._next_recording_id = next_id
        self._valid_count = valid_count

    # ---- reading

    @property
    def next_recording_id(self) -> int:
        return self._next_recording_id

    def max_entries(self) -> int:
        """Slots the file holds now (it grows when they are used up)."""
        if self.read_only:
            return os.fstat(self._fd).st_size // ENTRY_LENGTH - 1
        return self._max_entries

    def count_entries(self) -> int:
        """Number of valid recordings."""
        if self.read_only:
            return sum(1 for entry in self.entries() if entry.valid)
        return self._valid_count

    def descriptor(self, recording_id: int) -> RecordingDescriptor | None:
        """The descriptor of a valid recording; None for unknown, invalid or damaged entries."""
        entry = self.entry(recording_id)
        return entry.descriptor if entry is not None and entry.valid else None

    def entry(self, recording_id: int) -> CatalogEntry | None:
        """The slot's content whether valid or not; None for empty or damaged slots."""
        if recording_id < 0:
            return None
        slot = os.pread(self._fd, ENTRY_LENGTH, _slot_offset(recording_id))
        if len(slot) < ENTRY_LENGTH:
            return None
        result = _decode_slot(slot, recording_id)
        return result if isinstance(result, CatalogEntry) else None

    def stored_bodies(self, recording_ids: list[int]) -> list[tuple[int, memoryview]]:
        """(id, stored descriptor body) of each of ``recording_ids`` (ascending) that is valid and
        well formed, as `descriptor` would decode it, but not decoded: a listing sends these bytes
        as they are. Slots next to each other are read with one pread."""
        found: list[tuple[int, memoryview]] = []
        next_index = 0
        for first, last in _dense_runs(recording_ids):
            data = memoryview(os.pread(self._fd, (last - first + 1) * ENTRY_LENGTH, _slot_offset(first)))
            while next_index < len(recording_ids) and recording_ids[next_index] <= last:
                recording_id = recording_ids[next_index]
                next_index += 1
                at = (recording_id - first) * ENTRY_LENGTH
                if at + ENTRY_LENGTH > len(data):
                    continue  # past the end of the file
                length, valid = _DESCRIPTOR_HEADER.unpack_from(data, at)
                if valid != 1 or not MIN_DESCRIPTOR_LENGTH <= length <= MAX_DESCRIPTOR_LENGTH:
                    continue
                body = data[at + DESCRIPTOR_HEADER_LENGTH:at + DESCRIPTOR_HEADER_LENGTH + length]
                if descriptor_body.stored_body_length(body, recording_id) is not None:
                    found.append((recording_id, body))
        return found

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
        wanted = self._index.listable[start:stop]
        if stream_id is not None:
            wanted = wanted & (self._index.stream_ids[start:stop] == stream_id)
        return np.flatnonzero(wanted).astype(np.int64) + start

    def active_recording_ids(self) -> list[int]:
        """Valid recordings with stop position -1 (being recorded, or left so by a crash)."""
        if self._index is None:
            return [d.recording_id for d in self.descriptors() if d.is_active]
        end = self._next_recording_id
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
        """Every used, readable slot (valid or invalid) in id order."""
        end = self.max_entries() if self.read_only else self._next_recording_id
        for item in self._entries_in(max(0, from_recording_id), end, include_problems=False):
            yield item  # type: ignore[misc]

    def _entries_in(self, start: int, end: int, *, include_problems: bool):
        chunk = 256
        for first_id in range(start, end, chunk):
            count = min(chunk, end - first_id)
            data = os.pread(self._fd, count * ENTRY_LENGTH, _slot_offset(first_id))
            for index in range(len(data) // ENTRY_LENGTH):
                recording_id = first_id + index
                slot = memoryview(data)[index * ENTRY_LENGTH:(index + 1) * ENTRY_LENGTH]
                if _I32.unpack_from(slot, 0)[0] == 0:
                    continue
                result = _decode_slot(slot, recording_id)
                if isinstance(result, CatalogEntry) or include_problems:
                    yield result

    def _slot_headers(self, start: int, end: int):
        """(first id, lengths, valid flags) per chunk of slots, read in bulk with numpy."""
        chunk = 4096
        for first_id in range(start, end, chunk):
            count = min(chunk, end - first_id)
            data = os.pread(self._fd, count * ENTRY_LENGTH, _slot_offset(first_id))
            whole = len(data) // ENTRY_LENGTH
            slots = np.frombuffer(data, dtype=np.uint8, count=whole * ENTRY_LENGTH).reshape(whole, ENTRY_LENGTH)
            lengths = slots[:, :4].copy().view("<i4").reshape(whole)
            yield first_id, lengths, slots[:, 4]

    # ---- writing

    def add_recording(self, *, start_position: int, initial_term_id: int, segment_file_length: int,
                      term_buffer_length: int, mtu_length: int, session_id: int, stream_id: int,
                      stripped_channel: str, original_channel: str, source_identity: str,
                      start_timestamp: int | None = None, stop_timestamp: int = NULL_TIMESTAMP,
                      stop_position: int = NULL_POSITION) -> int:
        """Stores a new valid recording in the next free slot and returns its id.

        Defaults are those of a new recording (Aeron's Catalog.addNewRecording): start timestamp now,
        stop timestamp and stop position -1. Replicated recordings pass their own timestamps and
        stop position.
        """
        self._require_writable("add a recording")
        _check_lengths(term_buffer_length, segment_file_length, mtu_length)
        _check_position("start position", start_position)
        if stop_position != NULL_POSITION:
            _check_position("stop position", stop_position)
            if stop_position < start_position:
                raise ValueError(f"stop position {stop_position} is below start position {start_position}")
        with self._lock:
            recording_id = self._next_recording_id
            descriptor = RecordingDescriptor(
                recording_id=recording_id,
                start_timestamp=_now_ms() if start_timestamp is None else start_timestamp,
                stop_timestamp=stop_timestamp, start_position=start_position,
                stop_position=stop_position, initial_term_id=initial_term_id,
                segment_file_length=segment_file_length, term_buffer_length=term_buffer_length,
                mtu_length=mtu_length, session_id=session_id, stream_id=stream_id,
                stripped_channel=stripped_channel, original_channel=original_channel,
                source_identity=fit_source_identity(stripped_channel, original_channel, source_identity),
                control_session_id=0, correlation_id=0)
            body = encode_recording_descriptor(descriptor)
            if recording_id >= self._max_entries:
                self._grow()
            offset = _slot_offset(recording_id)
            # The body goes first and the length last: a slot with length 0 is empty, so a crash
            # in between leaves no half-written entry.
            try:
                fault_point("catalog-add")
                os.pwrite(self._fd, body, offset + DESCRIPTOR_HEADER_LENGTH)
                os.pwrite(self._fd, _DESCRIPTOR_HEADER.pack(len(body), 1), offset)
                self._sync()
            except OSError:
                # ENOSPC or EIO: leave the slot empty so that no entry exists that the caller was
                # told failed (best effort: if even this write fails, the header never got written).
                try:
                    os.pwrite(self._fd, _DESCRIPTOR_HEADER.pack(0, 0), offset)
                except OSError:
                    pass
                raise
            self._next_recording_id = recording_id + 1
            self._valid_count += 1
            self._index.store(descriptor, True)
            return recording_id

    def update_stop_position(self, recording_id: int, stop_position: int) -> None:
        self._update_fields(recording_id, ((_STOP_POSITION, stop_position),))

    def update_stop_timestamp(self, recording_id: int, stop_timestamp: int) -> None:
        self._update_fields(recording_id, ((_STOP_TIMESTAMP, stop_timestamp),))

    def recording_stopped(self, recording_id: int, stop_position: int,
                          stop_timestamp: int | None = None) -> None:
        """Stop position and stop timestamp (default: now) in one update."""
        timestamp = _now_ms() if stop_timestamp is None else stop_timestamp
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
        """Marks a valid recording invalid (purge); the slot keeps its id and bytes."""
        self._set_valid(recording_id, False)

    def mark_valid(self, recording_id: int) -> None:
        """Marks an invalid (but readable) recording valid again (archive tool, verify)."""
        self._set_valid(recording_id, True)

    def _set_valid(self, recording_id: int, valid: bool) -> None:
        self._require_writable("change a recording's valid flag")
        with self._lock:
            entry = self.entry(recording_id)
            if entry is None:
                raise UnknownRecordingError(recording_id, "no readable entry with this id")
            if entry.valid == valid:
                state = "valid" if valid else "invalid"
                raise CatalogError(f"recording {recording_id} is already {state}")
            os.pwrite(self._fd, bytes([1 if valid else 0]), _slot_offset(recording_id) + 4)
            self._sync()
            self._valid_count += 1 if valid else -1
            self._index.store(entry.descriptor, valid)

    def _update_fields(self, recording_id: int, fields: tuple[tuple[int, int], ...]) -> None:
        self._require_writable("update a recording")
        with self._lock:
            # Only the slot header is read: damaged slots were found when the file was opened.
            if not self._is_valid_slot(recording_id):
                raise UnknownRecordingError(recording_id)
            base = _slot_offset(recording_id) + DESCRIPTOR_HEADER_LENGTH
            for field_offset, value in fields:
                packer = _I32 if field_offset == _SESSION_ID else _I64
                os.pwrite(self._fd, packer.pack(value), base + field_offset)
                if field_offset == _STOP_POSITION:
                    self._index.active[recording_id] = value == NULL_POSITION
            self._sync()

    def _is_valid_slot(self, recording_id: int) -> bool:
        if not 0 <= recording_id < self._next_recording_id or recording_id in self._damaged_ids:
            return False
        header = os.pread(self._fd, _DESCRIPTOR_HEADER.size, _slot_offset(recording_id))
        length, valid = _DESCRIPTOR_HEADER.unpack(header)
        return length != 0 and valid == 1

    def _grow(self) -> None:
        new_max = max(self._max_entries * GROWTH_FACTOR, self._max_entries + 1)
        os.ftruncate(self._fd, (new_max + 1) * ENTRY_LENGTH)
        log.info("%s: grown from %d to %d entries", self.path, self._max_entries, new_max)
        self._max_entries = new_max
        self._index.grow(new_max)

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


def _write_new_file(fd: int, max_entries: int, file_sync: int, directory: Path) -> None:
    os.ftruncate(fd, (max_entries + 1) * ENTRY_LENGTH)  # sparse, like Aeron's setLength
    os.pwrite(fd, _CATALOG_HEADER.pack(ARCHIVE_FILE_VERSION, ENTRY_LENGTH), 0)
    if file_sync:
        os.fsync(fd)
        _sync_directory(directory)


def _sync_directory(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _decode_slot(slot: bytes | memoryview, recording_id: int) -> CatalogEntry | CatalogProblem | None:
    length, valid = _DESCRIPTOR_HEADER.unpack_from(slot, 0)
    if length == 0:
        return None
    if not MIN_DESCRIPTOR_LENGTH <= length <= MAX_DESCRIPTOR_LENGTH:
        return CatalogProblem(recording_id, f"descriptor length {length} outside "
                                            f"[{MIN_DESCRIPTOR_LENGTH}, {MAX_DESCRIPTOR_LENGTH}]")
    if valid not in (0, 1):
        return CatalogProblem(recording_id, f"valid flag {valid} is neither 0 nor 1")
    try:
        descriptor, used = decode_recording_descriptor(slot, DESCRIPTOR_HEADER_LENGTH, length)
    except DescriptorDecodingError as error:
        return CatalogProblem(recording_id, str(error))
    if used != length:
        return CatalogProblem(recording_id, f"descriptor uses {used} bytes but its header says {length}")
    if descriptor.recording_id != recording_id:
        return CatalogProblem(recording_id, f"slot holds a descriptor for recording "
                                            f"{descriptor.recording_id}")
    return CatalogEntry(descriptor, valid == 1)


def _dense_runs(recording_ids: list[int], max_gap: int = 8) -> list[tuple[int, int]]:
    """(first, last) spans covering ascending ``recording_ids``, split where ids are more than
    ``max_gap`` apart (reading the slots between would cost more than another pread)."""
    runs: list[tuple[int, int]] = []
    for recording_id in recording_ids:
        if runs and recording_id - runs[-1][1] <= max_gap:
            runs[-1] = (runs[-1][0], recording_id)
        else:
            runs.append((recording_id, recording_id))
    return runs


def _slot_offset(recording_id: int) -> int:
    return (recording_id + 1) * ENTRY_LENGTH


def _check_lengths(term_length: int, segment_length: int, mtu_length: int) -> None:
    if not _is_power_of_two(term_length) or not 64 * 1024 <= term_length <= 1024 ** 3:
        raise ValueError(f"term buffer length {term_length} must be a power of two in [64 KiB, 1 GiB]")
    if not _is_power_of_two(segment_length) or segment_length < term_length:
        raise ValueError(f"segment file length {segment_length} must be a power of two >= the term "
                         f"length {term_length}")
    if mtu_length <= 32 or mtu_length % 32:
        raise ValueError(f"mtu length {mtu_length} must be a multiple of 32 above 32")


def _check_position(name: str, position: int) -> None:
    if position < 0 or position % 32:
        raise ValueError(f"{name} {position} must be >= 0 and a multiple of 32 (frame alignment)")


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _version_text(version: int) -> str:
    return f"{version >> 16}.{(version >> 8) & 0xFF}.{version & 0xFF}"


def _id_list(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:10])) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


# --------------------------------------------------------------------------- opening an archive

@dataclass(frozen=True)
class ArchiveOpenReport:
    """What `open_archive_directory` found and repaired; nothing found is left unreported."""

    catalog_created: bool
    catalog_problems: tuple[CatalogProblem, ...]
    recovered: tuple  # recovery.RecoveryReport per recording that was left active
    orphan_segment_files: tuple[Path, ...]

    @property
    def is_clean(self) -> bool:
        return (not self.catalog_problems and not self.orphan_segment_files
                and all(report.is_clean for report in self.recovered))

    def describe(self) -> str:
        lines = [f"catalog {'created' if self.catalog_created else 'opened'}; "
                 f"{len(self.recovered)} recording(s) recovered"]
        lines += [f"catalog problem: {problem}" for problem in self.catalog_problems]
        lines += [report.describe() for report in self.recovered]
        lines += [f"orphan segment file (no catalog entry): {path.name}"
                  for path in self.orphan_segment_files]
        return "\n".join(lines)


def open_archive_directory(archive_dir: str | os.PathLike, *, file_sync: int = 0,
                           max_entries: int = DEFAULT_MAX_ENTRIES, checksum=None,
                           on_unverified_straddle: str = "exclude",
                           now_ms: int | None = None) -> tuple[Catalog, ArchiveOpenReport]:
    """Opens the catalog for writing and repairs recordings a crash left active.

    For the archive service, after it has claimed the directory with the mark file. Every valid
    recording with stop position -1 gets the stop position recovered from its last segment
    (`recovery.recover_recording`; bytes after it are zeroed) and stop timestamp ``now``.
    ``checksum`` is the record checksum (`checksum.FrameChecksum`) used for the page-straddle
    check. Returns the catalog and a report, which is also logged.
    """
    from aeron_spark.archive.storage import recovery# the catalog itself needs no segment code

    directory = Path(archive_dir)
    created = not (directory / CATALOG_FILE_NAME).exists()
    catalog = Catalog.open(directory, file_sync=file_sync, max_entries=max_entries)
    try:
        now = _now_ms() if now_ms is None else now_ms
        reports = []
        files = recovery.ArchiveFiles(directory)
        for d in [catalog.descriptor(recording_id) for recording_id in catalog.active_recording_ids()]:
            report = recovery.recover_recording(
                directory, d.recording_id, d.start_position, d.term_buffer_length,
                d.segment_file_length, initial_term_id=d.initial_term_id, stream_id=d.stream_id,
                checksum=checksum, on_unverified_straddle=on_unverified_straddle, files=files)
            recovery.apply_recovery(report, file_sync=file_sync)
            catalog.recording_stopped(d.recording_id, report.stop_position, now)
            reports.append(report)
        for repair in recovery.repair_archive(catalog, directory, file_sync=file_sync):
            log.warning("%s: maintenance interrupted by a crash repaired: %s", directory, repair)
        report = ArchiveOpenReport(created, tuple(catalog.problems), tuple(reports),
                                   tuple(_orphan_segment_files(directory, catalog)))
    except BaseException:
        catalog.close()
        raise
    if report.is_clean:
        log.info("%s: %s", directory, report.describe())
    else:
        log.warning("%s: %s", directory, report.describe())
    return catalog, report


def _orphan_segment_files(directory: Path, catalog: Catalog) -> list[Path]:
    """``<id>-<base>.rec`` files whose id has no catalog entry (valid or invalid)."""
    orphans = []
    for entry in os.scandir(directory):
        if not entry.name.endswith(".rec"):
            continue
        head, _, tail = entry.name[:-4].partition("-")
        if head.isdigit() and tail.isdigit() and catalog.entry(int(head)) is None:
            orphans.append(Path(entry.path))
    return sorted(orphans)
