import random
import struct

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from aeron_spark.connector.data_source import source_schema
from aeron_spark.connector.source.message_batches import (
    FrameStreamError,
    MessageBatchBuilder,
    arrow_schema,
    assemble_messages,
    first_frame_continues_a_message,
    to_record_batch,
    walk_frames,
)
from tests.support.synthetic_log import SyntheticLog, blocks


def payloads(batch_list):
    return [row for batch in batch_list for row in batch.column("payload").to_pylist()]


def build_log(seed=1, count=400, term_length=64 * 1024, mtu=256, sizes=(0, 1, 31, 32, 100, 223, 224, 225, 700, 3000)):
    rng = random.Random(seed)
    log = SyntheticLog(term_length=term_length, mtu=mtu)
    for index in range(count):
        size = rng.choice(sizes)
        log.append(rng.randbytes(size), reserved_value=index * 1_000_000_007)
    return log


def test_single_unfragmented_message_exact_bytes():
    log = SyntheticLog(term_length=64 * 1024)
    log.append(b"hello aeron", reserved_value=99)
    frame = bytes(log.data)
    # 32-byte header + 11 bytes payload, aligned to 64
    assert len(frame) == 64
    assert struct.unpack_from("<iBBH", frame, 0) == (43, 0, 0xC0, 1)
    messages = assemble_messages(frame, 0)
    assert messages.count == 1
    assert bytes(messages.payload) == b"hello aeron"
    assert list(messages.value_offsets) == [0, 11]
    assert list(messages.end_positions) == [64]
    assert list(messages.reserved) == [99]


def test_fragmented_message_is_reassembled_with_first_frame_reserved_value():
    log = SyntheticLog(term_length=64 * 1024, mtu=64)  # 32-byte payload per fragment
    payload = bytes(range(100))
    log.append(payload, reserved_value=7)
    frames = walk_frames(bytes(log.data))
    assert list(frames.flags) == [0x80, 0x00, 0x00, 0x40]
    messages = assemble_messages(bytes(log.data), 0)
    assert bytes(messages.payload) == payload
    assert list(messages.end_positions) == [log.position]
    assert list(messages.reserved) == [7]


def test_padding_frames_carry_no_message_and_positions_skip_them():
    log = SyntheticLog(term_length=64 * 1024, mtu=1408)
    first = log.append(b"a" * 60_000)  # fragments filling most of the first term
    second = log.append(b"b" * 10_000)  # does not fit: PAD to the term end, then term 2
    frames = walk_frames(bytes(log.data))
    assert 0 in set(frames.types.tolist())  # a PAD frame is present
    assert second.begin_position == 64 * 1024
    messages = assemble_messages(bytes(log.data), 0)
    assert [bytes(messages.payload[a:b]) for a, b in zip(messages.value_offsets, messages.value_offsets[1:])] == [
        b"a" * 60_000, b"b" * 10_000]
    assert list(messages.end_positions) == [first.end_position, second.end_position]


def test_every_message_is_exact_across_random_block_sizes():
    log = build_log(seed=3, count=600)
    rng = random.Random(5)
    for _ in range(5):
        builder = MessageBatchBuilder(recording_id=9, session_id=11, stream_id=12, start_position=0,
                                      min_end_position=0, target_batch_bytes=rng.choice([1, 5000, 1 << 20]))
        out = []
        for position, block in blocks(bytes(log.data), 0, log.frame_boundaries(), rng.choice([64, 300, 5000])):
            out += builder.add_block(block, position)
        out += builder.finish()
        assert payloads(out) == [m.payload for m in log.messages]
        positions = [p for b in out for p in b.column("position").to_pylist()]
        assert positions == [m.end_position for m in log.messages]
        reserved = [p for b in out for p in b.column("reserved_value").to_pylist()]
        assert reserved == [m.reserved_value for m in log.messages]
        assert builder.stats.dropped_fragments == 0 and builder.stats.unfinished_bytes == 0


def test_uniform_and_varied_frames_walk_the_same_way():
    uniform = SyntheticLog(term_length=64 * 1024)
    for index in range(100):
        uniform.append(bytes([index]) * 40)
    table = walk_frames(bytes(uniform.data))
    assert list(table.offsets) == uniform.frame_boundaries()[:-1]
    varied = build_log(seed=8, count=300)
    table = walk_frames(bytes(varied.data))
    assert list(table.offsets) == varied.frame_boundaries()[:-1]


def test_malformed_blocks_are_rejected_with_the_offset():
    log = SyntheticLog()
    log.append(b"x" * 10)
    data = bytearray(log.data)
    with pytest.raises(FrameStreamError, match="multiple of 32"):
        walk_frames(bytes(data[:40]))
    struct.pack_into("<i", data, 0, 500)  # claims to run past the block
    with pytest.raises(FrameStreamError, match="malformed frame at byte 0.*runs past the end"):
        walk_frames(bytes(data))
    data = bytearray(log.data)
    struct.pack_into("<H", data, 6, 3)  # SM frame type
    with pytest.raises(FrameStreamError, match="type 3"):
        walk_frames(bytes(data))


