"""Segment maintenance through the real sidecar: detach, attach, delete detached and purge segments,
and replays from the new start. Uses the ``sidecar`` and ``local_aeron`` fixtures of
tests/integration/conftest.py."""

from __future__ import annotations

import pytest
from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import (
    TIMEOUT,
    as_pairs,
    error_of,
    expected,
    ipc_archive,
    payloads,
    record_ipc,
)

pytestmark = pytest.mark.timeout(120)


def test_detach_attach_delete_and_purge_segments_through_the_sidecar(sidecar: Sidecar, local_aeron: AeronClient):
    """Segments of 64 KiB (the fixture's --segment-length): detach moves the start to a segment
    base and keeps the files, attach brings them back, delete-detached removes them, purge-segments
    does both; a replay from the new start still works and one before it is refused."""
    segment = 64 * 1024
    directory = sidecar.archive_dir
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(500, seed=15))
        assert published.end > 4 * segment

        def bases() -> list[int]:
            return sorted(int(p.stem.split("-")[1]) for p in directory.glob(f"{recording_id}-*.rec"))
        all_bases = bases()
        assert all_bases[:4] == [0, segment, 2 * segment, 3 * segment]

        archive.detach_segments(recording_id, 2 * segment)
        assert archive.start_position(recording_id) == 2 * segment and bases() == all_bases
        assert archive.attach_segments(recording_id) == 2
        assert archive.start_position(recording_id) == 0

        archive.detach_segments(recording_id, segment)
        assert archive.delete_detached_segments(recording_id) == 1
        archive.await_recording_signal(RecordingSignal.DELETE, recording_id=recording_id)
        assert bases() == all_bases[1:]
        assert archive.purge_segments(recording_id, 3 * segment) == 2
        archive.await_recording_signal(RecordingSignal.DELETE, recording_id=recording_id)
        assert bases() == all_bases[3:] and archive.start_position(recording_id) == 3 * segment

        bad = error_of(lambda: archive.detach_segments(recording_id, 3 * segment + 1024))
        assert "invalid segment start" in bad.archive_message  # Aeron's text (isValidDetach)
        before = error_of(lambda: archive.start_replay(recording_id, 0, 1024, "aeron:ipc", 2001))
        assert before.error_code == ArchiveErrorCode.INVALID_POSITION
        with archive.replay(recording_id, 3 * segment, published.end - 3 * segment, "aeron:ipc", 2002) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published, 3 * segment)
