"""Frame header codec and frame walkers, byte by byte."""

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from aeron_spark.driver_integration import frame as fr
from aeron_spark.driver_integration.frame import (
    DataFrameHeader, StopReason, align, aligned_frame_length, compute_fragmented_frame_length,
    frame_offsets, last_complete_frame_end, padding_frame_header, scan_frames, walk_frames,
    write_padding_frame)


def test_header_layout_byte_by_byte():
    header = DataFrameHeader(frame_length=0x11223344, version=0, flags=0xC0, frame_type=1,
                             term_offset=0x200, session_id=-2, stream_id=1001, term_id=7,
                             reserved_value=0x0102030405060708)
    raw = header.pack()
    assert raw == (bytes.fromhex("44332211") + b"\x00\xc0\x01\x00" + bytes.fromhex("00020000")
                   + b"\xfe\xff\xff\xff" + struct.pack("<i", 1001) + struct.pack("<i", 7)
                   + bytes.fromhex("0807060504030201"))
    assert DataFrameHeader.unpack(raw) == header
    assert (fr.FRAME_LENGTH_OFFSET, fr.VERSION_OFFSET, fr.FLAGS_OFFSET, fr.TYPE_OFFSET,
            fr.TERM_OFFSET_OFFSET, fr.SESSION_ID_OFFSET, fr.STREAM_ID_OFFSET, fr.TERM_ID_OFFSET,
            fr.RESERVED_VALUE_OFFSET, fr.HEADER_LENGTH) == (0, 4, 5, 6, 8, 12, 16, 20, 24, 32)


def test_flags_and_types():
    assert (fr.BEGIN_FRAG_FLAG, fr.END_FRAG_FLAG, fr.UNFRAGMENTED, fr.EOS_FLAG) == (0x80, 0x40, 0xC0, 0x20)
    assert (fr.HDR_TYPE_PAD, fr.HDR_TYPE_DATA, fr.HDR_TYPE_SETUP, fr.HDR_TYPE_EXT) == (0, 1, 5, 0xFFFF)
    h = DataFrameHeader(frame_length=40, flags=fr.BEGIN_FRAG_FLAG | fr.EOS_FLAG)
    assert h.is_begin and not h.is_end and h.is_eos and h.is_data and not h.is_padding
    assert h.aligned_length == 64 and h.payload_length == 8


def test_unpack_rejects_short_buffer():
    with pytest.raises(ValueError, match="no complete 32-byte frame header at offset 8"):
        DataFrameHeader.unpack(bytes(32), 8)


def test_align_and_lengths():
    assert [align(v, 32) for v in (0, 1, 32, 33, 64)] == [0, 32, 32, 64, 64]
    assert aligned_frame_length(33) == 64
    with pytest.raises(ValueError):
        align(5, 3)
    assert compute_fragmented_frame_length(0, 1376) == 32
    assert compute_fragmented_frame_length(100, 1376) == 160
    assert compute_fragmented_frame_length(1376, 1376) == 1408
    assert compute_fragmented_frame_length(1377, 1376) == 1408 + 64
    assert compute_fragmented_frame_length(3 * 1376, 1376) == 3 * 1408


def test_padding_frame():
    buf = bytearray(256)
    write_padding_frame(buf, 64, term_offset=65536 - 192, pad_length=192, session_id=5,
                        stream_id=6, term_id=9)
    header = DataFrameHeader.unpack(buf, 64)
    assert header == padding_frame_header(65536 - 192, 192, 5, 6, 9)
    assert header.is_padding and header.flags == 0xC0 and header.frame_length == 192
    assert bytes(buf[96:]) == bytes(160)  # only the header is written
    with pytest.raises(ValueError, match="padding length 40"):
        padding_frame_header(0, 40, 0, 0, 0)


def _build(lengths, size, start=0):
    buf = bytearray(size)
    offset, offsets = start, []
    for length in lengths:
        if offset + aligned_frame_length(length) > size:
            break
        DataFrameHeader(length, term_offset=offset).pack_into(buf, offset)
        offsets.append(offset)
        offset += aligned_frame_length(length)
    return buf, offsets, offset


