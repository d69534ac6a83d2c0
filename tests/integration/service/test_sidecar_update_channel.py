"""UpdateChannel (107) through the real sidecar: our client's update_channel on a stopped recording
in the middle of the catalog (its entry grows, the later ones move), an active one, an unknown id
and a malformed channel; listings, replays and a read-only reader in this (another) process see
the moved catalog. Uses the ``sidecar`` and ``local_aeron`` fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import pytest
from aeron_spark.archive.client.archive_client import ArchiveError
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode, RecordingSignal
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import (
    IPC_RECORDED,
    RECORDED_STREAM,
    TIMEOUT,
    as_pairs,
    await_recorded,
    error_of,
    expected,
    ipc_archive,
    payloads,
    publish,
    record_ipc,
)

pytestmark = pytest.mark.timeout(120)

LONG = "aeron:udp?endpoint=localhost:40999|alias=" + "renamed-" * 40 + "|term-length=64k"


def test_update_channel_through_the_sidecar(sidecar: Sidecar, local_aeron: AeronClient):
    with ipc_archive(local_aeron) as archive, Catalog.open(sidecar.archive_dir, read_only=True) as reader:
        recorded = [record_ipc(archive, payloads(40, seed=30 + i), stream_id=RECORDED_STREAM + i)
                    for i in range(3)]
        ids = [recording_id for recording_id, _, _ in recorded]
        before = {d.recording_id: d for d in archive.list_recordings()}
        offsets = [reader.frame_offset(i) for i in ids]

        archive.update_channel(ids[1], LONG)
        after = {d.recording_id: d for d in archive.list_recordings()}
        assert after[ids[1]].original_channel == LONG
        assert after[ids[1]].stripped_channel == "aeron:udp?endpoint=localhost:40999|alias=" + "renamed-" * 40
        for recording_id in ids:
            changed = {"original_channel", "stripped_channel"} if recording_id == ids[1] else set()
            changed |= {"correlation_id"}  # the listing request's
            for field in before[recording_id].__dataclass_fields__:
                if field not in changed:
                    assert getattr(after[recording_id], field) == getattr(before[recording_id], field), field
        assert archive.poll_for_recording_signals() == []  # no signal, as Aeron

        # A reader in another process (this one; the sidecar writes) sees the moved entries.
        assert reader.descriptor(ids[1]).original_channel == LONG
        assert reader.frame_offset(ids[0]) == offsets[0] and reader.frame_offset(ids[1]) == offsets[1]
        assert reader.frame_offset(ids[2]) > offsets[2]
        assert [reader.descriptor(i).stream_id for i in ids] == [RECORDED_STREAM + i for i in range(3)]

        for recording_id, published, _ in recorded[1:]:
            with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2101) as replay:
                assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)

        with pytest.raises(ArchiveError) as unknown:  # Aeron's RECORDING_UNKNOWN response, not an ERROR
            archive.update_channel(99, "aeron:ipc")
        assert unknown.value.code == ControlResponseCode.RECORDING_UNKNOWN
        assert unknown.value.error_code == ArchiveErrorCode.UNKNOWN_RECORDING
        malformed = error_of(lambda: archive.update_channel(ids[0], "aeron:udp?endpoint"))
        assert malformed.error_code == ArchiveErrorCode.GENERIC
        assert archive.list_recording(ids[0]).original_channel == before[ids[0]].original_channel

        # An active recording is updated too (Aeron does not refuse it); it goes on and stops.
        active_id, published, publication = record_ipc(archive, payloads(20, seed=40),
                                                        stream_id=RECORDED_STREAM + 5, keep_open=True)
        try:
            archive.update_channel(active_id, "aeron:ipc?alias=active-renamed")
            assert archive.list_recording(active_id).original_channel == "aeron:ipc?alias=active-renamed"
            more = publish(publication, payloads(20, seed=41), published.end)
            await_recorded(archive, active_id, more.end)
            archive.stop_recording(IPC_RECORDED, RECORDED_STREAM + 5)
            archive.await_recording_signal(RecordingSignal.STOP, recording_id=active_id)
        finally:
            publication.close()
        final = archive.list_recording(active_id)
        assert (final.original_channel, final.stop_position) == ("aeron:ipc?alias=active-renamed", more.end)
        assert reader.descriptor(active_id).stop_position == more.end
