"""Stopping the real sidecar: SIGINT stops it cleanly (stop positions stored, the tail replay ended,
the mark file terminated, the embedded driver closed); kill -9 while messages flow, then a
restart: every complete frame written before the kill replays."""

from __future__ import annotations

import os
import signal
import struct
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import RecordingSignal, SourceLocation
from aeron_spark.archive.storage.mark_file import read_mark_file
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.frame import compute_fragmented_frame_length
from aeron_spark.driver_integration.media_driver import MediaDriver

from tests.support.ports import udp_channel
from tests.support.sidecar import Sidecar, running_sidecar
from tests.support.sidecar_streams import (
    IPC_RECORDED,
    RECORDED_STREAM,
    TERM,
    TIMEOUT,
    Published,
    as_pairs,
    await_recorded,
    drain_until,
    expected,
    message_start,
    payloads,
    poll_into,
    publish,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def test_sigint_stops_cleanly_with_stop_positions_and_closes_the_embedded_driver(tmp_path: Path,
                                                                                 aeron_client: AeronClient):
    """SIGINT while a recording is active, a client session is open and a tail replay of that
    recording is running: exit 0, the stop position stored, the replay ended at it, the mark file
    marked terminated, the embedded driver's directory removed."""
    archive_dir = tmp_path / "archive"
    sidecar = Sidecar(archive_dir)
    channel = udp_channel()
    try:
        sidecar.start()
        with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron_client,
                                   timeout=TIMEOUT) as archive, ExitStack() as replays:
            subscription_id = archive.start_recording(channel, RECORDED_STREAM, SourceLocation.REMOTE)
            publication = aeron_client.add_exclusive_publication(channel, RECORDED_STREAM)
            recording_id = archive.await_recording_signal(
                RecordingSignal.START, subscription_id=subscription_id).recording_id
            published = publish(publication, payloads(100, seed=13))
            await_recorded(archive, recording_id, published.end)
            replay = replays.enter_context(archive.replay(recording_id, 0, -1, udp_channel(), 2001))
            received: list[tuple[int, bytes]] = []
            drain_until(replay, received, 100, "the tail replay")

            sidecar.process.send_signal(signal.SIGINT)
            assert sidecar.process.wait(TIMEOUT) == 0, sidecar.log_tail()
            driver_dir_left = os.path.exists(sidecar.ready["aeronDir"])
            deadline = time.monotonic() + TIMEOUT
            while not replay.image.is_closed and not replay.image.is_end_of_stream:
                poll_into(replay, received)
                assert time.monotonic() < deadline, "the replay image outlived the archive"
                time.sleep(0.002)
            assert received == expected(published)
            archive.timeout = 1.0  # the archive is gone: let the replay's StopReplay fail fast
        publication.close()
    finally:
        sidecar.terminate()
        sidecar.kill()
    assert not driver_dir_left, "the embedded driver directory was left behind"
    assert any("archive stopped cleanly" in line for line in sidecar.stderr_lines), sidecar.log_tail()
    with Catalog.open(archive_dir, read_only=True) as catalog:
        descriptor = catalog.descriptor(recording_id)
    assert descriptor.stop_position == published.end and descriptor.stop_timestamp > 0
    assert read_mark_file(archive_dir).terminated


def walk_complete_frames(archive_dir: Path, recording_id: int, segment_length: int) -> int:
    """End of the last complete frame written, found by walking the segment files' headers
    (independently of recovery.py): frames are contiguous from position 0."""
    position = 0
    while True:
        base = position - position % segment_length
        path = archive_dir / f"{recording_id}-{base}.rec"
        if not path.exists():
            return position
        with open(path, "rb") as segment:
            segment.seek(position - base)
            header = segment.read(32)
            if len(header) < 32:
                return position
            frame_length = struct.unpack_from("<i", header, 0)[0]
            if frame_length <= 0:
                return position
            aligned = (frame_length + 31) & ~31
            if len(header) + len(segment.read(aligned - 32)) < aligned:
                return position
        position += aligned


def test_kill_9_while_messages_flow_then_restart_replays_every_complete_message(tmp_path: Path):
    """The sidecar (attached to the test's driver) is killed with SIGKILL while a publisher is
    writing as fast as it can. On restart, crash recovery gives the recording the end of the last
    complete frame on disk - no less than the rec-pos value read just before the kill - and a
    replay delivers every published message up to there, byte for byte."""
    archive_dir = tmp_path / "archive"
    driver = MediaDriver()
    aeron = AeronClient(driver.dir, client_name="acceptance-kill-9")
    try:
        first = Sidecar(archive_dir, aeron_dir=driver.dir)
        try:
            first.start()
            archive = ArchiveClient.connect(control_channel=first.control_channel, aeron=aeron, timeout=TIMEOUT)
            subscription_id = archive.start_recording(IPC_RECORDED, RECORDED_STREAM, SourceLocation.LOCAL)
            publication = aeron.add_exclusive_publication(IPC_RECORDED, RECORDED_STREAM)
            max_payload = publication.max_payload_length
            recording_id = archive.await_recording_signal(
                RecordingSignal.START, subscription_id=subscription_id).recording_id
            messages = payloads(3000, seed=14)
            published = Published([], [], 0)
            stop_publishing = threading.Event()

            def publisher() -> None:
                for message in messages:
                    while (result := publication.offer(message)) < 0:
                        if stop_publishing.is_set():
                            return
                        time.sleep(0.0002)
                    published.messages.append(message)
                    published.starts.append(message_start(publication, message, result))
                    published.end = result

            thread = threading.Thread(target=publisher, daemon=True)
            thread.start()
            counter_id = recording_position.find_counter_id_by_recording(aeron.counters_reader, recording_id)
            wait_until(lambda: aeron.counters_reader.value(counter_id) > 4 * TERM, "some data to be recorded")
            recorded_before_kill = aeron.counters_reader.value(counter_id)
            os.kill(first.pid, signal.SIGKILL)
            first.process.wait(TIMEOUT)
            stop_publishing.set()
            thread.join(TIMEOUT)
            archive.close()
            publication.close()
        finally:
            first.kill()

        with Catalog.open(archive_dir, read_only=True) as catalog:
            descriptor = catalog.descriptor(recording_id)
        assert descriptor.stop_position == -1  # left active by the crash
        on_disk = walk_complete_frames(archive_dir, recording_id, descriptor.segment_file_length)
        assert recorded_before_kill <= on_disk <= published.end

        with running_sidecar(archive_dir, aeron_dir=driver.dir) as second:
            assert any("crash recovery" in line for line in second.stderr_lines), second.log_tail()
            with ArchiveClient.connect(control_channel=second.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as archive:
                stop = archive.stop_position(recording_id)
                assert stop == on_disk
                with archive.replay(recording_id, 0, stop, "aeron:ipc", 2001) as replay:
                    replayed = as_pairs(list(replay.messages(idle_timeout=TIMEOUT)))
        # every message whose last frame ends at or before the recovered stop, and nothing else
        complete = [(start, message) for start, message in zip(published.starts, published.messages, strict=True)
                    if start + compute_fragmented_frame_length(len(message), max_payload) <= stop]
        assert len(complete) > 100 and replayed == complete
    finally:
        aeron.close()
        driver.close()
