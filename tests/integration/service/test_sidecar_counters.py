"""The real sidecar's counters on its driver: the rec-pos counter (type, key, label, value, closed
with the recording), the recorder/replayer I/O counters, and every other archive counter (101-113)
as a separate process reads them, moving as sessions open and close and an error is recorded. Uses
the ``sidecar`` and ``local_aeron`` fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import itertools
import json
import re
import struct
import subprocess
import sys

import pytest
from aeron_spark import __version__
from aeron_spark.archive.client.response_routing import ArchiveError
from aeron_spark.archive.codecs.archive_counters import (
    ARCHIVE_CONTROL_SESSION_TYPE_ID,
    ARCHIVE_COUNTER_TYPE_IDS,
    decode_control_session_key,
)
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
from aeron_spark.archive.codecs import RecordingSignal, SourceLocation
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


# ------------------------------------------------------------------ every archive counter, read by another process

#: Run by a separate Python process: every allocated counter of the driver in ``argv[1]`` as JSON
#: (the reader is its own Aeron client, as AeronStat or a monitoring agent would be).
SNAPSHOT_SCRIPT = """
import json, sys
from aeron_spark.driver_integration import AeronClient, CounterState
with AeronClient(sys.argv[1], client_name="counters-snapshot") as aeron:
    reader = aeron.counters_reader
    rows = []
    for counter_id in range(reader.max_counter_id + 1):
        state = reader.state(counter_id)
        if state == CounterState.UNUSED:
            break
        if state == CounterState.ALLOCATED:
            rows.append({"id": counter_id, "type": reader.type_id(counter_id), "key": reader.key(counter_id).hex(),
                         "label": reader.label(counter_id), "value": reader.value(counter_id),
                         "reference": reader.reference_id(counter_id)})
print(json.dumps(rows))
"""


def snapshot(aeron_dir: str) -> list[dict]:
    completed = subprocess.run([sys.executable, "-c", SNAPSHOT_SCRIPT, aeron_dir], capture_output=True, text=True,
                               timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout)


def archive_counters(rows: list[dict], archive_id: int) -> dict[str, dict]:
    """The archive's counters (types 101-113 keyed by ``archive_id``) by label."""
    key = struct.pack("<q", archive_id).hex()
    return {row["label"]: row for row in rows if row["type"] in ARCHIVE_COUNTER_TYPE_IDS and row["key"].startswith(key)}


def value_of(aeron_dir: str, label: str, archive_id: int = 778) -> int:
    return archive_counters(snapshot(aeron_dir), archive_id)[label]["value"]


SUFFIX = " - archiveId=778"
IDLE_COUNTERS = {  # label -> type id of a DEDICATED sidecar with --recorder-cycle-threshold 1us
    "Archive Errors - archiveId=778 version=" + __version__ + " commit=unknown": 101,
    "archive-conductor max cycle time in ns: DEDICATED" + SUFFIX: 103,
    "archive-conductor work cycle time exceeded count: threshold=100ms DEDICATED" + SUFFIX: 104,
    "archive-recorder max cycle time in ns: DEDICATED" + SUFFIX: 103,
    "archive-recorder work cycle time exceeded count: threshold=1us DEDICATED" + SUFFIX: 104,
    "archive-replayer max cycle time in ns: DEDICATED" + SUFFIX: 103,
    "archive-replayer work cycle time exceeded count: threshold=100ms DEDICATED" + SUFFIX: 104,
    "Archive Control Sessions" + SUFFIX: 102,
    "Archive Recording Sessions" + SUFFIX: 111,
    "Archive Replay Sessions" + SUFFIX: 112,
    "archive-recorder max write time in ns" + SUFFIX: 105,
    "archive-recorder total write bytes" + SUFFIX: 106,
    "archive-recorder total write time in ns" + SUFFIX: 107,
    "archive-replayer max read time in ns" + SUFFIX: 108,
    "archive-replayer total read bytes" + SUFFIX: 109,
    "archive-replayer total read time in ns" + SUFFIX: 110,
}


@pytest.mark.parametrize("sidecar", [["--archive-id", "778", "--recorder-cycle-threshold", "1us"]], indirect=True,
                         ids=["archive-id-778"])
