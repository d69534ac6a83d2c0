"""The ArchiveTool-parity commands (catalog_admin_commands, errors_command) on real directories,
run in-process through main([...])."""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aeron_spark.archive.cli import errors_command
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile

from tests.unit.archive.cli.test_tool import INITIAL_TERM_ID, MARK_SETTINGS, SEGMENT, TERM, run, write_frames


@pytest.fixture()
def archive(tmp_path):
    """As test_tool's: two stopped recordings (one across segments) and an invalid one."""
    with Catalog.open(tmp_path) as catalog:
        for start, stop in ((0, 2048), (256, SEGMENT + 1024), (0, 512)):
            rid = catalog.add_recording(
                start_position=start, initial_term_id=INITIAL_TERM_ID, segment_file_length=SEGMENT,
                term_buffer_length=TERM, mtu_length=1408, session_id=9, stream_id=1001,
                stripped_channel="aeron:ipc", original_channel="aeron:ipc", source_identity="aeron:ipc",
                start_timestamp=1000)
            write_frames(tmp_path, rid, start, stop)
            catalog.recording_stopped(rid, stop, 2000)
        catalog.invalidate(2)
    return tmp_path


@pytest.fixture()
def answer(monkeypatch):
    def set_answer(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    return set_answer


def test_help_of_each_new_command():
    for name in ("describe-all", "capacity-report", "errors", "compact", "delete-orphaned-segments",
                 "mark-valid", "mark-invalid"):
        code, out, _ = run(name, "--help")
        assert code == 0 and "--dir" in out, name
    code, out, _ = run("--help")
    assert "delete-orphaned-segments" in out and "mark-invalid" in out


def test_describe_all_lists_every_state(archive):
    code, out, _ = run("describe-all", "--dir", str(archive))
    assert code == 0
    lines = out.splitlines()
    assert lines[1].startswith("Catalog capacity in bytes: ")
    assert [line.rsplit("|", 1)[1] for line in lines[2:]] == ["VALID", "VALID", "INVALID"]
    assert "recordingId=2," in lines[4]


def test_mark_invalid_then_valid_and_refusals(archive):
    code, out, _ = run("mark-invalid", "0", "--dir", str(archive))
    assert (code, out) == (0, "(recordingId=0) changed state to INVALID\n")
    code, out, _ = run("mark-invalid", "0", "--dir", str(archive))
    assert (code, out) == (0, "")  # already INVALID: nothing to do, as Aeron
    code, out, _ = run("mark-valid", "0", "--dir", str(archive))
    assert (code, out) == (0, "(recordingId=0) changed state to VALID\n")
    code, _, err = run("mark-valid", "7", "--dir", str(archive))
    assert code == 2 and "no recording found with recordingId: 7" in err
    code, _, err = run("mark-valid", "x", "--dir", str(archive))
    assert code == 2 and "recording id must be a non-negative integer" in err
    with Catalog.open(archive) as catalog:
        catalog.delete(1)
    code, _, err = run("mark-valid", "1", "--dir", str(archive))
    assert code == 2 and "state transition DELETED -> VALID is not allowed" in err
    with ArchiveMarkFile.create(archive, **MARK_SETTINGS):
        code, _, err = run("mark-invalid", "0", "--dir", str(archive))
    assert code == 2 and "locked by another archive" in err


def test_compact_drops_invalid_and_deleted_entries_and_their_files(archive, answer):
    with Catalog.open(archive) as catalog:
        catalog.delete(0)
        next_id = catalog.next_recording_id
    before = (archive / "archive.catalog").stat().st_size
    answer("n\n")
    code, out, _ = run("compact", "--dir", str(archive))
    assert code == 0 and "nothing changed" in out and (archive / "2-0.rec").exists()
    answer("\n")  # an empty answer is yes, as Aeron
    code, out, _ = run("compact", "--dir", str(archive))
    assert code == 0 and "Continue? (y/n): " in out
    assert "Compaction result: deleted 2 records and reclaimed " in out
    assert sorted(p.name for p in archive.glob("*.rec")) == ["1-0.rec", f"1-{SEGMENT}.rec"]
    assert not (archive / "archive.catalog.compact").exists()
    assert (archive / "archive.catalog").stat().st_size < before
    with Catalog.open(archive, read_only=True) as catalog:
        assert [(e.descriptor.recording_id, e.state_name) for e in catalog.entries()] == [(1, "VALID")]
        assert catalog.next_recording_id == next_id
    with Catalog.open(archive) as catalog:  # still appendable: the file grows again
        assert catalog.add_recording(
            start_position=0, initial_term_id=3, segment_file_length=SEGMENT, term_buffer_length=64 * 1024,
            mtu_length=1408, session_id=9, stream_id=1001, stripped_channel="aeron:ipc",
            original_channel="aeron:ipc", source_identity="aeron:ipc", start_timestamp=1) == next_id


def test_compact_without_an_answer_or_while_running_refuses(archive, answer):
    answer("")
    code, _, err = run("compact", "--dir", str(archive))
    assert code == 2 and "pass --yes" in err
    with ArchiveMarkFile.create(archive, **MARK_SETTINGS):
        code, _, err = run("compact", "--yes", "--dir", str(archive))
    assert code == 2 and "locked by another archive" in err
    assert (archive / "2-0.rec").exists()


def test_delete_orphaned_segments(archive, answer):
    # Recording 1 spans [256, SEGMENT + 1024): files below its first and past its last segment are orphans.
    (archive / f"1-{3 * SEGMENT}.rec").write_bytes(b"\0" * 64)
    (archive / f"0-{SEGMENT}.rec").write_bytes(b"\0" * 64)
    answer("y\n")
    code, out, _ = run("delete-orphaned-segments", "1", "--dir", str(archive))
    assert code == 0 and "owned by the RecordingId[1]" in out and f"deleted 1-{3 * SEGMENT}.rec" in out
    assert (archive / f"0-{SEGMENT}.rec").exists()
    code, out, _ = run("delete-orphaned-segments", "--yes", "--dir", str(archive))
    assert code == 0 and f"deleted 0-{SEGMENT}.rec" in out and "1 orphaned segment file(s) deleted" in out
    assert sorted(p.name for p in archive.glob("*.rec")) == ["0-0.rec", "1-0.rec", f"1-{SEGMENT}.rec", "2-0.rec"]
    code, _, err = run("delete-orphaned-segments", "9", "--yes", "--dir", str(archive))
    assert code == 2 and "no recording found with recordingId: 9" in err


def test_capacity_report(archive):
    code, out, _ = run("capacity-report", "--dir", str(archive))
    assert code == 0
    assert "Entries: VALID=2, INVALID=1, DELETED=0, total=3" in out
    assert "Reclaimable by compact: 1 entries" in out and "Segment files: 4," in out
    used = int(next(line for line in out.splitlines() if line.startswith("Catalog used bytes: ")).split()[-1])
    assert 32 < used < (archive / "archive.catalog").stat().st_size


def test_errors_prints_the_mark_files_log_and_the_drivers(archive, tmp_path_factory):
    aeron_dir = tmp_path_factory.mktemp("aeron")
    settings = dict(MARK_SETTINGS, aeron_directory=str(aeron_dir))
    with ArchiveMarkFile.create(archive, **settings) as mark:
        mark.record_error("java.io.IOException: disk full", now_ms=1_700_000_000_000)
        mark.record_error("java.io.IOException: disk full", now_ms=1_700_000_001_000)
        code, out, _ = run("errors", "--dir", str(archive))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Archive error log:"
    assert lines[2].startswith("2 observations from ") and lines[2].endswith(" for:")
    assert lines[3] == "java.io.IOException: disk full"
    assert "1 distinct errors observed." in lines
    assert f"Aeron driver error log (directory: {aeron_dir}):" in lines
    assert "cannot read the driver's error log" in out  # no cnc.dat in that directory


def test_driver_error_log_from_a_cnc_file(tmp_path):
    import struct
    lengths = (0x200, 1024, 1024, 512, 256, 4096)
    record = b"boom"
    error_log = struct.pack("<iiqq", 24 + len(record), 3, 20, 10) + record
    offset = 128 + sum(lengths[1:5])
    data = bytearray(offset + lengths[5])
    struct.pack_into("<iiiiii", data, 0, *lengths)
    data[offset:offset + len(error_log)] = error_log
    (tmp_path / "cnc.dat").write_bytes(bytes(data))
    (observation,) = errors_command.read_driver_error_log(tmp_path)
    assert (observation.observation_count, observation.error) == (3, "boom")


def test_compact_asks_on_the_real_stdin_of_the_console_script(archive):
    tool = Path(sys.executable).parent / "aeron-archive"
    declined = subprocess.run([str(tool), "compact", "--dir", str(archive)], input="no\n",
                              capture_output=True, text=True, timeout=60)
    assert declined.returncode == 0 and "Continue? (y/n): not confirmed" in declined.stdout
    assert (archive / "2-0.rec").exists()
    accepted = subprocess.run([str(tool), "compact", "--dir", str(archive)], input="YES\n",
                              capture_output=True, text=True, timeout=60)
    assert accepted.returncode == 0 and "Compaction result: deleted 1 records" in accepted.stdout
    assert not (archive / "2-0.rec").exists()


@pytest.mark.parametrize("point", ["compact-written", "compact-committed"])
def test_compact_killed_at_each_step_then_rerun_finishes(archive, point):
    tool = Path(sys.executable).parent / "aeron-archive"
    killed = subprocess.run([str(tool), "compact", "--yes", "--dir", str(archive)], capture_output=True, text=True,
                            timeout=60, env=dict(os.environ, AERON_ARCHIVE_STORAGE_FAULT=f"{point}:kill"))
    assert killed.returncode == -9
    with Catalog.open(archive, read_only=True) as catalog:  # the old or the new catalog, whole
        assert [e.descriptor.recording_id for e in catalog.entries()] == ([0, 1, 2] if point == "compact-written"
                                                                          else [0, 1])
    code, out, _ = run("compact", "--yes", "--dir", str(archive))
    assert code == 0 and not (archive / "2-0.rec").exists() and not (archive / "archive.catalog.compact").exists()
    with Catalog.open(archive, read_only=True) as catalog:
        assert [e.descriptor.recording_id for e in catalog.entries()] == [0, 1]
