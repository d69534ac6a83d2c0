"""The sink's stalled-committer race against a real `aeron-archive serve` sidecar.

Committer A (its own process, as another driver of the query would be) recovers a sink recording
that holds a dead commit's debris, re-reads it, and is stopped exactly there by fault point
``before-claim`` (connector/sink/fault_injection.py) - where the old protocol truncated the debris
back to the last marker. Meanwhile committer B (this process: a restarted query's driver) recovers
the same state, claims the recording by extending it after the debris, appends its batch and seals
it. A then resumes: its claim at the stop position it re-read is refused by the archive (the stop
moved), so A fails with SinkConflict and appends nothing; B's batch is intact and readable, the
debris is never read, and A's retry finds the batch committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from aeron_spark.archive.client import ArchiveClient
from aeron_spark.connector.sink import archive_access as sink_archive
from aeron_spark.connector.sink.commit import CommitOutcome
from aeron_spark.connector.sink.commit_job import commit_staged
from aeron_spark.connector.sink.fault_injection import ENV_VAR
from aeron_spark.connector.source.archive_access import open_archive
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range

from tests.integration.connector.stalled_sink_committer import rows, sink_options, stage
from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[3]
PAUSE_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 60.0


class Crash(RuntimeError):
    pass


def visible_rows(archive_dir: Path, recording_id: int) -> list[bytes]:
    source = SourceOptions.parse({"recordingIds": str(recording_id), "archive.dir": str(archive_dir)}, ReadMode.BATCH)
    access = open_archive(source.connection)
    try:
        end = OffsetReader(source, lambda: access).latest_positions([recording_id])[0][recording_id]
        batches = list(read_range(ReplayRange(recording_id, 0, end), source, access)) if end else []
    finally:
        access.close()
    return pa.Table.from_batches(batches).column("payload").to_pylist() if batches else []


def stop_position(archive_dir: Path, recording_id: int) -> int:
    client = ArchiveClient.from_mark_file(archive_dir)
    try:
        descriptor = client.list_recording(recording_id)
        assert descriptor is not None and not descriptor.is_active
        return descriptor.stop_position
    finally:
        client.close()


def leave_debris(opts, monkeypatch, batch_id: int) -> None:
    """A commit of ``batch_id`` that dies after a few appends; its recording is stopped (debris)."""
    real_append = sink_archive.ClientAppender.append
    calls = {"n": 0}

    def dying_append(self, block):
        calls["n"] += 1
        if calls["n"] > 4:
            raise Crash("driver died mid-commit")
        real_append(self, block)

    monkeypatch.setattr(sink_archive.ClientAppender, "append", dying_append)
    sink_archive.forget_shared_sink_archive(opts)  # a fresh connection: no immediate re-run
    with pytest.raises(Crash):
        commit_staged(opts, [stage(opts, batch_id, rows(5000, "dead"), attempt=0)], batch_id)
    monkeypatch.undo()
    sink_archive.forget_shared_sink_archive(opts)


def test_a_committer_stalled_between_its_reread_and_its_claim_cannot_cut_the_batch_committed_meanwhile(
        tmp_path, monkeypatch):
    archive_dir, staging_dir = tmp_path / "archive", tmp_path / "staging"
    pause = tmp_path / "a-paused"
    with running_sidecar(archive_dir):
        opts = sink_options(str(archive_dir), str(staging_dir))
        first = commit_staged(opts, [stage(opts, 0, rows(300, "zero"), attempt=0)], 0)
        assert first.outcome is CommitOutcome.COMMITTED
        rid = first.recording_id
        leave_debris(opts, monkeypatch, 1)
        debris_end = stop_position(archive_dir, rid)
        assert debris_end > first.end  # the dead commit's frames after batch 0's marker
        assert visible_rows(archive_dir, rid) == rows(300, "zero")

        env = dict(os.environ, **{ENV_VAR: f"before-claim:1:{pause}"})
        committer_a = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.connector.stalled_sink_committer", "--archive-dir", str(archive_dir),
             "--staging-dir", str(staging_dir), "--batch", "1", "--rows", "700", "--tag", "A", "--attempt", "1"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + PAUSE_TIMEOUT_S
            while not pause.exists():
                assert committer_a.poll() is None, committer_a.communicate()[0]
                assert time.monotonic() < deadline, "committer A never reached before-claim"
                time.sleep(0.05)
            assert int(pause.read_text()) == committer_a.pid  # A re-read the recording and stopped there

            b = commit_staged(opts, [stage(opts, 1, rows(400, "B"), attempt=2)], 1)
            assert b.outcome is CommitOutcome.COMMITTED and b.data_start == debris_end  # claimed after the debris
            assert visible_rows(archive_dir, rid) == rows(300, "zero") + rows(400, "B")

            pause.unlink()  # A wakes up where it would have truncated the debris to batch 0's end
            output, _ = committer_a.communicate(timeout=EXIT_TIMEOUT_S)
        finally:
            if committer_a.poll() is None:
                os.kill(committer_a.pid, signal.SIGKILL)
                committer_a.wait(10)
        assert committer_a.returncode == 3, output
        failure = next(line for line in output.splitlines() if line.startswith("FAILED "))
        assert failure.startswith("FAILED SinkConflict:") and "refused to extend recording" in failure, output

        assert stop_position(archive_dir, rid) == b.end  # A appended nothing, cut nothing
        assert visible_rows(archive_dir, rid) == rows(300, "zero") + rows(400, "B")
        retried = commit_staged(opts, [stage(opts, 1, rows(700, "A"), attempt=3)], 1)  # Spark retries A's batch
        assert retried.outcome is CommitOutcome.ALREADY_COMMITTED
        following = commit_staged(opts, [stage(opts, 2, rows(50, "two"), attempt=0)], 2)
        assert following.outcome is CommitOutcome.COMMITTED and following.data_start == b.end
        assert visible_rows(archive_dir, rid) == rows(300, "zero") + rows(400, "B") + rows(50, "two")
        sink_archive.forget_shared_sink_archive(opts)
