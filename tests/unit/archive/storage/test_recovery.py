"""Crash recovery of active recordings: exact stop positions for clean, torn and corrupt segments."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings, strategies as st

from aeron_spark.archive.storage import recovery
from aeron_spark.archive.storage.checksum import CRC32C
from aeron_spark.archive.storage.recovery import FindingKind, RecoveryError, apply_recovery, recover_recording
from aeron_spark.archive.storage.segment import SegmentWriter, segment_file_path
from aeron_spark.driver_integration.frame import StopReason, aligned_frame_length, walk_frames
from test_segment import SEGMENT, TERM, StreamLog, make_stream, record

RID = 3


def recover(directory, stream: StreamLog, **options):
    return recover_recording(directory, RID, stream.start_position, TERM, SEGMENT,
                             initial_term_id=stream.initial_term_id, stream_id=stream.stream_id, **options)


def kinds(report):
    return [f.kind for f in report.findings]


def patch_file(directory, base, offset, data: bytes):
    path = segment_file_path(directory, RID, base)
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def test_clean_recording_ending_mid_segment(tmp_path):
    stream = make_stream(0, [100, 1000, 37, 3000] * 40)
    record(tmp_path, stream)
    report = recover(tmp_path, stream)
    assert report.stop_position == stream.position
    assert report.is_clean and report.findings == ()
    assert report.stop_reason is StopReason.ZERO_LENGTH
    assert report.last_segment.base_position == SEGMENT


def test_start_mid_term_scans_from_start_offset(tmp_path):
    start = TERM + 4096
    stream = make_stream(start, [200] * 10)
    record(tmp_path, stream)
    patch_file(tmp_path, TERM, 0, b"\xff" * 64)  # junk before the start offset is never looked at
    report = recover(tmp_path, stream)
    assert report.stop_position == start + 10 * 256 and report.is_clean


def test_no_segment_files_gives_start_position(tmp_path):
    report = recover_recording(tmp_path, RID, 8192, TERM, SEGMENT)
    assert report.stop_position == 8192
    assert kinds(report) == [FindingKind.NO_SEGMENT_FILES]
    assert not report.is_clean


def test_empty_recording_with_its_first_file(tmp_path):
    SegmentWriter(tmp_path, RID, 4096, TERM, SEGMENT).close()
    report = recover_recording(tmp_path, RID, 4096, TERM, SEGMENT)
    assert report.stop_position == 4096 and report.is_clean


def test_full_segment_then_empty_next_file(tmp_path):
    stream = StreamLog(0)
    while stream.position < SEGMENT:
        stream.append(4064)
    record(tmp_path, stream)
    report = recover(tmp_path, stream)
    assert report.stop_position == SEGMENT and report.last_segment.base_position == SEGMENT
    assert report.is_clean


def test_full_last_segment_without_next_file(tmp_path):
    stream = StreamLog(0)
    while stream.position < SEGMENT:
        stream.append(4064)
    record(tmp_path, stream)
    os.unlink(segment_file_path(tmp_path, RID, SEGMENT))
    report = recover(tmp_path, stream)
    assert report.stop_position == SEGMENT and report.stop_reason is StopReason.END and report.is_clean


def test_segment_file_cut_mid_frame(tmp_path):
    stream = make_stream(0, [1000] * 20)  # 1056-byte frames
    record(tmp_path, stream)
    cut = 5 * 1056 + 500
    os.truncate(segment_file_path(tmp_path, RID, 0), cut)
    report = recover(tmp_path, stream)
    assert report.stop_position == 5 * 1056
    assert kinds(report) == [FindingKind.WRONG_FILE_LENGTH, FindingKind.TORN_FRAME,
                             FindingKind.STALE_DATA_AFTER_STOP]
    assert report.stop_reason is StopReason.OVERRUN
    assert f"offset {5 * 1056}" in report.findings[1].detail


def test_zero_length_last_file(tmp_path):
    stream = make_stream(0, [1000] * 200)  # into the second segment
    record(tmp_path, stream)
    os.truncate(segment_file_path(tmp_path, RID, SEGMENT), 0)
    report = recover(tmp_path, stream)
    assert report.stop_position == SEGMENT
    assert kinds(report) == [FindingKind.ZERO_LENGTH_FILE]


def test_half_written_frame_negative_length(tmp_path):
    stream = make_stream(0, [100] * 30)  # 160-byte frames
    record(tmp_path, stream)
    patch_file(tmp_path, 0, 30 * 160, struct.pack("<i", -160))
    report = recover(tmp_path, stream)
    assert report.stop_position == 30 * 160
    assert kinds(report) == [FindingKind.TORN_FRAME, FindingKind.STALE_DATA_AFTER_STOP]
    assert report.stop_reason is StopReason.NEGATIVE_LENGTH


@pytest.mark.parametrize("field_offset, value, why", [
    (0, 7, "below the 32-byte header"),
    (8, 12345, "term_offset 12345 != 3200"),
    (6, 9, "frame type 9 is neither DATA nor PAD"),
    (20, 99, "term_id 99 does not match"),
    (16, 5, "stream_id 5 != 1001"),
    (0, TERM, "crosses the term end"),
])
def test_corrupted_frame_header(tmp_path, field_offset, value, why):
    stream = make_stream(0, [100] * 40)
    record(tmp_path, stream)
    fmt = "<H" if field_offset == 6 else "<i"
    patch_file(tmp_path, 0, 20 * 160 + field_offset, struct.pack(fmt, value))
    report = recover(tmp_path, stream)
    assert report.stop_position == 20 * 160
    assert kinds(report)[0] is FindingKind.CORRUPT_FRAME
    assert why in report.findings[0].detail
    # a too-short length stops the frame chain itself; the other fields fail the header check
    assert report.stop_reason is (StopReason.TOO_SHORT if value == 7 else None)
    assert FindingKind.STALE_DATA_AFTER_STOP in kinds(report)


def test_missing_middle_segment_is_reported(tmp_path):
    stream = make_stream(0, [2000] * 200)  # ~3.1 segments
    record(tmp_path, stream)
    os.unlink(segment_file_path(tmp_path, RID, SEGMENT))
    report = recover(tmp_path, stream)
    assert report.stop_position == stream.position
    assert kinds(report) == [FindingKind.MISSING_SEGMENT]
    assert report.findings[0].position == SEGMENT


def test_off_grid_detached_and_leftover_files(tmp_path):
    start = 2 * SEGMENT
    stream = make_stream(start, [100] * 10)
    record(tmp_path, stream)
    segment_file_path(tmp_path, RID, 0).write_bytes(bytes(SEGMENT))  # detached below start
    segment_file_path(tmp_path, RID, 5 * SEGMENT + TERM).write_bytes(b"")  # off the grid
    (tmp_path / f"{RID}-{SEGMENT}.rec.del").write_bytes(b"")
    report = recover(tmp_path, stream)
    assert report.stop_position == start + 10 * 160
    assert sorted(k.name for k in kinds(report)) == ["DELETE_LEFTOVER", "DETACHED_SEGMENT", "OFF_GRID_SEGMENT"]
    assert not report.is_clean  # the off-grid file is damage; the other two are housekeeping


def test_page_straddle_unverified_last_frame_is_excluded(tmp_path):
    stream = make_stream(0, [3000] * 3)  # 3040-byte frames: the 2nd crosses the 4 KiB page
    stream.append(8000)  # 8032 bytes at 9120: its payload covers the whole page 12288..16383
    record(tmp_path, stream)
    patch_file(tmp_path, 0, 12288, bytes(4096))  # that page never reached the disk
    report = recover(tmp_path, stream)
    assert report.stop_position == 9120
    assert kinds(report) == [FindingKind.UNVERIFIED_PAGE_STRADDLE, FindingKind.STALE_DATA_AFTER_STOP]
    with pytest.raises(RecoveryError, match="straddling page boundary"):
        recover(tmp_path, stream, on_unverified_straddle="raise")


def test_page_straddle_kept_when_data_present_or_checksum_matches(tmp_path):
    stream = StreamLog(0)
    for _ in range(3):
        stream.append(3000)
    stream.append(8000, fill=0)  # a legitimately all-zero payload
    (tmp_path / "plain").mkdir()
    record(tmp_path / "plain", stream)
    assert recover(tmp_path / "plain", stream).stop_position == 9120  # zero page: excluded
    (tmp_path / "crc").mkdir()
    record(tmp_path / "crc", stream, checksum=CRC32C)
    report = recover(tmp_path / "crc", stream, checksum=CRC32C)
    assert report.stop_position == stream.position and report.is_clean  # checksum vouches for it
    (tmp_path / "data").mkdir()
    data_stream = make_stream(0, [3000, 3000, 3000, 8000])
    record(tmp_path / "data", data_stream)
    assert recover(tmp_path / "data", data_stream).stop_position == data_stream.position


def test_last_frame_a_long_pad_is_kept(tmp_path):
    stream = make_stream(0, [30000, 30000])  # then a PAD to the term end (zeros on disk after its header)
    stream.pad(TERM - stream.position)
    record(tmp_path, stream)
    report = recover(tmp_path, stream)
    assert report.stop_position == TERM and report.is_clean


def test_apply_recovery_zeroes_stale_bytes(tmp_path):
    stream = make_stream(0, [100] * 40)
    record(tmp_path, stream)
    patch_file(tmp_path, 0, 20 * 160, struct.pack("<i", 7))
    report = recover(tmp_path, stream)
    assert apply_recovery(report, file_sync=1)
    path = segment_file_path(tmp_path, RID, 0)
    assert os.path.getsize(path) == SEGMENT
    again = recover(tmp_path, stream)
    assert again.stop_position == 20 * 160 and again.is_clean and not apply_recovery(again)


def test_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match="on_unverified_straddle 'ignore'"):
        recover_recording(tmp_path, RID, 0, TERM, SEGMENT, on_unverified_straddle="ignore")
    with pytest.raises(ValueError, match="start position 7"):
        recover_recording(tmp_path, RID, 7, TERM, SEGMENT)


@settings(max_examples=80, deadline=None)
@given(payloads=st.lists(st.integers(0, 5000), min_size=1, max_size=60), data=st.data(),
       chunk=st.sampled_from([4096, 65536, 16 << 20]))
def test_stop_matches_a_reference_walk_of_any_cut(tmp_path_factory, payloads, data, chunk):
    directory = tmp_path_factory.mktemp("rec")
    stream = make_stream(0, payloads)
    record(directory, stream)
    # Simulate a crash: the file only holds its first ``cut`` bytes (in a segment).
    last_base = (stream.position - 1) // SEGMENT * SEGMENT if stream.position else 0
    cut = data.draw(st.integers(0, stream.position - last_base))
    path = segment_file_path(directory, RID, last_base)
    os.truncate(path, cut)
    os.truncate(path, SEGMENT)  # zeros after the cut, as if those pages were lost
    old_chunk = recovery.SCAN_CHUNK
    recovery.SCAN_CHUNK = chunk
    try:
        report = recover(directory, stream)
    finally:
        recovery.SCAN_CHUNK = old_chunk
    content = open(path, "rb").read()
    frames = []
    for offset, header in walk_frames(content):  # stop at the first header contradicting its place
        if (header.term_offset != offset % TERM or header.stream_id != stream.stream_id
                or header.term_id != stream.initial_term_id + offset // TERM or header.frame_type > 1):
            break
        frames.append((offset, header))
    end = frames[-1][0] + frames[-1][1].aligned_length if frames else 0
    # the reference: Aeron's page-straddle rule on the last frame (PAD exempt)
    if frames and not frames[-1][1].is_padding:
        offset, header = frames[-1]
        last_end = offset + header.aligned_length
        page = (offset // 4096 + 1) * 4096
        while page < last_end:
            if not any(content[page:min(page + 4096, last_end)]):
                end = offset
                break
            page += 4096
    assert report.stop_position == last_base + end
    assert aligned_frame_length(report.stop_position) == report.stop_position
