"""A segment writer on a disk that fills at a roll-over: the full segment before it is kept and
counted, and the next segment file that could not be allocated is not left behind (an empty file
would be a segment of the wrong length to recovery and to replays)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from aeron_spark.archive.storage import segment
from aeron_spark.archive.storage.segment import SegmentReader, SegmentWriter, list_segment_files

from tests.support.synthetic_log import SyntheticLog, blocks

TERM = 64 * 1024


def test_a_roll_over_without_space_keeps_the_full_segment_and_leaves_no_empty_file(tmp_path: Path, monkeypatch):
    log = SyntheticLog(term_length=TERM, initial_term_id=0)
    while log.position < TERM + 4096:
        log.append(bytes(range(200)))
    real_allocate = segment._allocate
    allocations = []

    def allocate(fd: int, length: int) -> None:
        allocations.append(length)
        if len(allocations) > 1:  # the first segment fits, the next one does not
            raise OSError(errno.ENOSPC, "No space left on device")
        real_allocate(fd, length)

    monkeypatch.setattr(segment, "_allocate", allocate)
    writer = SegmentWriter(tmp_path, 3, 0, TERM, TERM)
    with pytest.raises(OSError) as raised:
        for _, block in blocks(bytes(log.data), 0, log.frame_boundaries(), 4096):
            writer.append(block)
    writer.close()
    assert segment.is_storage_space_error(raised.value)
    assert writer.position == TERM  # the block that filled the first segment is written and counted
    assert [f.path.name for f in list_segment_files(tmp_path, 3)] == ["3-0.rec"]
    with SegmentReader(tmp_path, 3, 0, TERM, TERM) as reader:
        assert reader.read(0, TERM) == log.bytes_between(0, TERM)
