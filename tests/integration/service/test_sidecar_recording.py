"""Recording through a real `aeron-archive serve` subprocess: start, list, stop, replay,
SIGTERM with an active recording, and kill -9 then recovery on restart."""

from __future__ import annotations

import os
import struct
import time

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    BooleanType,
    ControlResponseCode,
    RecordingSignal,
    SourceLocation,
)
from aeron_spark.archive.storage.mark_file import read_mark_file
from aeron_spark.driver_integration.client import AeronClient
from aeron_spark.driver_integration.media_driver import MediaDriver

from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import Sidecar, running_sidecar
from tests.support.waiting import wait_until


RECORDED_CHANNEL = "aeron:ipc?term-length=65536"
RECORDED_STREAM = 1001
REPLAY_STREAM = 2002


def payloads(count: int, start: int = 0) -> list[bytes]:
    """Short messages and, every 10th, one longer than the IPC MTU (fragmented)."""
    return [(b"m%06d-" % i) * (600 if i % 10 == 9 else 3) for i in range(start, start + count)]


def publish(publication, messages: list[bytes]) -> int:
    for message in messages:
        deadline = time.monotonic() + 10
        while publication.offer(message) < 0:
            assert time.monotonic() < deadline, "publication back-pressured for 10 s"
            time.sleep(0.0005)
    return publication.position


def start_recording(client: RawArchiveClient) -> tuple[int, int]:
    response = client.call(lambda s, c: codecs.StartRecordingRequest2(
        s, c, RECORDED_STREAM, SourceLocation.LOCAL, BooleanType.FALSE, RECORDED_CHANNEL))
    assert response.code == ControlResponseCode.OK, response
    return response.relevant_id, response.correlation_id


def recorded_position(client: RawArchiveClient, recording_id: int) -> int:
    return client.call(lambda s, c: codecs.RecordingPositionRequest(s, c, recording_id)).relevant_id


def replay_messages(aeron, client: RawArchiveClient, recording_id: int, length: int,
                    expected: int) -> list[bytes]:
    """Replays [0, length) of the recording and returns the first ``expected`` messages (plus
    anything else that arrives within a short grace period)."""
    subscription = aeron.add_subscription("aeron:ipc", REPLAY_STREAM)
    try:
        response = client.call(lambda s, c: codecs.ReplayRequest(
            s, c, recording_id, 0, length, REPLAY_STREAM, -1, -1, "aeron:ipc"))
        assert response.code == ControlResponseCode.OK, response
        received: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(received) < expected:
            if subscription.poll(lambda payload, header: received.append(bytes(payload)), 100) == 0:
                assert time.monotonic() < deadline, f"replay stalled after {len(received)} messages"
                time.sleep(0.001)
        grace = time.monotonic() + 0.2
        while time.monotonic() < grace:
            subscription.poll(lambda payload, header: received.append(bytes(payload)), 100)
        return received
    finally:
        subscription.close()


