"""The sink committer against a real `aeron-archive serve` sidecar (no Spark session): a commit that
dies between its data and its marker is invisible to readers and skipped by the next commit (which
appends after it; debris is never truncated), also when the dead commit's recording was left active;
and the sidecar killed with SIGKILL before or after a commit's marker was recorded recovers (archive
crash recovery + the sink's debris skip) to every row exactly once. And one writer per sink without a lock: two committers racing
to start the sink recording, or to extend it, leave one recording and one batch (the archive refuses
the second extension; the lower recording id wins the start), the loser failing with SinkConflict."""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path

import pyarrow as pa
import pytest


from aeron_spark.archive.client import ArchiveClient
from aeron_spark.connector.sink import archive_access as sink_archive
from aeron_spark.connector.archive_connection import ArchiveUnavailable
from aeron_spark.connector.source.archive_access import open_archive
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range
from aeron_spark.connector.sink.commit import CommitOutcome
from aeron_spark.connector.sink.commit_job import commit_staged
from aeron_spark.connector.sink.sink_archive import SinkConflict
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import streaming_batch_key
from aeron_spark.connector.sink.writer import TaskInfo, stage_task_output

from tests.support.ports import free_udp_port
from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = pytest.mark.timeout(120)


class Crash(RuntimeError):
    pass


@pytest.fixture()
def archive_dir(tmp_path):
    directory = tmp_path / "archive"
    with running_sidecar(directory):
        yield directory


def options(archive_dir: Path) -> SinkOptions:
    return SinkOptions.parse({"channel": "aeron:ipc", "streamId": "4100", "archive.dir": str(archive_dir),
                              "sink.termLength": "64k", "sink.mtu": "1408", "sink.commitTimeoutMs": "4000",
                              "archive.timeoutMs": "3000"},
                             streaming=True)


def rows(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}-".encode().ljust(100, b".") for i in range(n)]


def stage(opts, batch_id: int, payloads: list[bytes], attempt: int = 0):
    table = pa.table({"payload": pa.array(payloads, pa.binary())})
    return stage_task_output(opts, iter(table.to_batches()), TaskInfo(0, attempt, attempt, batch_id, "q-crash"),
                             streaming_batch_key(batch_id))


def visible_rows(archive_dir: Path, recording_id: int) -> list[bytes]:
    source = SourceOptions.parse({"recordingIds": str(recording_id), "archive.dir": str(archive_dir)}, ReadMode.BATCH)
    access = open_archive(source.connection)
    try:
        end = OffsetReader(source, lambda: access).latest_positions([recording_id])[0][recording_id]
        if end == 0:
            return []
        batches = list(read_range(ReplayRange(recording_id, 0, end), source, access))
    finally:
        access.close()
    return pa.Table.from_batches(batches).column("payload").to_pylist() if batches else []


@pytest.mark.parametrize("recording_left_active", [False, True])
def test_a_commit_dying_before_its_marker_is_invisible_and_skipped(archive_dir, monkeypatch, recording_left_active):
    opts = options(archive_dir)
    first = commit_staged(opts, [stage(opts, 0, rows(300, "a"))], 0)
    assert first.outcome is CommitOutcome.COMMITTED
    rid = first.recording_id

    real_append = sink_archive.ClientAppender.append
    calls = {"n": 0}

    def dying_append(self, block):
        calls["n"] += 1
        if calls["n"] > 4:
            raise Crash("driver died mid-commit")
        real_append(self, block)

    monkeypatch.setattr(sink_archive.ClientAppender, "append", dying_append)
    if recording_left_active:  # no clean-up at all: the recording stays active, as after kill -9
        monkeypatch.setattr(sink_archive.ClientAppender, "abandon", lambda self: None)
    with pytest.raises(Crash):
        commit_staged(opts, [stage(opts, 1, rows(5000, "b"))], 1)
    monkeypatch.undo()

    assert visible_rows(archive_dir, rid) == rows(300, "a")  # the debris is never read
    again = commit_staged(opts, [stage(opts, 1, rows(5000, "b"), attempt=1)], 1)
    assert again.outcome is CommitOutcome.COMMITTED and again.data_start >= first.end  # after the debris
    assert visible_rows(archive_dir, rid) == rows(300, "a") + rows(5000, "b")
    replayed = commit_staged(opts, [stage(opts, 1, rows(5000, "b"), attempt=2)], 1)
    assert replayed.outcome is CommitOutcome.ALREADY_COMMITTED
    assert visible_rows(archive_dir, rid) == rows(300, "a") + rows(5000, "b")


