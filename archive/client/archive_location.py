"""Finding a running archive by its directory: what its mark file says (read-only, no lock).

A client on the archive's host can be given the archive directory instead of channels: the
mark file names the control channels and stream ids and the archive's Aeron directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from aeron_spark.archive.codecs.mark_file_layout import (
    HEADER_LENGTH,
    MARK_FILE_NAME,
    MODERN_BLOCK_OFFSET,
    ArchiveMarkInfo,
    MarkFileError,
    decode_mark_file,
)

__all__ = ["ArchiveMarkInfo", "MarkFileError", "read_archive_location"]


def read_archive_location(path: str | os.PathLike) -> ArchiveMarkInfo:
    """The mark file's header, for a path naming either the mark file or the archive directory.

    Raises `MarkFileError` when the directory holds no (readable) mark file.
    """
    target = Path(path)
    mark_file = target if target.name == MARK_FILE_NAME else target / MARK_FILE_NAME
    try:
        with open(mark_file, "rb") as f:
            data = f.read(HEADER_LENGTH + MODERN_BLOCK_OFFSET)
    except FileNotFoundError:
        raise MarkFileError(f"no archive mark file in {mark_file.parent}: {MARK_FILE_NAME} is "
                            f"missing (no archive has run on this directory)") from None
    return decode_mark_file(data, mark_file)
