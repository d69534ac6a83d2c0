"""catalog_compaction: compact keeps VALID frames byte for byte, survives a kill at each step, and
delete_orphaned_segments deletes only files outside a recording's segments."""

from pathlib import Path

import pytest

from aeron_spark.archive.storage import catalog_compaction
from aeron_spark.archive.storage.catalog import Catalog, CatalogError
from aeron_spark.archive.storage.maintenance import verify_recording

from tests.unit.archive.storage.test_maintenance import SEGMENT, make_recording


class Killed(Exception):
    pass


def three_recordings(directory: Path) -> tuple[int, int, int]:
    """0 VALID, 1 INVALID, 2 DELETED (its files already gone, as after a purge)."""
    with Catalog.open(directory) as catalog:
        ids = tuple(make_recording(catalog, directory, 0, 3 * SEGMENT // 2) for _ in range(3))
        catalog.invalidate(ids[1])
        catalog.delete(ids[2])
    for path in directory.glob(f"{ids[2]}-*.rec"):
        path.unlink()
    return ids  # type: ignore[return-value]


def frames_of(directory: Path) -> bytes:
    data = (directory / "archive.catalog").read_bytes()
    return data[:catalog_compaction.used_catalog_bytes(directory)]


def test_compact_keeps_valid_frames_byte_for_byte(tmp_path):
    valid, invalid, deleted = three_recordings(tmp_path)
    with Catalog.open(tmp_path, read_only=True) as catalog:
        kept_frame_offset = catalog.frame_offset(valid)
        before = (tmp_path / "archive.catalog").read_bytes()
    result = catalog_compaction.compact_catalog(tmp_path)
    assert (result.deleted_records, result.removed_recording_ids) == (2, [invalid, deleted])
    assert sorted(p.name for p in result.deleted_files) == ["1-0.rec", f"1-{SEGMENT}.rec"]
    after = (tmp_path / "archive.catalog").read_bytes()
    assert len(after) == catalog_compaction.used_catalog_bytes(tmp_path)  # cut to its last frame, as Aeron
    assert after[32:] == before[kept_frame_offset:kept_frame_offset + len(after) - 32]
    assert after[:32] == before[:32]  # version, nextRecordingId, alignment unchanged
    with Catalog.open(tmp_path, read_only=True) as catalog:
        (entry,) = catalog.entries()
        assert entry.descriptor.recording_id == valid and entry.valid
        assert verify_recording(tmp_path, entry.descriptor).ok


@pytest.mark.parametrize("point", ["compact-written", "compact-committed"])
def test_a_kill_at_each_step_leaves_the_old_or_the_new_catalog_and_a_rerun_finishes(tmp_path, monkeypatch, point):
    three_recordings(tmp_path)
    before = frames_of(tmp_path)

    def fault(name: str) -> None:
        if name == point:
            raise Killed(name)
    monkeypatch.setattr(catalog_compaction, "fault_point", fault)
    with pytest.raises(Killed):
        catalog_compaction.compact_catalog(tmp_path)
    if point == "compact-written":
        assert frames_of(tmp_path) == before and (tmp_path / "1-0.rec").exists()
    else:
        assert len(frames_of(tmp_path)) < len(before) and (tmp_path / "1-0.rec").exists()
    monkeypatch.undo()
    catalog_compaction.compact_catalog(tmp_path)
    assert not (tmp_path / "1-0.rec").exists() and not (tmp_path / "archive.catalog.compact").exists()
    with Catalog.open(tmp_path) as catalog:
        assert [e.descriptor.recording_id for e in catalog.entries()] == [0]


def test_compact_refuses_a_damaged_catalog(tmp_path):
    three_recordings(tmp_path)
    path = tmp_path / "archive.catalog"
    data = bytearray(path.read_bytes())
    data[32:36] = (7).to_bytes(4, "little")  # a frame length that is not aligned
    path.write_bytes(bytes(data))
    with pytest.raises(CatalogError, match="refusing to compact a damaged catalog"):
        catalog_compaction.compact_catalog(tmp_path)
    assert path.read_bytes() == bytes(data)


def test_delete_orphaned_segments_keeps_the_start_to_stop_segments(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        stopped = make_recording(catalog, tmp_path, SEGMENT + 1024, 5 * SEGMENT // 2)
        active = make_recording(catalog, tmp_path, 0, SEGMENT // 2, active=True)
    for name in ("0-0.rec", f"0-{4 * SEGMENT}.rec", f"1-{3 * SEGMENT}.rec"):
        (tmp_path / name).write_bytes(b"\0" * 32)
    with Catalog.open(tmp_path, read_only=True) as catalog:
        deleted = catalog_compaction.delete_orphaned_segments(tmp_path, catalog)
    # A detached segment below the start and one past the stop go; an active recording keeps later files.
    assert sorted(p.name for p in deleted) == ["0-0.rec", f"0-{4 * SEGMENT}.rec"]
    assert sorted(p.name for p in tmp_path.glob("*.rec")) == [
        f"0-{SEGMENT}.rec", f"0-{2 * SEGMENT}.rec", "1-0.rec", f"1-{3 * SEGMENT}.rec"]
    assert (stopped, active) == (0, 1)
