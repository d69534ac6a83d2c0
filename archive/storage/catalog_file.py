"""The catalog file's life outside its entries: creating it, growing it, copying its bytes into a
rewrite, the rewrite a crash left uncommitted, and fsyncing the directory after a rename.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage.catalog_entries import CatalogError

log = logging.getLogger(__name__)

CATALOG_FILE_NAME = "archive.catalog"
REPLACE_FILE_NAME = CATALOG_FILE_NAME + ".replace"  # the rewritten catalog before its rename
COPY_CHUNK = 1024 * 1024


def write_new_catalog_file(fd: int, capacity: int, file_sync: int, directory: Path) -> None:
    os.ftruncate(fd, capacity)  # sparse, like Aeron's mapping of a new catalog
    os.pwrite(fd, layout.encode_catalog_header(0), 0)
    if file_sync:
        os.fsync(fd)
        sync_directory(directory)


def grown_capacity(size: int, needed: int, path: Path) -> int:
    """The file length for ``needed`` bytes: ``size`` if enough, else grown by x1.5 steps."""
    if needed <= size:
        return size
    new_size = max(size, layout.MIN_CAPACITY)
    while new_size < needed:
        new_size = new_size * layout.GROWTH_NUMERATOR // layout.GROWTH_DENOMINATOR
    if new_size > layout.MAX_CAPACITY:
        if needed > layout.MAX_CAPACITY:
            raise CatalogError(f"{path}: the catalog cannot grow past {layout.MAX_CAPACITY} bytes")
        new_size = layout.MAX_CAPACITY
    return new_size


def copy_range(source: int, target: int, start: int, end: int, to: int) -> None:
    """Copies bytes [start, end) of ``source`` to offset ``to`` of ``target`` (file descriptors)."""
    while start < end:
        data = os.pread(source, min(COPY_CHUNK, end - start), start)
        if not data:
            raise CatalogError(f"catalog ends at offset {start}, before its entries' end {end}")
        os.pwrite(target, data, to)
        start += len(data)
        to += len(data)


def remove_uncommitted_replace(directory: Path) -> None:
    """A `REPLACE_FILE_NAME` left by a crash before its rename was never the catalog: delete it."""
    leftover = directory / REPLACE_FILE_NAME
    if leftover.exists():
        log.warning("%s: deleting an uncommitted catalog rewrite (a channel update interrupted by a crash)",
                    leftover)
        leftover.unlink(missing_ok=True)


def sync_directory(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
