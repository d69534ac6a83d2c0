"""`archive-mark.dat` on disk: one archive per directory, its liveness, and where to find it.

The header layout (Aeron 1.47+, version 3.1.0, written; the 1.24-1.46 and <= 1.23 layouts read)
is described and decoded in ``aeron_spark.archive.codecs.mark_file_layout``; the archive's
threading mode, which Aeron's header has no field for, goes in the aeron-spark area at the
header's end (offset 7936), where Java's ArchiveMarkFile and ArchiveTool do not look.

Besides the liveness timestamp, the owning archive holds an exclusive ``flock`` on the file for
its lifetime, so two archives starting at the same moment cannot both win.
"""

from __future__ import annotations

import datetime
import fcntl
import logging
import os
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aeron_spark.archive.codecs.mark_file_layout import (  # re-exported: the mark file's one import point for storage users
    MARK_FILE_NAME,
    HEADER_LENGTH,
    DEFAULT_ERROR_BUFFER_LENGTH,
    MIN_ERROR_BUFFER_LENGTH,
    PAGE_SIZE,
    UPDATE_INTERVAL_MS,  # noqa: F401 - re-exported
    LIVENESS_TIMEOUT_MS,  # noqa: F401 - re-exported
    NULL_TIMESTAMP,
    BLOCK,
    ACTIVITY_OFFSET,
    U32,
    MODERN_BLOCK_OFFSET,
    ERROR_RECORD,
    ERROR_RECORD_ALIGNMENT,
    ERROR_LOG_OFFSET,
    MODERN_SBE_HEADER,
    VERSION_OFFSET,
    WRITTEN_STRINGS_OFFSET,
    EXTENSION_OFFSET,
    encode_extension,
    MarkFileError,
    ArchiveRunningError,
    ArchiveMarkInfo,
    ErrorObservation,
    decode_mark_file,
    decode_error_log,
    block_offset,
    pid_is_alive,
    align,
    epoch_ms,
)
from aeron_spark.archive.codecs.catalog_layout import ARCHIVE_FILE_VERSION, version_text

log = logging.getLogger(__name__)


def read_mark_file(archive_dir: str | os.PathLike) -> ArchiveMarkInfo:
    """Reads a mark file without changing or locking it (tools, the Spark connector)."""
    path = Path(archive_dir) / MARK_FILE_NAME
    try:
        with open(path, "rb") as f:
            data = f.read(HEADER_LENGTH + MODERN_BLOCK_OFFSET)
    except FileNotFoundError:
        raise MarkFileError(f"no archive mark file in {Path(archive_dir)}: {MARK_FILE_NAME} is "
                            f"missing (no archive has run on this directory)") from None
    return decode_mark_file(data, path)


def read_error_log(archive_dir: str | os.PathLike) -> list[ErrorObservation]:
    info = read_mark_file(archive_dir)
    if info.header_length <= 0 or info.error_buffer_length <= 0:
        return []
    start = _error_log_offset(info)
    with open(info.path, "rb") as f:
        f.seek(start)
        return decode_error_log(f.read(info.error_buffer_length))


def running_archive(archive_dir: str | os.PathLike, now_ms: int | None = None) -> ArchiveMarkInfo | None:
    """The live archive on the directory, or None (no mark file, clean shutdown, or stale)."""
    try:
        info = read_mark_file(archive_dir)
    except MarkFileError:
        return None
    return info if info.is_live(now_ms) else None


def _error_log_offset(info: ArchiveMarkInfo) -> int:
    """The error log starts at the header length, counted from the start of the file (1.24+)."""
    return info.header_length if info.header_length > 0 else ERROR_LOG_OFFSET


# --------------------------------------------------------------------------- the owning archive

