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
DEFAULT_STAGING_LENGTH = 1024 * 1024 + DIRECT_IO_ALIGNMENT  # a 1 MiB block after a partial page
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
    """Stages appends after the current partial page and writes them as whole pages.

    Invariant: ``buffer[:partial]`` holds the file's bytes of the page containing the append
    offset, before that offset. Bytes after them are scratch; each write zero-fills the rest of
    its last page. Use: :meth:`stage` a region, fill it, :meth:`commit` it.
    """

    def __init__(self, capacity: int = DEFAULT_STAGING_LENGTH) -> None:
        if capacity < DIRECT_IO_ALIGNMENT:
            raise ValueError(f"staging capacity {capacity} is below one page ({DIRECT_IO_ALIGNMENT})")
        self._map = mmap.mmap(-1, round_up(capacity))  # anonymous mappings are page-aligned
        self._view = memoryview(self._map)
        self._partial = 0

    @property
    def capacity(self) -> int:
        return len(self._view)

    @property
    def partial(self) -> int:
        """Bytes of the current page before the append offset (held in the buffer)."""
        return self._partial

    def start_page(self) -> None:
        """The append offset is page-aligned (e.g. a new segment file): nothing to keep."""
        self._partial = 0

    def load_partial_page(self, fd: int, offset: int) -> None:
        """Appends continue at ``offset`` of the file behind ``fd``: read the bytes of its page
        before ``offset`` (an aligned read, so it works with O_DIRECT or without)."""
        partial = offset % DIRECT_IO_ALIGNMENT
        self._partial = 0
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
        self._partial = partial

    def stage(self, length: int) -> memoryview:
        """The writable region where the next ``length`` bytes go (grows the buffer if needed)."""
        end = self._partial + length
        if round_up(end) > len(self._view):
            self._grow(round_up(end))
        return self._view[self._partial:end]

    def commit(self, fd: int, offset: int, staged: int, advance: int, *, aligned: bool = True) -> None:
        """Write the partial page plus ``staged`` bytes for the append at ``offset``, then move the
        append offset on by ``advance`` (>= ``staged``; the rest, e.g. a PAD frame's body, stays
        as the zeros the preallocated file holds). On error nothing moves: the append may be
        retried."""
        if advance < staged:
            raise ValueError(f"advance {advance} is below the staged length {staged}")
        if offset % DIRECT_IO_ALIGNMENT != self._partial:
            raise ValueError(f"append offset {offset} does not continue the staged page "
                             f"(partial {self._partial} bytes)")
        view = self._view
        end = self._partial + staged
        write_end = round_up(end)
        if write_end > end:
            view[end:write_end] = _ZEROS[: write_end - end]
        pwrite_fully(fd, view[:write_end], offset - self._partial, aligned=aligned)
        new_end = self._partial + advance
        new_partial = new_end % DIRECT_IO_ALIGNMENT
        new_page_start = new_end - new_partial
        if new_partial and new_page_start:
            if new_page_start < write_end:  # the new last page was part of this write
                view[:new_partial] = view[new_page_start:new_end]
            else:  # past the written bytes (inside a pad): the file holds zeros there
                view[:new_partial] = _ZEROS[:new_partial]
        self._partial = new_partial

    def _grow(self, capacity: int) -> None:
        bigger = mmap.mmap(-1, capacity)
        bigger_view = memoryview(bigger)
        bigger_view[: self._partial] = self._view[: self._partial]
        self.close()
        self._map, self._view = bigger, bigger_view

    def close(self) -> None:
        self._view.release()
        try:
            self._map.close()
        except BufferError:  # a caller still holds a staged view: the mapping goes with it
            pass
