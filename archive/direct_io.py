"""O_DIRECT appends to preallocated files through a reused, page-aligned staging buffer.

Why: on this VM memory that was not touched recently fills at only ~250-390 MB/s, so buffered
``pwrite`` into fresh page-cache pages caps recording at ~270 MB/s; O_DIRECT sustains ~1.7 GB/s
(measured-limits.md). O_DIRECT needs the buffer address, the file offset and the length aligned
(:data:`DIRECT_IO_ALIGNMENT`), so :class:`PageAppender` keeps the current partial last page at the
start of its buffer, copies each new block after it, and writes from that page's start up to the
end rounded up to a page, with zeros after the data. The files are preallocated (zeros past the
recorded position), so the bytes on disk are exactly what a buffered writer would have produced.
The buffer is reused for every append, so it stays hot in memory: that is the whole point.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os

DIRECT_IO_ALIGNMENT = 4096  # page size; also a multiple of every common logical block size
DEFAULT_STAGING_LENGTH = 2 * 1024 * 1024 + DIRECT_IO_ALIGNMENT  # a batch plus a 1 MiB block
_ZEROS = memoryview(bytes(DIRECT_IO_ALIGNMENT))
_UNSUPPORTED = (errno.EINVAL, errno.EOPNOTSUPP)


def round_up(value: int, alignment: int = DIRECT_IO_ALIGNMENT) -> int:
    return (value + alignment - 1) & -alignment


def enable_direct_io(fd: int) -> bool:
    """Switch ``fd`` to O_DIRECT; False (fd unchanged) if the file system refuses it.

    Done with ``fcntl(F_SETFL)`` on an fd opened the usual way rather than ``open(O_DIRECT)``:
    Linux performs the same check, and a refused ``open(O_CREAT | O_EXCL | O_DIRECT)`` may already
    have created the file.
    """
    direct = getattr(os, "O_DIRECT", 0)
    if not direct:
        return False
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | direct)
    except OSError as error:
        if error.errno in _UNSUPPORTED:
            return False
        raise
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & direct)


def disable_direct_io(fd: int) -> None:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~getattr(os, "O_DIRECT", 0))


def is_unsupported_direct_write(error: OSError) -> bool:
    """An error a direct write gives when this file/device wants other alignment or no O_DIRECT."""
    return error.errno in _UNSUPPORTED


def pwrite_fully(fd: int, data: memoryview, offset: int, *, aligned: bool) -> None:
    """Write all of ``data`` at ``offset``. ``aligned``: a short write resumes at a page boundary
    (O_DIRECT needs it; the bytes rewritten are the same)."""
    written = 0
    total = len(data)
    while written < total:
        count = os.pwrite(fd, data[written:], offset + written)
        if count <= 0:
            raise OSError(errno.EIO, f"pwrite wrote nothing at offset {offset + written} "
                                     f"({total - written} bytes left)")
        progress = written + count
        if aligned and progress < total:
            progress -= progress % DIRECT_IO_ALIGNMENT
            if progress <= written:  # less than a page: resuming would repeat the same write
                raise OSError(errno.EIO, f"direct pwrite at offset {offset + written} wrote only "
                                         f"{count} bytes")
        written = progress


class PageAppender:
    """Holds the bytes of the file from the current page start up to the append offset, and
    writes them as whole pages.

    ``buffer[:filled]`` are the file's bytes from the page-aligned start of the unwritten region
    to the append offset: the first ``written`` of them (the partial page kept from the last
    write) are already in the file, the rest are appended but still pending. Bytes after
    ``filled`` are scratch; each write zero-fills the rest of its last page. Use: :meth:`stage`
    a region, fill it, :meth:`accept` it, :meth:`write` whenever the pending bytes should reach
    the file (several appends may share one write: O_DIRECT costs ~100 us per write here).
    """

    def __init__(self, capacity: int = DEFAULT_STAGING_LENGTH) -> None:
        if capacity < DIRECT_IO_ALIGNMENT:
            raise ValueError(f"staging capacity {capacity} is below one page ({DIRECT_IO_ALIGNMENT})")
        self._map = mmap.mmap(-1, round_up(capacity))  # anonymous mappings are page-aligned
        self._view = memoryview(self._map)
        self._filled = 0
        self._written = 0

    @property
    def capacity(self) -> int:
        return len(self._view)

    @property
    def partial(self) -> int:
        """Bytes of the append offset's page before it (``append offset % page``)."""
        return self._filled % DIRECT_IO_ALIGNMENT

    @property
    def pending(self) -> int:
        """Appended bytes not written to the file yet."""
        return self._filled - self._written

    def start_page(self) -> None:
        """The append offset is page-aligned in a fresh file (e.g. a new segment): nothing held.
        Pending bytes must have been written."""
        if self.pending:
            raise ValueError(f"{self.pending} appended bytes were not written")
        self._filled = self._written = 0

    def load_partial_page(self, fd: int, offset: int) -> None:
        """Appends continue at ``offset`` of the file behind ``fd``: read the bytes of its page
        before ``offset`` (an aligned read, so it works with O_DIRECT or without)."""
        partial = offset % DIRECT_IO_ALIGNMENT
        self._filled = self._written = 0
        if not partial:
            return
        page_start = offset - partial
        target = self._view[:DIRECT_IO_ALIGNMENT]
        done = 0
        while done < partial:
            count = os.preadv(fd, [target[done:]], page_start + done)
            if count == 0:
                raise OSError(errno.EIO, f"file ends at offset {page_start + done}, inside the page "
                                         f"being extended (append offset {offset})")
            done += count
        self._filled = self._written = partial

    def stage(self, length: int) -> memoryview:
        """The writable region where the next ``length`` bytes go (grows the buffer if needed)."""
        end = self._filled + length
        if round_up(end) > len(self._view):
            self._grow(round_up(end))
        return self._view[self._filled:end]

    def accept(self, length: int) -> None:
        """The ``length`` staged bytes are appended (pending until :meth:`write`)."""
        self._filled += length

    def retract(self, length: int) -> None:
        """Undo the last :meth:`accept` of ``length`` bytes (its write failed)."""
        if not 0 <= length <= self.pending:
            raise ValueError(f"cannot retract {length} bytes: {self.pending} pending")
        self._filled -= length

    def write(self, fd: int, offset: int, *, skip: int = 0, aligned: bool = True) -> None:
        """Write the held bytes, ``offset`` being the file offset of the append offset (just after
        them), then move the append offset on by ``skip`` bytes that stay as the zeros the
        preallocated file holds (a PAD frame's body). On error nothing changes: retry or
        :meth:`retract`."""
        if skip < 0:
            raise ValueError(f"skip {skip} is negative")
        if offset % DIRECT_IO_ALIGNMENT != self.partial:
            raise ValueError(f"append offset {offset} does not continue the held bytes "
                             f"({self._filled} bytes, {self.partial} into the last page)")
        view = self._view
        end = self._filled
        write_end = round_up(end)
        if write_end > end:
            view[end:write_end] = _ZEROS[: write_end - end]
        pwrite_fully(fd, view[:write_end], offset - end, aligned=aligned)
        new_end = end + skip
        new_partial = new_end % DIRECT_IO_ALIGNMENT
        new_page_start = new_end - new_partial
        if new_partial and new_page_start:
            if new_page_start < write_end:  # the new last page was part of this write
                view[:new_partial] = view[new_page_start:new_end]
            else:  # past the written bytes (inside a pad): the file holds zeros there
                view[:new_partial] = _ZEROS[:new_partial]
        self._filled = self._written = new_partial

    def _grow(self, capacity: int) -> None:
        bigger = mmap.mmap(-1, capacity)
        bigger_view = memoryview(bigger)
        bigger_view[: self._filled] = self._view[: self._filled]
        self.close()
        self._map, self._view = bigger, bigger_view

    def close(self) -> None:
        self._view.release()
        try:
            self._map.close()
        except BufferError:  # a caller still holds a staged view: the mapping goes with it
            pass
