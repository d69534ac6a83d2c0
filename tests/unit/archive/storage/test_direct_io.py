"""O_DIRECT segment writes: byte-identical to buffered writes for any sequence of blocks.

The same random block sequences (DATA frames of many sizes, PAD frames of any length including
32 bytes, blocks from 32 B to 2 MiB, checksums on and off, extension from a non-aligned position,
rollover across segments) are written by a direct-I/O writer and a buffered writer into two
archive directories; every segment file must match byte for byte and match the expected disk
image (the log with PAD bodies zeroed). Also: the fallbacks (file system refusing O_DIRECT at
open or at the first write), short writes, ENOSPC, file sync levels and the staging buffer.
"""

from __future__ import annotations

import errno
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aeron_spark.archive.storage import direct_io
from aeron_spark.archive.storage import segment
from aeron_spark.archive.storage.checksum import CRC32C, verify_and_restore
from aeron_spark.archive.storage.direct_io import DIRECT_IO_ALIGNMENT, PageAppender, pwrite_fully
from aeron_spark.archive.storage.segment import (
    SegmentError, SegmentReader, SegmentWriter, list_segment_files, set_default_direct_io)
from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA, HDR_TYPE_PAD, DataFrameHeader, aligned_frame_length, write_padding_frame)
from aeron_spark.driver_integration.position import compute_term_id_from_position

TERM = 64 * 1024
SESSION_ID = 777
STREAM_ID = 1001


@dataclass
class Stream:
    """A publication's log from position 0 (zeros before the start) and the blocks a block poll
    would deliver: whole frames within a term, a PAD frame always alone."""

    start_position: int
    term_length: int = TERM
    log: bytearray = field(default_factory=bytearray)
    frames: list[tuple[int, int, int]] = field(default_factory=list)  # (position, length, type)

    def __post_init__(self) -> None:
        self.log = bytearray(self.start_position)

    @property
    def position(self) -> int:
        return len(self.log)

    def _term_id(self, position: int) -> int:
        return compute_term_id_from_position(position, self.term_length.bit_length() - 1, 5)

    def _term_remaining(self) -> int:
        return self.term_length - (self.position & (self.term_length - 1))

    def data(self, payload_length: int, rng: random.Random) -> None:
        length = 32 + payload_length
        aligned = aligned_frame_length(length)
        if aligned > self._term_remaining():
            self.pad(self._term_remaining())
        start = self.position
        frame = bytearray(rng.randbytes(aligned))  # bytes after the frame length are log garbage
        DataFrameHeader(length, 0, 0xC0, HDR_TYPE_DATA, start & (self.term_length - 1), SESSION_ID,
                        STREAM_ID, self._term_id(start)).pack_into(frame, 0)
        self.log += frame
        self.frames.append((start, aligned, HDR_TYPE_DATA))

    def pad(self, pad_length: int) -> None:
        start = self.position
        frame = bytearray(b"\xee" * pad_length)  # a PAD body must not reach the file
        write_padding_frame(frame, 0, start & (self.term_length - 1), pad_length, SESSION_ID,
                            STREAM_ID, self._term_id(start))
        self.log += frame
        self.frames.append((start, pad_length, HDR_TYPE_PAD))

    def blocks(self, rng: random.Random, max_blocks: tuple[int, ...]) -> list[tuple[int, bytes]]:
        """Group the frames into blocks, each with a random size limit from ``max_blocks``."""
        out: list[tuple[int, bytes]] = []
        start = end = None
        limit = rng.choice(max_blocks)
        for position, length, frame_type in self.frames:
            new_term = start is not None and position // self.term_length != start // self.term_length
            if start is not None and (frame_type == HDR_TYPE_PAD or new_term or position + length - start > limit):
                out.append((start, bytes(self.log[start:end])))
                start, limit = None, rng.choice(max_blocks)
            if frame_type == HDR_TYPE_PAD:
                out.append((position, bytes(self.log[position:position + length])))
                continue
            start = position if start is None else start
            end = position + length
        if start is not None:
            out.append((start, bytes(self.log[start:end])))
        return out

    def on_disk(self) -> bytearray:
        expected = bytearray(self.log)
        for position, length, frame_type in self.frames:
            if frame_type == HDR_TYPE_PAD:
                expected[position + 32:position + length] = bytes(length - 32)
        return expected


def random_stream(rng: random.Random, start: int, length: int, term_length: int = TERM,
                  max_payload: int = 5000, pad_chance: float = 0.03) -> Stream:
    stream = Stream(start, term_length)
    while stream.position < start + length:
        if rng.random() < pad_chance:  # mid-term padding of any length, down to a bare header
            stream.pad(min(32 * rng.randint(1, 200), stream._term_remaining()))
        else:
            stream.data(rng.choice([0, 1, 31, 32, 100, rng.randint(0, max_payload)]), rng)
    return stream


