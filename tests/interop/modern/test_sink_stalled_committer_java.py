"""The sink's stalled-committer race against the real Java Aeron Archive (1.51): the same scene as
tests/integration/connector/test_sink_stalled_committer.py. Committer A (its own process) re-reads the sink
recording, which holds a dead commit's debris, and pauses at fault point ``before-claim`` (where the
old protocol truncated the debris, and Java's TruncateRecording would have accepted it); committer B
commits the batch after the debris; A resumes and its ExtendRecording is refused by the Java archive
(the stop position moved): A fails with SinkConflict, B's batch is whole and readable, the debris
never read, and A's retry is skipped as already committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
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
from tests.integration.connector.test_sink_stalled_committer import EXIT_TIMEOUT_S, PAUSE_TIMEOUT_S, REPO, leave_debris
from tests.interop.peer.modern_peer import RunningModernJavaArchive
from tests.support.ports import udp_channel

pytestmark = pytest.mark.timeout(240)


def visible_rows(control_channel: str, recording_id: int) -> list[bytes]:
    source = SourceOptions.parse({"recordingIds": str(recording_id), "archive.controlChannel": control_channel},
                                 ReadMode.BATCH)
    access = open_archive(source.connection)
    try:
        end = OffsetReader(source, lambda: access).latest_positions([recording_id])[0][recording_id]
        batches = list(read_range(ReplayRange(recording_id, 0, end), source, access)) if end else []
    finally:
        access.close()
    return pa.Table.from_batches(batches).column("payload").to_pylist() if batches else []


def test_a_committer_stalled_before_its_claim_cannot_cut_a_batch_in_the_java_archive(
        modern_java_archive: RunningModernJavaArchive, tmp_path: Path, monkeypatch) -> None:
    java = modern_java_archive
    channel = udp_channel()
    staging_dir, pause = tmp_path / "staging", tmp_path / "a-paused"
    opts = sink_options(None, str(staging_dir), control_channel=java.control_channel, channel=channel)
    first = commit_staged(opts, [stage(opts, 0, rows(300, "zero"), attempt=0)], 0)
    assert first.outcome is CommitOutcome.COMMITTED
    rid = first.recording_id
    leave_debris(opts, monkeypatch, 1)
    debris = java.client.positions(rid)
    deadline = time.monotonic() + 30
    while debris.active and time.monotonic() < deadline:  # abandon stops it; the stop may lag a moment
        time.sleep(0.05)
        debris = java.client.positions(rid)
    assert not debris.active and debris.stop_position > first.end  # the dead commit's frames, stopped
    assert visible_rows(java.control_channel, rid) == rows(300, "zero")

    env = dict(os.environ, **{ENV_VAR: f"before-claim:1:{pause}"})
    committer_a = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.connector.stalled_sink_committer", "--control-channel", java.control_channel,
         "--channel", channel, "--staging-dir", str(staging_dir), "--batch", "1", "--rows", "700", "--tag", "A",
         "--attempt", "1"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + PAUSE_TIMEOUT_S
        while not pause.exists():
            assert committer_a.poll() is None, committer_a.communicate()[0]
            assert time.monotonic() < deadline, "committer A never reached before-claim"
            time.sleep(0.05)

        b = commit_staged(opts, [stage(opts, 1, rows(400, "B"), attempt=2)], 1)
        assert b.outcome is CommitOutcome.COMMITTED and b.data_start == debris.stop_position
        pause.unlink()  # A wakes where it would have truncated to batch 0's end
        output, _ = committer_a.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if committer_a.poll() is None:
            os.kill(committer_a.pid, signal.SIGKILL)
            committer_a.wait(10)
    assert committer_a.returncode == 3, output
    failure = next(line for line in output.splitlines() if line.startswith("FAILED "))
    assert failure.startswith("FAILED SinkConflict:") and "refused to extend recording" in failure, output

    assert java.client.positions(rid).stop_position == b.end  # A appended nothing, cut nothing
    assert visible_rows(java.control_channel, rid) == rows(300, "zero") + rows(400, "B")
    retried = commit_staged(opts, [stage(opts, 1, rows(700, "A"), attempt=3)], 1)
    assert retried.outcome is CommitOutcome.ALREADY_COMMITTED
    sink_archive.forget_shared_sink_archive(opts)
