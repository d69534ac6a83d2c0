"""Catalog.replace_channels (UpdateChannel, Aeron's Catalog.replaceRecording): shorter, same and
longer descriptors, entries after a grown one moved and still found, crash points, and a reader in
another process that sees the rewritten file."""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage import catalog as catalog_module
from aeron_spark.archive.storage.catalog import (
    CATALOG_FILE_NAME, DELETED, REPLACE_FILE_NAME, Catalog, UnknownRecordingError)
from aeron_spark.archive.storage.checksum import CRC32C

from tests.unit.archive.storage.test_catalog import frame_at, new_recording

LONG = "aeron:udp?endpoint=localhost:40123|alias=" + "x" * 300


def three(catalog: Catalog) -> list[int]:
    ids = [new_recording(catalog, stream_id=1000 + i) for i in range(3)]
    catalog.recording_stopped(ids[1], 4096, 77)
    return ids


def frames(directory) -> list[tuple[int, int, int]]:
    """(offset, length, state) of every frame, walking the file as Java does."""
    data = (directory / CATALOG_FILE_NAME).read_bytes()
    found, offset = [], layout.HEADER_LENGTH
    while True:
        length, state, _ = frame_at(data, offset)
        if length == 0:
            return found
        found.append((offset, length, state))
        offset += 32 + length


