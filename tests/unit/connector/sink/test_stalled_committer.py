"""The sink's stalled-committer race, on the fake archive: committer A re-reads the sink recording
(debris after its last marker) and stalls exactly at fault point ``before-claim`` - where the old
protocol truncated the debris back to the last marker - while committer B recovers, claims, appends
and seals a batch. A truncate by A on waking would cut B's committed batch; nothing truncates now,
and A's claim (ExtendRecording at the stop position it re-read) is refused: A fails with
SinkConflict having changed nothing, B's batch stays whole and readable, and A's retry finds it."""

from __future__ import annotations

import pytest
from aeron_spark.connector.sink import commit as commit_module
from aeron_spark.connector.sink.commit import CommitOutcome
from aeron_spark.connector.sink.sink_archive import SinkConflict

from tests.support.fake_sink_archive import FakeSinkArchive, InjectedCrash
from tests.unit.connector.sink.test_commit import batch, commit, only_recording, options, rows_of, stage


def stall_once_at(monkeypatch, point: str, batch_id: int, while_stalled) -> list[str]:
    """Replaces the commit's fault hook: the first commit reaching ``point`` for ``batch_id`` runs
    ``while_stalled`` there (another committer's whole commit) before going on. Returns the points
    reached, in order."""
    reached: list[str] = []
    stalled = {"done": False}

    def hook(name: str, batch: int | None) -> None:
        reached.append(name)
        if name == point and batch == batch_id and not stalled["done"]:
            stalled["done"] = True
            while_stalled()

    monkeypatch.setattr(commit_module, "fault_point", hook)
    return reached


def with_debris(tmp_path) -> tuple:
    """Batch 0 committed, then a commit of batch 1 that died mid-data: the recording stopped with
    debris after batch 0's marker."""
    opts, archive = options(tmp_path), FakeSinkArchive()
    first = commit(opts, archive, [stage(opts, 0, 0, batch(40, "zero"))], 0)
    archive.crash_after_appends = 2
    with pytest.raises(InjectedCrash):
        commit(opts, archive, [stage(opts, 1, 0, batch(2000, "dead", size=60))], 1)
    archive.crash_after_appends = None
    rid = only_recording(archive)
    archive.stop_active(rid)  # autoStop: the dead commit's publication is gone
    assert archive.recordings[rid].position > first.end  # debris after the last marker
    return opts, archive, rid, first


def test_a_committer_stalled_before_its_claim_cannot_cut_the_batch_committed_meanwhile(tmp_path, monkeypatch):
    opts, archive, rid, first = with_debris(tmp_path)
    debris_end = archive.recordings[rid].position
    committed: dict = {}

    def committer_b() -> None:  # a restarted query's driver: same batch id, its own task attempt
        committed["B"] = commit(opts, archive, [stage(opts, 1, 0, batch(30, "B"), attempt=1)], 1)

    reached = stall_once_at(monkeypatch, "before-claim", 1, committer_b)
    with pytest.raises(SinkConflict, match=r"INVALID_EXTENSION"):  # the archive refused A's claim
        commit(opts, archive, [stage(opts, 1, 0, batch(50, "A"), attempt=2)], 1)
    assert reached[:2] == ["before-append", "before-claim"]  # A stalled exactly there, then B ran
    b = committed["B"]
    assert b.outcome is CommitOutcome.COMMITTED and b.data_start == debris_end  # B claimed after the debris
    assert archive.calls.get("truncate", 0) == 0
    recording = archive.recordings[rid]
    assert not recording.active and recording.position == b.end  # A appended nothing
    assert rows_of(archive, rid) == batch(40, "zero") + batch(30, "B")  # B whole, the debris skipped

    monkeypatch.undo()  # Spark retries A's batch: already committed (B's); the next batch follows B's
    retried = commit(opts, archive, [stage(opts, 1, 0, batch(50, "A"), attempt=3)], 1)
    assert retried.outcome is CommitOutcome.ALREADY_COMMITTED and retried.end == b.end
    assert commit(opts, archive, [stage(opts, 2, 0, batch(5, "two"))], 2).outcome is CommitOutcome.COMMITTED
    assert rows_of(archive, rid) == batch(40, "zero") + batch(30, "B") + batch(5, "two")


def test_a_committer_stalled_before_its_claim_on_a_clean_recording_fails_the_same_way(tmp_path, monkeypatch):
    opts, archive = options(tmp_path), FakeSinkArchive()
    commit(opts, archive, [stage(opts, 0, 0, batch(10, "zero"))], 0)
    rid = only_recording(archive)
    stall_once_at(monkeypatch, "before-claim", 1,
                  lambda: commit(opts, archive, [stage(opts, 1, 0, batch(7, "B"), attempt=1)], 1))
    with pytest.raises(SinkConflict, match=r"INVALID_EXTENSION"):
        commit(opts, archive, [stage(opts, 1, 0, batch(9, "A"))], 1)
    assert rows_of(archive, rid) == batch(10, "zero") + batch(7, "B")


def test_what_the_old_truncate_would_have_done(tmp_path, monkeypatch):
    """The race this closes, replayed by hand: A's truncate to the end of batch 0, issued after B's
    commit, is accepted by the archive (the recording is stopped, the position below its stop) and
    cuts B's committed batch. This is why the commit no longer truncates."""
    opts, archive, rid, first = with_debris(tmp_path)
    commit(opts, archive, [stage(opts, 1, 0, batch(30, "B"), attempt=1)], 1)
    archive.truncate(rid, first.end)  # a stalled A's late truncate, had it still been sent
    assert rows_of(archive, rid) == batch(40, "zero")  # B's committed batch is gone


@pytest.mark.parametrize("crash_after", [1, 2, 5])
def test_debris_at_every_depth_is_skipped_and_each_retry_lands_once(tmp_path, crash_after):
    opts, archive = options(tmp_path), FakeSinkArchive()
    commit(opts, archive, [stage(opts, 0, 0, batch(40, "zero"))], 0)
    rid = only_recording(archive)
    expected = batch(40, "zero")
    for batch_id in (1, 2):  # two dead commits in a row, each followed by its retry
        archive.crash_after_appends = crash_after
        with pytest.raises(InjectedCrash):
            commit(opts, archive, [stage(opts, batch_id, 0, batch(3000, f"dead{batch_id}", size=70))], batch_id)
        archive.crash_after_appends = None
        archive.stop_active(rid)
        rows = batch(20 + batch_id, f"b{batch_id}")
        assert commit(opts, archive, [stage(opts, batch_id, 0, rows, attempt=1)], batch_id).outcome \
            is CommitOutcome.COMMITTED
        expected += rows
        assert rows_of(archive, rid) == expected