def _reference_walk(buf, start, end):
    return [offset for offset, _ in walk_frames(buf, start, end)]


def test_scan_stops_at_zero_length():
    buf, offsets, end = _build([64, 40, 100], 1024)
    scan = scan_frames(buf)
    assert list(scan.offsets) == offsets == [0, 64, 128]
    assert scan.end == end == 256 and scan.stop_reason is StopReason.ZERO_LENGTH
    assert last_complete_frame_end(buf) == 256


def test_scan_exact_end_and_overrun():
    buf, offsets, end = _build([64] * 4, 256)
    assert scan_frames(buf).stop_reason is StopReason.END and scan_frames(buf).end == 256
    # a frame whose length runs past the range is torn: stop before it
    scan = scan_frames(buf, 0, 180)
    assert list(scan.offsets) == [0, 64] and scan.end == 128 and scan.stop_reason is StopReason.OVERRUN
    assert scan.stop_frame_length == 64


def test_scan_negative_and_too_short_and_truncated_header():
    buf, _, _ = _build([64, 64], 256)
    struct.pack_into("<i", buf, 64, -64)
    assert scan_frames(buf).stop_reason is StopReason.NEGATIVE_LENGTH and scan_frames(buf).end == 64
    struct.pack_into("<i", buf, 64, 12)
    assert scan_frames(buf).stop_reason is StopReason.TOO_SHORT and scan_frames(buf).end == 64
    buf2, _, _ = _build([64], 80)
    scan = scan_frames(buf2)
    assert scan.end == 64 and scan.stop_reason is StopReason.TRUNCATED_HEADER


def test_scan_empty_range():
    scan = scan_frames(bytearray(64), 32, 32)
    assert len(scan.offsets) == 0 and scan.end == 32 and scan.stop_reason is StopReason.END


def test_scan_from_non_zero_start_and_memoryview():
    buf, offsets, end = _build([96, 64, 33], 512, start=128)
    view = memoryview(buf)
    assert list(frame_offsets(view, 128)) == offsets
    assert list(frame_offsets(view, 160)) == []  # slot 160 is payload of zeros: length 0


def test_scan_across_windows_with_frame_larger_than_window(monkeypatch):
    monkeypatch.setattr(fr, "SCAN_WINDOW", 256)
    lengths = [64, 40, 600, 96, 64, 64, 64, 1000, 32]
    buf, offsets, end = _build(lengths, 4096)
    scan = scan_frames(buf)
    assert list(scan.offsets) == offsets and scan.end == end
    assert scan.stop_reason is StopReason.ZERO_LENGTH


def test_scan_equal_runs_then_irregular():
    lengths = [64] * 100 + [1024] * 10 + [random.Random(1).randint(32, 300) for _ in range(200)]
    buf, offsets, end = _build(lengths, 1 << 16)
    scan = scan_frames(buf)
    assert list(scan.offsets) == offsets and scan.end == end


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(32, 700), max_size=60), size=st.integers(0, 8192),
       tail=st.sampled_from([0, -32, 5, 7000, 1 << 30]), window=st.sampled_from([64, 256, 1 << 20]),
       cut=st.integers(0, 8192))
def test_scan_matches_reference_walker(lengths, size, tail, window, cut):
    fr_window = fr.SCAN_WINDOW
    fr.SCAN_WINDOW = window
    try:
        buf, offsets, end = _build(lengths, size)
        if end + 4 <= size:
            struct.pack_into("<i", buf, end, tail)
        # garbage in the payloads must not be mistaken for frames
        arr = np.frombuffer(buf, dtype=np.uint8)
        for offset in offsets:
            length = struct.unpack_from("<i", buf, offset)[0]
            arr[offset + 32: offset + length] = 0x5A
        range_end = min(cut, size)
        scan = scan_frames(buf, 0, range_end)
        expected = _reference_walk(buf, 0, range_end)
        assert list(scan.offsets) == expected
        assert scan.end == (expected[-1] + aligned_frame_length(struct.unpack_from("<i", buf, expected[-1])[0])
                            if expected else 0)
    finally:
        fr.SCAN_WINDOW = fr_window
