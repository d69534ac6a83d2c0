"""Recording segment files ``<recordingId>-<segmentBasePosition>.rec``: writer, reader, file helpers.

Layout (Aeron 1.23+, as Aeron's RecordingWriter; see docs/positions.md): a recording's stream is
cut into segments of ``segment_length`` bytes (a power-of-two multiple of the term length)
counted from the term boundary at or before its start position; the byte at stream position
``p`` lives in file ``base(p)`` at offset ``p - base(p)``. Every file has its full length from
creation (allocated up front; bytes never written read as zeros). Frames are stored verbatim as
the driver's log holds them, except that of a PAD frame only its 32-byte header is written (the
file offset still advances by the whole pad) and, with a record checksum, DATA frames carry
their checksum in the session-id field.

Files are allocated with ``posix_fallocate`` (full length, blocks reserved: a full disk fails
at file creation, not mid-block). On request (``direct_io=True``, or the process default
``set_default_direct_io``; off by default, as Aeron) the writer uses O_DIRECT where the file
system allows it (``direct_io.py``): each block is copied (and checksum-stamped) once into a reused,
page-aligned buffer after the current partial page, and whole pages are written. Buffered
``pwrite`` into fresh page-cache pages runs at only ~0.3 GB/s on this VM (first touch of memory),
O_DIRECT at ~1.7 GB/s (measured-limits.md). Buffered mode (``direct_io=False``, or a file system
that refuses O_DIRECT) writes straight from the caller's view; only checksum stamping copies.
The bytes on disk are identical in both modes.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aeron_spark.archive.configuration import DEFAULT_FILE_SYNC, DEFAULT_SEGMENT_DIRECT_IO, FILE_SYNC_LEVELS
from aeron_spark.archive.storage.checksum import FrameChecksum, stamp_checksums
from aeron_spark.archive.storage.direct_io import (
    PageAppender, disable_direct_io, enable_direct_io, is_unsupported_direct_write)
from aeron_spark.archive.storage.fault_injection import fault_point
from aeron_spark.driver_integration.frame import (
    FRAME_ALIGNMENT, FRAME_LENGTH_OFFSET, HDR_TYPE_PAD, HEADER_LENGTH, TERM_OFFSET_OFFSET, TYPE_OFFSET,
    aligned_frame_length)
from aeron_spark.driver_integration.position import (
    parse_segment_file_name, segment_file_base_position, segment_file_name,
    start_term_base_position, validate_segment_length)

DELETE_SUFFIX = ".del"
_INT32 = struct.Struct("<i")
_UINT16 = struct.Struct("<H")
log = logging.getLogger(__name__)
_default_direct_io = DEFAULT_SEGMENT_DIRECT_IO  # O_DIRECT on request (see set_default_direct_io)


def set_default_direct_io(enabled: bool) -> None:
    """Process-wide default for writers created with ``direct_io=None`` (the sidecar's
    ``--no-segment-direct-io`` sets it to False)."""
    global _default_direct_io
    _default_direct_io = bool(enabled)


def default_direct_io() -> bool:
    return _default_direct_io


class SegmentError(Exception):
    """A segment file operation that cannot be done as asked."""


class SegmentWriteError(SegmentError, ValueError):
    """A block that cannot be appended (crosses a term, not whole frames, wrong position)."""


class SegmentFileExistsError(SegmentError, FileExistsError):
    pass


class SegmentFileMissingError(SegmentError, FileNotFoundError):
    def __init__(self, path: Path, recording_id: int, position: int) -> None:
        super().__init__(f"segment file {path} of recording {recording_id} is missing "
                         f"(needed for position {position})")
        self.path = path
        self.recording_id = recording_id
        self.position = position


class SegmentFileDamagedError(SegmentError):
    """A segment file shorter than the data asked of it (truncated on disk)."""


def recording_segment_length(configured_segment_length: int, term_length: int) -> int:
    """Per-recording segment length: ``max(configured, term_length)``, validated (Aeron's rule)."""
    return validate_segment_length(max(configured_segment_length, term_length), term_length)


def segment_file_path(archive_dir: str | os.PathLike, recording_id: int, base_position: int) -> Path:
    return Path(archive_dir) / segment_file_name(recording_id, base_position)


@dataclass(frozen=True, order=True)
class SegmentFile:
    base_position: int
    path: Path


def list_segment_files(archive_dir: str | os.PathLike[str], recording_id: int) -> list[SegmentFile]:
    """The recording's ``.rec`` files sorted by base position (``.del`` leftovers excluded)."""
    prefix = f"{recording_id}-"
    found = []
    with os.scandir(archive_dir) as entries:
        for entry in entries:
            if not entry.name.startswith(prefix) or not entry.name.endswith(".rec"):
                continue
            try:
                file_recording_id, base = parse_segment_file_name(entry.name)
            except ValueError:
                continue  # not a segment of ours (e.g. "12-x.rec"); maintenance reports orphans
            if file_recording_id == recording_id:
                found.append(SegmentFile(base, Path(entry.path)))
    return sorted(found)


def stage_delete(path: Path) -> Path:
    """Renames a segment to ``<name>.del``: the intent to delete it, which restart repair
    (`recovery.repair_archive`) either completes or undoes (if the catalog still needs the file)."""
    deleted = path.with_name(path.name + DELETE_SUFFIX)
    os.replace(path, deleted)
    return deleted


def _delete_segment(path: Path) -> None:
    # Rename first as Aeron does: a crash between the two steps leaves a recognisable ".del" file.
    deleted = stage_delete(path)
    fault_point("segment-renamed")
    os.unlink(deleted)


def delete_segment_files_below(archive_dir: str | os.PathLike, recording_id: int,
                               base_position: int) -> list[Path]:
    """Delete the recording's segment files whose base is below ``base_position``; return them."""
    doomed = [f.path for f in list_segment_files(archive_dir, recording_id) if f.base_position < base_position]
    for path in doomed:
        _delete_segment(path)
    return doomed


def delete_segment_files_from(archive_dir: str | os.PathLike, recording_id: int,
                              base_position: int) -> list[Path]:
    """Delete the recording's segment files whose base is at or above ``base_position``."""
    doomed = [f.path for f in list_segment_files(archive_dir, recording_id) if f.base_position >= base_position]
    for path in doomed:
        _delete_segment(path)
    return doomed


def truncate_segment_file(path: str | os.PathLike, offset: int, segment_length: int,
                          *, file_sync: int = DEFAULT_FILE_SYNC) -> None:
    """Zero the file from ``offset`` on, keeping its full length (truncate, then restore length)."""
    if not 0 <= offset <= segment_length:
        raise SegmentError(f"truncate offset {offset} is outside the segment [0, {segment_length}] "
                           f"of {path}")
    fd = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(fd, offset)
        fault_point("truncate-cut")  # a short file here is extended again by restart repair
        os.ftruncate(fd, segment_length)
        if file_sync:
            os.fsync(fd) if file_sync == 2 else os.fdatasync(fd)
    finally:
        os.close(fd)


def is_storage_space_error(error: BaseException) -> bool:
    """Whether an exception means the file system is full (Aeron answers STORAGE_SPACE)."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def low_storage_space(archive_dir: str | os.PathLike, threshold: int) -> str | None:
    """Aeron's low-storage-space check before a recording starts or extends: why not, if the
    archive's file system has ``threshold`` bytes or fewer usable (Aeron's ``usableSpace <=
    threshold``; usable = what an unprivileged writer may still use), else None."""
    try:
        stats = os.statvfs(archive_dir)
    except OSError:
        return None  # cannot tell: the writes themselves will say
    usable = stats.f_bavail * stats.f_frsize
    if usable <= threshold:
        return (f"low storage space: {usable} bytes usable in {archive_dir} <= the low storage threshold "
                f"{threshold} bytes (--low-storage-threshold)")
    return None


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _allocate(fd: int, length: int) -> None:
    """Give the file its full length with blocks reserved (ENOSPC now, not mid-recording)."""
    try:
        os.posix_fallocate(fd, 0, length)
    except OSError as error:  # file systems without fallocate (tmpfs is fine; some FUSE are not)
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        os.ftruncate(fd, length)


def _check_file_sync(file_sync: int) -> None:
    if file_sync not in FILE_SYNC_LEVELS:
        raise ValueError(f"file sync level {file_sync} is invalid: accepted values are "
                         f"0 (none), 1 (data), 2 (data and metadata)")


class SegmentWriter:
    """Appends blocks of whole frames to a recording's segment files, rolling over at segment ends.

    ``position`` (default ``start_position``) is where appending begins; when extending a
    recording it is the old stop position and its segment file may already exist (it is opened).
    A file needed on rollover must not exist yet. ``file_sync``: 0 none, 1 fdatasync after each
    write, 2 fsync (and the directory on each file creation for 1 and 2).

    ``direct_io``: True writes with O_DIRECT through a page-aligned staging buffer when the file
    system supports it (else silently buffered); False always uses buffered ``pwrite``; None
    (default) follows :func:`default_direct_io` (the configuration's ``DEFAULT_SEGMENT_DIRECT_IO``,
    off, unless the process set it otherwise).
    :attr:`direct_io` tells which mode is in use.
    """

    def __init__(self, archive_dir: str | os.PathLike, recording_id: int, start_position: int,
                 term_length: int, segment_length: int, *, file_sync: int = DEFAULT_FILE_SYNC,
                 checksum: FrameChecksum | None = None, position: int | None = None,
                 direct_io: bool | None = None) -> None:
        validate_segment_length(segment_length, term_length)
        _check_file_sync(file_sync)
        if start_position < 0 or start_position % FRAME_ALIGNMENT:
            raise ValueError(f"start position {start_position} must be non-negative and "
                             f"{FRAME_ALIGNMENT}-byte aligned")
        position = start_position if position is None else position
        if position < start_position or position % FRAME_ALIGNMENT:
            raise ValueError(f"write position {position} must be {FRAME_ALIGNMENT}-byte aligned and "
                             f"not before the start position {start_position}")
        self.archive_dir = Path(archive_dir)
        self.recording_id = recording_id
        self.start_position = start_position
        self.term_length = term_length
        self.segment_length = segment_length
        self.file_sync = file_sync
        self.checksum = checksum
        self._term_mask = term_length - 1
        self._position = position
        self._scratch = bytearray()  # checksum stamping copies blocks here, grown on demand
        self._fd = -1
        want_direct = _default_direct_io if direct_io is None else bool(direct_io)
        self._appender: PageAppender | None = None
        base = segment_file_base_position(start_position, position, term_length, segment_length)
        self._open_segment(base, exclusive=False)
        self._segment_offset = position - base
        if want_direct and enable_direct_io(self._fd):
            try:
                self._appender = PageAppender()
                self._appender.load_partial_page(self._fd, self._segment_offset)
            except BaseException:
                self.close()
                raise
        elif want_direct:
            log.debug("segment file %s: O_DIRECT not supported, writing buffered", self._path)

    @property
    def direct_io(self) -> bool:
        """True while writes go through O_DIRECT."""
        return self._appender is not None

    @property
    def position(self) -> int:
        """Stream position after the last appended byte."""
        return self._position

    def _open_segment(self, base_position: int, *, exclusive: bool) -> None:
        path = segment_file_path(self.archive_dir, self.recording_id, base_position)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            raise SegmentFileExistsError(
                f"segment file already exists: {path} (recording {self.recording_id}, "
                f"rolling over at position {self._position})") from None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                try:
                    _allocate(fd, self.segment_length)
                except OSError:
                    # A disk too full for the next segment: leave no empty file for recovery or
                    # replays to trip over; the recording stops at the end of the last segment.
                    os.unlink(path)
                    raise
            elif size != self.segment_length:
                raise SegmentError(f"segment file {path} has length {size}, expected the segment "
                                   f"length {self.segment_length}")
            if self.file_sync:
                _sync_directory(self.archive_dir)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._path, self._segment_base = fd, path, base_position

    def append(self, block) -> None:
        """Append one block of whole, 32-byte aligned frames starting at :attr:`position`.

        The block must not cross a term boundary. Of a block starting with a PAD frame only the
        32-byte header is written (block polls deliver padding as a block of its own).
        """
        if self._fd < 0:
            raise SegmentError(f"segment writer of recording {self.recording_id} is closed")
        view = memoryview(block).cast("B")
        length = len(view)
        if length == 0:
            return
        if length % FRAME_ALIGNMENT or length < HEADER_LENGTH:
            raise SegmentWriteError(f"block length {length} is not a whole number of "
                                    f"{FRAME_ALIGNMENT}-byte aligned frames")
        term_offset = self._position & self._term_mask
        if term_offset + length > self.term_length:
            raise SegmentWriteError(
                f"block of {length} bytes at position {self._position} (term offset {term_offset}) "
                f"crosses the term boundary (term length {self.term_length})")
        frame_term_offset = _INT32.unpack_from(view, TERM_OFFSET_OFFSET)[0]
        if frame_term_offset != term_offset:
            raise SegmentWriteError(
                f"block's first frame has term offset {frame_term_offset} but the recording is at "
                f"position {self._position} (term offset {term_offset})")
        if _UINT16.unpack_from(view, TYPE_OFFSET)[0] == HDR_TYPE_PAD:
            pad_length = aligned_frame_length(_INT32.unpack_from(view, FRAME_LENGTH_OFFSET)[0])
            if pad_length != length:  # writing only the header would drop the frames after it
                raise SegmentWriteError(
                    f"block at position {self._position} starts with a PAD frame of {pad_length} "
                    f"bytes but is {length} bytes long: padding must come as a block of its own")
            data = view[:HEADER_LENGTH]
            if self._appender is not None:  # only the header; the pad's body stays zeros
                self._appender.stage(HEADER_LENGTH)[:] = data
        elif self._appender is not None:
            data = self._appender.stage(length)
            data[:] = view
            if self.checksum is not None:
                stamp_checksums(data, self.checksum)
        elif self.checksum is not None:
            if len(self._scratch) < length:
                self._scratch = bytearray(length)
            data = memoryview(self._scratch)[:length]
            data[:] = view
            stamp_checksums(data, self.checksum)
        else:
            data = view
        appender = self._appender
        if appender is not None:
            self._write_direct(appender, data, length)
        else:
            self._write_fully(data, self._segment_offset)
        self._position += length
        self._segment_offset += length
        if self._segment_offset >= self.segment_length:
            self._roll_over()

    def _write_direct(self, appender: PageAppender, data: memoryview, advance: int) -> None:
        try:
            appender.commit(self._fd, self._segment_offset, len(data), advance)
        except OSError as error:
            if not is_unsupported_direct_write(error):
                raise
            # The device wants another alignment after all: same pages, buffered, from now on.
            log.debug("segment file %s: O_DIRECT write refused (%s), writing buffered", self._path, error)
            disable_direct_io(self._fd)
            appender.commit(self._fd, self._segment_offset, len(data), advance, aligned=False)
            self._appender = None
            appender.close()
        self._sync()

    def _write_fully(self, data: memoryview, offset: int) -> None:
        written = 0
        total = len(data)
        while written < total:
            written += os.pwrite(self._fd, data[written:], offset + written)
        self._sync()

    def _sync(self) -> None:
        if self.file_sync == 1:
            os.fdatasync(self._fd)
        elif self.file_sync == 2:
            os.fsync(self._fd)

    def _roll_over(self) -> None:
        os.close(self._fd)
        self._fd = -1
        self._open_segment(self._segment_base + self.segment_length, exclusive=True)
        self._segment_offset = 0
        if self._appender is not None:
            self._appender.start_page()
            if not enable_direct_io(self._fd):
                log.debug("segment file %s: O_DIRECT not supported, writing buffered", self._path)
                self._appender.close()
                self._appender = None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._appender is not None:
            self._appender.close()
            self._appender = None

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class SegmentReader:
    """Reads any position range of a recording from its segment files.

    Every read stays within one term (so within one file), like the replayer's reads: blocks of
    frames can be handed to a publication's ``offer_block`` unchanged in length.
    """

    def __init__(self, archive_dir: str | os.PathLike, recording_id: int, start_position: int,
                 term_length: int, segment_length: int) -> None:
        validate_segment_length(segment_length, term_length)
        self.archive_dir = Path(archive_dir)
        self.recording_id = recording_id
        self.start_position = start_position
        self.term_length = term_length
        self.segment_length = segment_length
        self._start_term_base = start_term_base_position(start_position, term_length)
        self._fd = -1
        self._base = -1

    def _file_for(self, position: int) -> tuple[int, int]:
        base = segment_file_base_position(self.start_position, position, self.term_length,
                                          self.segment_length)
        if base != self._base:
            self.close()
            path = segment_file_path(self.archive_dir, self.recording_id, base)
            try:
                self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                raise SegmentFileMissingError(path, self.recording_id, position) from None
            self._base = base
        return self._fd, base

    def read_into(self, position: int, buffer, limit_position: int | None = None) -> int:
        """Read from ``position`` into ``buffer``: up to its length, the term end and ``limit_position``.

        Returns the number of bytes read (0 at ``limit_position``).
        """
        if position < self.start_position:
            raise ValueError(f"position {position} is before the start position "
                             f"{self.start_position} of recording {self.recording_id}")
        target = memoryview(buffer).cast("B")
        term_remaining = self.term_length - (position & (self.term_length - 1))
        length = min(len(target), term_remaining)
        if limit_position is not None:
            length = min(length, limit_position - position)
        if length <= 0:
            return 0
        fd, base = self._file_for(position)
        offset = position - base
        done = 0
        while done < length:
            count = os.preadv(fd, [target[done:length]], offset + done)
            if count == 0:
                raise SegmentFileDamagedError(
                    f"segment file {segment_file_path(self.archive_dir, self.recording_id, base)} "
                    f"ends at offset {offset + done}, before position {position + done} "
                    f"(expected length {self.segment_length})")
            done += count
        return length

    def read(self, position: int, length: int) -> bytes:
        """``length`` bytes from ``position`` (may span terms and files); for control paths."""
        out = bytearray(length)
        view = memoryview(out)
        done = 0
        while done < length:
            done += self.read_into(position + done, view[done:])
        return bytes(out)

    def blocks(self, from_position: int, to_position: int,
               max_block_length: int = 1024 * 1024) -> Iterator[tuple[int, memoryview]]:
        """Yield ``(position, block)`` covering ``[from_position, to_position)``.

        Blocks never cross a term boundary; each view is valid until the next one is produced.
        """
        if to_position < from_position:
            raise ValueError(f"range [{from_position}, {to_position}) is reversed")
        if max_block_length < FRAME_ALIGNMENT:
            raise ValueError(f"max block length {max_block_length} is below {FRAME_ALIGNMENT}")
        buffer = memoryview(bytearray(min(max_block_length, max(to_position - from_position, 1))))
        position = from_position
        while position < to_position:
            count = self.read_into(position, buffer, to_position)
            yield position, buffer[:count]
            position += count

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        self._base = -1

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

