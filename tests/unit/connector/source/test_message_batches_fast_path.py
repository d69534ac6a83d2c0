"""assemble_messages' fast path (every DATA frame a whole message) gives exactly what the log holds.

Logs of unfragmented messages only (fixed and varied sizes, PAD frames at term ends, empty
payloads), cut at random message boundaries and filtered by min_end_position; compared field by
field with the messages the synthetic log wrote.
"""

import random

import pytest

from aeron_spark.connector.source.message_batches import assemble_messages
from tests.support.synthetic_log import SyntheticLog


def unfragmented_log(sizes, count, seed, term_length=4096):
    rng = random.Random(seed)
    log = SyntheticLog(term_length=term_length, mtu=1408)
    for index in range(count):
        log.append(rng.randbytes(rng.choice(sizes)), reserved_value=index * 7919 - 5)
    return log


def check(log, start_index, end_index, min_index):
    start = log.messages[start_index - 1].end_position if start_index else 0
    end = log.messages[end_index - 1].end_position
    minimum = log.messages[min_index - 1].end_position if min_index > start_index else None
    got = assemble_messages(bytes(log.bytes_between(start, end)), start, min_end_position=minimum)
    wanted = log.messages[max(start_index, min_index):end_index]
    assert list(got.end_positions) == [m.end_position for m in wanted]
    assert list(got.reserved) == [m.reserved_value for m in wanted]
    payload = bytes(got.payload)
    offsets = list(got.value_offsets)
    assert [payload[a:b] for a, b in zip(offsets, offsets[1:])] == [m.payload for m in wanted]
    assert (got.carry_offset, got.leading_fragments, got.dropped_fragments) == (end - start, 0, 0)


@pytest.mark.parametrize("sizes", [(32,), (1000,), (0, 1, 31, 32, 33, 500, 1376)])
def test_unfragmented_messages_with_padding_and_cuts(sizes):
    log = unfragmented_log(sizes, 300, seed=len(sizes))
    rng = random.Random(5)
    for _ in range(40):
        start_index = rng.randrange(0, 299)
        end_index = rng.randrange(start_index + 1, 301)
        min_index = rng.randrange(start_index, end_index + 1)
        check(log, start_index, end_index, min_index)


def test_fixed_size_messages_whose_frames_are_back_to_back():
    log = unfragmented_log((64,), 50, seed=3, term_length=1 << 16)  # no PAD frame at all
    check(log, 0, 50, 0)
    check(log, 10, 50, 30)


def test_uniform_blocks_take_the_strided_path_and_reject_anything_else():
    from aeron_spark.connector.source import message_batches

    log = unfragmented_log((100,), 40, seed=9, term_length=1 << 16)
    data = bytes(log.data)
    whole = message_batches._uniform_whole_messages(
        message_batches._as_bytes_array(data), 0, log.messages[4].end_position)
    assert whole is not None and list(whole.end_positions) == [m.end_position for m in log.messages[5:]]
    mutated = bytearray(data)
    mutated[20 * 160 + 5] = 0x80  # one frame: BEGIN only (a fragment)
    assert message_batches._uniform_whole_messages(message_batches._as_bytes_array(bytes(mutated)), 0, None) is None
    mutated = bytearray(data)
    mutated[7 * 160 + 6] = 0  # one PAD frame of the same length
    assert message_batches._uniform_whole_messages(message_batches._as_bytes_array(bytes(mutated)), 0, None) is None
