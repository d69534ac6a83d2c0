"""One publication recorded by OUR sidecar and by the real Java 1.15.1 archive: identical bytes on disk.

Setup (three media drivers, all traffic UDP on localhost):

* the publisher is an ``ExclusivePublication`` in a third, private C driver (ours, 1.53) on a
  dynamic multi-destination-cast channel
  ``aeron:udp?control=localhost:C|control-mode=dynamic|fc=min,g:/2|term-length=64k``. Both archives'
  recording subscriptions (``aeron:udp?endpoint=localhost:P|control=localhost:C``) join it, so
  they receive the SAME publication: same session id, initial term id, term length and frames.
  ``fc=min,g:/2`` keeps the publication unconnected until both receivers are there (so both
  recordings start at position 0) and paces it to the slower one (so neither loses data).
* the Java side is the real 1.15.1 ``ArchivingMediaDriver``; ours is ``aeron-archive serve`` with
  its embedded C driver. Both are told to record by the real 1.15.1 Java client
  (``start-recording`` / ``stop-recording --await-position``), both with 128 KiB segments.

What is compared, exactly:

* the recording descriptors: start/stop position, initial term id, session id, stream id, term
  length, segment length, mtu (ids, timestamps and channels may differ);
* every segment file, byte for byte over its full length (128 KiB each, the bytes after the stop
  position are zeros in both), pairing 1.15.1's ``<recordingId>-<segmentIndex>.rec`` with our
  ``<recordingId>-<segmentBasePosition>.rec`` (``base = index * segmentLength`` because both
  recordings start at position 0). The files hold the frames verbatim: 32-byte headers (frame
  length, version, flags, type, term offset, session id, stream id, term id, reserved value),
  payloads, alignment padding, and the PAD frame at the end of each 64 KiB term (160-byte frames
  do not divide the term) with zeros after its header;
* and, independently of the Java side, that our bytes are the frames the publisher offered.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from aeron_spark.archive.storage.segment import SegmentReader
from aeron_spark.driver_integration.client import AeronClient
from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    UNFRAGMENTED,
)

from tests.interop.peer.interop_peer import (
    ArchiveEndpoint,
    PeerClient,
    PeerInstallation,
    framed_length,
    payloads,
    running_java_archive,
)
from tests.support.ports import free_udp_port
from tests.support.sidecar import running_sidecar


STREAM_ID = 77
MESSAGES = 5000
SIZE = 100  # 160-byte frames: 409 per 64 KiB term, then a 96-byte PAD frame
TERM_LENGTH = 64 * 1024
SEGMENT_LENGTH = 128 * 1024
CONNECT_TIMEOUT_S = 15.0
_HEADER = struct.Struct("<iBBHiiiiq")
T = TypeVar("T")


def java_1_15_segment_files(archive_dir: Path, recording_id: int, start_position: int, stop_position: int,
                            segment_length: int) -> list[Path]:
    """1.15.1 names segments ``<recordingId>-<segmentIndex>.rec`` with
    ``segmentIndex = (position - startPosition) >> log2(segmentLength)`` (Archive.segmentFileIndex)."""
    if start_position % segment_length:
        raise ValueError(f"start position {start_position} is not segment aligned: 1.15.1's in-file "
                         f"offsets then depend on the join term, which this comparison does not model")
    count = -(-(stop_position - start_position) // segment_length)
    return [archive_dir / f"{recording_id}-{index}.rec" for index in range(count)]


def our_segment_files(archive_dir: Path, recording_id: int, start_position: int, stop_position: int,
                      segment_length: int) -> list[Path]:
    """Ours (modern layout): ``<recordingId>-<segmentBasePosition>.rec``."""
    return [archive_dir / f"{recording_id}-{base}.rec"
            for base in range(start_position, stop_position, segment_length)]


def both[T](first: Callable[[], T], second: Callable[[], T]) -> tuple[T, T]:
    """Runs two peer commands at once (each waits on its own subprocess); re-raises a failure."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = pool.submit(first), pool.submit(second)
        return futures[0].result(), futures[1].result()


def offer_all(publication, messages: np.ndarray, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    for row in messages:
        data = row.tobytes()
        while publication.offer(data) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"publisher back-pressured for {timeout} s at {publication.position}")
            time.sleep(0.0005)
    return publication.position