class ArchiveMarkFile:
    """The mark file of the running archive; create one with `ArchiveMarkFile.create`."""

    def __init__(self, path: Path, fd: int, error_buffer_length: int) -> None:
        self.path = path
        self._fd = fd
        self._error_buffer_length = error_buffer_length
        self._error_tail = 0
        self._error_offsets: dict[str, int] = {}
        self.errors_not_recorded = 0  # new errors refused by a full error log
        self._lock = threading.Lock()

    @classmethod
    def create(cls, archive_dir: str | os.PathLike, *, archive_id: int, control_channel: str,
               control_stream_id: int, local_control_channel: str, local_control_stream_id: int,
               events_channel: str, events_stream_id: int, aeron_directory: str,
               error_buffer_length: int = DEFAULT_ERROR_BUFFER_LENGTH, now_ms: int | None = None,
               pid: int | None = None, threading_mode: str | None = None) -> "ArchiveMarkFile":
        """Claims the directory for this archive, or raises `ArchiveRunningError` fast.

        A mark file left by a dead process (pid gone, or no activity for 10 s) is taken over
        with a warning; its error log is saved to ``<timestamp>-error.log`` first.
        """
        if error_buffer_length < MIN_ERROR_BUFFER_LENGTH or error_buffer_length % ERROR_RECORD_ALIGNMENT:
            raise ValueError(f"error_buffer_length must be a multiple of 8 and >= "
                             f"{MIN_ERROR_BUFFER_LENGTH}, got {error_buffer_length}")
        strings = _encode_strings({
            "control_channel": control_channel, "local_control_channel": local_control_channel,
            "events_channel": events_channel, "aeron_directory": aeron_directory})
        extension = encode_extension({"threadingMode": threading_mode}) if threading_mode is not None else b""
        directory = Path(archive_dir)
        if not directory.is_dir():
            raise MarkFileError(f"archive directory {directory} does not exist or is not a directory")
        now = epoch_ms() if now_ms is None else now_ms
        path = directory / MARK_FILE_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            _lock_or_raise(fd, path)
            _check_previous_owner(fd, path, now)
            length = align(HEADER_LENGTH + error_buffer_length, PAGE_SIZE)
            os.ftruncate(fd, 0)  # forget the previous owner's header and errors
            os.ftruncate(fd, length)
            block = BLOCK.pack(0, now, now, os.getpid() if pid is None else pid, control_stream_id,
                                local_control_stream_id, events_stream_id, HEADER_LENGTH,
                                error_buffer_length, archive_id)
            os.pwrite(fd, MODERN_SBE_HEADER + block, 0)
            os.pwrite(fd, strings, WRITTEN_STRINGS_OFFSET)
            if extension:
                os.pwrite(fd, extension, EXTENSION_OFFSET)
            os.pwrite(fd, struct.pack("<i", ARCHIVE_FILE_VERSION), VERSION_OFFSET)  # last: "ready"
        except BaseException:
            os.close(fd)  # also drops the lock
            raise
        return cls(path, fd, error_buffer_length)

    def update_activity(self, now_ms: int | None = None) -> None:
        """Call about every `UPDATE_INTERVAL_MS` while the archive runs."""
        self._write_activity(epoch_ms() if now_ms is None else now_ms)

    def record_error(self, error: str, now_ms: int | None = None) -> bool:
        """Adds an error to the log, or counts another observation of one already there.

        Returns False when the log is full (the error is then only in the process log).
        """
        now = epoch_ms() if now_ms is None else now_ms
        with self._lock:
            self._require_open()
            base = HEADER_LENGTH
            existing = self._error_offsets.get(error)
            if existing is not None:
                (count,) = struct.unpack("<i", os.pread(self._fd, 4, base + existing + 4))
                os.pwrite(self._fd, struct.pack("<iq", count + 1, now), base + existing + 4)
                return True
            encoded = error.encode("utf-8")
            length = ERROR_RECORD.size + len(encoded)
            if self._error_tail + align(length, ERROR_RECORD_ALIGNMENT) > self._error_buffer_length:
                self.errors_not_recorded += 1
                if self.errors_not_recorded == 1:  # once: a full log stays full, and errors can come fast
                    log.warning("%s: error log full: this and later new errors are only in the process log "
                                "(the count is in errors_not_recorded)", self.path)
                return False
            offset = base + self._error_tail
            os.pwrite(self._fd, ERROR_RECORD.pack(0, 1, now, now)[4:] + encoded, offset + 4)
            os.pwrite(self._fd, struct.pack("<i", length), offset)  # length last: record complete
            self._error_offsets[error] = self._error_tail
            self._error_tail += align(length, ERROR_RECORD_ALIGNMENT)
            return True

    def info(self) -> ArchiveMarkInfo:
        self._require_open()
        return decode_mark_file(os.pread(self._fd, HEADER_LENGTH + MODERN_BLOCK_OFFSET, 0), self.path)

    def close(self, *, clean: bool = True) -> None:
        """Releases the directory; ``clean`` marks the archive as shut down (activity -1)."""
        with self._lock:
            if self._fd < 0:
                return
            if clean:
                os.pwrite(self._fd, struct.pack("<q", NULL_TIMESTAMP), ACTIVITY_OFFSET)
            os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __enter__(self) -> "ArchiveMarkFile":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _write_activity(self, timestamp: int) -> None:
        self._require_open()
        os.pwrite(self._fd, struct.pack("<q", timestamp), ACTIVITY_OFFSET)

    def _require_open(self) -> None:
        if self._fd < 0:
            raise MarkFileError(f"{self.path} is closed")


