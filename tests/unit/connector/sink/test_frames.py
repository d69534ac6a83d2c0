"""sink/frames.py: numpy framing is byte-identical to a publication's term appender (SyntheticLog)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from aeron_spark.connector.source.message_batches import assemble_messages
from aeron_spark.connector.sink.frames import (
    FramingError,
    PublicationLayout,
    frame_messages,
)
from tests.support.synthetic_log import SyntheticLog


def _columns(payloads: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(payloads) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    return np.frombuffer(b"".join(payloads), dtype=np.uint8), offsets


def _framed(payloads, reserved, start, layout) -> bytes:
    values, offsets = _columns(payloads)
    blocks = frame_messages(values, offsets, np.array(reserved, dtype=np.int64), start, layout)
    position = start
    out = bytearray()
    for block in blocks:
        assert block.position == position
        assert block.position // layout.term_length == (block.end - 1) // layout.term_length, "crosses a term"
        if not block.is_padding_only:
            assert block.split_offsets[0] == 0
        out += block.data.tobytes()
        position = block.end
    return bytes(out)


def _reference(payloads, reserved, start, term_length, mtu) -> bytes:
    log = SyntheticLog(term_length=term_length, mtu=mtu, initial_term_id=7, session_id=4321, stream_id=1001,
                       start_position=start)
    for payload, value in zip(payloads, reserved):
        log.append(payload, value)
    return bytes(log.data)


LAYOUT = PublicationLayout(initial_term_id=7, term_length=64 * 1024, mtu=1408, session_id=4321, stream_id=1001)


@pytest.mark.parametrize("start", [0, 64 * 1024 - 96, 3 * 64 * 1024 + 4096, 64 * 1024 - 32])
def test_equal_size_messages_match_the_term_appender(start):
    payloads = [bytes([i % 251]) * 100 for i in range(3000)]
    reserved = list(range(3000))
    assert _framed(payloads, reserved, start, LAYOUT) == _reference(payloads, reserved, start, 64 * 1024, 1408)


@pytest.mark.parametrize("seed", range(6))
def test_random_sizes_fragments_and_term_ends_match(seed):
    rng = random.Random(seed)
    payloads = [rng.randbytes(rng.choice([0, 1, 31, 32, 33, 100, 1376, 1377, 2752, 5000, 8192]))
                for _ in range(400)]
    reserved = [rng.randrange(-(1 << 63), 1 << 63) for _ in payloads]
    start = rng.randrange(0, 1 << 20) // 32 * 32
    assert _framed(payloads, reserved, start, LAYOUT) == _reference(payloads, reserved, start, 64 * 1024, 1408)


def test_the_source_reads_back_what_was_framed():
    rng = random.Random(7)
    payloads = [rng.randbytes(rng.randrange(0, 3000)) for _ in range(200)]
    framed = _framed(payloads, list(range(200)), 4096, LAYOUT)
    messages = assemble_messages(np.frombuffer(framed, np.uint8), 4096)
    got = [messages.payload[messages.value_offsets[i]:messages.value_offsets[i + 1]].tobytes()
           for i in range(messages.count)]
    assert got == payloads
    assert messages.reserved.tolist() == list(range(200))


def test_first_message_not_fitting_gives_a_padding_only_block():
    values, offsets = _columns([b"x" * 1000])
    blocks = frame_messages(values, offsets, np.zeros(1, np.int64), 64 * 1024 - 64, LAYOUT)
    assert [b.is_padding_only for b in blocks] == [True, False]
    assert blocks[0].data.size == 64 and blocks[1].position == 64 * 1024


def test_too_long_message_is_rejected_naming_the_limit():
    values, offsets = _columns([b"", b"y" * (8 * 1024 + 1)])
    with pytest.raises(FramingError, match="message 1 is 8193 bytes.*8192"):
        frame_messages(values, offsets, np.zeros(2, np.int64), 0, LAYOUT)


def test_bad_layout_is_rejected():
    with pytest.raises(FramingError, match="mtu 100"):
        PublicationLayout(0, 64 * 1024, 100, 1, 1)
