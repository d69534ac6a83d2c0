"""Maintenance: truncate, purge, detach / delete detached / attach, over real segment files."""

import os
from pathlib import Path

import pytest

from aeron_spark.archive.storage.catalog import Catalog, UnknownRecordingError
from aeron_spark.archive.storage.segment import SegmentWriter
from aeron_spark.archive.storage.maintenance import (
    MaintenanceError, attach_segments, delete_detached_segments, detach_segments,
    is_frame_boundary, purge_recording, segment_files, truncate_recording)
from aeron_spark.driver_integration import frame, position as positions

TERM = 64 * 1024
SEGMENT = 128 * 1024  # two terms per segment
FRAME_LENGTH = 1000   # occupies 1024 bytes: 64 frames per term, no padding needed
INITIAL_TERM_ID = 5


def write_frames(directory: Path, recording_id: int, start: int, stop: int) -> None:
    """Records 1024-byte-aligned DATA frames covering [start, stop) with the real segment writer."""
    bits = positions.position_bits_to_shift(TERM)
    with SegmentWriter(directory, recording_id, start, TERM, SEGMENT) as writer:
        for pos in range(start, stop, 1024):
            header = frame.DataFrameHeader(
                frame_length=FRAME_LENGTH, term_offset=pos & (TERM - 1), session_id=77,
                stream_id=1001, term_id=positions.compute_term_id_from_position(pos, bits, INITIAL_TERM_ID))
            writer.append(header.pack() + bytes([pos // 1024 % 251]) * (1024 - 32))


def make_recording(catalog: Catalog, directory: Path, start: int, stop: int, *,
                   active: bool = False) -> int:
    recording_id = catalog.add_recording(
        start_position=start, initial_term_id=INITIAL_TERM_ID, segment_file_length=SEGMENT,
        term_buffer_length=TERM, mtu_length=1408, session_id=77, stream_id=1001,
        stripped_channel="aeron:ipc", original_channel="aeron:ipc", source_identity="aeron:ipc")
    write_frames(directory, recording_id, start, stop)
    if not active:
        catalog.recording_stopped(recording_id, stop, 1)
    return recording_id


@pytest.fixture()
def catalog(tmp_path):
    with Catalog.open(tmp_path) as opened:
        yield opened


def bases(directory: Path, recording_id: int) -> list[int]:
    return list(segment_files(directory, recording_id))


# ---------------------------------------------------------------- truncate

def test_truncate_within_a_segment_cuts_and_restores_length(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 1024, 5 * SEGMENT // 2)  # segments 0, 128K, 256K
    position = SEGMENT + 10 * 1024
    result = truncate_recording(catalog, tmp_path, rid, position)
    assert catalog.descriptor(rid).stop_position == position
    assert bases(tmp_path, rid) == [0, SEGMENT]
    assert [p.name for p in result.deleted_files] == [f"{rid}-{2 * SEGMENT}.rec"]
    kept = tmp_path / f"{rid}-{SEGMENT}.rec"
    assert result.truncated_file == kept and kept.stat().st_size == SEGMENT
    data = kept.read_bytes()
    assert data[10 * 1024:] == bytes(SEGMENT - 10 * 1024)
    assert frame.DataFrameHeader.unpack(data, 9 * 1024).frame_length == FRAME_LENGTH


def test_truncate_at_a_segment_base_deletes_that_segment(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 0, 2 * SEGMENT + 4096)
    truncate_recording(catalog, tmp_path, rid, SEGMENT)
    assert bases(tmp_path, rid) == [0]
    assert (tmp_path / f"{rid}-0.rec").read_bytes()[SEGMENT - 1024:SEGMENT - 1000] != bytes(24)


def test_truncate_to_start_empties_the_recording(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 2048, SEGMENT + 4096)
    truncate_recording(catalog, tmp_path, rid, 2048)
    d = catalog.descriptor(rid)
    assert d.stop_position == d.start_position == 2048
    assert bases(tmp_path, rid) == []


def test_truncate_to_stop_changes_nothing_on_disk(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 0, 8192)
    before = (tmp_path / f"{rid}-0.rec").read_bytes()
    truncate_recording(catalog, tmp_path, rid, 8192)
    assert (tmp_path / f"{rid}-0.rec").read_bytes() == before


@pytest.mark.parametrize("position, message", [
    (4096 + 16, "not aligned to 32 bytes"),
    (4096 + 512, "not at the start of a recorded frame"),
    (0, r"outside the recording \[1024, 65536\]"),
    (65536 + 1024, "outside the recording"),
])
def test_bad_truncate_positions_are_refused_and_change_nothing(catalog, tmp_path, position, message):
    rid = make_recording(catalog, tmp_path, 1024, 65536)
    before = (tmp_path / f"{rid}-0.rec").read_bytes()
    with pytest.raises(MaintenanceError, match=f"recording {rid}: .*{message}"):
        truncate_recording(catalog, tmp_path, rid, position)
    assert catalog.descriptor(rid).stop_position == 65536
    assert (tmp_path / f"{rid}-0.rec").read_bytes() == before


def test_active_and_unknown_recordings_are_refused(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 0, 4096, active=True)
    with pytest.raises(MaintenanceError, match=f"recording {rid}: cannot truncate an active recording"):
        truncate_recording(catalog, tmp_path, rid, 1024)
    with pytest.raises(MaintenanceError, match="cannot purge an active recording"):
        purge_recording(catalog, tmp_path, rid)
    with pytest.raises(UnknownRecordingError, match="unknown recording 42"):
        truncate_recording(catalog, tmp_path, 42, 0)


def test_frame_boundary_detection_walks_from_the_term_start(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 1024, 3 * TERM)
    d = catalog.descriptor(rid)
    assert is_frame_boundary(tmp_path, d, TERM)            # term boundary
    assert is_frame_boundary(tmp_path, d, TERM + 5 * 1024)
    assert not is_frame_boundary(tmp_path, d, TERM + 5 * 1024 + 32)
    assert is_frame_boundary(tmp_path, d, 1024 + 3 * 1024)  # first term, walked from the start


# ---------------------------------------------------------------- purge

def test_purge_invalidates_and_deletes_every_file(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 0, 2 * SEGMENT + 64)
    other = make_recording(catalog, tmp_path, 0, 4096)
    (tmp_path / f"{rid}-{3 * SEGMENT}.rec.del").write_bytes(b"x")
    result = purge_recording(catalog, tmp_path, rid)
    assert catalog.descriptor(rid) is None and catalog.entry(rid).valid is False
    assert len(result.deleted_files) == 4
    assert {p.name for p in tmp_path.iterdir()} == {"archive.catalog", f"{other}-0.rec"}


# ---------------------------------------------------------------- detach / delete / attach

def test_detach_delete_and_attach_round_trip(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 3072, 3 * SEGMENT + 4096)
    detach_segments(catalog, tmp_path, rid, 2 * SEGMENT)
    assert catalog.descriptor(rid).start_position == 2 * SEGMENT
    assert bases(tmp_path, rid) == [0, SEGMENT, 2 * SEGMENT, 3 * SEGMENT]  # files stay

    result = attach_segments(catalog, tmp_path, rid)
    assert [p.name for p in result.attached_files] == [f"{rid}-0.rec", f"{rid}-{SEGMENT}.rec"]
    assert catalog.descriptor(rid).start_position == 3072  # first frame of the earliest segment

    detach_segments(catalog, tmp_path, rid, SEGMENT)
    deleted = delete_detached_segments(catalog, tmp_path, rid)
    assert [p.name for p in deleted.deleted_files] == [f"{rid}-0.rec"]
    assert bases(tmp_path, rid) == [SEGMENT, 2 * SEGMENT, 3 * SEGMENT]
    assert attach_segments(catalog, tmp_path, rid).attached_files == []
    assert catalog.descriptor(rid).start_position == SEGMENT


def test_attach_stops_at_a_segment_of_the_wrong_length(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 0, 3 * SEGMENT)
    detach_segments(catalog, tmp_path, rid, 2 * SEGMENT)
    os.truncate(tmp_path / f"{rid}-0.rec", 1000)
    result = attach_segments(catalog, tmp_path, rid)
    assert [p.name for p in result.attached_files] == [f"{rid}-{SEGMENT}.rec"]
    assert catalog.descriptor(rid).start_position == SEGMENT


@pytest.mark.parametrize("new_start, message", [
    (SEGMENT + 1024, "is not a segment base"),
    (0, "is below the start position 1024"),
    (5 * SEGMENT, "is beyond the stop position"),
])
def test_bad_detach_positions_are_refused(catalog, tmp_path, new_start, message):
    rid = make_recording(catalog, tmp_path, 1024, 2 * SEGMENT + 64)
    with pytest.raises(MaintenanceError, match=f"recording {rid}: detach position {new_start} {message}"):
        detach_segments(catalog, tmp_path, rid, new_start)
    assert catalog.descriptor(rid).start_position == 1024


def test_detach_of_an_active_recording_needs_its_recorded_position(catalog, tmp_path):
    rid = make_recording(catalog, tmp_path, 0, 2 * SEGMENT + 64, active=True)
    with pytest.raises(MaintenanceError, match="needs its recorded position"):
        detach_segments(catalog, tmp_path, rid, SEGMENT)
    with pytest.raises(MaintenanceError, match="beyond the recorded position 131136"):
        detach_segments(catalog, tmp_path, rid, 2 * SEGMENT, recorded_position=SEGMENT + 64)
    detach_segments(catalog, tmp_path, rid, 2 * SEGMENT, recorded_position=2 * SEGMENT + 64)
    assert catalog.descriptor(rid).start_position == 2 * SEGMENT  # up to the segment being written


def test_segment_files_ignores_other_recordings_and_odd_names(catalog, tmp_path):
    for name in ("1-0.rec", "11-0.rec", "1-012.rec", "1-x.rec", "1-65536.rec", "1-0.rec.del"):
        (tmp_path / name).write_bytes(b"")
    assert list(segment_files(tmp_path, 1)) == [0, 65536]


# ---------------------------------------------------------------- verify

def crc_of(payload) -> int:
    import zlib
    value = zlib.crc32(payload)
    return value - (1 << 32) if value >= 1 << 31 else value


def test_verify_accepts_a_good_recording_across_segments(catalog, tmp_path):
    from aeron_spark.archive.storage.maintenance import verify_recording
    rid = make_recording(catalog, tmp_path, 1024, 2 * SEGMENT + 4096)
    result = verify_recording(tmp_path, catalog.descriptor(rid))
    assert result.ok, result.errors
    assert result.frames == (2 * SEGMENT + 4096 - 1024) // 1024 and result.segments == 3
    assert result.data_end == 2 * SEGMENT + 4096


def test_verify_recomputes_the_end_of_an_active_recording(catalog, tmp_path):
    from aeron_spark.archive.storage.maintenance import verify_recording
    rid = make_recording(catalog, tmp_path, 0, SEGMENT + 8192, active=True)
    result = verify_recording(tmp_path, catalog.descriptor(rid))
    assert result.ok and result.data_end == SEGMENT + 8192


def test_verify_reports_wrong_headers_gaps_and_missing_segments(catalog, tmp_path):
    from aeron_spark.archive.storage.maintenance import verify_recording
    rid = make_recording(catalog, tmp_path, 0, 2 * SEGMENT + 4096)
    with open(tmp_path / f"{rid}-0.rec", "r+b") as f:
        f.seek(5 * 1024 + frame.STREAM_ID_OFFSET)
        f.write((999).to_bytes(4, "little"))
        f.seek(7 * 1024 + frame.TERM_ID_OFFSET)
        f.write((1).to_bytes(4, "little"))
    with open(tmp_path / f"{rid}-{SEGMENT}.rec", "r+b") as f:
        f.seek(3 * 1024)
        f.write(bytes(4))  # a hole in the frame chain
    errors = verify_recording(tmp_path, catalog.descriptor(rid)).errors
    assert any("wrong streamId, first at position 5120: 999, expected 1001" in e for e in errors)
    assert any("wrong termId, first at position 7168: 1, expected 5" in e for e in errors)
    assert any(f"frame chain breaks at position {SEGMENT + 3072}" in e for e in errors)
    (tmp_path / f"{rid}-{SEGMENT}.rec").unlink()
    errors = verify_recording(tmp_path, catalog.descriptor(rid)).errors
    assert any(f"segment file {rid}-{SEGMENT}.rec is missing" in e for e in errors)


def test_verify_checks_checksums_in_the_session_id_field(catalog, tmp_path):
    from aeron_spark.archive.storage.maintenance import verify_recording
    rid = make_recording(catalog, tmp_path, 0, 4096)
    errors = verify_recording(tmp_path, catalog.descriptor(rid), checksum=crc_of).errors
    assert errors and "4 DATA frame(s) fail the checksum, first at position 0" in errors[0]
    with open(tmp_path / f"{rid}-0.rec", "r+b") as f:
        for pos in range(0, 4096, 1024):
            f.seek(pos + 32)
            payload = f.read(1024 - 32)
            f.seek(pos + frame.SESSION_ID_OFFSET)
            f.write(crc_of(payload).to_bytes(4, "little", signed=True))
    assert verify_recording(tmp_path, catalog.descriptor(rid), checksum=crc_of).ok


def test_verify_rejects_misaligned_positions(catalog, tmp_path):
    from aeron_spark.archive.storage.maintenance import verify_recording
    rid = make_recording(catalog, tmp_path, 0, 4096)
    bad = catalog.descriptor(rid).with_changes(stop_position=4010)
    assert "stop position 4010" in verify_recording(tmp_path, bad).errors[0]