def test_shorter_and_same_length_keep_the_frame_and_its_offset(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        ids = three(catalog)
        before = frames(tmp_path)
        d = catalog.replace_channels(ids[1], stripped_channel="aeron:ipc", original_channel="aeron:ipc?alias=a")
        assert (d.stripped_channel, d.original_channel) == ("aeron:ipc", "aeron:ipc?alias=a")
        assert frames(tmp_path) == before  # as Aeron: the frame keeps its length, zero padded
        old = catalog.descriptor(ids[1])
        same = catalog.replace_channels(ids[1], stripped_channel="aeron:ipc", original_channel="aeron:ipc?alias=b")
        assert frames(tmp_path) == before
        assert same == dataclasses.replace(old, original_channel="aeron:ipc?alias=b")
    with Catalog.open(tmp_path, read_only=True) as reader:
        d1 = reader.descriptor(ids[1])
        assert (d1.stripped_channel, d1.original_channel) == ("aeron:ipc", "aeron:ipc?alias=b")
        assert (d1.stop_position, d1.stop_timestamp, d1.stream_id) == (4096, 77, 1001)
        assert [reader.descriptor(i).stream_id for i in ids] == [1000, 1001, 1002]
        assert not reader.problems


def test_longer_shifts_the_following_entries_which_are_still_found(tmp_path):
    with Catalog.open(tmp_path, checksum=CRC32C) as catalog:
        ids = three(catalog)
        before = frames(tmp_path)
        untouched = [catalog.descriptor(i) for i in ids]
        d = catalog.replace_channels(ids[1], stripped_channel="aeron:udp?endpoint=localhost:40123",
                                     original_channel=LONG)
        after = frames(tmp_path)
        shift = after[1][1] - before[1][1]
        assert shift > 0 and shift % 64 == 0
        assert after[0] == before[0]
        assert after[1][0] == before[1][0]
        assert after[2] == (before[2][0] + shift, before[2][1], before[2][2])
        assert catalog.frame_offset(ids[2]) == before[2][0] + shift
        assert catalog.descriptor(ids[1]) == d
        assert [catalog.descriptor(i) for i in (ids[0], ids[2])] == [untouched[0], untouched[2]]
        # the writer goes on: updates and appends land in the moved file at the right places
        catalog.recording_stopped(ids[2], 8192, 99)
        four = new_recording(catalog, stream_id=1003)
        assert frames(tmp_path)[3][0] == after[2][0] + 32 + after[2][1]
        data = (tmp_path / CATALOG_FILE_NAME).read_bytes()
        for offset, length, _ in frames(tmp_path):
            assert frame_at(data, offset)[2] == CRC32C.compute(data[offset + 32:offset + 32 + length])
    with Catalog.open(tmp_path, read_only=True) as reader:
        assert [reader.descriptor(i).stream_id for i in ids + [four]] == [1000, 1001, 1002, 1003]
        assert reader.descriptor(ids[1]).original_channel == LONG
        assert reader.descriptor(ids[2]).stop_position == 8192
        assert not reader.problems
    assert not (tmp_path / REPLACE_FILE_NAME).exists()


def test_growing_the_last_entry_and_past_the_capacity(tmp_path):
    with Catalog.open(tmp_path, capacity=4096) as catalog:
        ids = [new_recording(catalog, stream_id=i) for i in range(16)]
        size = catalog.capacity()
        for recording_id in (ids[-1], ids[0]):
            catalog.replace_channels(recording_id, stripped_channel="aeron:ipc", original_channel=LONG * 6)
        assert catalog.capacity() > size
    with Catalog.open(tmp_path, read_only=True) as reader:
        assert [d.stream_id for d in reader.descriptors()] == list(range(len(ids)))
        assert reader.descriptor(ids[0]).original_channel == LONG * 6
        assert not reader.problems


def test_unknown_ids_are_refused_and_the_state_is_kept(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        ids = three(catalog)
        with pytest.raises(UnknownRecordingError):
            catalog.replace_channels(7, stripped_channel="aeron:ipc", original_channel="aeron:ipc")
        catalog.delete(ids[0])
        catalog.replace_channels(ids[0], stripped_channel="aeron:ipc", original_channel=LONG)
        assert catalog.entry(ids[0]).state == DELETED and catalog.descriptor(ids[0]) is None
        assert catalog.count_entries() == 2
        assert list(catalog.listable_ids(0)) == ids[1:]


@pytest.mark.parametrize("point", ["catalog-replace-written", "catalog-replace-committed"])
def test_a_crash_leaves_the_old_or_the_new_catalog(tmp_path, monkeypatch, point):
    class Killed(Exception):
        pass

    def fault(name: str) -> None:
        if name == point:
            raise Killed(name)

    with Catalog.open(tmp_path) as catalog:
        ids = three(catalog)
        old = catalog.descriptor(ids[1])
        monkeypatch.setattr(catalog_module, "fault_point", fault)
        with pytest.raises(Killed):
            catalog.replace_channels(ids[1], stripped_channel="aeron:ipc", original_channel=LONG)
    with Catalog.open(tmp_path) as reopened:  # the writer's open removes an uncommitted rewrite
        assert not (tmp_path / REPLACE_FILE_NAME).exists()
        expected = old.original_channel if point == "catalog-replace-written" else LONG
        assert reopened.descriptor(ids[1]).original_channel == expected
        assert [reopened.descriptor(i).stream_id for i in ids] == [1000, 1001, 1002]
        assert not reopened.problems


def test_a_leftover_rewrite_is_ignored_by_readers_and_removed_by_the_writer(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        three(catalog)
    (tmp_path / REPLACE_FILE_NAME).write_bytes(b"partial")
    with Catalog.open(tmp_path, read_only=True) as reader:
        assert reader.count_entries() == 3
    assert (tmp_path / REPLACE_FILE_NAME).exists()
    Catalog.open(tmp_path).close()
    assert not (tmp_path / REPLACE_FILE_NAME).exists()


READER = textwrap.dedent("""
    import json, sys
    from aeron_spark.archive.storage.catalog import Catalog
    reader = Catalog.open(sys.argv[1], read_only=True)
    for line in sys.stdin:
        ids = json.loads(line)
        print(json.dumps([[d.original_channel, d.stream_id] if d else None
                          for d in map(reader.descriptor, ids)]
                         + [[d.recording_id for d in reader.descriptors()]]), flush=True)
""")


def test_a_reader_in_another_process_sees_the_rewritten_catalog(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        ids = three(catalog)
        reader = subprocess.Popen([sys.executable, "-c", READER, str(tmp_path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
        try:
            def ask(wanted):
                reader.stdin.write(json.dumps(wanted) + "\n")
                reader.stdin.flush()
                return json.loads(reader.stdout.readline())

            first = ask(ids)
            assert [row[1] for row in first[:3]] == [1000, 1001, 1002]
            catalog.replace_channels(ids[0], stripped_channel="aeron:ipc", original_channel=LONG)
            catalog.recording_stopped(ids[2], 4096)
            four = new_recording(catalog, stream_id=1003)
            second = ask(ids + [four])
            assert second[0] == [LONG, 1000]
            assert [row[1] for row in second[1:4]] == [1001, 1002, 1003]
            assert second[4] == ids + [four]
            catalog.replace_channels(ids[1], stripped_channel="aeron:ipc", original_channel=LONG + "y")
            assert ask([ids[2], ids[1]])[:2] == [[first[2][0], 1002], [LONG + "y", 1001]]
        finally:
            reader.kill()
            reader.wait(10)


def test_threads_reading_the_writers_catalog_never_miss_a_moved_entry(tmp_path):
    """The sidecar's other threads read through the writer's Catalog while the conductor moves
    entries: a read at a stale offset is retried under the lock, never reported unknown."""
    with Catalog.open(tmp_path) as catalog:
        ids = [new_recording(catalog, stream_id=2000 + i) for i in range(20)]
        stop = threading.Event()
        wrong: list = []

        def read() -> None:
            while not stop.is_set():
                for recording_id in ids:
                    d = catalog.descriptor(recording_id)
                    if d is None or d.stream_id != 2000 + recording_id:
                        wrong.append((recording_id, d))

        readers = [threading.Thread(target=read) for _ in range(2)]
        for reader in readers:
            reader.start()
        try:
            for round_ in range(1, 15):
                catalog.replace_channels(ids[round_ % 5], stripped_channel="aeron:ipc",
                                         original_channel=LONG + "z" * (64 * round_))
        finally:
            stop.set()
            for reader in readers:
                reader.join(10)
        assert wrong == []