def write(directory: Path, stream: Stream, blocks, segment_length: int, *, direct: bool,
          position: int | None = None, **options) -> SegmentWriter:
    writer = SegmentWriter(directory, 3, stream.start_position, stream.term_length, segment_length,
                           direct_io=direct, position=position, **options)
    with writer:
        assert writer.direct_io is direct  # tmp_path is on a file system with O_DIRECT (ext4)
        for position, block in blocks:
            assert writer.position == position
            writer.append(memoryview(block))
    return writer


def segment_files(directory: Path) -> dict[str, bytes]:
    return {f.path.name: f.path.read_bytes() for f in list_segment_files(directory, 3)}


def assert_identical_and_expected(direct_dir: Path, buffered_dir: Path, stream: Stream,
                                  segment_length: int, *, checksum=None) -> None:
    direct_files, buffered_files = segment_files(direct_dir), segment_files(buffered_dir)
    assert direct_files.keys() == buffered_files.keys()
    for name, content in direct_files.items():
        assert content == buffered_files[name], f"{name} differs between direct and buffered"
    if checksum is None:
        expected = stream.on_disk()
        for f in list_segment_files(direct_dir, 3):
            wanted = expected[f.base_position:f.base_position + segment_length]
            content = direct_files[f.path.name]
            assert len(content) == segment_length
            assert content[:len(wanted)] == wanted
            assert content[len(wanted):] == bytes(segment_length - len(wanted))


