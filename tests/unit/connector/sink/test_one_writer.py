"""One writer per sink without a lock, on the fake archive: two committers of one sink (two drivers of
a query, or a zombie driver) racing at each point where they could both act. The archive arbitrates
extensions (ACTIVE_RECORDING, INVALID_EXTENSION), the lowest recording id wins the first recording,
and debris is never truncated (a late truncate could cut another committer's batch): the recovering
committer claims the recording by extending it after the debris; the loser fails with SinkConflict,
nothing of it is appended, and its retry finds the winner's batch."""

from __future__ import annotations

import threading

import pytest
from aeron_spark.connector.sink.commit import CommitOutcome
from aeron_spark.connector.sink.sink_archive import SinkConflict

from tests.support.fake_sink_archive import FakeSinkArchive
from tests.unit.connector.sink.test_commit import batch, commit, options, rows_of, stage


def test_two_committers_starting_the_sink_recording_at_once_the_lower_id_wins(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    both_recovered, both_started = threading.Barrier(2, timeout=10), threading.Barrier(2, timeout=10)
    archive.hooks["before_start_appender"] = both_recovered.wait  # both found no sink recording
    archive.hooks["after_start_appender"] = both_started.wait  # both recordings exist before either checks
    messages = {name: stage(opts, 0, 0, batch(20, name), attempt=attempt) for attempt, name in enumerate("AB")}
    outcomes: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            outcomes[name] = commit(opts, archive, [messages[name]], 0)
        except Exception as error:  # noqa: BLE001 - recorded and checked below
            outcomes[name] = error

    threads = [threading.Thread(target=run, args=(name,)) for name in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    archive.hooks.clear()
    conflicts = [name for name, outcome in outcomes.items() if isinstance(outcome, SinkConflict)]
    winners = [name for name, outcome in outcomes.items() if getattr(outcome, "outcome", None) is CommitOutcome.COMMITTED]
    assert len(conflicts) == 1 and len(winners) == 1, outcomes
    assert "another committer started the sink recording at the same time" in str(outcomes[conflicts[0]])
    assert list(archive.recordings) == [5] and archive.calls["discard"] == 1  # the loser's (6) was removed
    assert outcomes[winners[0]].recording_id == 5 and rows_of(archive, 5) == batch(20, winners[0])
    # Spark retries the loser's batch: it is already committed (same query, same batch id).
    retried = commit(opts, archive, [stage(opts, 0, 0, batch(20, conflicts[0]), attempt=2)], 0)
    assert retried.outcome is CommitOutcome.ALREADY_COMMITTED and rows_of(archive, 5) == batch(20, winners[0])


def test_a_committer_starting_after_another_started_the_sink_recording_loses(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    # B recovers, starts and commits batch 0 while A (which also found no recording) is about to start.
    archive.once("before_start_appender", lambda: commit(opts, archive, [stage(opts, 0, 0, batch(7, "B"), attempt=1)], 0))
    with pytest.raises(SinkConflict, match=r"recording 5, before this commit's 6"):
        commit(opts, archive, [stage(opts, 0, 0, batch(9, "A"))], 0)
    assert list(archive.recordings) == [5] and rows_of(archive, 5) == batch(7, "B")
    assert commit(opts, archive, [stage(opts, 1, 0, batch(3, "A1"))], 1).outcome is CommitOutcome.COMMITTED
    assert rows_of(archive, 5) == batch(7, "B") + batch(3, "A1")


def committed_once(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    commit(opts, archive, [stage(opts, 0, 0, batch(10, "zero"))], 0)
    return opts, archive, next(iter(archive.recordings))


def test_an_extension_from_a_stop_position_that_moved_is_refused(tmp_path):
    opts, archive, rid = committed_once(tmp_path)
    # A recovered the recording stopped after batch 0; before it extends, B commits batch 1.
    archive.once("before_start_appender", lambda: commit(opts, archive, [stage(opts, 1, 0, batch(5, "B"), attempt=1)], 1))
    with pytest.raises(SinkConflict, match="INVALID_EXTENSION"):
        commit(opts, archive, [stage(opts, 1, 0, batch(6, "A"))], 1)
    assert rows_of(archive, rid) == batch(10, "zero") + batch(5, "B")
    assert commit(opts, archive, [stage(opts, 1, 0, batch(6, "A"), attempt=2)], 1).outcome is \
        CommitOutcome.ALREADY_COMMITTED


def test_an_extension_of_a_recording_another_committer_is_appending_to_is_refused(tmp_path):
    opts, archive, rid = committed_once(tmp_path)
    other: list = []
    archive.once("before_start_appender", lambda: other.append(archive.start_appender(archive.describe(rid), "q-1")))
    with pytest.raises(SinkConflict, match="ACTIVE_RECORDING"):
        commit(opts, archive, [stage(opts, 1, 0, batch(6, "A"))], 1)
    assert archive.recordings[rid].active and rows_of(archive, rid) == batch(10, "zero")
    other[0].seal()


def test_debris_is_not_truncated_after_another_committer_appended(tmp_path):
    opts, archive, rid = committed_once(tmp_path)
    recording = archive.recordings[rid]
    # A dead commit's debris (whole frames, as an archive records them), the recording stopped.
    recording.data += bytes(recording.data[:max(b for b in recording.boundaries() if b <= 1024)])
    # A scanned the recording and found the debris; before its claim, B recovers (claiming the
    # recording after the debris) and commits batch 1. A truncate to the end of batch 0 would remove
    # B's batch: nothing truncates, and A's late check fails it by name.
    archive.once("before_describe", lambda: commit(opts, archive, [stage(opts, 1, 0, batch(5, "B"), attempt=1)], 1))
    with pytest.raises(SinkConflict, match=r"changed while this commit recovered it .* now stopped at"):
        commit(opts, archive, [stage(opts, 1, 0, batch(6, "A"))], 1)
    assert archive.calls.get("truncate", 0) == 0  # nobody truncates (B skipped the debris)
    assert rows_of(archive, rid) == batch(10, "zero") + batch(5, "B")
