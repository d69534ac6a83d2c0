"""A commit skips the full recovery when the sink recording is exactly where this process's last
commit left it, and recovers fully whenever anything else touched it."""

from __future__ import annotations

import pytest

from aeron_spark.connector.sink.commit import CommitOutcome
from tests.support.fake_sink_archive import FakeSinkArchive, InjectedCrash
from tests.unit.connector.sink.test_commit import batch, commit, only_recording, options, rows_of, stage


def remembering_archive() -> FakeSinkArchive:
    archive = FakeSinkArchive()
    archive.committed_states = {}  # what ClientSinkArchive keeps per connection
    return archive


def test_the_next_commit_reads_one_descriptor_instead_of_recovering(tmp_path):
    opts, archive = options(tmp_path), remembering_archive()
    commit(opts, archive, [stage(opts, 0, 0, batch(10, "a"))], 0)
    calls_before = dict(archive.calls)
    result = commit(opts, archive, [stage(opts, 1, 0, batch(10, "b"))], 1)
    assert result.outcome is CommitOutcome.COMMITTED
    assert archive.calls.get("find", 0) == calls_before.get("find", 0)  # no listing
    assert archive.calls.get("read", 0) == calls_before.get("read", 0)  # no tail replay
    assert rows_of(archive, only_recording(archive)) == batch(10, "a") + batch(10, "b")
    replayed = commit(opts, archive, [stage(opts, 1, 0, batch(10, "b"))], 1)
    assert replayed.outcome is CommitOutcome.ALREADY_COMMITTED


def test_a_commit_by_another_process_in_between_is_recovered_not_overwritten(tmp_path):
    opts, archive = options(tmp_path), remembering_archive()
    commit(opts, archive, [stage(opts, 0, 0, batch(10, "a"))], 0)
    other = FakeSinkArchive(recordings=archive.recordings, next_recording_id=archive.next_recording_id)
    commit(opts, other, [stage(opts, 1, 0, batch(10, "b"))], 1)  # e.g. a restarted driver elsewhere
    assert commit(opts, archive, [stage(opts, 1, 0, batch(10, "b"))], 1).outcome is CommitOutcome.ALREADY_COMMITTED
    assert commit(opts, archive, [stage(opts, 2, 0, batch(10, "c"))], 2).outcome is CommitOutcome.COMMITTED
    assert rows_of(archive, only_recording(archive)) == batch(10, "a") + batch(10, "b") + batch(10, "c")


def test_debris_of_a_failed_commit_is_skipped_by_the_next(tmp_path):
    opts, archive = options(tmp_path), remembering_archive()
    commit(opts, archive, [stage(opts, 0, 0, batch(10, "a"))], 0)
    archive.crash_after_appends = 0
    with pytest.raises(InjectedCrash):
        commit(opts, archive, [stage(opts, 1, 0, batch(500, "b", size=200))], 1)
    archive.crash_after_appends = None
    rid = only_recording(archive)
    archive.recordings[rid].active = False  # autoStop after the dead commit's publication went
    assert commit(opts, archive, [stage(opts, 1, 0, batch(5, "b"), attempt=1)], 1).outcome is CommitOutcome.COMMITTED
    assert rows_of(archive, rid) == batch(10, "a") + batch(5, "b")
