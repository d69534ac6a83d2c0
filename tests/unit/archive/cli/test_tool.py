"""The offline aeron-archive commands (inspect_commands), run in-process through main([...]) and
once as a real process."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from aeron_spark.archive.cli import main as cli
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.checksum import CRC32C
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile
from aeron_spark.driver_integration import frame, position as positions

TERM = 64 * 1024
SEGMENT = 128 * 1024
INITIAL_TERM_ID = 3
VENV_TOOL = Path(sys.executable).parent / "aeron-archive"
MARK_SETTINGS = dict(archive_id=42, control_channel="aeron:udp?endpoint=localhost:8010",
                     control_stream_id=10, local_control_channel="aeron:ipc",
                     local_control_stream_id=11, events_channel="aeron:ipc", events_stream_id=30,
                     aeron_directory="/dev/shm/aeron-x")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def write_frames(directory: Path, recording_id: int, start: int, stop: int, frame_length: int = 232) -> None:
    """Frames of 256 aligned bytes: a whole number per term, so none crosses a term end."""
    bits = positions.position_bits_to_shift(TERM)
    step = frame.aligned_frame_length(frame_length)
    for pos in range(start, stop, step):
        base = positions.segment_file_base_position(start, pos, TERM, SEGMENT)
        path = directory / positions.segment_file_name(recording_id, base)
        if not path.exists():
            with open(path, "wb") as f:
                f.truncate(SEGMENT)
        header = frame.DataFrameHeader(
            frame_length=frame_length, term_offset=pos & (TERM - 1), session_id=9, stream_id=1001,
            term_id=positions.compute_term_id_from_position(pos, bits, INITIAL_TERM_ID))
        with open(path, "r+b") as f:
            f.seek(pos - base)
            f.write(header.pack() + bytes(range(frame_length - 32)))


@pytest.fixture()
def archive(tmp_path):
    """Two stopped recordings (one across segments) and an invalid one."""
    with Catalog.open(tmp_path) as catalog:
        for start, stop in ((0, 2048), (256, SEGMENT + 1024), (0, 512)):
            rid = catalog.add_recording(
                start_position=start, initial_term_id=INITIAL_TERM_ID, segment_file_length=SEGMENT,
                term_buffer_length=TERM, mtu_length=1408, session_id=9, stream_id=1001,
                stripped_channel="aeron:ipc", original_channel="aeron:ipc?term-length=64k",
                source_identity="aeron:ipc", start_timestamp=1000)
            write_frames(tmp_path, rid, start, stop)
            catalog.recording_stopped(rid, stop, 2000)
        catalog.invalidate(2)
    return tmp_path


def test_help_lists_every_command():
    code, out, _ = run("--help")
    assert code == 0
    for name in ("describe", "dump", "verify", "checksum", "count-entries", "max-entries", "pid"):
        assert name in out


def test_usage_errors_exit_2_with_a_message():
    code, _, err = run("no-such-command")
    assert code == 2 and "invalid choice" in err
    code, _, err = run("dump", "minus-one")
    assert code == 2 and "recording id must be a non-negative integer" in err


def test_missing_directory_and_missing_catalog_exit_2(tmp_path):
    code, _, err = run("describe", "--dir", str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in err
    code, _, err = run("count-entries", "--dir", str(tmp_path))
    assert code == 2 and "archive.catalog is missing" in err
    code, _, err = run("pid", "--dir", str(tmp_path))
    assert code == 2 and "archive-mark.dat is missing" in err


def test_describe_all_one_and_json(archive):
    code, out, _ = run("describe", "--dir", str(archive))
    assert code == 0
    assert "no archive-mark.dat" in out
    assert "recordingId=0" in out and "recordingId=1" in out and "recordingId=2" not in out
    code, out, _ = run("describe", "--dir", str(archive), "--all")
    assert "INVALID, " in out and "recordingId=2" in out
    code, out, _ = run("describe", "1", "--dir", str(archive))
    assert out.count("RecordingDescriptor{") == 1 and f"stopPosition={SEGMENT + 1024}" in out
    code, _, err = run("describe", "7", "--dir", str(archive))
    assert code == 2 and "unknown recording 7" in err
    code, out, _ = run("describe", "--json", "--dir", str(archive))
    document = json.loads(out)
    assert [r["recordingId"] for r in document["recordings"]] == [0, 1]
    assert document["recordings"][1]["originalChannel"] == "aeron:ipc?term-length=64k"


def test_counts_and_pid(archive):
    assert run("count-entries", "--dir", str(archive))[:2] == (0, "2\n")
    assert run("max-entries", "--dir", str(archive))[:2] == (0, "8190\n")  # 2 entries + 128-byte frames in 1 MiB
    assert run("capacity", "--dir", str(archive))[:2] == (0, "1048576\n")
    with ArchiveMarkFile.create(archive, **MARK_SETTINGS):
        code, out, _ = run("pid", "--dir", str(archive))
        assert code == 0 and int(out) > 0
        code, out, _ = run("describe", "--dir", str(archive))
        assert "MarkFile (running)" in out and "archiveId=42" in out


def test_dump_prints_frames(archive):
    code, out, _ = run("dump", "1", "--dir", str(archive))
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("RecordingDescriptor{")
    assert lines[1] == ("position=256 length=232 type=DATA flags=0xc0 termOffset=256 session=9 "
                        "stream=1001 termId=3 reserved=0 payload=200 "
                        "000102030405060708090a0b0c0d0e0f...")
    assert lines[-1] == f"{(SEGMENT + 1024 - 256) // 256} frames"
    assert any(line.startswith(f"position={SEGMENT + 256} ") and "termId=5" in line
               for line in lines)  # second segment, third term
    code, out, _ = run("dump", "1", "--limit", "3", "--dir", str(archive))
    assert out.splitlines()[-1] == "3 frames"


def test_verify_passes_then_fails_and_marks_invalid(archive):
    code, out, _ = run("verify", "--dir", str(archive))
    assert code == 0, out
    assert "recording 2 (invalid): OK" in out and "recording 2: marked VALID again" in out
    with open(archive / "1-0.rec", "r+b") as f:
        f.seek(256 + 256 * 3 + frame.STREAM_ID_OFFSET)
        f.write((5).to_bytes(4, "little"))
    code, out, _ = run("verify", "1", "--dry-run", "--dir", str(archive))
    assert code == 1 and "wrong streamId" in out and "marked INVALID" not in out
    code, out, _ = run("verify", "1", "--dir", str(archive))
    assert code == 1 and "recording 1: marked INVALID" in out
    with Catalog.open(archive, read_only=True) as catalog:
        assert catalog.descriptor(1) is None


def test_verify_finishes_a_recording_left_active(archive):
    with Catalog.open(archive) as catalog:
        rid = catalog.add_recording(
            start_position=0, initial_term_id=INITIAL_TERM_ID, segment_file_length=SEGMENT,
            term_buffer_length=TERM, mtu_length=1408, session_id=9, stream_id=1001,
            stripped_channel="aeron:ipc", original_channel="aeron:ipc", source_identity="x")
    write_frames(archive, rid, 0, 256 * 10)
    code, out, _ = run("verify", str(rid), "--dir", str(archive))
    assert code == 0 and f"stop position set to {256 * 10}" in out
    with Catalog.open(archive, read_only=True) as catalog:
        assert catalog.descriptor(rid).stop_position == 256 * 10


def test_verify_while_running_is_read_only(archive):
    (archive / "1-0.rec").write_bytes(b"short")
    before = (archive / "archive.catalog").read_bytes()
    with ArchiveMarkFile.create(archive, **MARK_SETTINGS):
        code, out, _ = run("verify", "--dir", str(archive))
    assert code == 1 and "verifying read-only" in out and "1-0.rec is 5 bytes" in out
    assert (archive / "archive.catalog").read_bytes() == before


def test_checksum_then_verify_checksum(archive):
    code, out, _ = run("verify", "0", "--checksum", "--dir", str(archive))
    assert code == 1 and "fail the checksum" in out and "recording 0: marked INVALID" in out
    code, out, _ = run("checksum", "--dir", str(archive))
    assert code == 0 and "recording 1: 2 segment(s) checksummed with CRC-32C" in out
    data = (archive / "0-0.rec").read_bytes()
    stored = int.from_bytes(data[frame.SESSION_ID_OFFSET:frame.SESSION_ID_OFFSET + 4], "little", signed=True)
    assert stored == CRC32C.compute(data[32:256])
    code, out, _ = run("verify", "--checksum", "--dir", str(archive))
    assert code == 0 and "recording 0: marked VALID again" in out
    code, _, err = run("verify", "--checksum", "MD5", "--dir", str(archive))
    assert code == 2 and "unknown checksum 'MD5'" in err


def test_checksum_refuses_while_an_archive_runs(archive):
    before = (archive / "0-0.rec").read_bytes()
    with ArchiveMarkFile.create(archive, **MARK_SETTINGS):
        code, _, err = run("checksum", "--dir", str(archive))
    assert code == 2 and "locked by another archive" in err
    assert (archive / "0-0.rec").read_bytes() == before


def test_installed_console_script(archive):
    completed = subprocess.run([str(VENV_TOOL), "--help"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0 and "verify" in completed.stdout
    completed = subprocess.run([str(VENV_TOOL), "count-entries", "--dir", str(archive)],
                               capture_output=True, text=True, timeout=60)
    assert (completed.returncode, completed.stdout) == (0, "2\n")
    completed = subprocess.run([str(VENV_TOOL), "describe", "99", "--dir", str(archive)],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2 and "aeron-archive: error: unknown recording 99" in completed.stderr
