"""The file-sync levels really sync: catalog updates and segment writes make no sync call at level 0,
``fdatasync`` at 1 and ``fsync`` at 2 (the real calls counted)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from aeron_spark.archive.storage import catalog as catalog_module
from aeron_spark.archive.storage import segment as segment_module
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.segment import SegmentWriter
from aeron_spark.driver_integration.frame import DataFrameHeader

pytestmark = pytest.mark.timeout(120)

TERM = 64 * 1024
CHANNEL = f"aeron:ipc?term-length={TERM}"


class SyncCalls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        real_fsync, real_fdatasync = os.fsync, os.fdatasync

        def fsync(fd: int) -> None:
            self.calls.append("fsync")
            real_fsync(fd)

        def fdatasync(fd: int) -> None:
            self.calls.append("fdatasync")
            real_fdatasync(fd)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "fdatasync", fdatasync)

    def take(self) -> list[str]:
        taken, self.calls = self.calls, []
        return taken


def frames_block(count: int, position: int) -> bytes:
    """``count`` 64-byte DATA frames of term 0 starting at ``position``."""
    block = bytearray()
    for index in range(count):
        header = DataFrameHeader(frame_length=64, term_offset=position + 64 * index, session_id=5,
                                 stream_id=1001, term_id=0)
        block += header.pack() + bytes([index + 1]) * 32
    return bytes(block)


@pytest.mark.parametrize("level, expected", [(0, None), (1, "fdatasync"), (2, "fsync")])
def test_file_sync_level_syncs_catalog_updates_and_segment_writes(tmp_path: Path, monkeypatch, level, expected):
    assert catalog_module.os is os and segment_module.os is os  # both sync through os.*
    calls = SyncCalls(monkeypatch)
    with Catalog.open(tmp_path, file_sync=level) as catalog:
        recording_id = catalog.add_recording(
            start_position=0, initial_term_id=0, segment_file_length=TERM, term_buffer_length=TERM,
            mtu_length=1408, session_id=5, stream_id=1001, stripped_channel="aeron:ipc",
            original_channel=CHANNEL, source_identity="aeron:ipc")
        calls.take()
        catalog.recording_stopped(recording_id, 640)
        catalog_calls = calls.take()
    writer = SegmentWriter(tmp_path, recording_id, 0, TERM, TERM, file_sync=level)
    try:
        calls.take()  # file creation (directory sync at levels 1 and 2)
        writer.append(frames_block(10, 0))
        writer.append(frames_block(10, 640))
        segment_calls = calls.take()
    finally:
        writer.close()
    if expected is None:
        assert catalog_calls == [] and segment_calls == []
    else:
        assert catalog_calls and set(catalog_calls) == {expected}
        assert segment_calls == [expected, expected]  # after each write
