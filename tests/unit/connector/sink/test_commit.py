"""The sink's driver-side commit over a fake archive: exactly once across replays, crashes and aborts."""

from __future__ import annotations

import contextlib

import os

import numpy as np
import pyarrow as pa
import pytest
from aeron_spark.connector.source.message_batches import MessageBatchBuilder
from aeron_spark.connector.sink.commit import CommitOutcome, SinkCommitter
from aeron_spark.connector.sink.commit_job import HintStore, StagedFile, StagedFiles, abort_staged, commit_staged
from aeron_spark.connector.sink.sink_archive import SinkCommitError, SinkConflict
from aeron_spark.connector.commit_markers import (
    MARKER_RESERVED_VALUE,
    CommitMarker,
    marker_at_tail,
)
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import (
    new_job_key,
    sink_staging,
    streaming_batch_key,
)
from aeron_spark.connector.sink.writer import TaskInfo, stage_task_output
from tests.support.fake_sink_archive import FakeSinkArchive, InjectedCrash

SINK = "q-1"


def options(tmp_path, **extra) -> SinkOptions:
    streaming = extra.pop("streaming", True)
    raw = {"channel": "aeron:ipc", "streamId": "1001", "archive.controlChannel": "aeron:udp?endpoint=localhost:1",
           "sink.stagingDir": str(tmp_path / "staging"), "sink.commitTimeoutMs": "1000", **extra}
    return SinkOptions.parse(raw, streaming=streaming)


def stage(opts: SinkOptions, batch_id: int | None, partition: int, payloads: list[bytes], *, attempt: int = 0,
          reserved: list[int] | None = None, key: str | None = None, query_id: str = SINK):
    table = pa.table({"payload": pa.array(payloads, pa.binary()),
                      "reserved_value": pa.array(reserved or [partition * 1000 + i for i in range(len(payloads))],
                                                 pa.int64())})
    task = TaskInfo(partition, attempt, 100 + partition + 10 * attempt, batch_id, query_id)
    batch_key = key or streaming_batch_key(batch_id)
    return stage_task_output(opts, iter(table.to_batches(max_chunksize=7)), task, batch_key)


def rows_of(archive: FakeSinkArchive, recording_id: int) -> list[bytes]:
    """Every data message of the recording, as a sink reader assembles it: markers dropped, and a dead
    commit's debris before a later batch skipped (source/message_batches.py); debris after the last
    marker (a reader's visible end stops before it) is included."""
    recording = archive.recordings[recording_id]
    if not recording.data:
        return []
    builder = MessageBatchBuilder(recording_id=recording_id, session_id=0, stream_id=0,
                                  start_position=recording.start_position,
                                  min_end_position=recording.start_position, allow_leading_fragments=True,
                                  drop_reserved_value=MARKER_RESERVED_VALUE)
    batches = builder.add_block(bytes(recording.data), recording.start_position) + builder.finish()
    return [payload for record_batch in batches for payload in record_batch.column("payload").to_pylist()]


def batch(n: int, tag: str, size: int = 40) -> list[bytes]:
    return [f"{tag}-{i}-".encode().ljust(size + i % 50, b"x") for i in range(n)]


def commit(opts, archive, messages, batch_id):
    return commit_staged(opts, messages, batch_id, open_archive=lambda _options: archive)


def only_recording(archive: FakeSinkArchive) -> int:
    assert len(archive.recordings) == 1
    return next(iter(archive.recordings))


