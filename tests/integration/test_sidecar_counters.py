"""The real sidecar's counters on its driver: the rec-pos counter (type, key, label, value, closed
with the recording) and the recorder/replayer I/O counters. Uses the ``sidecar`` and
``local_aeron`` fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import pytest
from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.codecs.archive_io_counters import (
    RECORDER_MAX_WRITE_TIME_TYPE_ID,
    RECORDER_TOTAL_WRITE_BYTES_TYPE_ID,
    RECORDER_TOTAL_WRITE_TIME_TYPE_ID,
    REPLAYER_MAX_READ_TIME_TYPE_ID,
    REPLAYER_TOTAL_READ_BYTES_TYPE_ID,
    REPLAYER_TOTAL_READ_TIME_TYPE_ID,
    find_archive_counter,
)
from aeron_spark.archive.codecs import RecordingSignal
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import RECORDED_STREAM, TIMEOUT, ipc_archive, payloads, record_ipc
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("sidecar", [["--archive-id", "777"]], indirect=True, ids=["archive-id-777"])
def test_rec_pos_counter_and_recorder_replayer_io_counters(sidecar: Sidecar, local_aeron: AeronClient):
    counters = local_aeron.counters_reader
    with ipc_archive(local_aeron) as archive:
        archive_id = archive.archive_id
        assert archive_id == int(sidecar.ready["archiveId"]) == 777
        recording_id, published, publication = record_ipc(archive, payloads(150, seed=11), keep_open=True)
        try:
            counter_id = recording_position.find_counter_id_by_recording(counters, recording_id, archive_id)
            assert counter_id >= 0
            assert recording_position.find_counter_id_by_session(counters, publication.session_id,
                                                                 archive_id) == counter_id
            assert recording_position.find_counter_id_by_recording(counters, recording_id, archive_id + 1) == -1
            assert counters.type_id(counter_id) == 100
            key = recording_position.decode_key(counters.key(counter_id))
            assert (key.recording_id, key.session_id, key.archive_id) == (
                recording_id, publication.session_id, archive_id)
            assert key.source_identity == "aeron:ipc"
            assert counters.label(counter_id) == (
                f"rec-pos: {recording_id} {publication.session_id} {RECORDED_STREAM} aeron:ipc"
                f" - archiveId={archive_id}")
            assert counters.value(counter_id) == published.end == archive.recording_position(recording_id)
        finally:
            publication.close()
        archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
        wait_until(lambda: recording_position.find_counter_id_by_recording(counters, recording_id) == -1,
                   "the rec-pos counter to close with the recording")

        def value(type_id: int) -> int:
            counter = find_archive_counter(counters, type_id, archive_id)
            assert counter >= 0, f"no counter of type {type_id} for archive {archive_id}"
            return counters.value(counter)

        labels = {counters.label(find_archive_counter(counters, t, archive_id)) for t in range(105, 111)}
        assert f"archive-recorder total write bytes - archiveId={archive_id}" in labels
        assert f"archive-replayer total read bytes - archiveId={archive_id}" in labels
        assert value(RECORDER_TOTAL_WRITE_BYTES_TYPE_ID) == published.end
        assert value(RECORDER_TOTAL_WRITE_TIME_TYPE_ID) >= value(RECORDER_MAX_WRITE_TIME_TYPE_ID) > 0
        assert value(REPLAYER_TOTAL_READ_BYTES_TYPE_ID) == 0

        for stream_id in (2001, 2002):
            with archive.replay(recording_id, 0, published.end, "aeron:ipc", stream_id) as replay:
                assert len(list(replay.messages(idle_timeout=TIMEOUT))) == 150
        wait_until(lambda: value(REPLAYER_TOTAL_READ_BYTES_TYPE_ID) == 2 * published.end,
                   "the replayer's read bytes to count both replays")
        assert value(REPLAYER_TOTAL_READ_TIME_TYPE_ID) >= value(REPLAYER_MAX_READ_TIME_TYPE_ID) > 0