def test_every_archive_counter_is_seen_by_another_process_and_moves_with_the_archive(sidecar: Sidecar,
                                                                                    local_aeron: AeronClient):
    aeron_dir = sidecar.driver_dir
    idle = archive_counters(snapshot(aeron_dir), 778)
    assert {label: row["type"] for label, row in idle.items()} == IDLE_COUNTERS
    assert {row["key"] for row in idle.values()} == {struct.pack("<q", 778).hex() + "00" * 104}
    assert all(idle[label]["value"] == 0 for label in ("Archive Control Sessions" + SUFFIX,
                                                       "Archive Recording Sessions" + SUFFIX,
                                                       "Archive Replay Sessions" + SUFFIX))
    wait_until(lambda: value_of(aeron_dir, "archive-conductor max cycle time in ns: DEDICATED" + SUFFIX) > 0,
               "the conductor's max cycle time to be measured")

    with ipc_archive(local_aeron) as archive:
        # A control session: counted, and its own counter (113) keyed by the archive and session ids,
        # valued with the session id, referring to the response publication (whose pub-lmt counter,
        # type 1, is keyed by the same registration id).
        rows = snapshot(aeron_dir)
        counters = archive_counters(rows, 778)
        assert counters["Archive Control Sessions" + SUFFIX]["value"] == 1
        (session_row,) = [row for row in rows if row["type"] == ARCHIVE_CONTROL_SESSION_TYPE_ID]
        assert decode_control_session_key(bytes.fromhex(session_row["key"])) == (778, archive.control_session_id)
        assert session_row["value"] == archive.control_session_id
        assert re.fullmatch(r"control-session: name=aeron-spark-archive-client sourceIdentity=aeron:ipc "
                            r"sessionId=-?\d+ - archiveId=778",
                            session_row["label"]), session_row["label"]
        publisher_limits = {int.from_bytes(bytes.fromhex(row["key"])[:8], "little", signed=True)
                            for row in rows if row["type"] == 1}
        assert session_row["reference"] in publisher_limits

        # A recording held open and a replay following it: one session each.
        recording_id, published, publication = record_ipc(archive, payloads(50, seed=3), keep_open=True)
        try:
            wait_until(lambda: value_of(aeron_dir, "Archive Recording Sessions" + SUFFIX) == 1,
                       "the recording session to be counted")
            with archive.replay(recording_id, 0, -1, "aeron:ipc", 2003) as replay:
                assert len(list(itertools.islice(replay.messages(idle_timeout=TIMEOUT), 50))) == 50
                wait_until(lambda: value_of(aeron_dir, "Archive Replay Sessions" + SUFFIX) == 1,
                           "the replay session to be counted")
        finally:
            publication.close()
        archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
        wait_until(lambda: value_of(aeron_dir, "Archive Recording Sessions" + SUFFIX) == 0,
                   "the recording session count to drop when it stops")
        wait_until(lambda: value_of(aeron_dir, "Archive Replay Sessions" + SUFFIX) == 0,
                   "the replay session count to drop when the replay ends")
        after = archive_counters(snapshot(aeron_dir), 778)
        assert after["archive-recorder max cycle time in ns: DEDICATED" + SUFFIX]["value"] > 0
        assert after["archive-recorder work cycle time exceeded count: threshold=1us DEDICATED" + SUFFIX]["value"] > 0
        assert after["archive-replayer max cycle time in ns: DEDICATED" + SUFFIX]["value"] > 0

        # An error the archive's error handler records (the media driver refuses a channel): counted.
        errors_before = value_of(aeron_dir, next(label for label in IDLE_COUNTERS if label.startswith("Archive Errors")))
        with pytest.raises(ArchiveError, match="media driver refused"):
            archive.start_recording("aeron:udp?endpoint=no-such-host.invalid:40123", 2004, SourceLocation.REMOTE)
        wait_until(lambda: value_of(aeron_dir, next(label for label in IDLE_COUNTERS
                                                    if label.startswith("Archive Errors"))) == errors_before + 1,
                   "the refused request to be counted as an archive error")
        session_id = archive.control_session_id

    wait_until(lambda: value_of(aeron_dir, "Archive Control Sessions" + SUFFIX) == 0,
               "the control session count to drop when the client closes its session")
    assert not [row for row in snapshot(aeron_dir) if row["type"] == ARCHIVE_CONTROL_SESSION_TYPE_ID
                and decode_control_session_key(bytes.fromhex(row["key"])) == (778, session_id)]
