"""The sink's exactly-once under real failures (issue 7): a real sidecar subprocess, and a real Spark
query in ANOTHER process (``sink_query_process.py``: aeron-archive source -> aeron-archive sink) that
the test kills with SIGKILL and restarts from its checkpoint.

Input: one stopped recording of numbered messages of mixed sizes, recorded beforehand. The query
writes each message's payload with the input position as its reserved value, 128 KiB of input per
micro-batch (~10 batches), so a replayed batch produces the same rows.

One test runs the failures one after the other on the same query and checkpoint, because starting
a Spark query process costs 20-90 s on this 2-core machine. After each failure the test checks
what it left: whole batches 0..k-1 in the sink recording, with consecutive batch ids, and readers
seeing exactly their rows and nothing of the batch that was in flight.

1. the query's driver (its whole process group: Python, JVM, workers) is SIGKILLed mid-stream;
2. restarted, it is SIGKILLed while its commit of a later batch is paused by the sink's
   fault-injection hook (``connector/sink/fault_injection.py``) after the tasks staged the batch
   and before the commit appends anything (``before-append``);
3. restarted, the SIDECAR is SIGKILLed while the next commit is paused with its rows appended
   and recorded but no marker (``before-marker``). The query then fails, and a new sidecar on the
   same archive directory recovers the recording (debris after the last marker, never visible);
4. restarted once more, the query runs to the end.

At the end the sink recording must equal the input exactly once, in order, read two ways:
(1) a raw replay of the whole recording with the archive client: every recorded byte, markers
included. The data messages must equal the input, the markers must be numbered 0, 1, 2, ... and
each must count the rows since the previous one, with nothing after the last marker;
(2) ``spark.read.format("aeron-archive")`` in the query process, the source's view of rows and
reserved values, compared as a digest.

A second test runs the query with ``sink.stagingDir`` on S3 (moto's S3 server on localhost) and kills
its driver while a commit is paused before its marker; the restart ends with every row exactly once.

An aborted batch leaving nothing visible is covered by
``test_sink_exactly_once.py::test_an_aborted_batch_leaves_nothing_visible`` and not repeated here.
Every process started here (sidecars, query process trees) is stopped by PID in ``finally``.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.connector.source.archive_access import open_archive
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range
from aeron_spark.connector.commit_markers import (
    MARKER_FRAME_LENGTH,
    MARKER_MAGIC,
    MARKER_PAYLOAD_LENGTH,
    CommitMarker,
    sink_id_of_channel,
)

from tests.support.process_tree import kill_tree
from tests.support.s3_server import running_s3_server
from tests.support.sidecar import Sidecar
from tests.spark.source_fixtures import Recorded, RecordingArchive, numbered_payloads

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

QUERY_SCRIPT = Path(__file__).with_name("sink_query_process.py")
INPUT_MESSAGES = 7500
INPUT_SIZES = (16, 48, 100, 300)  # ~116 B on average: 7500 messages ~ 1.2 MB of 64k terms
MAX_BYTES_PER_TRIGGER = "128k"  # ~10 micro-batches of two partitions (one per term)
RUN_TIMEOUT_S = 240.0
PAUSE_TIMEOUT_S = 180.0


# --- processes -------------------------------------------------------------------------------------


class QueryProcess:
    """``sink_query_process.py`` in its own session (process group), its stdout collected by a thread."""

    def __init__(self, archive_dir: Path, checkpoint: Path, recording_id: int, sink_id: str, stream_id: int,
                 *extra: str) -> None:
        argv = [sys.executable, str(QUERY_SCRIPT), "--archive-dir", str(archive_dir), "--checkpoint",
                str(checkpoint), "--recording-id", str(recording_id), "--sink-id", sink_id, "--stream-id",
                str(stream_id), "--max-bytes-per-trigger", MAX_BYTES_PER_TRIGGER, *extra]
        self.lines: list[str] = []
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self, last: int = 60) -> str:
        return "\n".join(self.lines[-last:])

    def finished_batches(self) -> list[int]:
        return [int(line.split()[1].partition("=")[2]) for line in self.lines if line.startswith("PROGRESS ")]

    def line_starting(self, prefix: str) -> str | None:
        return next((line for line in self.lines if line.startswith(prefix)), None)

    def wait_until(self, condition, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                self._reader.join(5)
                if condition():
                    return
                raise AssertionError(f"the query process exited ({self.process.returncode}) before {what}:\n"
                                     + self.output())
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n" + self.output())
            time.sleep(0.02)

    def wait_exit(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the query process did not end within {timeout} s:\n" + self.output()) from None
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL the query's whole process tree (driver Python, its JVM, the worker daemon and its
        Python workers, which pyspark puts in a process group of their own), by PID, and reap it."""
        if self.process.poll() is None:
            kill_tree(self.process.pid)
        self.process.wait(30)
        self._reader.join(10)


