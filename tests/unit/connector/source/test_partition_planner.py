import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_spark.connector.source.offsets import RecordingPositions
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import (
    PlanningError,
    RecordingLayout,
    ReplayRange,
    plan_ranges,
    split_points,
)
from aeron_spark.connector.source.partition_reader import read_range
from tests.support.fake_archive import FakeArchive
from tests.support.synthetic_log import SyntheticLog

TERM = 64 * 1024


def options(**extra):
    raw = {"recordingIds": "1", "archive.controlChannel": "aeron:ipc", **extra}
    return SourceOptions.parse(raw, ReadMode.BATCH)


def random_log(seed, count=300, mtu=512, start_position=0):
    rng = random.Random(seed)
    log = SyntheticLog(term_length=TERM, mtu=mtu, start_position=start_position)
    for index in range(count):
        log.append(rng.randbytes(rng.choice([0, 5, 200, 480, 481, 1500, 5000, 7000])), reserved_value=index)
    return log


def read_all(archive, ranges, opts):
    rows = []
    for replay_range in ranges:
        for batch in read_range(replay_range, opts, archive):
            rows += list(zip(batch.column("position").to_pylist(), batch.column("payload").to_pylist()))
            assert all(replay_range.start < p <= replay_range.end for p in batch.column("position").to_pylist())
    return rows


def test_split_points_are_term_boundaries_and_cover_the_range():
    cuts = split_points(1000, 10 * TERM + 64, TERM, 3 * TERM)
    assert cuts[0] == 1000 and cuts[-1] == 10 * TERM + 64
    assert all(c % TERM == 0 for c in cuts[1:-1])
    assert all(b - a <= 3 * TERM for a, b in zip(cuts, cuts[1:]))
    # budget below one term: a whole term per piece
    assert split_points(0, 3 * TERM, TERM, 100) == [0, TERM, 2 * TERM, 3 * TERM]
    assert split_points(5, 50, TERM, 100) == [5, 50]


def test_plan_starts_new_recordings_at_their_start_and_skips_empty_ranges():
    layouts = {1: RecordingLayout(1, 0, TERM), 2: RecordingLayout(2, 4096, TERM), 3: RecordingLayout(3, 0, TERM)}
    start = RecordingPositions({1: 640, 3: 96})
    end = RecordingPositions({1: 2 * TERM + 64, 2: 8192, 3: 96})
    ranges = plan_ranges(start, end, layouts, max_bytes_per_partition=TERM)
    assert ranges == [ReplayRange(1, 640, TERM), ReplayRange(1, TERM, 2 * TERM), ReplayRange(1, 2 * TERM, 2 * TERM + 64),
                      ReplayRange(2, 4096, 8192)]
    with pytest.raises(PlanningError, match="before start"):
        plan_ranges(RecordingPositions({1: 640}), RecordingPositions({1: 320}), layouts, TERM)


def test_min_partitions_shares_a_small_batch_out_in_whole_terms():
    layouts = {1: RecordingLayout(1, 0, TERM), 2: RecordingLayout(2, 0, TERM)}
    start, end = RecordingPositions({1: 0, 2: 0}), RecordingPositions({1: 8 * TERM, 2: 4 * TERM - 96})
    assert len(plan_ranges(start, end, layouts, 1 << 30)) == 2
    ranges = plan_ranges(start, end, layouts, 1 << 30, min_partitions=4)
    # 12 terms over 4 partitions: pieces of 3 terms, cut at term boundaries
    assert ranges == [ReplayRange(1, 0, 3 * TERM), ReplayRange(1, 3 * TERM, 6 * TERM), ReplayRange(1, 6 * TERM, 8 * TERM),
                      ReplayRange(2, 0, 3 * TERM), ReplayRange(2, 3 * TERM, 4 * TERM - 96)]
    # maxBytesPerPartition still caps the pieces; a share below one term takes a whole term
    assert len(plan_ranges(start, end, layouts, TERM, min_partitions=2)) == 12
    assert plan_ranges(RecordingPositions({1: 0}), RecordingPositions({1: TERM}), layouts, 1 << 30,
                       min_partitions=8) == [ReplayRange(1, 0, TERM)]
    with pytest.raises(PlanningError, match="minPartitions"):
        plan_ranges(start, end, layouts, TERM, min_partitions=0)


