"""Crash safety of maintenance: the state a kill leaves at each fault point is repaired at restart.

A kill is simulated by an exception raised at the named point (`fault_injection`): the files and
the catalog stay as they were at that instant. `recovery.repair_archive` then runs as at sidecar
start; the recording must verify clean and hold the operation's before or after state, byte-exact.
The real-process form (SIGKILL of the sidecar) is tests/integration/storage/test_storage_crash_safety.py.
"""

import os
from pathlib import Path

import pytest

from aeron_spark.archive.storage import fault_injection, maintenance, segment
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.maintenance import segment_files, verify_recording
from aeron_spark.archive.storage.recovery import repair_archive

from tests.unit.archive.storage.test_maintenance import SEGMENT, make_recording


class Killed(Exception):
    pass


def crash_at(monkeypatch, point: str) -> None:
    def fault(name: str) -> None:
        if name == point:
            raise Killed(name)
    monkeypatch.setattr(maintenance, "fault_point", fault)
    monkeypatch.setattr(segment, "fault_point", fault)


def recorded_bytes(directory: Path, d) -> bytes:
    with segment.SegmentReader(directory, d.recording_id, d.start_position, d.term_buffer_length,
                               d.segment_file_length) as reader:
        return reader.read(d.start_position, d.stop_position - d.start_position)


OPERATIONS = {
    "truncate-mid-segment": lambda c, p, r: maintenance.truncate_recording(c, p, r, SEGMENT + 10 * 1024),
    "truncate-at-segment-base": lambda c, p, r: maintenance.truncate_recording(c, p, r, SEGMENT),
    "truncate-to-start": lambda c, p, r: maintenance.truncate_recording(c, p, r, 1024),
    "purge": lambda c, p, r: maintenance.purge_recording(c, p, r),
    "detach-and-delete": lambda c, p, r: (maintenance.detach_segments(c, p, r, SEGMENT),
                                          maintenance.delete_detached_segments(c, p, r)),
}


@pytest.mark.parametrize("point", fault_injection.POINTS)
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_kill_at_any_point_is_repaired_to_the_before_or_after_state(tmp_path, monkeypatch, point, operation):
    stop = 5 * SEGMENT // 2
    with Catalog.open(tmp_path) as catalog:
        rid = make_recording(catalog, tmp_path, 1024, stop)
        before = catalog.descriptor(rid)
        original = recorded_bytes(tmp_path, before)
        crash_at(monkeypatch, point)
        try:
            OPERATIONS[operation](catalog, tmp_path, rid)
        except Killed:
            pass
    monkeypatch.undo()
    with Catalog.open(tmp_path) as catalog:  # the restart
        repair_archive(catalog, tmp_path)
        entry = catalog.entry(rid)
        leftovers = [name for name in os.listdir(tmp_path) if name.endswith(".del")]
        assert leftovers == []
        if not entry.valid:
            assert operation == "purge" and segment_files(tmp_path, rid) == {}
            return
        d = entry.descriptor
        result = verify_recording(tmp_path, d)
        assert result.ok and result.notes == [], result.errors + result.notes
        assert (d.start_position, d.stop_position) in {(before.start_position, before.stop_position),
                                                        (before.start_position, d.stop_position),
                                                        (SEGMENT, before.stop_position)}
        data = recorded_bytes(tmp_path, d)
        assert data == original[d.start_position - 1024:d.stop_position - 1024]
        for base, path in segment_files(tmp_path, rid).items():
            assert path.stat().st_size == SEGMENT
            if base <= d.stop_position < base + SEGMENT:
                assert path.read_bytes()[d.stop_position - base:] == bytes(base + SEGMENT - d.stop_position)


def test_verify_notes_a_short_segment_that_still_holds_the_data(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        rid = make_recording(catalog, tmp_path, 0, SEGMENT + 4096)
        os.truncate(tmp_path / f"{rid}-{SEGMENT}.rec", 4096)
        result = verify_recording(tmp_path, catalog.descriptor(rid))
        assert result.ok and "holds all recorded data" in result.notes[0]
        os.truncate(tmp_path / f"{rid}-{SEGMENT}.rec", 2048)
        assert not verify_recording(tmp_path, catalog.descriptor(rid)).ok