def test_batches_are_appended_in_partition_order_each_sealed_by_a_marker(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    expected: list[bytes] = []
    for batch_id in range(3):
        parts = [batch(30 + batch_id, f"b{batch_id}p{p}") for p in range(3)]
        messages = [stage(opts, batch_id, p, parts[p]) for p in (2, 0, 1)]  # Spark's order is arbitrary
        result = commit(opts, archive, messages, batch_id)
        assert result.outcome is CommitOutcome.COMMITTED and result.rows == sum(map(len, parts))
        expected += [row for part in parts for row in part]
    rid = only_recording(archive)
    assert rows_of(archive, rid) == expected
    recording = archive.recordings[rid]
    assert not recording.active
    tail = marker_at_tail(bytes(recording.data[-96:]), recording.position - 96, recording.position)
    assert tail is not None and tail.marker.batch_id == 2 and tail.marker.row_count == 3 * 32
    assert sorted(os.listdir(sink_staging(opts.staging_root, SINK).directory)) == ["_committed.json"]


def test_a_replayed_batch_is_not_written_twice(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    commit(opts, archive, [stage(opts, 0, 0, batch(10, "a"))], 0)
    commit(opts, archive, [stage(opts, 1, 0, batch(10, "b"))], 1)
    rid = only_recording(archive)
    before = bytes(archive.recordings[rid].data)
    replayed = stage(opts, 1, 0, batch(10, "b"), attempt=0)
    result = commit(opts, archive, [replayed], 1)
    assert result.outcome is CommitOutcome.ALREADY_COMMITTED
    assert bytes(archive.recordings[rid].data) == before
    assert not os.path.exists(replayed.path)
    # An older batch id (Spark never does this, but a restarted query from an old checkpoint might).
    assert commit(opts, archive, [stage(opts, 0, 0, batch(3, "old"))], 0).outcome is CommitOutcome.ALREADY_COMMITTED


@pytest.mark.parametrize("crash_after", [0, 1, 3])
def test_crash_between_data_and_marker_is_skipped_and_rewritten(tmp_path, crash_after):
    opts, archive = options(tmp_path), FakeSinkArchive(term_length=64 * 1024)
    commit(opts, archive, [stage(opts, 0, 0, batch(50, "a"))], 0)
    rid = only_recording(archive)
    committed_end = archive.recordings[rid].position
    big = batch(3000, "b", size=60)  # several terms: many appends
    archive.crash_after_appends = crash_after
    with pytest.raises(InjectedCrash):
        commit(opts, archive, [stage(opts, 1, 0, big[:1500]), stage(opts, 1, 1, big[1500:])], 1)
    recording = archive.recordings[rid]
    assert recording.active and recording.position >= committed_end  # debris, recording left active
    debris_end = recording.position
    archive.crash_after_appends = None
    # Spark replays batch 1 (new task attempts) and commits again, after the debris.
    result = commit(opts, archive, [stage(opts, 1, 0, big[:1500], attempt=1), stage(opts, 1, 1, big[1500:], attempt=1)], 1)
    assert result.outcome is CommitOutcome.COMMITTED and result.data_start == debris_end
    assert (debris_end > committed_end) == (crash_after > 0)
    assert rows_of(archive, rid) == batch(50, "a") + big
    assert archive.calls.get("stop_active") == 1
    assert archive.calls.get("truncate", 0) == 0  # never: a late truncate could cut another commit's batch


def test_crash_in_the_first_batch_is_skipped_from_the_recording_start(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    archive.crash_after_appends = 1
    with pytest.raises(InjectedCrash):
        commit(opts, archive, [stage(opts, 0, 0, batch(4000, "a"))], 0)
    rid = only_recording(archive)
    archive.stop_active(rid)  # autoStop noticed the dead publication
    debris_end = archive.recordings[rid].position
    archive.crash_after_appends = None
    result = commit(opts, archive, [stage(opts, 0, 0, batch(5, "z"), attempt=1)], 0)
    assert rows_of(archive, rid) == batch(5, "z")
    assert result.data_start == debris_end > archive.recordings[rid].start_position
    assert archive.calls.get("truncate", 0) == 0


def test_crash_after_the_marker_counts_as_committed(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    archive.crash_in_seal = True
    with pytest.raises(InjectedCrash):
        commit(opts, archive, [stage(opts, 0, 0, batch(20, "a"))], 0)
    archive.crash_in_seal = False
    result = commit(opts, archive, [stage(opts, 0, 0, batch(20, "a"), attempt=1)], 0)
    assert result.outcome is CommitOutcome.ALREADY_COMMITTED
    assert rows_of(archive, only_recording(archive)) == batch(20, "a")


def test_recovery_scans_from_the_hinted_end_and_ignores_a_wrong_hint(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    for batch_id in range(4):
        commit(opts, archive, [stage(opts, batch_id, 0, batch(200, f"b{batch_id}"))], batch_id)
    rid = only_recording(archive)
    recording = archive.recordings[rid]
    end_of_3 = recording.position
    recording.data += bytes(archive.recordings[rid].data[:4096])  # debris: frames that are not a batch
    hints = HintStore(sink_staging(opts.staging_root, SINK))
    assert hints.load().committed_end == end_of_3
    committer = SinkCommitter(archive, SINK, 1001, hints=hints, timeout_s=1.0)
    reads_before = archive.calls["read"]
    state = committer.recover()
    assert state.committed_end == end_of_3 and state.last_marker.marker.batch_id == 3
    assert recording.position == end_of_3 + 4096  # the debris stays (never truncated)
    # tail (fails: not a frame... or not a marker), hinted marker check, scan from the hint: all small
    assert archive.calls["read"] - reads_before <= 3

    recording.data += bytes(recording.data[:1024])
    hints.save(type(hints.load())(rid, end_of_3 - 32, 3))  # a stale/wrong hint: not a marker end
    state = SinkCommitter(archive, SINK, 1001, hints=hints, timeout_s=1.0).recover()
    assert state.committed_end == end_of_3


def test_abort_deletes_the_staged_files_and_leaves_nothing_visible(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    messages = [stage(opts, 0, 0, batch(5, "a")), None, stage(opts, 0, 2, batch(5, "c"))]
    abort_staged(opts, messages)
    assert not any(os.path.exists(m.path) for m in messages if m is not None)
    assert archive.recordings == {}


def test_leftovers_of_crashed_attempts_are_deleted_by_the_next_commit(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    orphan_old = stage(opts, 0, 3, batch(2, "o"))              # batch 0, task never reported
    orphan_attempt = stage(opts, 1, 0, batch(2, "x"), attempt=0)  # batch 1, attempt 0 failed
    future = stage(opts, 5, 0, batch(2, "f"))                    # a later batch: keep
    winner = stage(opts, 1, 0, batch(2, "w"), attempt=1)
    commit(opts, archive, [winner], 1)
    assert not os.path.exists(orphan_old.path) and not os.path.exists(orphan_attempt.path)
    assert not os.path.exists(winner.path) and os.path.exists(future.path)


def test_empty_batch_touches_nothing(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive()
    result = commit(opts, archive, [stage(opts, 0, 0, []), stage(opts, 0, 1, [])], 0)
    assert result.outcome is CommitOutcome.EMPTY and archive.recordings == {} and "find" not in archive.calls
    assert commit(opts, archive, [], 0) is None


def test_batch_writes_number_their_batches_and_cannot_share_a_streaming_sink(tmp_path):
    opts = options(tmp_path, **{"sink.id": "daily", "streaming": False})
    archive = FakeSinkArchive()
    for expected_id in range(3):
        key = new_job_key()
        result = commit(opts, archive, [stage(opts, None, 0, batch(3, f"j{expected_id}"), key=key, query_id=None)], None)
        assert result.batch_id == expected_id
    assert rows_of(archive, only_recording(archive)) == batch(3, "j0") + batch(3, "j1") + batch(3, "j2")
    streaming = options(tmp_path, **{"sink.id": "daily"})
    with pytest.raises(SinkConflict, match="sink.id daily .* batch writes"):
        commit(streaming, archive, [stage(streaming, 7, 0, batch(1, "s"), query_id=None)], 7)


def test_two_messages_for_one_partition_are_rejected(tmp_path):
    archive = FakeSinkArchive()
    committer = SinkCommitter(archive, SINK, 1001)
    staging = sink_staging(str(tmp_path), SINK)
    inputs = StagedFiles(SINK, staging, [StagedFile(staging, 0, "a", 1), StagedFile(staging, 0, "b", 1)])
    with pytest.raises(SinkCommitError, match="two commit messages for one partition"):
        committer.commit(inputs, 0)


def test_fragmented_messages_and_term_ends_round_trip(tmp_path):
    opts, archive = options(tmp_path), FakeSinkArchive(term_length=64 * 1024, mtu=1408)
    rng = np.random.default_rng(3)
    payloads = [rng.bytes(int(n)) for n in rng.integers(0, 8000, 300)]
    commit(opts, archive, [stage(opts, 0, 0, payloads[:150]), stage(opts, 0, 1, payloads[150:])], 0)
    assert rows_of(archive, only_recording(archive)) == payloads


def test_marker_round_trip_and_crc():
    marker = CommitMarker(123, 7, 4096, 10, 999, 0xDEADBEEF, 1)
    encoded = marker.encode()
    assert len(encoded) == 64 and CommitMarker.decode(encoded) == marker
    broken = bytearray(encoded)
    broken[30] ^= 1
    with pytest.raises(ValueError, match="CRC"):
        CommitMarker.decode(bytes(broken))


def test_a_reused_connection_that_fails_is_replaced_once_and_the_commit_recovers(tmp_path, monkeypatch):
    from aeron_spark.connector.sink import archive_access as sink_archive

    opts = options(tmp_path)
    healthy = FakeSinkArchive()
    broken = FakeSinkArchive()
    broken.find_sink_recordings = lambda *a: (_ for _ in ()).throw(ConnectionError("archive restarted"))
    handed: list = [(broken, True), (healthy, False)]
    forgotten: list = []
    monkeypatch.setattr(sink_archive, "leased_sink_archive", lambda _o: contextlib.nullcontext(handed.pop(0)))
    monkeypatch.setattr(sink_archive, "forget_shared_sink_archive", lambda _o: forgotten.append(1))
    result = commit_staged(opts, [stage(opts, 0, 0, batch(5, "r"))], 0)
    assert result.outcome is CommitOutcome.COMMITTED and forgotten == [1] and handed == []
    assert rows_of(healthy, only_recording(healthy)) == batch(5, "r")

    handed[:] = [(broken, False)]  # a fresh connection failing is not retried
    with pytest.raises(ConnectionError):
        commit_staged(opts, [stage(opts, 1, 0, batch(5, "s"))], 1)