@pytest.mark.parametrize("kill_point", ["before the marker", "after the marker"])
def test_the_archive_killed_mid_commit_recovers_to_exactly_once(tmp_path, monkeypatch, kill_point):
    directory = tmp_path / "archive"
    sidecar = Sidecar(directory).start()
    try:
        opts = options(directory)
        first = commit_staged(opts, [stage(opts, 0, rows(300, "a"))], 0)
        rid = first.recording_id
        calls = {"n": 0}
        real_append = sink_archive.ClientAppender.append
        real_stop = sink_archive.ClientAppender._stop_subscription

        def append_then_kill(self, block):
            real_append(self, block)
            calls["n"] += 1
            if calls["n"] == 4:
                sidecar.kill()  # SIGKILL mid-batch
                raise Crash("archive killed")

        def kill_before_stop(self):
            if self._subscription_id is not None:  # the marker is recorded (seal waited for it)
                sidecar.kill()
                raise Crash("archive killed after the marker was recorded")
            real_stop(self)

        if kill_point == "before the marker":
            monkeypatch.setattr(sink_archive.ClientAppender, "append", append_then_kill)
        else:
            monkeypatch.setattr(sink_archive.ClientAppender, "_stop_subscription", kill_before_stop)
        # The commit fails: Crash, or - when its retry on a fresh connection finds no archive -
        # ArchiveUnavailable.
        with pytest.raises((Crash, ArchiveUnavailable)):
            commit_staged(opts, [stage(opts, 1, rows(5000, "b"))], 1)
        monkeypatch.undo()

        sidecar = Sidecar(directory).start()  # recovery stops the recording at its last whole frame
        expected_before = rows(300, "a") + (rows(5000, "b") if kill_point == "after the marker" else [])
        assert visible_rows(directory, rid) == expected_before
        again = commit_staged(opts, [stage(opts, 1, rows(5000, "b"), attempt=1)], 1)
        assert again.outcome is (CommitOutcome.ALREADY_COMMITTED if kill_point == "after the marker"
                                 else CommitOutcome.COMMITTED)
        assert visible_rows(directory, rid) == rows(300, "a") + rows(5000, "b")
    finally:
        sidecar.terminate()
        sidecar.kill()


@pytest.mark.parametrize("sink_mtu, expected_mtu", [("1408", 1408), ("auto", 8192)])
def test_a_udp_sink_channel_recorded_remotely_round_trips(archive_dir, sink_mtu, expected_mtu):
    opts = SinkOptions.parse({"channel": f"aeron:udp?endpoint=localhost:{free_udp_port()}", "streamId": "4101",
                              "archive.dir": str(archive_dir), "sink.termLength": "64k",
                              "sink.commitTimeoutMs": "8000", "sink.mtu": sink_mtu}, streaming=True)
    assert not opts.source_location_local and opts.mtu == expected_mtu
    first = commit_staged(opts, [stage(opts, 0, rows(2000, "u"))], 0)
    second = commit_staged(opts, [stage(opts, 1, rows(10, "v"))], 1)
    assert second.recording_id == first.recording_id
    assert visible_rows(archive_dir, first.recording_id) == rows(2000, "u") + rows(10, "v")
    with contextlib.closing(ArchiveClient.from_mark_file(archive_dir)) as client:
        descriptor = client.list_recording(first.recording_id)
    assert descriptor is not None and descriptor.mtu_length == expected_mtu  # the extension kept the recording's
    # sink.receiveWindow=auto on loopback: the archive's recording subscription got a window (half the 64k term)
    assert "|rcv-wnd=32768|so-rcvbuf=32768" in descriptor.original_channel


# --- one writer per sink, enforced by the archive (no lock) -----------------------------------------


def race_two_commits(opts, monkeypatch, batch_id: int, tags: tuple[str, str], *,
                     staggered: bool = False) -> dict[str, object]:
    """Two committers (own archive connections, as two drivers would have) commit ``batch_id`` of one
    sink at once: both recover before either starts its appender, and both start before either goes
    on (``staggered``: the second starts once the first has started). Returns each one's CommitResult
    or exception."""
    both_recovered, both_started = threading.Barrier(2, timeout=60), threading.Barrier(2, timeout=60)
    first_started = threading.Event()
    real_start = sink_archive.ClientSinkArchive.start_appender

    def racing_start(self, recording, sink_id):
        both_recovered.wait()
        first = threading.current_thread().name == tags[0]
        if staggered and not first:
            first_started.wait(60)
        try:
            return real_start(self, recording, sink_id)
        finally:
            if first:
                first_started.set()
            both_started.wait()

    monkeypatch.setattr(sink_archive.ClientSinkArchive, "start_appender", racing_start)
    messages = {tag: stage(opts, batch_id, rows(400, tag), attempt=attempt) for attempt, tag in enumerate(tags)}
    outcomes: dict[str, object] = {}

    def run(tag: str) -> None:
        try:
            outcomes[tag] = commit_staged(opts, [messages[tag]], batch_id, open_archive=sink_archive.open_sink_archive)
        except Exception as error:  # noqa: BLE001 - checked by the caller
            outcomes[tag] = error

    threads = [threading.Thread(target=run, args=(tag,), name=tag) for tag in tags]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    monkeypatch.undo()
    return outcomes


