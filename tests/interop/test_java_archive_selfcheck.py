"""The Java side works on its own: real 1.15.1 archive + real 1.15.1 client, through our peer.

Proves the peer's record/list/replay/publish commands and its payload digests before they are
pointed at our Python archive sidecar.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.interop.peer.interop_peer import (
    ArchiveEndpoint,
    EXIT_USAGE,
    PeerClient,
    PeerError,
    PeerInstallation,
    RecordResult,
    RunningJavaArchive,
    expected_digest,
    framed_length,
    payloads,
    running_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel


MESSAGES = 1_000
SIZE = 100
STREAM_ID = 1001
GOLDEN_FILE = Path(__file__).with_name("golden_1_15_1.json")


@pytest.fixture(scope="module")
def recording(java_archive: RunningJavaArchive) -> RecordResult:
    """1,000 deterministic messages recorded over UDP (REMOTE) by the real 1.15.1 client."""
    return java_archive.client.record(udp_channel(free_udp_port()), STREAM_ID, MESSAGES, SIZE)


def replay_channel() -> str:
    return udp_channel(free_udp_port())


def test_recording_stops_at_the_publication_position(recording: RecordResult) -> None:
    assert recording.start_position == 0
    assert recording.publication_position == MESSAGES * framed_length(SIZE)
    assert recording.stop_position == recording.publication_position
    assert recording.messages == MESSAGES
    assert recording.digest == expected_digest(0, MESSAGES, SIZE)


def test_list_returns_the_descriptor_with_aeron_field_names(java_archive: RunningJavaArchive,
                                                             recording: RecordResult) -> None:
    descriptors = java_archive.client.list_recordings()
    by_id = {d["recordingId"]: d for d in descriptors}
    descriptor = by_id[recording.recording_id]

    assert descriptor["startPosition"] == recording.start_position
    assert descriptor["stopPosition"] == recording.stop_position
    assert descriptor["sessionId"] == recording.session_id
    assert descriptor["streamId"] == STREAM_ID
    assert descriptor["mtuLength"] == 1408
    assert descriptor["termBufferLength"] == recording.fields["termBufferLength"]
    assert descriptor["initialTermId"] == recording.fields["initialTermId"]
    assert descriptor["originalChannel"] == recording.fields["recordingChannel"]
    assert descriptor["stopTimestamp"] >= descriptor["startTimestamp"] > 0
    # A single-descriptor listing agrees with the full one (apart from the request's own ids).
    [single] = java_archive.client.list_recordings(recording_id=recording.recording_id)
    assert _without_request_ids(single) == _without_request_ids(descriptor)


def _without_request_ids(descriptor: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in descriptor.items() if k not in ("correlationId", "controlSessionId")}


def test_replay_of_the_whole_recording_matches_the_published_digest(java_archive: RunningJavaArchive,
                                                                    recording: RecordResult) -> None:
    replay = java_archive.client.replay(recording.recording_id, replay_channel=replay_channel(),
                                        replay_stream_id=2001)

    assert replay.digest == recording.digest
    assert replay.messages == MESSAGES
    assert (replay.first_index, replay.last_index) == (0, MESSAGES - 1)
    assert replay.first_position == recording.start_position
    assert replay.last_position == recording.stop_position


def test_replay_from_a_mid_position_continues_at_the_right_message(java_archive: RunningJavaArchive,
                                                                   recording: RecordResult) -> None:
    middle = MESSAGES // 2
    position = recording.start_position + middle * framed_length(SIZE)

    replay = java_archive.client.replay(recording.recording_id, position=position,
                                        replay_channel=replay_channel(), replay_stream_id=2002)

    assert replay.first_position == position
    assert replay.last_position == recording.stop_position
    assert (replay.first_index, replay.last_index) == (middle, MESSAGES - 1)
    assert replay.digest == expected_digest(middle, MESSAGES - middle, SIZE)


def test_bounded_replay_stops_after_the_requested_length(java_archive: RunningJavaArchive,
                                                         recording: RecordResult) -> None:
    position = 100 * framed_length(SIZE)
    replay = java_archive.client.replay(recording.recording_id, position=position, length=50 * framed_length(SIZE),
                                        replay_channel="aeron:ipc", replay_stream_id=2003)

    assert replay.messages == 50
    assert replay.last_position == position + 50 * framed_length(SIZE)
    assert replay.digest == expected_digest(100, 50, SIZE)


def test_fragmented_ipc_recording_replays_whole_messages(java_archive: RunningJavaArchive) -> None:
    size = 5_000  # > max payload 1376 of the default 1408 MTU: 4 fragments per message
    recorded = java_archive.client.record("aeron:ipc", 1002, 20, size, fragmented=True)
    assert recorded.fields["sourceLocation"] == "LOCAL"
    assert recorded.fields["fragmented"] is True
    assert recorded.stop_position == recorded.publication_position

    replay = java_archive.client.replay(recorded.recording_id, replay_channel="aeron:ipc", replay_stream_id=2004)

    assert replay.messages == 20
    assert replay.digest == recorded.digest == expected_digest(0, 20, size)


def test_publish_feeds_a_recording_started_by_another_client(java_archive: RunningJavaArchive) -> None:
    """start-recording + publish (no archive) + stop-recording: how one stream feeds two archives."""
    client = java_archive.client
    channel, stream_id = "aeron:ipc", 1003
    client.start_recording(channel, stream_id)
    published = client.publish(channel, stream_id, 10, 64, first_index=7)
    assert published.position == 10 * framed_length(64)
    assert published.digest == expected_digest(7, 10, 64)

    [descriptor] = [d for d in client.list_recordings()
                    if d["sessionId"] == published.session_id and d["streamId"] == stream_id]
    stopped = client.stop_recording(channel, stream_id, recording_id=descriptor["recordingId"],
                                    await_position=published.position)
    assert stopped["stopPosition"] == published.position

    replay = client.replay(descriptor["recordingId"], replay_channel="aeron:ipc", replay_stream_id=2005)
    assert (replay.messages, replay.first_index, replay.digest) == (10, 7, published.digest)


def test_bad_usage_is_reported_with_exit_code_2(java_archive: RunningJavaArchive) -> None:
    with pytest.raises(PeerError) as raised:
        java_archive.client.run("record", *java_archive.endpoint.options(), "--channel", "aeron:ipc",
                                "--stream-id", "1", "--messages", "1", "--size", "5000")
    assert raised.value.exit_code == EXIT_USAGE
    assert raised.value.error is not None and "--fragmented" in raised.value.error["message"]


def test_java_archive_stops_cleanly_by_pid(peer_installation: PeerInstallation, tmp_path: Path) -> None:
    with running_java_archive(peer_installation, tmp_path) as archive:
        pid = archive.server.pid
        assert archive.server.ready["role"] == "archive"
        assert archive.server.ready["aeronVersion"] == "1.15.1"
        assert (archive.archive_dir / "archive.catalog").is_file()
        assert archive.server.stop() is True
    assert archive.server.process.returncode == 0
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0


def test_golden_file_is_what_the_1_15_1_jar_produces(peer_installation: PeerInstallation) -> None:
    """Regenerating the golden messages from the jar gives exactly the committed file."""
    stored = json.loads(GOLDEN_FILE.read_text())["messages"]
    regenerated = PeerClient(peer_installation, ArchiveEndpoint()).golden()
    assert regenerated == stored


def test_java_archive_records_a_stream_published_by_our_c_driver(java_archive: RunningJavaArchive) -> None:
    """C driver (pyaeron 1.53) -> UDP -> Java 1.15.1 driver -> Java archive: the same bytes come back."""
    from aeron_spark.driver_integration.client import AeronClient

    client = java_archive.client
    channel, stream_id, count, size = udp_channel(free_udp_port()), 1004, 200, 48
    client.start_recording(channel, stream_id, source_location="remote")
    with AeronClient.with_embedded_driver() as aeron:
        publication = aeron.add_exclusive_publication(channel, stream_id)
        deadline = time.monotonic() + 30
        while not publication.is_connected:
            assert time.monotonic() < deadline, "the Java archive's recording subscription never connected"
            time.sleep(0.005)
        for payload in payloads(0, count, size):
            publication.offer_with_retry(payload.tobytes(), timeout=10)
        position = publication.position
        session_id = publication.session_id

        [descriptor] = [d for d in client.list_recordings()
                        if d["sessionId"] == session_id and d["streamId"] == stream_id]
        stopped = client.stop_recording(channel, stream_id, recording_id=descriptor["recordingId"],
                                        await_position=position)
    assert stopped["stopPosition"] == position == count * framed_length(size)

    replay = client.replay(descriptor["recordingId"], replay_channel=replay_channel(), replay_stream_id=2006)
    assert (replay.messages, replay.digest) == (count, expected_digest(0, count, size))