@dataclass
class Scene:
    """One test's world: an archive directory, its sidecar, the input recording, a sink."""

    tmp: Path
    sink_id: str
    stream_id: int
    sidecar: Sidecar | None = None
    recorded: Recorded | None = None
    queries: list[QueryProcess] | None = None
    staging_dir: str | None = None  # sink.stagingDir of the queries; None: the default, under the checkpoint
    layout_args: tuple[str, ...] = ()  # sink_query_process options of a layout (tests/cluster: another host)

    @property
    def archive_dir(self) -> Path:
        return self.tmp / "archive"

    @property
    def checkpoint(self) -> Path:
        return self.tmp / "checkpoint"

    def start_sidecar(self) -> Sidecar:
        self.sidecar = Sidecar(self.archive_dir).start()
        return self.sidecar

    def start_query(self, *extra: str) -> QueryProcess:
        staging = ("--staging-dir", self.staging_dir) if self.staging_dir else ()
        query = QueryProcess(self.archive_dir, self.checkpoint, self.recorded.recording_id, self.sink_id,
                             self.stream_id, *staging, *self.layout_args, *extra)
        self.queries.append(query)
        return query

    def stop_all_queries(self) -> None:
        for query in self.queries:
            query.kill()

    def stop_all(self) -> None:
        self.stop_all_queries()
        if self.sidecar is not None:
            self.sidecar.terminate()
            self.sidecar.kill()
            print("sidecar log tail (shown when the test fails):\n" + self.sidecar.log_tail(80))


@pytest.fixture()
def scene(tmp_path):
    world = Scene(tmp_path, sink_id="failures", stream_id=4300, queries=[])
    try:
        world.start_sidecar()
        archive = RecordingArchive(world.sidecar)  # closed before anything is killed (its client is on that driver)
        try:
            world.recorded, _ = archive.record(numbered_payloads(0, INPUT_MESSAGES, INPUT_SIZES), stop=True)
        finally:
            archive.close()
        yield world
    finally:
        world.stop_all()


# --- what the sink recording holds ----------------------------------------------------------------


@dataclass
class SinkRecording:
    """Everything recorded in the sink recording, in order (a raw replay, markers included; an active
    recording up to its recorded position)."""

    recording_id: int
    data: list[tuple[int, bytes]]  # (start position, payload) of every data message
    markers: list[tuple[int, CommitMarker]]  # (start position, marker)
    after_last_marker: int  # data messages recorded after the last marker (a dead commit's debris)
    active: bool  # still being recorded (a killed driver's commit, until autoStop)
    skipped_debris: int = 0  # data messages of a dead commit before a later batch (left in place, skipped)


def connect(sidecar: Sidecar) -> ArchiveClient:
    return ArchiveClient.connect(control_channel=sidecar.control_channel, aeron_dir=sidecar.driver_dir)


def sink_recording_id(client: ArchiveClient, sink_id: str, stream_id: int) -> int | None:
    found = [d for d in client.list_recordings_for_uri(0, None, f"alias=aeron-spark-sink:{sink_id}", stream_id)
             if sink_id_of_channel(d.original_channel) == sink_id]
    assert len(found) <= 1, f"more than one sink recording: {found}"
    return found[0].recording_id if found else None


