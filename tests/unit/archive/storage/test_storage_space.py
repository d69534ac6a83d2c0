"""A full file system: the catalog leaves no half-made entry; the low-space check refuses early."""

import errno
import os

import pytest

from aeron_spark.archive.storage import segment
from aeron_spark.archive.storage.catalog import Catalog

NEW = dict(start_position=0, initial_term_id=1, segment_file_length=65536, term_buffer_length=65536,
           mtu_length=1408, session_id=7, stream_id=1001, stripped_channel="aeron:ipc",
           original_channel="aeron:ipc", source_identity="aeron:ipc")


def test_a_failed_catalog_write_leaves_no_entry(tmp_path, monkeypatch):
    real_pwrite = os.pwrite
    calls = []

    def pwrite(fd, data, offset):
        calls.append(offset)
        if len(calls) == 2:  # the slot header, after the body went in
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, offset)

    with Catalog.open(tmp_path) as catalog:
        monkeypatch.setattr(os, "pwrite", pwrite)
        with pytest.raises(OSError) as raised:
            catalog.add_recording(**NEW)
        monkeypatch.undo()
        assert segment.is_storage_space_error(raised.value)
        assert catalog.next_recording_id == 0 and list(catalog.entries()) == []
        assert catalog.add_recording(**NEW) == 0  # the same slot, once there is room


def test_low_storage_space_names_what_is_left(tmp_path):
    assert segment.low_storage_space(tmp_path, 0) is None
    assert "low storage space" in segment.low_storage_space(tmp_path, 1 << 62)