def test_gap_between_blocks_is_an_error_not_a_silent_loss():
    log = build_log(count=50)
    parts = blocks(bytes(log.data), 0, log.frame_boundaries(), 1000)
    builder = MessageBatchBuilder(recording_id=1, session_id=1, stream_id=1, start_position=0, min_end_position=0)
    builder.add_block(parts[0][1], parts[0][0])
    with pytest.raises(FrameStreamError, match="expected"):
        builder.add_block(parts[2][1], parts[2][0])


def test_unfinished_trailing_message_is_left_for_the_next_range():
    log = SyntheticLog(mtu=64)
    log.append(b"complete")
    cut = log.position
    log.append(bytes(100))  # 4 fragments
    boundaries = log.frame_boundaries()
    mid = boundaries[boundaries.index(cut) + 2]
    builder = MessageBatchBuilder(recording_id=1, session_id=1, stream_id=1, start_position=0, min_end_position=0)
    out = builder.add_block(log.bytes_between(0, mid), 0) + builder.finish()
    assert payloads(out) == [b"complete"]
    assert builder.stats.unfinished_bytes == mid - cut


def test_leading_fragments_only_allowed_where_the_head_was_never_recorded():
    log = SyntheticLog(mtu=64)
    log.append(bytes(100))
    log.append(b"next")
    second_fragment = log.frame_boundaries()[1]
    tail = log.bytes_between(second_fragment, log.position)
    assert first_frame_continues_a_message(tail)
    strict = MessageBatchBuilder(recording_id=1, session_id=1, stream_id=1, start_position=second_fragment,
                                 min_end_position=second_fragment)
    with pytest.raises(FrameStreamError, match="continue a message"):
        strict.add_block(tail, second_fragment) + strict.finish()
    lenient = MessageBatchBuilder(recording_id=1, session_id=1, stream_id=1, start_position=second_fragment,
                                  min_end_position=second_fragment, allow_leading_fragments=True)
    out = lenient.add_block(tail, second_fragment) + lenient.finish()
    assert payloads(out) == [b"next"]
    assert lenient.stats.leading_fragments == 3


def test_orphan_fragments_are_counted_as_dropped():
    log = SyntheticLog(mtu=64)
    log.append(b"one")
    log.append_raw_fragment(b"B" * 32, 0x80)  # BEGIN without END, then a new message begins
    log.append(b"two")
    messages = assemble_messages(bytes(log.data), 0)
    assert messages.count == 2
    assert messages.dropped_fragments == 1


def test_min_end_position_excludes_messages_of_the_previous_range():
    log = build_log(count=40)
    middle = log.messages[20].end_position
    messages = assemble_messages(bytes(log.data), 0, min_end_position=middle)
    assert list(messages.end_positions) == [m.end_position for m in log.messages[21:]]


def test_record_batch_schema_is_exactly_what_spark_expects():
    for include_timestamp in (False, True):
        expected = to_arrow_schema(source_schema(include_timestamp), timezone="UTC")
        assert arrow_schema(include_timestamp).equals(expected)
    log = SyntheticLog()
    log.append(b"t", reserved_value=1_700_000_000_123_456_789)
    batch = to_record_batch(assemble_messages(bytes(log.data), 0), recording_id=3, session_id=-5, stream_id=77,
                            include_timestamp=True)
    row = batch.to_pylist()[0]
    assert row["recording_id"] == 3 and row["session_id"] == -5 and row["stream_id"] == 77
    assert row["timestamp"].isoformat() == "2023-11-14T22:13:20.123456+00:00"
    assert batch.schema.field("payload").type == pa.binary()


def test_empty_payload_messages_survive():
    log = SyntheticLog()
    for _ in range(3):
        log.append(b"")
    messages = assemble_messages(bytes(log.data), 0)
    assert messages.count == 3 and list(messages.value_offsets) == [0, 0, 0, 0]
    assert np.array_equal(messages.end_positions, [32, 64, 96])


def test_selected_columns_are_the_only_ones_built_and_markers_are_dropped_first():
    from aeron_spark.connector.source.message_batches import OutputColumns
    log = SyntheticLog(term_length=64 * 1024, mtu=1408)
    for index in range(6):
        log.append(bytes([index]) * (index + 1), reserved_value=-1 if index % 2 else index)
    columns = OutputColumns(("payload", "position"), frozenset({"position"}))
    builder = MessageBatchBuilder(recording_id=1, session_id=1, stream_id=1, start_position=0, min_end_position=0,
                                  columns=columns, drop_reserved_value=-1)
    batches = builder.add_block(bytes(log.data), 0) + builder.finish()
    batch = pa.Table.from_batches(batches)
    assert batch.schema.names == ["payload", "position"]
    assert not batch.schema.field("payload").nullable and batch.schema.field("position").nullable
    kept = [m for m in log.messages if m.reserved_value != -1]
    assert batch.column("payload").to_pylist() == [m.payload for m in kept]
    assert batch.column("position").to_pylist() == [m.end_position for m in kept]