def raw_sink_recording(scene: Scene) -> SinkRecording:
    client = connect(scene.sidecar)
    try:
        recording_id = sink_recording_id(client, scene.sink_id, scene.stream_id)
        assert recording_id is not None, "no sink recording"
        descriptor = client.list_recording(recording_id)
        # Active: a killed driver's commit, until autoStop (the dead client's publication is reclaimed).
        end = client.recording_position(recording_id) if descriptor.is_active else descriptor.stop_position
        data: list[tuple[int, bytes]] = []
        markers: list[tuple[int, CommitMarker]] = []
        after = 0
        length = end - descriptor.start_position
        if length:
            with client.replay(recording_id, descriptor.start_position, length, "aeron:ipc", 1101) as replay:
                for message in replay.messages(idle_timeout=30):
                    if len(message.payload) == MARKER_PAYLOAD_LENGTH and message.payload.startswith(MARKER_MAGIC):
                        markers.append((message.position, CommitMarker.decode(message.payload)))
                        after = 0
                    else:
                        data.append((message.position, message.payload))
                        after += 1
        data, skipped = without_debris(data, markers, descriptor.start_position)
        return SinkRecording(recording_id, data, markers, after, descriptor.is_active, skipped)
    finally:
        client.close()


def without_debris(data: list[tuple[int, bytes]], markers: list[tuple[int, CommitMarker]],
                   start_position: int) -> tuple[list[tuple[int, bytes]], int]:
    """The data messages minus a dead commit's debris before a later batch: the sink never truncates
    it (connector/sink/commit.py), each marker names where its batch's data begins (data_start), so
    what lies in [previous marker end, data_start) is debris. Returns (kept, number skipped)."""
    kept: list[tuple[int, bytes]] = []
    skipped, index, previous_end = 0, 0, start_position
    for marker_start, marker in markers:
        while index < len(data) and data[index][0] < marker_start:
            if previous_end <= data[index][0] < marker.data_start:
                skipped += 1
            else:
                kept.append(data[index])
            index += 1
        previous_end = marker_start + MARKER_FRAME_LENGTH
    return kept + data[index:], skipped


def visible_payloads(scene: Scene, recording_id: int) -> list[bytes]:
    """What a reader of the sink sees now (the source's own view: up to the last commit marker)."""
    source = SourceOptions.parse({"recordingIds": str(recording_id), "archive.dir": str(scene.archive_dir)},
                                 ReadMode.BATCH)
    access = open_archive(source.connection)
    try:
        latest, _ = OffsetReader(source, lambda: access).latest_positions([recording_id])
        end = latest[recording_id]
        batches = list(read_range(ReplayRange(recording_id, 0, end), source, access)) if end > 0 else []
    finally:
        access.close()
    return pa.Table.from_batches(batches).column("payload").to_pylist() if batches else []


def committed_rows(recording: SinkRecording) -> int:
    return sum(marker.row_count for _, marker in recording.markers)


def assert_committed_prefix(scene: Scene) -> SinkRecording:
    """Right after a failure: the recording holds whole batches 0..k-1 (and maybe debris); readers see
    exactly those batches' rows, which are the first rows of the input."""
    recording = raw_sink_recording(scene)
    payloads = [payload for _, payload in scene.recorded.messages]
    batch_ids = [marker.batch_id for _, marker in recording.markers]
    assert batch_ids == list(range(len(batch_ids)))
    rows = committed_rows(recording)
    assert [payload for _, payload in recording.data[:rows]] == payloads[:rows]
    assert visible_payloads(scene, recording.recording_id) == payloads[:rows]
    print(f"sink recording {recording.recording_id}: batches {batch_ids}, {rows} rows committed and visible, "
          f"{recording.after_last_marker} rows of debris after the last marker{' (active)' if recording.active else ''}")
    return recording


def expected_digest(recorded: Recorded) -> str:
    digest = hashlib.sha256()
    for position, payload in recorded.messages:
        digest.update(struct.pack("<qi", position, len(payload)))
        digest.update(payload)
    return digest.hexdigest()


