"""O_DIRECT segment writes with the real driver: blocks from ``Image.block_poll`` written by a
direct and a buffered ``SegmentWriter`` (stopping and extending at non-aligned positions), and
two real sidecars (``--segment-direct-io`` and the default, buffered) recording the same
publication produce byte-identical segment files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.checksum import CRC32C
from aeron_spark.archive.codecs import BooleanType, ControlResponseCode, RecordingSignal, SourceLocation
from aeron_spark.archive.storage.segment import SegmentWriter, list_segment_files
from aeron_spark.driver_integration.client import AeronClient
from aeron_spark.driver_integration.media_driver import MediaDriver
from aeron_spark.driver_integration.publication import OfferResult

from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import Sidecar
from tests.support.waiting import wait_until


pytestmark = pytest.mark.timeout(120)

TERM = 64 * 1024
CHANNEL = f"aeron:ipc?term-length={TERM}"
STREAM_ID = 1088
O_DIRECT = os.O_DIRECT


def message(index: int) -> bytes:
    sizes = (1, 100, 1000, 3000, 37, 5000, 64)  # 3000 and 5000 are fragmented (IPC mtu 1408)
    return bytes([(index * 7 + i) & 0xFF for i in range(sizes[index % len(sizes)])])


def offer_all(publication, count: int, drain=lambda: None) -> int:
    for index in range(count):
        deadline = time.monotonic() + 10
        while (result := publication.offer(message(index))) < 0:
            assert result in (OfferResult.BACK_PRESSURED, OfferResult.ADMIN_ACTION), result
            assert time.monotonic() < deadline, "publication back-pressured for 10 s"
            drain()
    return publication.position


def segment_bytes(directory: Path, recording_id: int) -> dict[str, bytes]:
    return {f.path.name: f.path.read_bytes() for f in list_segment_files(directory, recording_id)}


@pytest.mark.parametrize("checksum", [None, CRC32C], ids=["plain", "crc32c"])
def test_real_blocks_with_stops_and_extensions_are_identical_direct_and_buffered(tmp_path, checksum):
    direct_dir, buffered_dir = tmp_path / "direct", tmp_path / "buffered"
    direct_dir.mkdir()
    buffered_dir.mkdir()
    aeron = AeronClient.with_embedded_driver(client_name="direct-io-test")
    try:
        publication = aeron.add_exclusive_publication(CHANNEL, STREAM_ID)
        subscription = aeron.add_subscription(CHANNEL, STREAM_ID)
        wait_until(lambda: bool(subscription.images), "the image")
        image = subscription.images[0]
        start = image.join_position

        def writers(position=None):
            return [SegmentWriter(directory, 9, start, TERM, 2 * TERM, checksum=checksum,
                                  direct_io=direct, position=position)
                    for directory, direct in ((direct_dir, True), (buffered_dir, False))]

        current = writers()
        assert [w.direct_io for w in current] == [True, False]
        reopened = 0

        def on_block(block, position, session_id, term_id):
            for writer in current:
                assert writer.position == position
                writer.append(block)

        def drain():
            nonlocal current, reopened
            while image.block_poll(on_block, 3000) > 0:
                position = current[0].position
                if position % 4096 and reopened < 6 and position > (reopened + 1) * 40_000:
                    for writer in current:  # stop here, then extend from this non-aligned position
                        writer.close()
                    current = writers(position)
                    reopened += 1

        end = offer_all(publication, 600, drain)
        deadline = time.monotonic() + 10
        while current[0].position < end and time.monotonic() < deadline:
            drain()
        for writer in current:
            assert writer.position == end
            writer.close()
        assert reopened >= 3
        direct_files, buffered_files = segment_bytes(direct_dir, 9), segment_bytes(buffered_dir, 9)
        assert len(direct_files) >= 3  # rolled over at least twice
        assert direct_files == buffered_files
        subscription.close()
        publication.close()
    finally:
        aeron.close()


def _open_segment_flags(pid: int) -> list[int]:
    """The open-file flags of each segment file the process holds open."""
    flags = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.endswith(".rec"):
                with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                    fields = dict(line.split(":", 1) for line in info if ":" in line)
                flags.append(int(fields["flags"].strip(), 8))
        except (FileNotFoundError, KeyError):
            continue  # closed meanwhile
    return flags


@pytest.mark.parametrize("checksum", ["none", "crc32c"])
def test_sidecars_direct_and_buffered_record_identical_segments(tmp_path, checksum):
    driver = MediaDriver()
    aeron = None
    sidecars = []
    try:
        aeron = AeronClient(driver.dir)
        common = ["--segment-length", "128k", "--checksum", checksum]
        for name, extra in (("direct", ["--segment-direct-io"]), ("buffered", [])):
            sidecars.append(Sidecar(tmp_path / name, common + extra, aeron_dir=driver.dir).start())
        clients = []
        for sidecar in sidecars:
            client = RawArchiveClient(aeron, sidecar.control_channel, 10)
            assert client.connect().code == ControlResponseCode.OK
            response = client.call(lambda s, c: codecs.StartRecordingRequest2(
                s, c, STREAM_ID, SourceLocation.LOCAL, BooleanType.FALSE, CHANNEL))
            assert response.code == ControlResponseCode.OK, response
            clients.append(client)
        publication = aeron.add_exclusive_publication(CHANNEL, STREAM_ID)
        recording_ids = [client.await_signal(RecordingSignal.START).recording_id for client in clients]
        end = offer_all(publication, 700, lambda: time.sleep(0.0005))

        for client, recording_id in zip(clients, recording_ids):
            wait_until(lambda: client.call(lambda s, c: codecs.RecordingPositionRequest(
                s, c, recording_id)).relevant_id == end, "the recording to catch up")
        direct_flags, buffered_flags = (_open_segment_flags(s.pid) for s in sidecars)
        assert direct_flags and all(f & O_DIRECT for f in direct_flags), direct_flags
        assert buffered_flags and not any(f & O_DIRECT for f in buffered_flags), buffered_flags
        publication.close()
        for sidecar in sidecars:
            assert sidecar.terminate() == 0, sidecar.log_tail()
        stops = []
        for sidecar, recording_id in zip(sidecars, recording_ids):
            with Catalog.open(sidecar.archive_dir, read_only=True) as catalog:
                stops.append(catalog.descriptor(recording_id).stop_position)
        assert stops == [end, end]
        direct_files = segment_bytes(sidecars[0].archive_dir, recording_ids[0])
        buffered_files = segment_bytes(sidecars[1].archive_dir, recording_ids[1])
        assert recording_ids[0] == recording_ids[1] and len(direct_files) >= 3
        assert direct_files == buffered_files
    finally:
        for sidecar in sidecars:
            sidecar.terminate()
            sidecar.kill()
        if aeron is not None:
            aeron.close()
        driver.close()