def test_pieces_are_even_and_a_multiple_of_min_partitions():
    layouts = {1: RecordingLayout(1, 0, TERM)}
    start, end = RecordingPositions({1: 0}), RecordingPositions({1: 12 * TERM})
    # 12 terms, at most 5 per piece: 3 pieces of 4 terms (not 5 + 5 + 2)
    assert [r.length for r in plan_ranges(start, end, layouts, 5 * TERM)] == [4 * TERM] * 3
    # ... and with minPartitions=2 a multiple of 2: 4 pieces of 3 terms (two full waves on two cores)
    assert [r.length for r in plan_ranges(start, end, layouts, 5 * TERM, min_partitions=2)] == [3 * TERM] * 4


def test_term_boundary_splits_deliver_every_message_once():
    log = random_log(seed=2, count=500)
    archive = FakeArchive(block_jitter=random.Random(3))
    archive.add(1, log, active=False)
    layouts = {1: RecordingLayout(1, 0, TERM)}
    for max_bytes in (1, TERM // 2, TERM, 3 * TERM, 1 << 30):
        ranges = plan_ranges(RecordingPositions({1: 0}), RecordingPositions({1: log.position}), layouts, max_bytes)
        rows = read_all(archive, ranges, options())
        assert rows == [(m.end_position, m.payload) for m in log.messages]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), cut_count=st.integers(0, 12), max_bytes=st.sampled_from([TERM, 2 * TERM, 1 << 30]))
def test_batches_cut_anywhere_on_frames_deliver_every_message_once(seed, cut_count, max_bytes):
    """Batch ends from rec-pos counters may cut fragmented messages: each message still appears once."""
    log = random_log(seed, count=120)
    archive = FakeArchive(block_jitter=random.Random(seed))
    archive.add(1, log, active=False)
    rng = random.Random(seed)
    boundaries = log.frame_boundaries()
    cuts = sorted(set(rng.sample(boundaries, min(cut_count, len(boundaries))) + [0, log.position]))
    layouts = {1: RecordingLayout(1, 0, TERM)}
    rows = []
    for start, end in zip(cuts, cuts[1:]):
        ranges = plan_ranges(RecordingPositions({1: start}), RecordingPositions({1: end}), layouts, max_bytes)
        rows += read_all(archive, ranges, options())
    assert rows == [(m.end_position, m.payload) for m in log.messages]


def test_mid_message_start_replays_the_head_from_the_term_start():
    log = SyntheticLog(term_length=TERM, mtu=64)
    log.append(b"first")
    big = log.append(bytes(range(256)) * 2)  # 16 fragments
    boundaries = log.frame_boundaries()
    cut = boundaries[boundaries.index(big.begin_position) + 5]
    archive = FakeArchive()
    archive.add(1, log, active=False)
    first_part = read_all(archive, [ReplayRange(1, 0, cut)], options())
    second_part = read_all(archive, [ReplayRange(1, cut, log.position)], options())
    assert first_part == [(log.messages[0].end_position, b"first")]
    assert second_part == [(big.end_position, big.payload)]
    assert (1, 0, cut) in archive.replays  # the head replay


def test_recording_that_joined_mid_message_drops_only_that_message():
    full = SyntheticLog(term_length=TERM, mtu=64)
    full.append(bytes(200))
    full.append(b"whole")
    join = full.frame_boundaries()[3]  # inside the first message
    joined = SyntheticLog(term_length=TERM, mtu=64, start_position=join)
    joined.data = bytearray(full.bytes_between(join, full.position))
    archive = FakeArchive()
    archive.add(1, joined, active=False)
    rows = read_all(archive, [ReplayRange(1, join, full.position)], options())
    assert rows == [(full.position, b"whole")]
