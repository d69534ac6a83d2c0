"""The sink committer against a real `aeron-archive serve` sidecar (no Spark session): a commit that
dies between its data and its marker is invisible to readers and truncated back by the next commit,
also when the dead commit's recording was left active; and the sidecar killed with SIGKILL before or
after a commit's marker was recorded recovers (archive crash recovery + the sink's truncate-back or
skip) to every row exactly once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest


from aeron_spark.connector.sink import archive_access as sink_archive
from aeron_spark.connector.archive_connection import ArchiveUnavailable
from aeron_spark.connector.source.archive_access import open_archive
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range
from aeron_spark.connector.sink.commit import CommitOutcome, commit_staged
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import streaming_batch_key
from aeron_spark.connector.sink.writer import TaskInfo, stage_task_output

from tests.support.ports import free_udp_port
from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


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
def test_a_commit_dying_before_its_marker_is_invisible_and_cut_back(archive_dir, monkeypatch, recording_left_active):
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
    assert again.outcome is CommitOutcome.COMMITTED and again.data_start == first.end
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


def test_a_udp_sink_channel_recorded_remotely_round_trips(archive_dir):
    opts = SinkOptions.parse({"channel": f"aeron:udp?endpoint=localhost:{free_udp_port()}", "streamId": "4101",
                              "archive.dir": str(archive_dir), "sink.termLength": "64k",
                              "sink.commitTimeoutMs": "8000"}, streaming=True)
    assert not opts.source_location_local and opts.mtu == 1408
    first = commit_staged(opts, [stage(opts, 0, rows(2000, "u"))], 0)
    second = commit_staged(opts, [stage(opts, 1, rows(10, "v"))], 1)
    assert second.recording_id == first.recording_id
    assert visible_rows(archive_dir, first.recording_id) == rows(2000, "u") + rows(10, "v")
