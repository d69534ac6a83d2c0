"""Recording a real publication: blocks from the driver's ``Image.block_poll`` go through
``SegmentWriter`` and read back byte-identical (PAD frames as their header), across term
rotations with padding and a segment rollover; crash recovery finds the exact stop position."""

from __future__ import annotations

import time

import pytest

from aeron_spark.archive.storage.checksum import CRC32C, verify_and_restore
from aeron_spark.archive.storage.recovery import recover_recording
from aeron_spark.archive.storage.segment import SegmentReader, SegmentWriter, list_segment_files
from aeron_spark.driver_integration.client import AeronClient
from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA, HDR_TYPE_PAD, HEADER_LENGTH, DataFrameHeader, walk_frames)
from aeron_spark.driver_integration.publication import OfferResult

pytestmark = pytest.mark.timeout(120)

TERM = 64 * 1024
CHANNEL = f"aeron:ipc?term-length={TERM}"
STREAM_ID = 1077


@pytest.fixture
def client():
    aeron = AeronClient.with_embedded_driver(client_name="segment-recording-test")
    try:
        yield aeron
    finally:
        aeron.close()  # also stops the embedded driver it owns


def _await_image(subscription, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        images = subscription.images
        if images:
            return images[0]
        time.sleep(0.001)
    raise AssertionError(f"no image on {CHANNEL} stream {STREAM_ID} within {timeout}s")


def _record(client, tmp_path, checksum):
    publication = client.add_exclusive_publication(CHANNEL, STREAM_ID)
    subscription = client.add_subscription(CHANNEL, STREAM_ID)
    try:
        image = _await_image(subscription)
        assert image.term_buffer_length == TERM
        start = image.join_position
        delivered: list[tuple[int, bytes]] = []
        writer = SegmentWriter(tmp_path, 9, start, TERM, 2 * TERM, checksum=checksum)

        def on_block(block, position, session_id, term_id):
            assert position == writer.position
            delivered.append((position, bytes(block)))  # what the driver handed over
            writer.append(block)  # straight from the log buffer

        def drain():
            while image.block_poll(on_block, 16 * 1024) > 0:
                pass

        sizes = [100, 1000, 3000, 37, 5000]  # 3000 and 5000 are fragmented (mtu 1408)
        offered = 0
        index = 0
        while offered < 4 * TERM + 12345:  # > 4 terms: padding at every rotation, 2 segments
            payload = bytes([(index + i) & 0xFF for i in range(sizes[index % len(sizes)])])
            result = publication.offer(payload)
            if result == OfferResult.BACK_PRESSURED or result == OfferResult.ADMIN_ACTION:
                drain()
                continue
            assert result > 0, f"offer failed: {result!r}"
            offered = result - start
            index += 1
        deadline = time.monotonic() + 10
        while writer.position < publication.position and time.monotonic() < deadline:
            drain()
        writer.close()
        assert writer.position == publication.position == image.position
        return start, image.session_id, image.initial_term_id, delivered, writer.position
    finally:
        subscription.close()
        publication.close()


@pytest.mark.parametrize("checksum", [None, CRC32C], ids=["plain", "crc32c"])
def test_recorded_segments_read_back_as_delivered(client, tmp_path, checksum):
    start, session_id, initial_term_id, delivered, end = _record(client, tmp_path, checksum)
    assert [f.base_position for f in list_segment_files(tmp_path, 9)] == [0, 2 * TERM, 4 * TERM]

    pads = 0
    with SegmentReader(tmp_path, 9, start, TERM, 2 * TERM) as reader:
        for position, block in delivered:
            stored = bytearray(reader.read(position, len(block)))
            first = DataFrameHeader.unpack(block)
            if first.frame_type == HDR_TYPE_PAD:
                pads += 1
                assert position % TERM + len(block) == TERM  # padding fills the term
                assert stored[:HEADER_LENGTH] == block[:HEADER_LENGTH]
                assert stored[HEADER_LENGTH:] == bytes(len(block) - HEADER_LENGTH)
                continue
            assert all(h.frame_type == HDR_TYPE_DATA for _, h in walk_frames(block))
            if checksum is not None:
                assert stored != bytearray(block)  # the session-id fields now hold checksums
                verify_and_restore(stored, session_id, checksum, block_position=position)
            assert stored == bytearray(block)
    assert pads >= 3  # a padded rotation at the end of terms 0, 1, 2 and 3

    report = recover_recording(tmp_path, 9, start, TERM, 2 * TERM, initial_term_id=initial_term_id,
                               stream_id=STREAM_ID, checksum=checksum)
    assert report.stop_position == end and report.is_clean, report.describe()