@pytest.fixture
def dirs(tmp_path):
    direct, buffered = tmp_path / "direct", tmp_path / "buffered"
    direct.mkdir()
    buffered.mkdir()
    return direct, buffered


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("checksum", [None, CRC32C], ids=["plain", "crc32c"])
def test_random_blocks_are_byte_identical_to_buffered(dirs, seed, checksum):
    rng = random.Random(seed)
    start = rng.choice([0, 32, 4096 - 32, TERM + 4128, 3 * TERM + 96])
    stream = random_stream(rng, start, 5 * TERM + rng.randint(0, TERM))  # rolls over 2+ times
    blocks = stream.blocks(rng, (32, 96, 1000, 4096, 8192, 20_000, TERM))
    segment_length = 2 * TERM
    for directory, direct in zip(dirs, (True, False)):
        writer = write(directory, stream, blocks, segment_length, direct=direct, checksum=checksum)
        assert writer.position == stream.position
    assert len(list_segment_files(dirs[0], 3)) >= 3
    assert_identical_and_expected(*dirs, stream, segment_length, checksum=checksum)
    if checksum is not None:  # the stamped session ids verify and restore to the log's bytes
        with SegmentReader(dirs[0], 3, start, TERM, segment_length) as reader:
            data = bytearray(reader.read(start, stream.position - start))
        term_start = start
        while term_start < stream.position:
            term_end = min(stream.position, (term_start // TERM + 1) * TERM)
            piece = memoryview(data)[term_start - start:term_end - start]
            verify_and_restore(piece, SESSION_ID, CRC32C, block_position=term_start)
            term_start = term_end
        assert data == stream.on_disk()[start:]


def test_tiny_blocks_every_frame_on_its_own(dirs):
    rng = random.Random(42)
    stream = random_stream(rng, 64, 2 * TERM + 500, max_payload=200, pad_chance=0.05)
    blocks = stream.blocks(rng, (32,))  # every frame is its own block: many partial pages
    for directory, direct in zip(dirs, (True, False)):
        write(directory, stream, blocks, 2 * TERM, direct=direct)
    assert_identical_and_expected(*dirs, stream, 2 * TERM)


@pytest.mark.parametrize("checksum", [None, CRC32C], ids=["plain", "crc32c"])
def test_one_mib_and_larger_blocks_grow_the_staging_buffer(dirs, checksum):
    rng = random.Random(7)
    term = 2 * 1024 * 1024
    stream = random_stream(rng, 4096 + 64, 2 * term + 12345, term_length=term, max_payload=60_000,
                           pad_chance=0.0)
    blocks = stream.blocks(rng, (1024 * 1024, term))  # up to a whole 2 MiB term after a partial page
    assert max(len(b) for _, b in blocks) > direct_io.DEFAULT_STAGING_LENGTH
    for directory, direct in zip(dirs, (True, False)):
        write(directory, stream, blocks, 2 * term, direct=direct, checksum=checksum)
    assert_identical_and_expected(*dirs, stream, 2 * term, checksum=checksum)


@pytest.mark.parametrize("first_direct", [True, False], ids=["direct-then-direct", "buffered-then-direct"])
def test_extending_from_a_non_aligned_position_keeps_the_partial_page(dirs, first_direct):
    rng = random.Random(11)
    start = 96
    stream = random_stream(rng, start, 4 * TERM)
    blocks = stream.blocks(rng, (32, 1000, 8192))
    # stop inside a page (not at its start) at least twice: the extension reloads that page
    cuts = [i for i, (position, _) in enumerate(blocks) if position % DIRECT_IO_ALIGNMENT][::17][1:3]
    assert len(cuts) == 2
    bounds = [0, *cuts, len(blocks)]
    for directory, direct in zip(dirs, (True, False)):
        for part, (begin, end) in enumerate(zip(bounds, bounds[1:])):
            mode = direct if part or direct is False else first_direct
            position = blocks[begin][0] if part else None
            write(directory, stream, blocks[begin:end], 2 * TERM, direct=mode, position=position)
    assert_identical_and_expected(*dirs, stream, 2 * TERM)


def test_extending_right_after_a_pad_header_keeps_the_pad_body_zero(dirs):
    stream = Stream(0)
    rng = random.Random(3)
    stream.data(100, rng)
    stream.pad(32 * 5)  # ends mid-page: the extension reloads header + zeros
    stream.data(1000, rng)
    stream.pad(32)  # a bare header
    stream.data(3000, rng)
    blocks = stream.blocks(rng, (TERM,))
    for directory, direct in zip(dirs, (True, False)):
        for index, (position, block) in enumerate(blocks):
            write(directory, stream, [(position, block)], 2 * TERM, direct=direct,
                  position=position if index else None)
    assert_identical_and_expected(*dirs, stream, 2 * TERM)


@pytest.mark.parametrize("level", [1, 2])
def test_file_sync_levels_sync_after_every_direct_write(dirs, monkeypatch, level):
    calls = {"fdatasync": 0, "fsync": 0}
    real_fdatasync, real_fsync = os.fdatasync, os.fsync

    def counting(name, real):
        def call(fd):
            calls[name] += 1
            return real(fd)
        return call

    monkeypatch.setattr(os, "fdatasync", counting("fdatasync", real_fdatasync))
    monkeypatch.setattr(os, "fsync", counting("fsync", real_fsync))
    rng = random.Random(5)
    stream = random_stream(rng, 0, TERM // 2)
    blocks = stream.blocks(rng, (4096,))
    write(dirs[0], stream, blocks, 2 * TERM, direct=True, file_sync=level)
    name = "fdatasync" if level == 1 else "fsync"
    data_syncs = calls[name] - (1 if level == 2 else 0)  # level 2 also fsyncs the directory once
    assert data_syncs == len(blocks)
    monkeypatch.undo()
    write(dirs[1], stream, blocks, 2 * TERM, direct=False, file_sync=level)
    assert_identical_and_expected(*dirs, stream, 2 * TERM)


def test_file_system_refusing_o_direct_falls_back_to_buffered(dirs, monkeypatch):
    real_fcntl = direct_io.fcntl.fcntl

    def refusing(fd, command, *args):
        if command == direct_io.fcntl.F_SETFL and args and args[0] & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_fcntl(fd, command, *args)

    monkeypatch.setattr(direct_io.fcntl, "fcntl", refusing)
    rng = random.Random(9)
    stream = random_stream(rng, 0, 3 * TERM)
    blocks = stream.blocks(rng, (1000, 8192))
    writer = SegmentWriter(dirs[0], 3, 0, TERM, 2 * TERM, direct_io=True)
    with writer:
        assert writer.direct_io is False
        for _, block in blocks:
            writer.append(block)
    monkeypatch.undo()
    write(dirs[1], stream, blocks, 2 * TERM, direct=False)
    assert_identical_and_expected(*dirs, stream, 2 * TERM)


def test_direct_write_refused_at_the_first_write_falls_back_and_loses_nothing(dirs, monkeypatch):
    real = direct_io.pwrite_fully
    refused = []

    def refusing_aligned(fd, data, offset, *, aligned):
        if aligned:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset, aligned=aligned)

    monkeypatch.setattr(direct_io, "pwrite_fully", refusing_aligned)
    rng = random.Random(13)
    stream = random_stream(rng, 160, 3 * TERM)
    blocks = stream.blocks(rng, (1000, 8192))
    writer = SegmentWriter(dirs[0], 3, 160, TERM, 2 * TERM, direct_io=True)
    with writer:
        assert writer.direct_io is True
        for _, block in blocks:
            writer.append(block)
            assert writer.direct_io is False
    assert len(refused) == 1
    monkeypatch.undo()
    write(dirs[1], stream, blocks, 2 * TERM, direct=False)
    assert_identical_and_expected(*dirs, stream, 2 * TERM)


def test_disk_full_raises_and_leaves_the_writer_able_to_retry(dirs, monkeypatch):
    real = direct_io.pwrite_fully
    failures = {"left": 1}

    def full_once(fd, data, offset, *, aligned):
        if failures["left"]:
            failures["left"] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset, aligned=aligned)

    rng = random.Random(17)
    stream = random_stream(rng, 0, TERM)
    blocks = stream.blocks(rng, (1000,))
    writer = SegmentWriter(dirs[0], 3, 0, TERM, 2 * TERM, direct_io=True)
    with writer:
        for index, (position, block) in enumerate(blocks):
            if index == 5:
                monkeypatch.setattr(direct_io, "pwrite_fully", full_once)
                with pytest.raises(OSError) as raised:
                    writer.append(block)
                assert raised.value.errno == errno.ENOSPC
                assert writer.position == position  # nothing recorded
                assert writer.direct_io is True
            writer.append(block)
    monkeypatch.undo()
    write(dirs[1], stream, blocks, 2 * TERM, direct=False)
    assert_identical_and_expected(*dirs, stream, 2 * TERM)


def test_short_direct_writes_resume_at_a_page_boundary(tmp_path, monkeypatch):
    path = tmp_path / "f"
    payload = random.Random(1).randbytes(5 * DIRECT_IO_ALIGNMENT)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    real_pwrite = os.pwrite
    offsets = []

    def short(fd_, data, offset):
        offsets.append(offset)
        return real_pwrite(fd_, bytes(data)[:5000], offset)  # never a whole number of pages

    try:
        monkeypatch.setattr(os, "pwrite", short)
        pwrite_fully(fd, memoryview(payload), 8192, aligned=True)
        monkeypatch.undo()
        assert all(offset % DIRECT_IO_ALIGNMENT == 0 for offset in offsets)
        assert os.pread(fd, len(payload), 8192) == payload
    finally:
        os.close(fd)


def test_a_write_that_makes_no_progress_is_an_error(tmp_path, monkeypatch):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        monkeypatch.setattr(os, "pwrite", lambda fd_, data, offset: 100)
        with pytest.raises(OSError, match="wrote only 100 bytes"):
            pwrite_fully(fd, memoryview(bytes(8192)), 0, aligned=True)
        monkeypatch.setattr(os, "pwrite", lambda fd_, data, offset: 0)
        with pytest.raises(OSError, match="wrote nothing"):
            pwrite_fully(fd, memoryview(bytes(100)), 0, aligned=False)
    finally:
        os.close(fd)


def test_page_appender_keeps_the_partial_page_and_zero_fills_the_last_page(tmp_path):
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, 8 * DIRECT_IO_ALIGNMENT)
        os.pwrite(fd, b"\x01" * 100, 0)
        appender = PageAppender(DIRECT_IO_ALIGNMENT)
        appender.load_partial_page(fd, 100)
        assert appender.partial == 100
        appender.stage(50)[:] = b"\x02" * 50
        appender.stage(50)[:] = b"\x02" * 50  # staging again is idempotent until committed
        appender.commit(fd, 100, 50, 50)
        appender.stage(5000)[:] = b"\x03" * 5000  # grows past the one-page capacity
        assert appender.capacity >= 150 + 5000
        stale = appender.stage(4000)  # leaves garbage after the staged bytes
        stale[:] = b"\xff" * 4000
        appender.stage(64)[:] = b"\x04" * 64
        appender.commit(fd, 150, 64, 64 + 9000)  # like a PAD header followed by a long body
        assert appender.partial == (150 + 64 + 9000) % DIRECT_IO_ALIGNMENT
        with pytest.raises(ValueError, match="does not continue"):
            appender.commit(fd, 150, 32, 32)
        appender.close()
        content = os.pread(fd, 8 * DIRECT_IO_ALIGNMENT, 0)
        assert content[:100] == b"\x01" * 100
        assert content[100:150] == b"\x02" * 50
        assert content[150:214] == b"\x04" * 64
        assert content[214:] == bytes(len(content) - 214)
    finally:
        os.close(fd)


def test_closed_writer_refuses_appends_and_default_follows_the_process_setting(tmp_path):
    assert SegmentWriter(tmp_path, 6, 0, TERM, 2 * TERM).direct_io is False  # off by default, as Aeron
    writer = SegmentWriter(tmp_path, 3, 0, TERM, 2 * TERM, direct_io=True)
    assert writer.direct_io is True  # where the file system supports it
    writer.close()
    writer.close()
    assert writer.direct_io is False
    stream = Stream(0)
    stream.data(10, random.Random(0))
    with pytest.raises(SegmentError, match="closed"):
        writer.append(stream.log)
    try:
        set_default_direct_io(True)
        with SegmentWriter(tmp_path, 4, 0, TERM, 2 * TERM) as direct:
            assert direct.direct_io is True
        with SegmentWriter(tmp_path, 5, 0, TERM, 2 * TERM, direct_io=False) as forced:
            assert forced.direct_io is False
    finally:
        set_default_direct_io(False)
    assert segment.default_direct_io() is False
