"""block_poll, offer_block, padding and initial positions checked against the log maths in
frame.py / position.py, on the real driver."""

from __future__ import annotations

import pytest

from aeron_spark.driver_integration import InitialPosition
from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    UNFRAGMENTED,
    DataFrameHeader,
    aligned_frame_length,
    walk_frames,
)
from aeron_spark.driver_integration.position import (
    compute_position,
    compute_term_id_from_position,
    compute_term_offset_from_position,
    position_bits_to_shift,
)

from tests.support.driver_streams import await_image, block_poll_bytes, offer_all, poll_messages

pytestmark = pytest.mark.timeout(60)

TERM = 64 * 1024
BITS = position_bits_to_shift(TERM)
CHANNEL = f"aeron:ipc?term-length={TERM}"


def _frames(blocks):
    """(stream position, header, payload) of every frame of the blocks, checking block facts."""
    out = []
    for block, position, session_id, term_id in blocks:
        for offset, header in walk_frames(block):
            assert header.session_id == session_id and header.term_id == term_id
            frame_position = position + offset
            assert compute_term_offset_from_position(frame_position, BITS) == header.term_offset
            payload = block[offset + HEADER_LENGTH: offset + header.frame_length]
            out.append((frame_position, header, payload))
    return out


def test_block_poll_is_byte_identical_to_the_offers(aeron_client):
    payloads = [bytes([n % 256]) * n for n in range(0, 300, 7)]
    with aeron_client.add_subscription(CHANNEL, 2001) as subscription, \
            aeron_client.add_exclusive_publication(CHANNEL, 2001) as publication:
        image = await_image(subscription, publication.session_id)
        ends = offer_all(publication, payloads, reserved_value=0x1122334455)
        blocks = block_poll_bytes(image, ends[-1])
        frames = _frames(blocks)
        assert [bytes(p) for _, _, p in frames] == payloads
        expected_start = 0
        for (position, header, payload), end in zip(frames, ends, strict=True):
            assert position == expected_start
            assert header == DataFrameHeader(
                frame_length=len(payload) + HEADER_LENGTH, flags=UNFRAGMENTED, frame_type=HDR_TYPE_DATA,
                term_offset=position, session_id=publication.session_id, stream_id=2001,
                term_id=publication.initial_term_id, reserved_value=0x1122334455)
            assert position + aligned_frame_length(header.frame_length) == end
            expected_start = end
        # The view handed to the handler is released after it returns.
        kept = []
        publication.offer_with_retry(b"more")
        image.block_poll(lambda block, *_: kept.append(block), 1 << 20)
        assert kept and kept[0].__class__ is memoryview
        with pytest.raises(ValueError):
            bytes(kept[0])
        image.close()


def test_term_rotation_pads_the_term_end(aeron_client):
    message = b"m" * 1000  # 1056 bytes a frame: 62 frames fill 65472 of 65536, then 64 B padding
    with aeron_client.add_subscription(CHANNEL, 2002) as subscription, \
            aeron_client.add_exclusive_publication(CHANNEL, 2002) as publication:
        image = await_image(subscription, publication.session_id)
        blocks = []

        def keep(block, position, session_id, term_id):
            blocks.append((bytes(block), position, session_id, term_id))

        for _ in range(70):  # the IPC window is half a term: drain as we go
            end = publication.offer_with_retry(message)
            image.block_poll(keep, 1 << 20)
        while image.position < end:
            image.block_poll(keep, 1 << 20)
        frames = _frames(blocks)
        pads = [(p, h) for p, h, _ in frames if h.frame_type == HDR_TYPE_PAD]
        assert len(pads) == 1
        pad_position, pad = pads[0]
        assert pad.term_offset == 62 * 1056 and pad.frame_length == TERM - 62 * 1056
        assert pad.term_id == publication.initial_term_id
        assert [b[1] for b in blocks][-1] >= TERM
        first_next = next(h for p, h, _ in frames if p == TERM)
        assert first_next.term_id == publication.initial_term_id + 1 and first_next.term_offset == 0
        assert compute_term_id_from_position(TERM, BITS, publication.initial_term_id) == first_next.term_id
        assert sum(1 for _, h, _ in frames if h.frame_type == HDR_TYPE_DATA) == 70
        assert pad_position + pad.frame_length == TERM
        image.close()


def test_exclusive_publication_starts_mid_stream_at_a_computed_position(aeron_client):
    initial_term_id = 1000
    start = compute_position(initial_term_id + 3, 4096, BITS, initial_term_id)
    where = InitialPosition(position=start, initial_term_id=initial_term_id, term_length=TERM, mtu=4096)
    with aeron_client.add_subscription("aeron:ipc", 2003) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 2003, initial_position=where) as publication:
        assert publication.initial_term_id == initial_term_id
        assert publication.term_buffer_length == TERM and publication.mtu_length == 4096
        assert publication.position == start
        image = await_image(subscription, publication.session_id)
        assert image.join_position == start and image.position == start
        assert image.initial_term_id == initial_term_id and image.term_buffer_length == TERM
        end = publication.offer_with_retry(b"first at a computed position")
        blocks = block_poll_bytes(image, end)
        assert blocks[0][1] == start and blocks[0][3] == initial_term_id + 3
        header = DataFrameHeader.unpack(blocks[0][0])
        assert (header.term_id, header.term_offset) == (initial_term_id + 3, 4096)
        image.close()


def test_offer_block_of_restamped_frames_and_append_padding(aeron_client):
    payloads = [b"alpha", b"beta" * 10, b"gamma" * 100]
    with aeron_client.add_subscription(CHANNEL, 2004) as source_subscription, \
            aeron_client.add_exclusive_publication(CHANNEL, 2004) as source:
        source_image = await_image(source_subscription, source.session_id)
        end = offer_all(source, payloads)[-1]
        recorded = b"".join(b for b, *_ in block_poll_bytes(source_image, end))
        source_image.close()

    # Replay the recorded frames into a new exclusive publication at the same position.
    where = InitialPosition(position=0, initial_term_id=source.initial_term_id, term_length=TERM)
    with aeron_client.add_subscription("aeron:ipc", 2005) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 2005, initial_position=where) as replay:
        image = await_image(subscription, replay.session_id)
        block = bytearray(recorded)
        for offset, header in walk_frames(block):
            DataFrameHeader(header.frame_length, header.version, header.flags, header.frame_type,
                            header.term_offset, replay.session_id, 2005, header.term_id,
                            header.reserved_value).pack_into(block, offset)
        assert replay.offer_block(block) == len(recorded)
        padded = replay.append_padding(100)
        assert padded == len(recorded) + aligned_frame_length(100 + HEADER_LENGTH)
        after = replay.offer_with_retry(b"after padding")
        received = poll_messages(image, len(payloads) + 1)
        assert [p for p, _ in received] == payloads + [b"after padding"]
        assert received[-1][1].position == after
        # A block stamped for another session is refused with Aeron's explanation.
        with pytest.raises(Exception, match="session"):
            replay.offer_block(bytes(recorded))
        with pytest.raises(ValueError, match="outside"):
            replay.offer_block(block, 8, len(block))
        image.close()
