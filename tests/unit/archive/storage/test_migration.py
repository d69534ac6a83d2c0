"""`aeron-archive migrate`: every source version (0, 1.0.0, 2.0.0, 2.1.0) to 3.1.0, byte-checked,
and a kill -9 after each step leaves the old or the new catalog (never neither); re-running
finishes the job."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage import fault_injection, migration
from aeron_spark.archive.storage.catalog import CATALOG_FILE_NAME, Catalog, OldCatalogVersionError
from aeron_spark.archive.storage.checksum import CRC32C
from aeron_spark.archive.storage.mark_file import (
    MARK_FILE_NAME, ArchiveMarkFile, ArchiveRunningError, read_mark_file)
from aeron_spark.archive.storage.segment import SegmentReader
from tests.support.old_archives import V0, V1_0, V2_0, V2_1, old_descriptor, write_old_catalog
from tests.unit.archive.storage.test_catalog import record_frames

TERM = 64 * 1024
SEGMENT = 128 * 1024
REPO = Path(__file__).resolve().parents[4]


def build_old_directory(directory: Path, version: int) -> dict:
    """Three recordings written in the modern layout, then renamed as ``version`` names them.

    Returns ``{modern name: bytes}`` (what migrate must give back) and the descriptors."""
    # 0: from 0 over three segments; 1: starts mid-way (start term base 3 terms in, not a segment
    # multiple); 2: invalid, one segment.
    starts = {0: 0, 1: 3 * TERM + 4096, 2: 0}
    counts = {0: 1200, 1: 1100, 2: 10}
    descriptors = []
    for recording_id, start in starts.items():
        stop = record_frames(directory, recording_id, start, counts[recording_id])
        descriptors.append(old_descriptor(recording_id, start_position=start, stop_position=stop,
                                          segment_file_length=SEGMENT, term_buffer_length=TERM))
    modern = {p.name: p.read_bytes() for p in directory.glob("*.rec")}
    for d in descriptors:
        start_term_base = d.start_position - (d.start_position & (TERM - 1))
        for path in sorted(directory.glob(f"{d.recording_id}-*.rec")):
            base = int(path.stem.split("-")[1])
            index = (base - start_term_base) // SEGMENT
            if version == V0:
                path.rename(directory / f"{d.recording_id}-{index}.rec")
            elif version == V1_0:
                first = d.start_position - d.start_position % SEGMENT
                path.rename(directory / f"{d.recording_id}-{first + index * SEGMENT}.rec")
    write_old_catalog(directory, version, [(descriptors[0], True), (descriptors[1], True),
                                           (descriptors[2], False)])
    return {"modern": modern, "descriptors": descriptors, "old": {p.name for p in directory.glob("*.rec")}}


def write_2_1_mark_file(directory: Path) -> None:
    """The 1.24-1.46 layout (block at 0) this project wrote before 3.1.0, terminated."""
    data = bytearray(8192 + 64 * 1024)
    struct.pack_into("<i4xqqqiiiii4xq", data, 0, V2_1, -1, 5, 4242, 10, 11, 30, 8192, 64 * 1024, 77)
    cursor = 128
    for text in (b"aeron:udp?endpoint=localhost:8010", b"aeron:ipc", b"", b"/dev/shm/old"):
        struct.pack_into("<I", data, cursor, len(text))
        data[cursor + 4:cursor + 4 + len(text)] = text
        cursor += 4 + len(text)
    (directory / MARK_FILE_NAME).write_bytes(bytes(data))


def assert_migrated(directory: Path, expected: dict) -> None:
    assert sorted(p.name for p in directory.glob("*.rec")) == sorted(expected["modern"])
    for name, data in expected["modern"].items():
        assert (directory / name).read_bytes() == data, name
    assert not (directory / migration.JOURNAL_FILE_NAME).exists()
    assert not (directory / migration.NEW_CATALOG_FILE_NAME).exists()
    raw = (directory / CATALOG_FILE_NAME).read_bytes()
    assert struct.unpack_from("<iiqi", raw, 0) == (layout.ARCHIVE_FILE_VERSION, 32, 3, 64)
    with Catalog.open(directory) as catalog:  # writable again: the archive serves it
        assert [(e.descriptor, e.state) for e in catalog.entries()] == [
            (expected["descriptors"][0], layout.VALID), (expected["descriptors"][1], layout.VALID),
            (expected["descriptors"][2], layout.INVALID)]
        assert catalog.problems == [] and catalog.next_recording_id == 3
    for d in expected["descriptors"][:2]:  # every byte readable at its position
        with SegmentReader(directory, d.recording_id, d.start_position, TERM, SEGMENT) as reader:
            data = reader.read(d.start_position, d.stop_position - d.start_position)
            assert len(data) == d.stop_position - d.start_position
            assert struct.unpack_from("<i", data, 0)[0] > 0  # a frame header at the start


@pytest.mark.parametrize("version", [V0, V1_0, V2_0, V2_1], ids=["0", "1.0.0", "2.0.0", "2.1.0"])
def test_each_source_version_is_migrated_in_place(tmp_path, version):
    expected = build_old_directory(tmp_path, version)
    if version == V2_1:
        write_2_1_mark_file(tmp_path)
    report = migration.migrate(tmp_path)
    assert report.from_version == version and report.entries == 3
    assert len(report.renamed) == {V0: 5, V1_0: 3, V2_0: 0, V2_1: 0}[version]
    assert_migrated(tmp_path, expected)
    if version == V2_1:
        mark = read_mark_file(tmp_path)
        assert mark.version == layout.ARCHIVE_FILE_VERSION and mark.terminated
        assert (mark.pid, mark.control_stream_id, mark.archive_id) == (4242, 10, 77)
        assert struct.unpack_from("<HHHH", (tmp_path / MARK_FILE_NAME).read_bytes(), 0) == (128, 200, 100, 2)
    again = migration.migrate(tmp_path)
    assert again.already_current and "nothing to migrate" in again.describe()


def test_version_0_segment_names_follow_the_start_term_base(tmp_path):
    build_old_directory(tmp_path, V0)
    assert sorted(p.name for p in tmp_path.glob("1-*.rec")) == ["1-0.rec", "1-1.rec", "1-2.rec"]
    migration.migrate(tmp_path)
    base = 3 * TERM  # start 3 terms + 4096 in: the first segment starts at its term
    assert sorted(p.name for p in tmp_path.glob("1-*.rec")) == sorted(
        f"1-{base + k * SEGMENT}.rec" for k in range(3))


def test_descriptor_checksums_can_be_stamped(tmp_path):
    build_old_directory(tmp_path, V2_1)
    migration.migrate(tmp_path, checksum=CRC32C)
    with Catalog.open(tmp_path, read_only=True) as catalog:
        raw = (tmp_path / CATALOG_FILE_NAME).read_bytes()
        for entry in catalog.entries():
            offset = catalog.frame_offset(entry.descriptor.recording_id)
            length = struct.unpack_from("<i", raw, offset)[0]
            assert entry.checksum == CRC32C.compute(raw[offset + 32:offset + 32 + length]) != 0


def test_refuses_while_an_archive_runs(tmp_path):
    build_old_directory(tmp_path, V2_1)
    with ArchiveMarkFile.create(tmp_path, archive_id=1, control_channel="", control_stream_id=10,
                                local_control_channel="aeron:ipc", local_control_stream_id=11,
                                events_channel="", events_stream_id=30, aeron_directory=""):
        with pytest.raises(ArchiveRunningError):
            migration.migrate(tmp_path)
    assert struct.unpack_from("<ii", (tmp_path / CATALOG_FILE_NAME).read_bytes(), 0) == (V2_1, 1024)


def run_migrate(directory: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(fault_injection.ENV_VAR, None)
    if fault:
        env[fault_injection.ENV_VAR] = f"{fault}:kill"
    return subprocess.run([sys.executable, "-m", "aeron_spark.archive.cli.main", "migrate", str(directory)],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=60)


STEPS = ["migrate-journaled", "migrate-linked", "migrate-committed", "migrate-unlinked", "migrate-marked"]


@pytest.mark.parametrize("version", [V0, V1_0, V2_1], ids=["0", "1.0.0", "2.1.0"])
@pytest.mark.parametrize("step", STEPS)
def test_kill_9_after_each_step_leaves_the_old_or_the_new_catalog(tmp_path, version, step):
    expected = build_old_directory(tmp_path, version)
    write_2_1_mark_file(tmp_path)
    killed = run_migrate(tmp_path, step)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    committed = STEPS.index(step) >= STEPS.index("migrate-committed")
    with Catalog.open(tmp_path, read_only=True) as catalog:  # one catalog, whole, either version
        assert catalog.old_layout is not committed
        assert [e.descriptor for e in catalog.entries()] == expected["descriptors"]
        readable = {p.name for p in tmp_path.glob("*.rec")}
    if committed:
        assert set(expected["modern"]) <= readable  # every new name is there
        with pytest.raises(OldCatalogVersionError, match="migrate` was interrupted"):
            Catalog.open(tmp_path)  # not served until migrate is run again
    else:
        assert expected["old"] <= readable  # every old name is still there
        with pytest.raises(OldCatalogVersionError, match="aeron-archive migrate"):
            Catalog.open(tmp_path)
    finished = run_migrate(tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert_migrated(tmp_path, expected)
    assert read_mark_file(tmp_path).version == layout.ARCHIVE_FILE_VERSION


def test_cli_migrate_reports_and_refuses_a_missing_directory(tmp_path):
    build_old_directory(tmp_path, V0)
    done = run_migrate(tmp_path)
    assert done.returncode == 0 and "migrated 0.0.0 -> 3.1.0" in done.stdout
    assert "1-1.rec -> 1-327680.rec" in done.stdout
    missing = run_migrate(tmp_path / "nope")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