@pytest.mark.parametrize("checksum", ["none", "crc32c"])
def test_record_list_stop_and_replay(tmp_path, checksum):
    with running_sidecar(tmp_path / "archive", ["--checksum", checksum]) as sidecar:
        aeron = AeronClient(sidecar.driver_dir)
        try:
            client = RawArchiveClient(aeron, "aeron:ipc", 11, response_stream_id=21)
            assert client.connect().code == ControlResponseCode.OK
            subscription_id, start_correlation = start_recording(client)

            duplicate = client.call(lambda s, c: codecs.StartRecordingRequest(
                s, c, RECORDED_STREAM, SourceLocation.LOCAL, RECORDED_CHANNEL))
            assert (duplicate.code, duplicate.relevant_id) == (ControlResponseCode.ERROR,
                                                               ArchiveErrorCode.ACTIVE_SUBSCRIPTION)

            publication = aeron.add_exclusive_publication(RECORDED_CHANNEL, RECORDED_STREAM)
            started = client.await_signal(RecordingSignal.START)
            assert (started.correlation_id, started.subscription_id, started.position) == (
                start_correlation, subscription_id, 0)
            recording_id = started.recording_id
            messages = payloads(500)
            end = publish(publication, messages)
            wait_until(lambda: recorded_position(client, recording_id) == end, "the recording to catch up")

            subs_id = client.request(lambda s, c: codecs.ListRecordingSubscriptionsRequest(
                s, c, 0, 10, BooleanType.TRUE, RECORDED_STREAM, "ipc"))
            described = client.await_message(
                lambda m: isinstance(m, codecs.RecordingSubscriptionDescriptor) and m.correlation_id == subs_id,
                "subscription descriptor")
            assert described.subscription_id == subscription_id
            assert client.await_response(subs_id).code == ControlResponseCode.SUBSCRIPTION_UNKNOWN

            stopped = client.call(lambda s, c: codecs.StopRecordingRequest(
                s, c, RECORDED_STREAM, RECORDED_CHANNEL))
            assert stopped.code == ControlResponseCode.OK
            stop_signal = client.await_signal(RecordingSignal.STOP, recording_id)
            assert stop_signal.position == end

            descriptors, terminator = client.list_recordings()
            assert terminator.code == ControlResponseCode.RECORDING_UNKNOWN
            assert terminator.relevant_id == recording_id + 1
            (descriptor,) = descriptors
            assert (descriptor.recording_id, descriptor.start_position, descriptor.stop_position) == (
                recording_id, 0, end)
            assert descriptor.stream_id == RECORDED_STREAM
            assert descriptor.original_channel == RECORDED_CHANNEL
            assert descriptor.stripped_channel == "aeron:ipc"
            assert descriptor.session_id == publication.session_id
            assert descriptor.stop_timestamp >= descriptor.start_timestamp > 0

            assert client.call(lambda s, c: codecs.StopPositionRequest(s, c, recording_id)).relevant_id == end
            assert client.call(lambda s, c: codecs.StartPositionRequest(s, c, recording_id)).relevant_id == 0
            assert client.call(lambda s, c: codecs.MaxRecordedPositionRequest(s, c, recording_id)).relevant_id == end
            assert recorded_position(client, recording_id) == -1
            found = client.call(lambda s, c: codecs.FindLastMatchingRecordingRequest(
                s, c, 0, publication.session_id, RECORDED_STREAM, "ipc"))
            assert found.relevant_id == recording_id

            for_uri = client.request(lambda s, c: codecs.ListRecordingsForUriRequest(
                s, c, 0, 5, RECORDED_STREAM, "term-length=65536"))
            match = client.await_message(lambda m: getattr(m, "correlation_id", None) == for_uri,
                                         "ListRecordingsForUri answer")
            assert isinstance(match, codecs.RecordingDescriptorMessage)
            assert client.await_response(for_uri).code == ControlResponseCode.RECORDING_UNKNOWN

            with open(tmp_path / "archive" / f"{recording_id}-0.rec", "rb") as segment:
                stored_session_id = struct.unpack("<i", segment.read(32)[12:16])[0]
            # a record checksum replaces the session id of each stored DATA frame
            assert (stored_session_id == publication.session_id) == (checksum == "none")
            assert replay_messages(aeron, client, recording_id, end, len(messages)) == messages

            not_active = client.call(lambda s, c: codecs.StopRecordingRequest(
                s, c, RECORDED_STREAM, RECORDED_CHANNEL))
            assert (not_active.code, not_active.relevant_id) == (ControlResponseCode.ERROR,
                                                                 ArchiveErrorCode.UNKNOWN_SUBSCRIPTION)
            publication.close()
        finally:
            aeron.close()


@pytest.fixture
def driver():
    media_driver = MediaDriver()
    try:
        yield media_driver
    finally:
        media_driver.close()


def record_some(aeron, sidecar: Sidecar, count: int) -> tuple[RawArchiveClient, object, int, int, list[bytes]]:
    client = RawArchiveClient(aeron, sidecar.control_channel, 10)
    assert client.connect().code == ControlResponseCode.OK
    start_recording(client)
    publication = aeron.add_exclusive_publication(RECORDED_CHANNEL, RECORDED_STREAM)
    recording_id = client.await_signal(RecordingSignal.START).recording_id
    messages = payloads(count)
    end = publish(publication, messages)
    wait_until(lambda: recorded_position(client, recording_id) == end, "the recording to catch up")
    return client, publication, recording_id, end, messages


def test_sigterm_stops_active_recordings_with_their_stop_positions(tmp_path, driver):
    archive_dir = tmp_path / "archive"
    aeron = AeronClient(driver.dir)
    try:
        sidecar = Sidecar(archive_dir, aeron_dir=driver.dir)
        try:
            sidecar.start()
            _, publication, recording_id, end, _ = record_some(aeron, sidecar, 300)
            assert sidecar.terminate() == 0, sidecar.log_tail()
        finally:
            sidecar.kill()
        assert any("archive stopped cleanly" in line for line in sidecar.stderr_lines)
        with Catalog.open(archive_dir, read_only=True) as catalog:
            descriptor = catalog.descriptor(recording_id)
        assert descriptor.stop_position == end
        assert descriptor.stop_timestamp > 0
        assert read_mark_file(archive_dir).terminated
        publication.close()
    finally:
        aeron.close()


