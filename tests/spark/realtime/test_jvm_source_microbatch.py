"""format("aeron-archive-jvm") as a plain micro-batch source (no real-time mode): admission control
(maxBytesPerTrigger) over finished recordings, and trigger(availableNow=True) over a live one.

Real parts only: our sidecar, live publishers recording through it (tests/support/live_publisher.py:
sequence-numbered messages of mixed sizes, some fragmented), and a Spark query in a process of its
own (tests/support/jvm_query_process.py, local[2], the built jar), each stopped or killed by PID.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from aeron_spark.archive.client import ArchiveClient
from tests.support.jvm_module import JvmModule
from tests.support.jvm_query_process import JvmQuery, delivered_rows
from tests.support.live_publisher import LivePublisher, sequence_of
from tests.support.ports import free_udp_port
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

STREAM_ID = 4411
#: The smallest term: the cap's rounding to term boundaries (and messages cut by a batch end) show at this size.
TERM_LENGTH = 64 * 1024


@pytest.fixture(autouse=True)
def no_java_driver_dirs_left() -> Iterator[None]:
    """The query JVM's embedded Java media driver directory (<aeron dir>-spark-<pid>): removed after the
    test when its JVM is gone but the directory stayed (a JVM ended without its shutdown hooks)."""
    before = set(glob.glob("/dev/shm/aeron-*-spark-*"))
    yield
    for directory in set(glob.glob("/dev/shm/aeron-*-spark-*")) - before:
        pid = directory.rsplit("-", 1)[1]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(directory, ignore_errors=True)


def publish(sidecar: Sidecar, messages: int, rate: float, *extra: str) -> LivePublisher:
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}|term-length={TERM_LENGTH}"
    return LivePublisher((), "--channel", channel, "--stream-id", str(STREAM_ID), "--messages", str(messages),
                         "--rate", str(rate), "--control-channel", sidecar.control_channel,
                         "--aeron-dir", sidecar.driver_dir, *extra)


def run_query(jvm_module: JvmModule, work: Path, options: dict[str, str], trigger: dict) -> JvmQuery:
    return JvmQuery({"jars": jvm_module.spark_jars, "options": options, "trigger": trigger,
                     "checkpoint": str(work / "checkpoint"), "out": str(work / "out"), "stop_file": str(work / "stop")})


def rows_by_recording(out: Path) -> dict[int, list[tuple[int, int]]]:
    """recording -> [(position, sequence number)] in delivery order (task files in batch order)."""
    found: dict[int, list[tuple[int, int]]] = {}
    for name, rows in sorted(delivered_rows(out).items(), key=lambda item: item[0].rsplit("-", 1)[1]):
        for recording_id, position, payload in rows:
            found.setdefault(recording_id, []).append((position, sequence_of(payload)))
    return found


def end_offsets(query: JvmQuery) -> list[dict[int, int]]:
    """Each batch that read rows: its end offset (recording -> position)."""
    ends = []
    for progress in query.progress():
        if progress["numInputRows"] > 0:
            offset = progress["endOffset"]
            parsed = offset if isinstance(offset, dict) else json.loads(offset)
            ends.append({int(recording): int(position) for recording, position in parsed.items()})
    return ends


def test_capped_micro_batches_over_finished_recordings_deliver_every_message_once_in_order(
        sidecar: Sidecar, archive: ArchiveClient, jvm_module: JvmModule, tmp_path: Path) -> None:
    """Two finished recordings of unequal length, maxBytesPerTrigger below their backlog: several
    batches, each recording's messages exactly once and in order, each batch within the cap (a
    capped end lands on a term boundary, so a batch may read less, never more than a term over), the
    last batch ending at each recording's stop position."""
    counts = (900, 400)
    publishers = [publish(sidecar, count, 5000.0) for count in counts]
    try:
        for publisher in publishers:
            publisher.wait_until(publisher.done, "every message published and recorded", 60)
    finally:
        for publisher in publishers:
            publisher.stop()
    recording_ids = [publisher.recordings()[0] for publisher in publishers]
    stops = {recording_id: archive.stop_position(recording_id) for recording_id in recording_ids}
    cap = 3 * TERM_LENGTH  # four to six batches: enough to show the split, few enough to stay fast
    query = run_query(jvm_module, tmp_path, {
        "archive.controlChannel": sidecar.control_channel, "recordingIds": ",".join(map(str, recording_ids)),
        "startingPositions": "earliest", "maxBytesPerTrigger": str(cap)}, {"processingTime": "100 milliseconds"})
    try:
        query.wait_for(lambda: (ends := end_offsets(query)) != [] and ends[-1] == stops,
                       "a batch ending at every recording's stop position", 200)
        query.stop()
    finally:
        query.kill()
    assert query.failure() is None, query.output()
    found = rows_by_recording(tmp_path / "out")
    for recording_id, count in zip(recording_ids, counts):
        assert [sequence for _, sequence in found[recording_id]] == list(range(count)), recording_id
        positions = [position for position, _ in found[recording_id]]
        assert positions == sorted(set(positions)) and positions[-1] == stops[recording_id]
    ends = end_offsets(query)
    assert len(ends) >= 3, ends  # the cap split the backlog
    previous = {recording_id: 0 for recording_id in recording_ids}
    for end in ends:
        read = sum(end[recording_id] - previous[recording_id] for recording_id in recording_ids)
        assert 0 < read <= cap + TERM_LENGTH, (read, ends)
        assert all(end[recording_id] >= previous[recording_id] for recording_id in recording_ids), ends
        previous = end


def test_available_now_reads_up_to_the_position_at_start_and_stops(
        sidecar: Sidecar, archive: ArchiveClient, jvm_module: JvmModule, tmp_path: Path) -> None:
    """A recording that keeps growing while an AvailableNow query (capped, so in several batches)
    reads it: the query ends by itself, having read every message from the first up to a position
    between the recorded position before the query started and the one when it ended, short of the
    latter (what arrived after its start is left for the next run)."""
    until = tmp_path / "stop-publishing"
    # Slow (~28 KB/s): the backlog at start grows with Spark's start-up, which a loaded machine stretches.
    publisher = publish(sidecar, 1_000_000, 50.0, "--until-file", str(until))
    query = None
    try:
        publisher.wait_until(lambda: publisher.recordings(), "the recording started", 30)
        recording_id = publisher.recordings()[0]
        publisher.wait_until(lambda: archive.max_recorded_position(recording_id) >= 2 * TERM_LENGTH,
                             "two terms recorded", 60)
        before = archive.max_recorded_position(recording_id)
        query = run_query(jvm_module, tmp_path, {
            "archive.controlChannel": sidecar.control_channel, "recordingIds": str(recording_id),
            "startingPositions": "earliest", "maxBytesPerTrigger": str(4 * TERM_LENGTH)}, {"availableNow": True})
        query.wait_for(lambda: not query.running, "the AvailableNow query ending by itself", 300)
        assert query.process.wait(10) == 0, query.output()
        after = archive.max_recorded_position(recording_id)
    finally:
        until.touch()
        if query is not None:
            query.kill()
        publisher.stop()
    assert "QUERY STOPPED" in query.lines, query.output()
    ends = end_offsets(query)
    assert len(ends) >= 2, ends  # the cap held within AvailableNow too
    final = ends[-1][recording_id]
    assert before <= final < after, (before, final, after)
    found = rows_by_recording(tmp_path / "out")[recording_id]
    assert [sequence for _, sequence in found] == list(range(len(found)))  # from the first, none skipped or repeated
    assert found[-1][0] <= final