def winner_and_loser(outcomes: dict[str, object]) -> tuple[str, str]:
    won = [tag for tag, o in outcomes.items() if getattr(o, "outcome", None) is CommitOutcome.COMMITTED]
    lost = [tag for tag, o in outcomes.items() if isinstance(o, SinkConflict)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    return won[0], lost[0]


def sink_recordings(archive_dir: Path) -> list:
    client = ArchiveClient.from_mark_file(archive_dir)
    try:
        return client.list_recordings_for_uri(0, None, "alias=aeron-spark-sink:q-crash", 4100)
    finally:
        client.close()


def test_two_committers_starting_the_sink_recording_at_once_leave_one_recording(archive_dir, monkeypatch):
    opts = options(archive_dir)
    outcomes = race_two_commits(opts, monkeypatch, 0, ("A", "B"))
    won, lost = winner_and_loser(outcomes)
    assert "another committer started the sink recording at the same time" in str(outcomes[lost])
    recordings = sink_recordings(archive_dir)  # the loser's recording (the higher id) was purged
    assert [d.recording_id for d in recordings] == [outcomes[won].recording_id]
    assert visible_rows(archive_dir, outcomes[won].recording_id) == rows(400, won)
    retried = commit_staged(opts, [stage(opts, 0, rows(400, lost), attempt=5)], 0)  # Spark retries the batch
    assert retried.outcome is CommitOutcome.ALREADY_COMMITTED
    assert visible_rows(archive_dir, outcomes[won].recording_id) == rows(400, won)


@pytest.mark.parametrize("staggered, refusal", [
    # Both requests accepted, the second Image refused (INVALID_EXTENSION) - or, when one Image was
    # quicker than the other request, that request refused (ACTIVE_RECORDING).
    (False, "already being extended|cannot extend active recording"),
    (True, "cannot extend active recording"),  # the second request comes while the first extension is recorded
])
def test_two_committers_extending_the_sink_recording_at_once_append_one_batch(archive_dir, monkeypatch, staggered,
                                                                             refusal):
    opts = options(archive_dir)
    first = commit_staged(opts, [stage(opts, 0, rows(300, "zero"))], 0)
    outcomes = race_two_commits(opts, monkeypatch, 1, ("C", "D"), staggered=staggered)
    won, lost = winner_and_loser(outcomes)  # the archive refused the loser's ExtendRecording
    assert "refused to extend recording" in str(outcomes[lost]) and re.search(refusal, str(outcomes[lost]))
    assert [d.recording_id for d in sink_recordings(archive_dir)] == [first.recording_id]
    assert visible_rows(archive_dir, first.recording_id) == rows(300, "zero") + rows(400, won)
    retried = commit_staged(opts, [stage(opts, 1, rows(400, lost), attempt=5)], 1)
    assert retried.outcome is CommitOutcome.ALREADY_COMMITTED
    assert visible_rows(archive_dir, first.recording_id) == rows(300, "zero") + rows(400, won)


def test_a_commit_reports_how_long_back_pressure_held_its_appends(archive_dir, monkeypatch, tmp_path):
    # 64k terms: 16 KiB pieces against a 32 KiB publication window, so 5,000 rows of 100 B meet
    # back pressure whenever the recorder lags; the figures are reported whether or not it did.
    import json

    from aeron_spark.connector.step_timings import TIMINGS_FILE_VARIABLE

    timings_file = tmp_path / "timings.jsonl"
    monkeypatch.setenv(TIMINGS_FILE_VARIABLE, str(timings_file))
    opts = options(archive_dir)
    result = commit_staged(opts, [stage(opts, 0, rows(5000, "p"))], 0)
    assert result.outcome is CommitOutcome.COMMITTED
    commits = [line for line in map(json.loads, timings_file.read_text().splitlines()) if line["what"] == "sink.commit"]
    assert len(commits) == 1
    steps = commits[0]["ms"]
    assert 0.0 <= steps["append rows: back pressured"] <= steps["append rows"]
    assert steps["append rows: offers refused"] >= 0 and steps["append rows: offers refused"] == int(
        steps["append rows: offers refused"])
    assert visible_rows(archive_dir, result.recording_id) == rows(5000, "p")