def test_kill_9_during_recording_then_restart_recovers_every_complete_message(tmp_path, driver):
    archive_dir = tmp_path / "archive"
    aeron = AeronClient(driver.dir)
    try:
        first = Sidecar(archive_dir, aeron_dir=driver.dir)
        try:
            first.start()
            _, publication, recording_id, end, messages = record_some(aeron, first, 400)
            os.kill(first.pid, 9)
            first.process.wait(10)
        finally:
            first.kill()
        publication.close()
        with Catalog.open(archive_dir, read_only=True) as catalog:
            assert catalog.descriptor(recording_id).stop_position == -1  # left active by the crash

        with running_sidecar(archive_dir, aeron_dir=driver.dir) as second:
            assert any("crash recovery" in line for line in second.stderr_lines), second.log_tail()
            client = RawArchiveClient(aeron, second.control_channel, 10)
            assert client.connect().code == ControlResponseCode.OK
            stop = client.call(lambda s, c: codecs.StopPositionRequest(s, c, recording_id))
            assert stop.relevant_id == end
            assert replay_messages(aeron, client, recording_id, end, len(messages)) == messages
    finally:
        aeron.close()


def test_extend_truncate_purge_and_recording_events(tmp_path):
    events_args = ["--recording-events-channel", "aeron:ipc", "--recording-events-stream-id", "30"]
    with running_sidecar(tmp_path / "archive", events_args) as sidecar:
        aeron = AeronClient(sidecar.driver_dir)
        try:
            events = aeron.add_subscription("aeron:ipc", 30)
            received_events: list = []
            client = RawArchiveClient(aeron, "aeron:ipc", 11, response_stream_id=21)
            assert client.connect().code == ControlResponseCode.OK
            # autoStop: the subscription goes away when the recorded publication does
            response = client.call(lambda s, c: codecs.StartRecordingRequest2(
                s, c, RECORDED_STREAM, SourceLocation.LOCAL, BooleanType.TRUE, RECORDED_CHANNEL))
            assert response.code == ControlResponseCode.OK
            publication = aeron.add_exclusive_publication(RECORDED_CHANNEL, RECORDED_STREAM)
            recording_id = client.await_signal(RecordingSignal.START).recording_id
            first_end = publish(publication, payloads(50))
            wait_until(lambda: recorded_position(client, recording_id) == first_end, "recording")
            publication.close()
            assert client.await_signal(RecordingSignal.STOP, recording_id).position == first_end

            def poll_events() -> bool:
                events.poll(lambda payload, header: received_events.append(codecs.decode(bytes(payload))), 100)
                return any(isinstance(e, codecs.RecordingStopped) for e in received_events)

            wait_until(poll_events, "the RecordingStopped event")
            assert isinstance(received_events[0], codecs.RecordingStarted)
            assert received_events[0].recording_id == recording_id
            assert received_events[0].channel == RECORDED_CHANNEL
            assert received_events[-1] == codecs.RecordingStopped(recording_id, 0, first_end)
            assert any(isinstance(e, codecs.RecordingProgress) for e in received_events)

            # extend with a publication that continues exactly where the recording stopped
            descriptor = client.list_recordings()[0][0]
            extend = client.call(lambda s, c: codecs.ExtendRecordingRequest2(
                s, c, recording_id, RECORDED_STREAM, SourceLocation.LOCAL, BooleanType.TRUE,
                RECORDED_CHANNEL))
            assert extend.code == ControlResponseCode.OK, extend
            from aeron_spark.driver_integration.channel_uri import with_initial_position
            continued = aeron.add_exclusive_publication(
                with_initial_position(RECORDED_CHANNEL, first_end, descriptor.initial_term_id,
                                      descriptor.term_buffer_length, descriptor.mtu_length),
                RECORDED_STREAM)
            assert client.await_signal(RecordingSignal.EXTEND, recording_id).position == first_end
            second_end = publish(continued, payloads(30, 50))
            wait_until(lambda: recorded_position(client, recording_id) == second_end, "extension")
            continued.close()
            assert client.await_signal(RecordingSignal.STOP, recording_id).position == second_end
            assert replay_messages(aeron, client, recording_id, second_end, 80) == payloads(80)

            active_truncate = client.call(lambda s, c: codecs.TruncateRecordingRequest(s, c, 12345, 0))
            assert active_truncate.relevant_id == ArchiveErrorCode.UNKNOWN_RECORDING
            misaligned = client.call(lambda s, c: codecs.TruncateRecordingRequest(s, c, recording_id, 7))
            assert (misaligned.code, misaligned.relevant_id) == (ControlResponseCode.ERROR,
                                                                 ArchiveErrorCode.INVALID_POSITION)
            truncated = client.call(lambda s, c: codecs.TruncateRecordingRequest(
                s, c, recording_id, first_end))
            assert truncated.code == ControlResponseCode.OK, truncated
            client.await_signal(RecordingSignal.DELETE, recording_id)
            assert client.call(lambda s, c: codecs.StopPositionRequest(s, c, recording_id)).relevant_id == first_end

            purged = client.call(lambda s, c: codecs.PurgeRecordingRequest(s, c, recording_id))
            assert purged.code == ControlResponseCode.OK, purged
            client.await_signal(RecordingSignal.DELETE, recording_id)
            assert client.list_recordings()[0] == []
            assert not list((tmp_path / "archive").glob(f"{recording_id}-*.rec"))
        finally:
            aeron.close()