def assert_exactly_once(scene: Scene, final: QueryProcess) -> SinkRecording:
    """Every input row exactly once, in order: raw recording, markers, and the source's read-back."""
    recording = raw_sink_recording(scene)
    payloads = [payload for _, payload in scene.recorded.messages]
    assert len(recording.data) == len(payloads), (len(recording.data), len(payloads))
    assert [payload for _, payload in recording.data] == payloads
    assert recording.after_last_marker == 0
    batch_ids = [marker.batch_id for _, marker in recording.markers]
    assert batch_ids == list(range(len(batch_ids))), batch_ids
    first_row = 0
    for _, marker in recording.markers:  # each marker counts the rows since the previous one
        assert marker.row_count > 0 and marker.data_start == recording.data[first_row][0]
        assert marker.payload_bytes == sum(len(p) for _, p in recording.data[first_row:first_row + marker.row_count])
        first_row += marker.row_count
    assert first_row == len(payloads)
    read_back = final.line_starting("SINK ROWS ")
    assert read_back == f"SINK ROWS count={len(payloads)} sha256={expected_digest(scene.recorded)}", read_back
    return recording


def run_to_the_end(scene: Scene) -> QueryProcess:
    final = scene.start_query("--read-back")
    code = final.wait_exit(RUN_TIMEOUT_S)
    assert code == 0 and final.line_starting("QUERY DONE") is not None, final.output()
    return final


def pause_file_of(scene: Scene) -> Path:
    return scene.tmp / "commit-paused"


def settled_recording_position(client: ArchiveClient, recording_id: int, beyond: int, timeout: float = 60) -> int:
    """The recorded position once it is past ``beyond`` and has stopped moving for a moment."""
    deadline = time.monotonic() + timeout
    last, steady_since = -1, time.monotonic()
    while True:
        position = client.recording_position(recording_id)
        if position != last:
            last, steady_since = position, time.monotonic()
        elif position > beyond and time.monotonic() - steady_since > 0.3:
            return position
        assert time.monotonic() < deadline, f"recording {recording_id} stayed at {position} (wanted > {beyond})"
        time.sleep(0.02)


# --- the test ------------------------------------------------------------------------------------


def last_committed_batch(recording: SinkRecording) -> int:
    return recording.markers[-1][1].batch_id


def test_every_row_exactly_once_across_driver_kills_a_paused_commit_and_a_sidecar_kill(scene):
    pause = pause_file_of(scene)

    # 1. SIGKILL the query's driver mid-stream (batch 1 done, the next one planned/staged/committing).
    run = scene.start_query()
    run.wait_until(lambda: 1 in run.finished_batches(), "batch 1 to finish", RUN_TIMEOUT_S)
    time.sleep(0.3)
    assert run.process.poll() is None, "the query ended before it could be killed:\n" + run.output()
    run.kill()
    after_kill = assert_committed_prefix(scene)
    assert len(after_kill.markers) >= 2 and committed_rows(after_kill) < INPUT_MESSAGES
    assert last_committed_batch(after_kill) <= 5, "the kill came too late to leave batches for stages 2-4"

    # 2. Restart from the checkpoint; SIGKILL it while the commit of a later batch is paused between the
    #    tasks' staging and its first append (fault hook before-append): that batch is staged, not committed.
    staged_batch = last_committed_batch(after_kill) + 2
    run = scene.start_query("--fault", f"before-append:{staged_batch}:{pause}")
    run.wait_until(pause.exists, f"the commit of batch {staged_batch} to pause before its append", PAUSE_TIMEOUT_S)
    assert min(run.finished_batches(), default=staged_batch) >= last_committed_batch(after_kill)  # resumed
    run.kill()
    pause.unlink()
    after_staged = assert_committed_prefix(scene)
    assert last_committed_batch(after_staged) == staged_batch - 1 and after_staged.after_last_marker == 0

    # 3. Restart (batch staged_batch is replayed); SIGKILL the SIDECAR while the next commit is paused
    #    with its rows appended and recorded but no marker (fault hook before-marker). The query fails.
    torn_batch = staged_batch + 1
    run = scene.start_query("--fault", f"before-marker:{torn_batch}:{pause}")
    run.wait_until(pause.exists, f"the commit of batch {torn_batch} to pause before its marker", PAUSE_TIMEOUT_S)
    committed_end = json.loads((scene.checkpoint / "aeron-sink-staging" / scene.sink_id / "_committed.json")
                               .read_text())["committed_end"]  # the committer's note of the last sealed batch
    client = connect(scene.sidecar)
    try:  # kill once the torn batch's rows are recorded, so the restarted archive has debris to recover
        recording_id = sink_recording_id(client, scene.sink_id, scene.stream_id)
        recorded_before_kill = settled_recording_position(client, recording_id, beyond=committed_end)
    finally:
        client.close()  # no client may outlive the media driver it is attached to
    scene.sidecar.kill()  # its embedded media driver dies with it
    pause.unlink()  # the commit goes on and cannot finish: the query fails
    code = run.wait_exit(RUN_TIMEOUT_S)
    assert code != 0 and run.line_starting("QUERY DONE") is None, run.output()
    print("the query after the sidecar's SIGKILL:", run.line_starting("QUERY FAILED") or f"exit code {code}")
    assert staged_batch in run.finished_batches()  # the batch staged in stage 2 was replayed and committed

    scene.start_sidecar()  # the same archive directory: crash recovery stops the sink recording
    after_sidecar_kill = assert_committed_prefix(scene)
    assert last_committed_batch(after_sidecar_kill) == staged_batch
    assert after_sidecar_kill.markers[-1][0] + 96 == committed_end < recorded_before_kill
    assert after_sidecar_kill.after_last_marker > 0  # the torn batch's rows are in the recording, unseen

    # 4. Restart the query on the new sidecar and let it finish: every input row exactly once, in order.
    final = run_to_the_end(scene)
    assert torn_batch in final.finished_batches()
    assert assert_exactly_once(scene, final).skipped_debris > 0  # the torn batch's rows, left in place