def rewrite_as_current(archive_dir: str | os.PathLike) -> bool:
    """Rewrites a not-running archive's older mark file (1.24-1.46 or <= 1.23 layout, or another
    version) in place in the 1.47+ layout stamped with this version, "terminated", keeping its
    fields and error log; for `migrate`, which holds `maintenance_lock`. Returns whether it did."""
    path = Path(archive_dir) / MARK_FILE_NAME
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        data = os.pread(fd, HEADER_LENGTH + MODERN_BLOCK_OFFSET, 0)
        info = decode_mark_file(data, path)
        if block_offset(data) == MODERN_BLOCK_OFFSET and info.version == ARCHIVE_FILE_VERSION:
            return False
        had_error_log = info.header_length == HEADER_LENGTH and info.error_buffer_length >= MIN_ERROR_BUFFER_LENGTH
        error_buffer_length = info.error_buffer_length if had_error_log else DEFAULT_ERROR_BUFFER_LENGTH
        strings = _encode_strings({
            "control_channel": info.control_channel, "local_control_channel": info.local_control_channel,
            "events_channel": info.events_channel, "aeron_directory": info.aeron_directory})
        header = bytearray(HEADER_LENGTH)
        header[0:MODERN_BLOCK_OFFSET] = MODERN_SBE_HEADER
        BLOCK.pack_into(header, MODERN_BLOCK_OFFSET, 0, NULL_TIMESTAMP, info.start_timestamp, info.pid,
                        info.control_stream_id, info.local_control_stream_id, info.events_stream_id,
                        HEADER_LENGTH, error_buffer_length, info.archive_id if had_error_log else -1)
        header[WRITTEN_STRINGS_OFFSET:WRITTEN_STRINGS_OFFSET + len(strings)] = strings
        if info.threading_mode is not None:
            extension = encode_extension({"threadingMode": info.threading_mode})
            header[EXTENSION_OFFSET:EXTENSION_OFFSET + len(extension)] = extension
        os.pwrite(fd, bytes(header), 0)
        length = align(HEADER_LENGTH + error_buffer_length, PAGE_SIZE)
        if not had_error_log:
            os.ftruncate(fd, HEADER_LENGTH)  # whatever followed the old header is not an error log
        os.ftruncate(fd, max(length, os.fstat(fd).st_size))
        os.pwrite(fd, struct.pack("<i", ARCHIVE_FILE_VERSION), VERSION_OFFSET)  # last: "ready"
        os.fsync(fd)
    finally:
        os.close(fd)
    log.info("%s: mark file of version %s rewritten as %s (1.47+ layout)", path, info.version_text,
             version_text(ARCHIVE_FILE_VERSION))
    return True


