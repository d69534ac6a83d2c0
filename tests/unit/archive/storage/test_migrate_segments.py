"""MigrateSegments over real segment files (Aeron's rules: contiguous at a segment base of both,
same stream parameters, src stopped), including the order that keeps a killed migrate from losing
a file to restart repair."""

from pathlib import Path

import pytest

from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.maintenance import MaintenanceError, migrate_segments, segment_files
from aeron_spark.archive.storage.recovery import repair_recording

from tests.unit.archive.storage.test_maintenance import SEGMENT, make_recording


@pytest.fixture()
def catalog(tmp_path):
    with Catalog.open(tmp_path) as opened:
        yield opened


def bases(directory: Path, recording_id: int) -> list[int]:
    return list(segment_files(directory, recording_id))


def test_prepend_moves_the_files_and_empties_the_source(catalog, tmp_path):
    src = make_recording(catalog, tmp_path, 0, 2 * SEGMENT)
    dst = make_recording(catalog, tmp_path, 2 * SEGMENT, 3 * SEGMENT - 1024)
    before = {base: (tmp_path / f"{src}-{base}.rec").read_bytes() for base in (0, SEGMENT)}

    result = migrate_segments(catalog, tmp_path, src, dst)

    assert [p.name for p in result.attached_files] == [f"{dst}-0.rec", f"{dst}-{SEGMENT}.rec"]
    assert bases(tmp_path, src) == [] and bases(tmp_path, dst) == [0, SEGMENT, 2 * SEGMENT]
    assert all((tmp_path / f"{dst}-{base}.rec").read_bytes() == data for base, data in before.items())
    d = catalog.descriptor(dst)
    assert (d.start_position, d.stop_position) == (0, 3 * SEGMENT - 1024)
    s = catalog.descriptor(src)
    assert (s.start_position, s.stop_position) == (0, 0)


def test_append_refuses_the_destination_s_rolled_over_segment_as_aeron_does(catalog, tmp_path):
    """dst stopped at a segment base, so the writer already created its next (empty) segment: Aeron's
    migrate refuses it as a preexisting dst file, and so does ours."""
    dst = make_recording(catalog, tmp_path, 0, SEGMENT)
    src = make_recording(catalog, tmp_path, SEGMENT, 2 * SEGMENT + 4096)
    assert (tmp_path / f"{dst}-{SEGMENT}.rec").exists()
    with pytest.raises(MaintenanceError, match="preexisting dst segment file"):
        migrate_segments(catalog, tmp_path, src, dst)


def test_append_sets_the_destination_stop(catalog, tmp_path):
    dst = make_recording(catalog, tmp_path, 0, SEGMENT)
    src = make_recording(catalog, tmp_path, SEGMENT, 2 * SEGMENT + 4096)
    (tmp_path / f"{dst}-{SEGMENT}.rec").unlink()  # the rolled-over empty segment, see above
    result = migrate_segments(catalog, tmp_path, src, dst)
    assert len(result.attached_files) == 2
    assert bases(tmp_path, dst) == [0, SEGMENT, 2 * SEGMENT]
    assert catalog.descriptor(dst).stop_position == 2 * SEGMENT + 4096
    assert catalog.descriptor(src).stop_position == SEGMENT
    # What restart repair does with the result: nothing to delete.
    assert [r for r in repair_recording(tmp_path, catalog.descriptor(dst), True) if "deleted" in r.action] == []


@pytest.mark.parametrize("src_range, dst_range, text", [
    ((0, SEGMENT), (2 * SEGMENT, 3 * SEGMENT), "not contiguous"),
    ((0, SEGMENT + 1024), (SEGMENT + 1024, 2 * SEGMENT), "not on segment boundary"),
])
def test_invalid_migrates_change_nothing(catalog, tmp_path, src_range, dst_range, text):
    src = make_recording(catalog, tmp_path, *src_range)
    dst = make_recording(catalog, tmp_path, *dst_range)
    files = sorted(p.name for p in tmp_path.glob("*.rec"))
    with pytest.raises(MaintenanceError, match=text):
        migrate_segments(catalog, tmp_path, src, dst)
    assert sorted(p.name for p in tmp_path.glob("*.rec")) == files
    assert catalog.descriptor(src).stop_position == src_range[1]


def test_an_active_source_is_refused(catalog, tmp_path):
    src = make_recording(catalog, tmp_path, 0, SEGMENT, active=True)
    dst = make_recording(catalog, tmp_path, SEGMENT, 2 * SEGMENT)
    with pytest.raises(MaintenanceError, match="active"):
        migrate_segments(catalog, tmp_path, src, dst)