@pytest.fixture()
def s3():
    with running_s3_server() as server:
        yield server


def test_staging_on_s3_every_row_exactly_once_across_a_driver_kill_mid_commit(scene, s3):
    """The same query staging in S3 (a real S3 HTTP server on localhost, ``sink.stagingDir=s3://...``):
    SIGKILLed while a commit is paused with its rows appended but no marker, then restarted to the end.
    The executors wrote the batch's files to S3 and the driver read them from there; the restarted
    query replays the batch (new attempt files), the commit appends after the dead one's debris (left in
    place, skipped by readers), and the
    staging prefix holds nothing but the hint at the end."""
    exactly_once_through_a_kill_mid_commit(scene, s3)


def exactly_once_through_a_kill_mid_commit(scene: Scene, s3) -> None:
    """The S3 test's body, shared with tests/cluster (the same query on another host's media driver)."""
    prefix = "failures-staging"
    scene.staging_dir = s3.staging_uri(prefix)
    sink_prefix = f"{prefix}/{scene.sink_id}"
    pause = pause_file_of(scene)
    torn_batch = 2
    run = scene.start_query("--fault", f"before-marker:{torn_batch}:{pause}")
    run.wait_until(pause.exists, f"the commit of batch {torn_batch} to pause before its marker", PAUSE_TIMEOUT_S)
    staged = [key.rsplit("/", 1)[1] for key in s3.keys(sink_prefix)]
    assert any(name.startswith(f"b{torn_batch:019d}-") and name.endswith(".arrow") for name in staged), staged
    assert not (scene.checkpoint / "aeron-sink-staging").exists()  # nothing staged locally
    with s3.filesystem().open_input_stream(f"{s3.bucket}/{sink_prefix}/_committed.json") as hint:
        committed_end = json.loads(hint.read())["committed_end"]
    client = connect(scene.sidecar)
    try:  # kill once the batch's rows are recorded: the dead commit leaves debris after the last marker
        recording_id = sink_recording_id(client, scene.sink_id, scene.stream_id)
        settled_recording_position(client, recording_id, beyond=committed_end)
    finally:
        client.close()
    run.kill()
    pause.unlink()
    after_kill = assert_committed_prefix(scene)
    assert last_committed_batch(after_kill) == torn_batch - 1 and after_kill.after_last_marker > 0

    final = run_to_the_end(scene)
    assert torn_batch in final.finished_batches()
    assert assert_exactly_once(scene, final).skipped_debris > 0  # the dead commit's rows, left in place
    assert s3.keys(sink_prefix) == [f"{sink_prefix}/_committed.json"]
