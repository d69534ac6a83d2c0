"""The one read path: ReplayPump hands each block to the builder while it is still in the (fake)
term buffer, and read_range gives every message of any range split, however blocks arrive."""

from __future__ import annotations

import random

import pytest

from aeron_spark.connector.replay_errors import ReplayFailed
from aeron_spark.connector.replay_pump import ReplayPump
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import RecordingLayout, plan_ranges
from aeron_spark.connector.source.offsets import RecordingPositions
from aeron_spark.connector.source.partition_reader import read_range
from tests.support.fake_archive import FakeArchive
from tests.support.fake_image import FakeImage
from tests.support.synthetic_log import SyntheticLog

TERM = 64 * 1024


def options():
    return SourceOptions.parse({"recordingIds": "1", "archive.controlChannel": "aeron:ipc"}, ReadMode.BATCH)


def rows_of(archive, ranges):
    rows = []
    for replay_range in ranges:
        for batch in read_range(replay_range, options(), archive):
            rows += list(zip(batch.column("position").to_pylist(), batch.column("payload").to_pylist(),
                             batch.column("reserved_value").to_pylist()))
    return rows


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("fixed", [None, 100, 1024])
def test_read_range_reads_every_message_through_the_pump(seed, fixed):
    rng = random.Random(seed)
    log = SyntheticLog(term_length=TERM, mtu=1408)
    for index in range(400):
        size = fixed if fixed is not None else rng.choice([0, 5, 200, 1500, 5000])
        log.append(rng.randbytes(size), reserved_value=index)
    layouts = {1: RecordingLayout(1, 0, TERM)}
    expected = [(m.end_position, m.payload, m.reserved_value) for m in log.messages]
    for max_bytes in (TERM // 3, TERM, 1 << 30):
        ranges = plan_ranges(RecordingPositions({1: 0}), RecordingPositions({1: log.position}), layouts, max_bytes)
        for idle_polls in (0, 2):  # blocks at every poll, or after empty polls the pump waits out
            archive = FakeArchive(block_jitter=random.Random(seed), pump_idle_polls=idle_polls)
            archive.add(1, log, active=False)
            assert rows_of(archive, ranges) == expected
            assert archive.calls["replay_pump"] >= len(ranges)


def test_pump_copies_in_the_handler_and_tracks_the_position():
    blocks = [(0, b"a" * 64), (64, b"b" * 32), (96, b"c" * 96)]
    pump = ReplayPump(FakeImage(blocks, idle_polls=2), 9, 0, 192, idle_timeout_ms=1000)
    got = []
    while (block := pump.next_block(lambda view, position: (position, bytes(view)))) is not None:
        got.append(block)
    assert got == [(0, (0, b"a" * 64)), (64, (64, b"b" * 32)), (96, (96, b"c" * 96))]
    assert pump.position == 192


def test_pump_reports_a_replay_that_ends_early():
    pump = ReplayPump(FakeImage([(0, b"a" * 64), (64, b"b" * 64)], idle_polls=0, end_of_stream_after=1),
                      9, 0, 128, idle_timeout_ms=1000)
    assert pump.next_block(lambda view, position: None) == (0, None)
    with pytest.raises(ReplayFailed, match="recording 9: replay ended at 64, before 128"):
        pump.next_block(lambda view, position: None)


def test_pump_gives_up_after_the_idle_timeout():
    pump = ReplayPump(FakeImage([]), 9, 0, 64, idle_timeout_ms=20)
    with pytest.raises(ReplayFailed, match="no progress at 0 for 20 ms"):
        pump.next_block(lambda view, position: None)


def test_a_replay_that_stalls_or_ends_early_names_the_archive_it_came_from():
    archive = "aeron:udp?endpoint=archive-host:8010"  # after a restart or a partition, where to look
    stalled = ReplayPump(FakeImage([]), 9, 0, 64, idle_timeout_ms=20, archive=archive)
    with pytest.raises(ReplayFailed, match=r"replay from the archive at aeron:udp\?endpoint=archive-host:8010 "
                                           r"made no progress at 0"):
        stalled.next_block(lambda view, position: None)
    ended = ReplayPump(FakeImage([(0, b"a" * 64)], idle_polls=0, end_of_stream_after=1), 9, 0, 128,
                       idle_timeout_ms=1000, archive=archive)
    assert ended.next_block(lambda view, position: None) == (0, None)
    with pytest.raises(ReplayFailed, match=r"from the archive at aeron:udp\?endpoint=archive-host:8010 ended at 64"):
        ended.next_block(lambda view, position: None)


@pytest.mark.parametrize("payload", [100, 1000])
def test_fixed_size_fast_path_accepts_the_pad_frames_that_end_terms(payload):
    from aeron_spark.connector.source import message_batches

    rng = random.Random(payload)
    log = SyntheticLog(term_length=TERM, mtu=1408)
    for index in range(3 * TERM // (payload + 32) + 7):
        log.append(rng.randbytes(payload), reserved_value=index)
    data = message_batches._as_bytes_array(bytes(log.data))
    frames_bytes = len(log.messages) * ((payload + 32 + 31) // 32 * 32)
    assert data.size > frames_bytes  # the rest is PAD frames at the term ends
    for start_index, min_index in ((0, 0), (5, 40), (0, len(log.messages) - 3)):
        start = log.messages[start_index].begin_position
        chunk = data[start:]
        minimum = log.messages[min_index].end_position
        fast = message_batches._uniform_whole_messages(chunk, start, minimum)
        assert fast is not None
        wanted = [m for m in log.messages[start_index:] if m.end_position > minimum]
        assert list(fast.end_positions) == [m.end_position for m in wanted]
        assert list(fast.reserved) == [m.reserved_value for m in wanted]
        offsets, payload_bytes = fast.value_offsets, fast.payload.tobytes()
        assert [payload_bytes[a:b] for a, b in zip(offsets, offsets[1:])] == [m.payload for m in wanted]
        assert fast.carry_offset == chunk.size
        assert (fast.leading_fragments, fast.dropped_fragments) == (0, 0)


def test_a_pad_frame_inside_a_term_is_left_to_the_general_path():
    from aeron_spark.connector.source import message_batches

    log = SyntheticLog(term_length=TERM, mtu=1408)
    for index in range(10):
        log.append(bytes(100), reserved_value=index)
    data = bytearray(log.data)
    data[4 * 160 + 6] = 0  # frame 4 becomes a PAD mid-term
    array = message_batches._as_bytes_array(bytes(data))
    assert message_batches._uniform_whole_messages(array, 0, None) is None
    general = message_batches.assemble_messages(array, 0)
    assert list(general.reserved) == [0, 1, 2, 3, 5, 6, 7, 8, 9]