@contextmanager
def maintenance_lock(archive_dir: str | os.PathLike, now_ms: int | None = None) -> Iterator[None]:
    """Holds the directory for an offline change (tool `checksum`, `verify` fixes).

    Raises `ArchiveRunningError` if an archive runs on it; while held, an archive starting on the
    directory fails fast. Without a mark file no archive has run here and nothing is locked.
    """
    path = Path(archive_dir) / MARK_FILE_NAME
    if not path.exists():
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        _lock_or_raise(fd, path)
        info = decode_mark_file(os.pread(fd, HEADER_LENGTH + MODERN_BLOCK_OFFSET, 0), path)
        if info.is_live(now_ms):
            raise ArchiveRunningError(_running_message(info, path))
        yield
    finally:
        os.close(fd)


def _lock_or_raise(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = ""
        try:
            info = decode_mark_file(os.pread(fd, HEADER_LENGTH, 0), path)
            owner = f" (archive pid {info.pid}, archive id {info.archive_id})"
        except MarkFileError:
            pass
        raise ArchiveRunningError(
            f"{path} is locked by another archive or archive tool{owner}; only one archive may "
            f"run on a directory") from None


def _check_previous_owner(fd: int, path: Path, now: int) -> None:
    data = os.pread(fd, HEADER_LENGTH + MODERN_BLOCK_OFFSET, 0)
    if not data.strip(b"\x00"):
        return  # new or empty file
    try:
        info = decode_mark_file(data, path)
    except MarkFileError as error:
        log.warning("%s: replacing an unreadable mark file (%s)", path, error)
        return
    if info.is_live(now) and info.pid != os.getpid():
        raise ArchiveRunningError(_running_message(info, path))
    if info.terminated:
        log.info("%s: previous archive (pid %d) shut down cleanly; taking over", path, info.pid)
    else:
        reason = ("its process is gone" if not pid_is_alive(info.pid)
                  else f"no activity for {info.activity_age_ms(now)} ms")
        log.warning("%s: taking over a stale mark file: archive pid %d, archive id %d, last "
                    "activity %d ms ago; %s", path, info.pid, info.archive_id,
                    info.activity_age_ms(now), reason)
    _save_error_log(fd, path, info, now)


def _save_error_log(fd: int, path: Path, info: ArchiveMarkInfo, now: int) -> None:
    if info.header_length <= 0 or info.error_buffer_length <= 0:
        return
    observations = decode_error_log(os.pread(fd, info.error_buffer_length, _error_log_offset(info)))
    if not observations:
        return
    stamp = datetime.datetime.fromtimestamp(now / 1000, datetime.UTC).strftime("%Y-%m-%d-%H-%M-%S-%f")[:-3]
    target = path.parent / f"{stamp}-error.log"
    with open(target, "w", encoding="utf-8") as out:
        for o in observations:
            out.write(f"{o.observation_count} observations from {o.first_observation_timestamp} to "
                      f"{o.last_observation_timestamp} for:\n {o.error}\n")
    log.info("%s: previous archive's error log (%d distinct errors) saved to %s",
             path, len(observations), target)


def _running_message(info: ArchiveMarkInfo, path: Path) -> str:
    return (f"an archive is already running on {path.parent}: pid {info.pid}, archive id "
            f"{info.archive_id}, control {info.control_channel} stream {info.control_stream_id}, "
            f"last activity {info.activity_age_ms()} ms ago")


def _encode_strings(fields: dict[str, str]) -> bytes:
    parts = []
    for name, text in fields.items():
        try:
            raw = text.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError(f"{name} must be ASCII, got {text!r}") from None
        parts += [U32.pack(len(raw)), raw]
    encoded = b"".join(parts)
    if WRITTEN_STRINGS_OFFSET + len(encoded) > HEADER_LENGTH:
        raise ValueError(f"channels and aeron directory take {len(encoded)} bytes; the mark file "
                         f"header has room for {HEADER_LENGTH - WRITTEN_STRINGS_OFFSET}")
    if WRITTEN_STRINGS_OFFSET + len(encoded) > EXTENSION_OFFSET:
        raise ValueError(f"channels and aeron directory take {len(encoded)} bytes; the mark file "
                         f"header has room for {EXTENSION_OFFSET - WRITTEN_STRINGS_OFFSET} before its "
                         f"aeron-spark area")
    return encoded
