"""Our ArchiveClient against the REAL Java Aeron Archive 1.15.1.

The Java archive runs with its own Java media driver (tests/interop/peer/interop_peer.py); our
client runs on the test session's C driver and talks to it over UDP (control, response, recorded
stream, replay channels), in the 1.15.x protocol. Recordings are made by the real 1.15.1 client
(the peer) and by our own client and publication; both are listed and replayed by the other side
and the payload digests compared.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Iterator

import pytest
from aeron_spark.archive.cli import main as tool
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.codecs import ArchiveErrorCode, SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.interop_peer import (
    RecordResult,
    RunningJavaArchive,
    expected_digest,
    framed_length,
    payloads,
)
from tests.support.ports import free_udp_port, udp_channel

pytestmark = pytest.mark.interop

MESSAGES = 1_000
SIZE = 100
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def java_recording(java_archive: RunningJavaArchive) -> RecordResult:
    """Recorded over UDP (REMOTE) by the real 1.15.1 client."""
    return java_archive.client.record(udp_channel(free_udp_port()), 3001, MESSAGES, SIZE)


@pytest.fixture
def client(java_archive: RunningJavaArchive, aeron_client: AeronClient) -> Iterator[ArchiveClient]:
    with ArchiveClient.connect(control_channel=java_archive.endpoint.control_channel,
                               aeron=aeron_client, protocol="legacy", timeout=TIMEOUT) as connected:
        yield connected


def digest_of(messages) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.payload)
    return digest.hexdigest()


def replay_all(client: ArchiveClient, recording_id: int, position: int, length: int) -> list:
    with client.replay(recording_id, position, length, udp_channel(free_udp_port()), 4001) as replay:
        return list(replay.messages(idle_timeout=TIMEOUT))


def without_request_ids(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if k not in ("controlSessionId", "correlationId")}


def test_legacy_client_connects_and_lists_what_the_java_client_lists(
        java_archive: RunningJavaArchive, client: ArchiveClient, java_recording: RecordResult) -> None:
    assert client.is_legacy and client.archive_protocol_version == 0 and client.archive_id == -1
    ours = {d.recording_id: without_request_ids(d.to_aeron_dict()) for d in client.list_recordings()}
    theirs = {d["recordingId"]: without_request_ids(d) for d in java_archive.client.list_recordings()}
    assert ours == theirs and java_recording.recording_id in ours
    single = client.list_recording(java_recording.recording_id)
    assert without_request_ids(single.to_aeron_dict()) == ours[java_recording.recording_id]
    assert single.stop_position == java_recording.stop_position == MESSAGES * framed_length(SIZE)


def test_replay_of_a_java_recording_has_the_java_digest(client: ArchiveClient,
                                                         java_recording: RecordResult) -> None:
    messages = replay_all(client, java_recording.recording_id, 0, java_recording.stop_position)
    assert len(messages) == MESSAGES
    assert digest_of(messages) == java_recording.digest == expected_digest(0, MESSAGES, SIZE)
    middle = 500 * framed_length(SIZE)
    tail = replay_all(client, java_recording.recording_id, middle, java_recording.stop_position - middle)
    assert tail[0].position == middle and len(tail) == MESSAGES - 500
    assert digest_of(tail) == expected_digest(500, MESSAGES - 500, SIZE)


def test_positions_and_errors_from_the_java_archive(client: ArchiveClient,
                                                     java_recording: RecordResult) -> None:
    assert client.stop_position(java_recording.recording_id) == java_recording.stop_position
    assert client.max_recorded_position(java_recording.recording_id) == java_recording.stop_position
    assert client.start_position(java_recording.recording_id) == 0
    assert client.list_recording(987_654) is None
    with pytest.raises(ArchiveError) as raised:
        client.stop_position(987_654)
    assert raised.value.error_code == ArchiveErrorCode.UNKNOWN_RECORDING
    assert raised.value.archive_message  # the Java archive's own text
    assert client.stop_position(java_recording.recording_id) == java_recording.stop_position


def test_auto_protocol_detects_the_1_15_archive(java_archive: RunningJavaArchive,
                                                aeron_client: AeronClient,
                                                java_recording: RecordResult) -> None:
    with ArchiveClient.connect(control_channel=java_archive.endpoint.control_channel,
                               aeron=aeron_client, protocol="auto", timeout=TIMEOUT) as auto:
        assert auto.is_legacy
        assert auto.list_recording(java_recording.recording_id).stop_position == java_recording.stop_position


def test_our_client_records_our_stream_and_the_java_client_replays_it(
        java_archive: RunningJavaArchive, client: ArchiveClient) -> None:
    channel = udp_channel(free_udp_port())
    stream_id = 3002
    count = 300
    client.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = client.aeron.add_exclusive_publication(channel, stream_id)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not publication.is_connected:
            assert time.monotonic() < deadline, "the Java archive did not subscribe"
            time.sleep(0.005)
        for payload in payloads(0, count, SIZE):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
        end = publication.position
        [descriptor] = client.list_recordings_for_uri(0, 100, channel.split("?")[1], stream_id)
        while client.recording_position(descriptor.recording_id) < end:
            assert time.monotonic() < deadline, "the Java archive did not record the whole stream"
            time.sleep(0.005)
        client.stop_recording(channel, stream_id)
    finally:
        publication.close()
    while client.list_recording(descriptor.recording_id).stop_position != end:
        assert time.monotonic() < deadline, "the Java archive did not store the stop position"
        time.sleep(0.01)
    java_replay = java_archive.client.replay(descriptor.recording_id, replay_channel=udp_channel(free_udp_port()),
                                             replay_stream_id=4002)
    assert java_replay.digest == expected_digest(0, count, SIZE) and java_replay.messages == count
    ours = replay_all(client, descriptor.recording_id, 0, end)
    assert digest_of(ours) == java_replay.digest


def test_cli_lists_and_replays_from_the_java_archive(java_archive: RunningJavaArchive,
                                                      media_driver, java_recording: RecordResult) -> None:
    common = ["--control-channel", java_archive.endpoint.control_channel, "--aeron-dir",
              media_driver.dir, "--legacy"]
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(["recordings", "--recording-id", str(java_recording.recording_id), *common],
                     stdout=out, stderr=err) == 0, err.getvalue()
    [row] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert row["stopPosition"] == java_recording.stop_position
    out = io.StringIO()
    assert tool.main(["replay", str(java_recording.recording_id), "--length", str(5 * framed_length(SIZE)),
                      *common], stdout=out, stderr=err) == 0, err.getvalue()
    assert [json.loads(line)["position"] for line in out.getvalue().splitlines()] == [
        i * framed_length(SIZE) for i in range(5)]
