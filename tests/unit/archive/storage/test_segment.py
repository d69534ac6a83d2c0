"""Segment files: naming, preallocation, rollover, verbatim frames, PAD handling, reads, helpers."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings, strategies as st

from aeron_spark.archive.storage.checksum import CRC32C, verify_and_restore
from aeron_spark.archive.storage.segment import (
    SegmentError, SegmentFileExistsError, SegmentFileMissingError, SegmentReader, SegmentWriteError,
    SegmentWriter, delete_segment_files_below, delete_segment_files_from, list_segment_files,
    recording_segment_length, segment_file_path, truncate_segment_file)
from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA, HDR_TYPE_PAD, DataFrameHeader, aligned_frame_length, write_padding_frame)
from aeron_spark.driver_integration.position import compute_term_id_from_position

TERM = 64 * 1024
SEGMENT = 2 * TERM


@dataclass
class StreamLog:
    """A publication's log as contiguous bytes from position 0 (zeros before the start position),
    plus the blocks a subscriber's block poll would deliver (a PAD frame always on its own)."""

    start_position: int
    term_length: int = TERM
    initial_term_id: int = 11
    session_id: int = 4242
    stream_id: int = 1001
    log: bytearray = field(default_factory=bytearray)
    blocks: list[tuple[int, bytes]] = field(default_factory=list)
    frames: list[tuple[int, int, int]] = field(default_factory=list)  # (position, length, type)

    def __post_init__(self) -> None:
        self.log = bytearray(self.start_position)

    @property
    def position(self) -> int:
        return len(self.log)

    def _header(self, length: int, frame_type: int, flags: int = 0xC0) -> DataFrameHeader:
        position = self.position
        bits = self.term_length.bit_length() - 1
        return DataFrameHeader(length, 0, flags, frame_type, position & (self.term_length - 1),
                               self.session_id, self.stream_id,
                               compute_term_id_from_position(position, bits, self.initial_term_id))

    def append(self, payload_length: int, fill: int | None = None) -> None:
        length = 32 + payload_length
        aligned = aligned_frame_length(length)
        remaining = self.term_length - (self.position & (self.term_length - 1))
        if aligned > remaining:
            self.pad(remaining)
        start = self.position
        frame = bytearray(aligned)
        self._header(length, HDR_TYPE_DATA).pack_into(frame, 0)
        frame[32:length] = bytes([(fill if fill is not None else (start // 32 + i) & 0xFF)
                                  for i in range(payload_length)])
        self.log += frame
        self.frames.append((start, length, HDR_TYPE_DATA))

    def pad(self, pad_length: int) -> None:
        start = self.position
        frame = bytearray(b"\xee" * pad_length)  # a PAD body is not meaningful: must not be stored
        write_padding_frame(frame, 0, start & (self.term_length - 1), pad_length, self.session_id,
                            self.stream_id, self._header(pad_length, HDR_TYPE_PAD).term_id)
        self.log += frame
        self.frames.append((start, pad_length, HDR_TYPE_PAD))

    def block_poll_blocks(self, max_block: int = 8192) -> list[tuple[int, bytes]]:
        """Blocks of whole frames: at most ``max_block`` bytes (or one frame), within a term,
        a PAD frame alone."""
        blocks: list[tuple[int, bytes]] = []
        current_start, current_end = None, None
        for position, length, frame_type in self.frames:
            end = position + aligned_frame_length(length)
            same_term = current_start is not None and \
                position // self.term_length == current_start // self.term_length
            if frame_type == HDR_TYPE_PAD or not same_term or end - current_start > max_block:
                if current_start is not None:
                    blocks.append((current_start, bytes(self.log[current_start:current_end])))
                current_start = position
            current_end = end
            if frame_type == HDR_TYPE_PAD:
                blocks.append((position, bytes(self.log[position:end])))
                current_start = None
        if current_start is not None:
            blocks.append((current_start, bytes(self.log[current_start:current_end])))
        return blocks

    def on_disk(self) -> bytearray:
        """What segment files must hold: the log with PAD bodies zeroed."""
        expected = bytearray(self.log)
        for position, length, frame_type in self.frames:
            if frame_type == HDR_TYPE_PAD:
                expected[position + 32:position + length] = bytes(length - 32)
        return expected


def make_stream(start_position: int, payload_lengths, term_length: int = TERM) -> StreamLog:
    stream = StreamLog(start_position, term_length)
    for payload_length in payload_lengths:
        stream.append(payload_length)
    return stream


def record(directory, stream: StreamLog, recording_id: int = 3, segment_length: int = SEGMENT,
           max_block: int = 8192, **writer_options) -> SegmentWriter:
    writer = SegmentWriter(directory, recording_id, stream.start_position, stream.term_length,
                           segment_length, **writer_options)
    with writer:
        for position, block in stream.block_poll_blocks(max_block):
            assert writer.position == position
            writer.append(memoryview(block))
    return writer


def file_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_recording_across_segments_is_verbatim_with_pad_headers_only(tmp_path):
    stream = make_stream(0, [100, 1000, 37, 3000] * 70)  # ~4.6 terms, padding at every term end
    writer = record(tmp_path, stream)
    assert writer.position == stream.position
    files = list_segment_files(tmp_path, 3)
    assert [f.base_position for f in files] == [0, SEGMENT, 2 * SEGMENT]
    assert [f.path.name for f in files] == ["3-0.rec", f"3-{SEGMENT}.rec", f"3-{2 * SEGMENT}.rec"]
    expected = stream.on_disk()
    for f in files:
        content = file_bytes(f.path)
        assert len(content) == SEGMENT
        wanted = expected[f.base_position:f.base_position + SEGMENT]
        assert content[:len(wanted)] == wanted
        assert content[len(wanted):] == bytes(SEGMENT - len(wanted))
    assert any(t == HDR_TYPE_PAD for _, _, t in stream.frames)


def test_start_mid_term_first_file_begins_at_term_base(tmp_path):
    start = 3 * TERM + 4096
    stream = make_stream(start, [200] * 300)
    record(tmp_path, stream)
    files = list_segment_files(tmp_path, 3)
    assert files[0].base_position == 3 * TERM  # start term base, not a multiple of the segment length
    first = file_bytes(files[0].path)
    assert first[:4096] == bytes(4096)
    assert first[4096:4096 + 2000] == stream.on_disk()[start:start + 2000]
    with SegmentReader(tmp_path, 3, start, TERM, SEGMENT) as reader:
        assert reader.read(start, stream.position - start) == bytes(stream.on_disk()[start:])


def test_exact_segment_fill_rolls_over_to_an_empty_next_file(tmp_path):
    stream = StreamLog(0)
    while stream.position < SEGMENT:
        stream.append(4064)  # 4096-byte frames fill a term exactly: no padding
    writer = record(tmp_path, stream)
    assert writer.position == SEGMENT
    assert [f.base_position for f in list_segment_files(tmp_path, 3)] == [0, SEGMENT]
    assert file_bytes(segment_file_path(tmp_path, 3, SEGMENT)) == bytes(SEGMENT)


def test_block_crossing_a_term_is_rejected(tmp_path):
    stream = make_stream(TERM - 128, [32, 32, 32])  # 64-byte frames: the third one is in the next term
    with SegmentWriter(tmp_path, 1, TERM - 128, TERM, SEGMENT) as writer:
        block = bytes(stream.log[TERM - 128:TERM - 128 + 192])
        with pytest.raises(SegmentWriteError, match=r"crosses the term boundary \(term length 65536\)"):
            writer.append(block)
        assert writer.position == TERM - 128


def test_block_checks(tmp_path):
    stream = make_stream(0, [32, 32])
    with SegmentWriter(tmp_path, 1, 0, TERM, SEGMENT) as writer:
        with pytest.raises(SegmentWriteError, match="not a whole number"):
            writer.append(bytes(stream.log[:40]))
        with pytest.raises(SegmentWriteError, match="term offset 64 but the recording is at position 0"):
            writer.append(bytes(stream.log[64:128]))
        writer.append(bytes(stream.log[:128]))
        pad = bytearray(TERM - 128)
        write_padding_frame(pad, 0, 128, len(pad) - 64, 1, 2, 11)  # PAD plus more bytes after it
        with pytest.raises(SegmentWriteError, match="padding must come as a block of its own"):
            writer.append(pad)
        writer.append(b"")
        assert writer.position == 128
    with pytest.raises(SegmentError, match="closed"):
        writer.append(bytes(stream.log[:64]))


def test_rollover_onto_existing_file_is_an_error(tmp_path):
    segment_file_path(tmp_path, 3, SEGMENT).write_bytes(b"")
    stream = StreamLog(0)
    while stream.position < SEGMENT:
        stream.append(4064)
    with pytest.raises(SegmentFileExistsError, match=f"segment file already exists: .*3-{SEGMENT}.rec"):
        record(tmp_path, stream)


def test_extension_reopens_the_segment_holding_the_position(tmp_path):
    stream = make_stream(0, [500] * 50)
    middle = stream.frames[20][0]
    with SegmentWriter(tmp_path, 3, 0, TERM, SEGMENT) as writer:
        for position, block in stream.block_poll_blocks(1024):
            if position < middle:
                writer.append(block)
    with SegmentWriter(tmp_path, 3, 0, TERM, SEGMENT, position=middle) as writer:
        for position, block in stream.block_poll_blocks(1024):
            if position >= middle:
                writer.append(block)
        assert writer.position == stream.position
    assert file_bytes(segment_file_path(tmp_path, 3, 0))[:stream.position] == stream.on_disk()


def test_existing_file_with_wrong_length_is_refused(tmp_path):
    segment_file_path(tmp_path, 3, 0).write_bytes(b"x" * 100)
    with pytest.raises(SegmentError, match=f"has length 100, expected the segment length {SEGMENT}"):
        SegmentWriter(tmp_path, 3, 0, TERM, SEGMENT)


@pytest.mark.parametrize("file_sync", [1, 2])
def test_file_sync_levels_write_the_same_bytes(tmp_path, file_sync):
    stream = make_stream(0, [300] * 300)
    record(tmp_path, stream, file_sync=file_sync)
    reader = SegmentReader(tmp_path, 3, 0, TERM, SEGMENT)
    assert reader.read(0, stream.position) == bytes(stream.on_disk())
    reader.close()


def test_invalid_parameters(tmp_path):
    with pytest.raises(ValueError, match="file sync level 3"):
        SegmentWriter(tmp_path, 1, 0, TERM, SEGMENT, file_sync=3)
    with pytest.raises(ValueError, match="segment length"):
        SegmentWriter(tmp_path, 1, 0, TERM, TERM // 2)
    with pytest.raises(ValueError, match="start position 33"):
        SegmentWriter(tmp_path, 1, 33, TERM, SEGMENT)
    assert recording_segment_length(64 * 1024, 1 << 20) == 1 << 20
    assert recording_segment_length(128 << 20, TERM) == 128 << 20


@settings(max_examples=60, deadline=None)
@given(start_terms=st.integers(0, 3), start_frames=st.integers(0, 20), data=st.data())
def test_reader_returns_any_range_in_term_bounded_blocks(tmp_path_factory, start_terms, start_frames, data):
    directory = tmp_path_factory.mktemp("segments")
    start = start_terms * TERM + start_frames * 64
    stream = make_stream(start, [40, 900, 2000, 64] * 30)
    record(directory, stream)
    expected = stream.on_disk()
    begin = data.draw(st.integers(start, stream.position))
    end = data.draw(st.integers(begin, stream.position))
    max_block = data.draw(st.sampled_from([32, 4096, 1 << 20]))
    with SegmentReader(directory, 3, start, TERM, SEGMENT) as reader:
        got = bytearray()
        for position, block in reader.blocks(begin, end, max_block):
            assert position == begin + len(got)
            assert position // TERM == (position + len(block) - 1) // TERM  # never crosses a term
            assert len(block) <= max_block
            got += block
        assert bytes(got) == bytes(expected[begin:end])


def test_reader_reports_missing_file_and_positions_before_start(tmp_path):
    stream = make_stream(0, [1000] * 200)
    record(tmp_path, stream)
    os.unlink(segment_file_path(tmp_path, 3, SEGMENT))
    with SegmentReader(tmp_path, 3, 0, TERM, SEGMENT) as reader:
        assert len(reader.read(0, 100)) == 100
        with pytest.raises(SegmentFileMissingError, match=f"3-{SEGMENT}.rec of recording 3 is missing "
                                                          f"\\(needed for position {SEGMENT + 64}\\)"):
            reader.read(SEGMENT + 64, 32)
    with SegmentReader(tmp_path, 3, 4096, TERM, SEGMENT) as reader, \
            pytest.raises(ValueError, match="before the start position 4096"):
        reader.read(0, 32)


def test_list_delete_and_truncate_helpers(tmp_path):
    for base in (0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT):
        segment_file_path(tmp_path, 7, base).write_bytes(b"")
    (tmp_path / "7-x.rec").write_bytes(b"")
    (tmp_path / "17-0.rec").write_bytes(b"")
    (tmp_path / f"7-{4 * SEGMENT}.rec.del").write_bytes(b"")
    assert [f.base_position for f in list_segment_files(tmp_path, 7)] == [0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT]
    deleted = delete_segment_files_below(tmp_path, 7, 2 * SEGMENT)
    assert [p.name for p in deleted] == ["7-0.rec", f"7-{SEGMENT}.rec"]
    deleted = delete_segment_files_from(tmp_path, 7, 3 * SEGMENT)
    assert [p.name for p in deleted] == [f"7-{3 * SEGMENT}.rec"]
    assert [f.base_position for f in list_segment_files(tmp_path, 7)] == [2 * SEGMENT]
    assert (tmp_path / "17-0.rec").exists() and (tmp_path / "7-x.rec").exists()

    path = tmp_path / "t.rec"
    path.write_bytes(b"\x01" * SEGMENT)
    truncate_segment_file(path, 1000, SEGMENT, file_sync=1)
    content = file_bytes(path)
    assert len(content) == SEGMENT and content[:1000] == b"\x01" * 1000 and content[1000:] == bytes(SEGMENT - 1000)
    with pytest.raises(SegmentError, match="truncate offset 131073"):
        truncate_segment_file(path, SEGMENT + 1, SEGMENT)


def test_checksum_writer_stamps_file_and_leaves_source_untouched(tmp_path):
    stream = make_stream(0, [100, 2000, 7] * 60)
    blocks = stream.block_poll_blocks()
    sources = [bytearray(block) for _, block in blocks]
    with SegmentWriter(tmp_path, 3, 0, TERM, SEGMENT, checksum=CRC32C) as writer:
        for source in sources:
            writer.append(memoryview(source))
    assert [bytes(s) for s in sources] == [b for _, b in blocks]  # the "log buffer" is not mutated
    expected = stream.on_disk()
    with SegmentReader(tmp_path, 3, 0, TERM, SEGMENT) as reader:
        stored = bytearray(reader.read(0, stream.position))
    for position, length, frame_type in stream.frames:
        session = struct.unpack_from("<i", stored, position + 12)[0]
        if frame_type == HDR_TYPE_DATA:
            aligned = aligned_frame_length(length)
            assert session == CRC32C.compute(bytes(expected[position + 32:position + aligned]))
        else:
            assert session == stream.session_id
    for position, length, frame_type in stream.frames:
        if frame_type == HDR_TYPE_DATA:
            aligned = aligned_frame_length(length)
            verify_and_restore(memoryview(stored)[position:position + aligned], stream.session_id,
                               block_position=position)
    assert stored == expected