def test_same_publication_recorded_by_both_archives_has_identical_segment_bytes(
        peer_installation: PeerInstallation, tmp_path: Path) -> None:
    control_port = free_udp_port()
    java_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}|control=localhost:{control_port}"
    our_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}|control=localhost:{control_port}"
    publication_channel = (f"aeron:udp?control=localhost:{control_port}|control-mode=dynamic|fc=min,g:/2"
                           f"|term-length={TERM_LENGTH}")
    with running_java_archive(peer_installation, tmp_path / "java", segment_length=SEGMENT_LENGTH) as java, \
            running_sidecar(tmp_path / "ours", ["--segment-length", str(SEGMENT_LENGTH)]) as sidecar:
        ours = PeerClient(peer_installation, ArchiveEndpoint(
            control_channel=sidecar.control_channel, response_channel=None, aeron_dir=None), timeout=60)
        # Each peer command is a JVM start (~0.5-1 s): run the two archives' commands side by side.
        both(lambda: java.client.start_recording(java_channel, STREAM_ID),
             lambda: ours.start_recording(our_channel, STREAM_ID))

        with AeronClient.with_embedded_driver() as publisher_client:
            publication = publisher_client.add_exclusive_publication(publication_channel, STREAM_ID)
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            while not publication.is_connected:
                assert time.monotonic() < deadline, "both archives' recording subscriptions did not join"
                time.sleep(0.01)
            assert publication.position == 0
            stop_position = offer_all(publication, payloads(0, MESSAGES, SIZE))
            # Keep the publication open until both recordings have it all (lingering is not enough
            # under min flow control: a closed publication stops retransmitting).
            java_stopped, our_stopped = both(
                lambda: java.client.stop_recording(java_channel, STREAM_ID, recording_id=0,
                                                   await_position=stop_position, timeout_ms=20_000),
                lambda: ours.stop_recording(our_channel, STREAM_ID, recording_id=0,
                                            await_position=stop_position, timeout_ms=20_000))
        expected_stop = MESSAGES * framed_length(SIZE) + (MESSAGES * framed_length(SIZE) // TERM_LENGTH) * (
            TERM_LENGTH % framed_length(SIZE))  # plus one PAD frame per completed term
        assert stop_position == expected_stop
        assert (java_stopped["startPosition"], java_stopped["stopPosition"]) == (0, stop_position)
        assert (our_stopped["startPosition"], our_stopped["stopPosition"]) == (0, stop_position)

        java_listing, our_listing = both(java.client.list_recordings, ours.list_recordings)
        (java_descriptor,), (our_descriptor,) = java_listing, our_listing
        same_fields = ("startPosition", "stopPosition", "initialTermId", "sessionId", "streamId",
                       "termBufferLength", "segmentFileLength", "mtuLength")
        assert {f: our_descriptor[f] for f in same_fields} == {f: java_descriptor[f] for f in same_fields}
        assert (our_descriptor["termBufferLength"], our_descriptor["segmentFileLength"]) == (
            TERM_LENGTH, SEGMENT_LENGTH)

        java_files = java_1_15_segment_files(java.archive_dir, 0, 0, stop_position, SEGMENT_LENGTH)
        our_files = our_segment_files(sidecar.archive_dir, 0, 0, stop_position, SEGMENT_LENGTH)
        assert len(java_files) == len(our_files) == 7
        assert sorted(p.name for p in Path(java.archive_dir).glob("0-*.rec")) == sorted(p.name for p in java_files)
        assert sorted(p.name for p in Path(sidecar.archive_dir).glob("0-*.rec")) == sorted(p.name for p in our_files)
        for java_file, our_file in zip(java_files, our_files, strict=True):
            java_bytes, our_bytes = java_file.read_bytes(), our_file.read_bytes()
            assert len(java_bytes) == len(our_bytes) == SEGMENT_LENGTH, (java_file, our_file)
            if java_bytes != our_bytes:
                first = next(i for i in range(SEGMENT_LENGTH) if java_bytes[i] != our_bytes[i])
                pytest.fail(f"{our_file.name} differs from 1.15.1's {java_file.name} first at file offset "
                            f"{first}: ours {our_bytes[first:first + 32].hex()} java "
                            f"{java_bytes[first:first + 32].hex()}")

        # Our bytes are the publication's frames (so the equality above is not two empty files).
        with SegmentReader(sidecar.archive_dir, 0, 0, TERM_LENGTH, SEGMENT_LENGTH) as reader:
            recorded = reader.read(0, stop_position)
        assert_frames_are_the_offered_messages(recorded, our_descriptor["sessionId"], our_descriptor["initialTermId"])


def assert_frames_are_the_offered_messages(log: bytes, session_id: int, initial_term_id: int) -> None:
    expected = payloads(0, MESSAGES, SIZE)
    offset, index, pads = 0, 0, 0
    while offset < len(log):
        frame_length, version, flags, frame_type, term_offset, frame_session, stream, term_id, _ = \
            _HEADER.unpack_from(log, offset)
        assert term_offset == offset % TERM_LENGTH and term_id == initial_term_id + offset // TERM_LENGTH
        assert (frame_session, stream, version) == (session_id, STREAM_ID, 0)
        if frame_type == HDR_TYPE_PAD:
            assert frame_length == TERM_LENGTH - term_offset
            assert not any(log[offset + HEADER_LENGTH:offset + frame_length]), "PAD frame body is not zeros"
            pads += 1
        else:
            assert (frame_type, flags, frame_length) == (HDR_TYPE_DATA, UNFRAGMENTED, HEADER_LENGTH + SIZE)
            assert log[offset + HEADER_LENGTH:offset + frame_length] == expected[index].tobytes()
            index += 1
        offset += framed_length(frame_length - HEADER_LENGTH)
    assert index == MESSAGES and pads == len(log) // TERM_LENGTH == 12


def test_segment_name_helpers_pair_index_with_base_position(tmp_path: Path) -> None:
    assert [p.name for p in java_1_15_segment_files(tmp_path, 3, 0, 3 * SEGMENT_LENGTH + 1, SEGMENT_LENGTH)] == \
        ["3-0.rec", "3-1.rec", "3-2.rec", "3-3.rec"]
    assert [p.name for p in our_segment_files(tmp_path, 3, 0, 3 * SEGMENT_LENGTH + 1, SEGMENT_LENGTH)] == \
        ["3-0.rec", f"3-{SEGMENT_LENGTH}.rec", f"3-{2 * SEGMENT_LENGTH}.rec", f"3-{3 * SEGMENT_LENGTH}.rec"]
    with pytest.raises(ValueError, match="not segment aligned"):
        java_1_15_segment_files(tmp_path, 3, 4096, SEGMENT_LENGTH, SEGMENT_LENGTH)
    assert not any(tmp_path.iterdir()), "the helpers only build paths"
