"""The modern Java side works on its own: a real Aeron 1.51.0 archive and the real 1.51.0 client,
through the modern peer, with no code of ours in the archive path.

Proves the peer's commands and payload digests before other tests point them at our sidecar.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.interop.peer.modern_peer import (
    EXIT_USAGE,
    MODERN_AERON_VERSION,
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    PeerError,
    RecordResult,
    RunningModernJavaArchive,
    expected_digest,
    fetch_script,
    framed_length,
    payloads,
    running_modern_java_archive,
    shm_tempdir,
    start_modern_java_archive,
    start_modern_java_driver,
)
from tests.support.ports import free_udp_port, udp_channel

MESSAGES = 1_000
SIZE = 100
STREAM_ID = 1001


@pytest.fixture(scope="module")
def recording(modern_java_archive: RunningModernJavaArchive) -> RecordResult:
    """1,000 deterministic messages recorded over UDP (REMOTE) by the real 1.51.0 client."""
    return modern_java_archive.client.record(udp_channel(), STREAM_ID, MESSAGES, SIZE)


def test_the_pinned_version_is_the_one_running(modern_peer: ModernPeerInstallation,
                                               modern_java_archive: RunningModernJavaArchive) -> None:
    assert modern_peer.aeron_version == MODERN_AERON_VERSION
    assert modern_java_archive.server.ready["aeronVersion"] == MODERN_AERON_VERSION
    assert modern_java_archive.server.ready["archiveProtocolVersion"] == "1.12.0"


def test_recording_stops_at_the_publication_position(recording: RecordResult) -> None:
    assert recording.start_position == 0
    assert recording.publication_position == MESSAGES * framed_length(SIZE)
    assert recording.stop_position == recording.publication_position
    assert recording.digest == expected_digest(0, MESSAGES, SIZE)
    assert recording.fields["progressVia"] == "counter"


def test_list_returns_the_descriptor_with_aeron_field_names(modern_java_archive: RunningModernJavaArchive,
                                                             recording: RecordResult) -> None:
    by_id = {d["recordingId"]: d for d in modern_java_archive.client.list_recordings()}
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
    [single] = modern_java_archive.client.list_recordings(recording_id=recording.recording_id)
    assert _without_request_ids(single) == _without_request_ids(descriptor)


def _without_request_ids(descriptor: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in descriptor.items() if k not in ("correlationId", "controlSessionId")}


def test_connect_reports_the_archive_id_and_protocol(modern_java_archive: RunningModernJavaArchive) -> None:
    connected = modern_java_archive.client.connect()

    assert connected.archive_id == modern_java_archive.archive_id
    assert connected.archive_protocol_version == "1.12.0"
    assert connected.control_session_id != 0


def test_replay_of_the_whole_recording_matches_the_published_digest(modern_java_archive: RunningModernJavaArchive,
                                                                    recording: RecordResult) -> None:
    replay = modern_java_archive.client.replay(recording.recording_id, replay_channel=udp_channel(),
                                               replay_stream_id=2001)

    assert replay.digest == recording.digest
    assert (replay.messages, replay.first_index, replay.last_index) == (MESSAGES, 0, MESSAGES - 1)
    assert (replay.first_position, replay.last_position) == (recording.start_position, recording.stop_position)


def test_replay_from_the_middle_continues_at_the_right_message(modern_java_archive: RunningModernJavaArchive,
                                                               recording: RecordResult) -> None:
    middle = MESSAGES // 2
    position = middle * framed_length(SIZE)

    replay = modern_java_archive.client.replay(recording.recording_id, position=position,
                                               replay_channel="aeron:ipc", replay_stream_id=2002)

    assert replay.first_position == position
    assert replay.last_position == recording.stop_position
    assert (replay.first_index, replay.last_index) == (middle, MESSAGES - 1)
    assert replay.digest == expected_digest(middle, MESSAGES - middle, SIZE)


def test_replay_with_a_length_stops_there(modern_java_archive: RunningModernJavaArchive,
                                          recording: RecordResult) -> None:
    position = 100 * framed_length(SIZE)
    replay = modern_java_archive.client.replay(recording.recording_id, position=position,
                                               length=50 * framed_length(SIZE),
                                               replay_channel="aeron:ipc", replay_stream_id=2003)

    assert replay.messages == 50
    assert replay.last_position == position + 50 * framed_length(SIZE)
    assert replay.digest == expected_digest(100, 50, SIZE)


def test_bounded_replay_ends_at_the_limit_counter(modern_java_archive: RunningModernJavaArchive,
                                                  recording: RecordResult) -> None:
    limit = 300 * framed_length(SIZE)
    replay = modern_java_archive.client.replay(recording.recording_id, position=200 * framed_length(SIZE),
                                               limit_position=limit,
                                               replay_channel="aeron:ipc", replay_stream_id=2004)

    assert replay.fields["bounded"] is True
    assert replay.last_position == limit
    assert (replay.messages, replay.first_index, replay.last_index) == (100, 200, 299)
    assert replay.digest == expected_digest(200, 100, SIZE)


def test_publish_feeds_a_recording_started_by_another_client(modern_java_archive: RunningModernJavaArchive) -> None:
    client = modern_java_archive.client
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


def test_bad_usage_exits_with_code_2(modern_java_archive: RunningModernJavaArchive) -> None:
    with pytest.raises(PeerError) as raised:
        modern_java_archive.client.run("record", *modern_java_archive.endpoint.options(), "--channel", "aeron:ipc",
                                       "--stream-id", "1", "--messages", "1", "--size", "5000")
    assert raised.value.exit_code == EXIT_USAGE
    assert raised.value.error is not None and "--fragmented" in raised.value.error["message"]
    with pytest.raises(PeerError) as unknown:
        modern_java_archive.client.run("list", "--no-such-option", "1")
    assert unknown.value.exit_code == EXIT_USAGE


def test_dedicated_threading_starts_records_and_stops_cleanly_by_pid(modern_peer: ModernPeerInstallation,
                                                                     tmp_path: Path) -> None:
    with running_modern_java_archive(modern_peer, tmp_path, threading="dedicated") as archive:
        pid = archive.server.pid
        assert archive.server.ready["threading"] == "dedicated"
        recorded = archive.client.record("aeron:ipc", 1004, 100, 200)
        assert recorded.stop_position == 100 * framed_length(200)
        assert recorded.digest == expected_digest(0, 100, 200)
        assert archive.server.stop() is True
    assert archive.server.process.returncode == 0
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0


def test_credentials_and_a_response_channel_reach_the_archive(modern_peer: ModernPeerInstallation,
                                                              modern_java_archive: RunningModernJavaArchive,
                                                              recording: RecordResult) -> None:
    """An encoded-credentials supplier (the default authenticator accepts any) and a response channel
    (control-mode=response): login and a listing both work."""
    endpoint = ModernArchiveEndpoint(
        control_channel=modern_java_archive.control_channel, aeron_dir=modern_java_archive.aeron_dir,
        response_channel=f"aeron:udp?control-mode=response|control=localhost:{free_udp_port()}")
    client = ModernPeerClient(modern_peer, endpoint, credentials="user:pass")

    assert client.connect().archive_id == modern_java_archive.archive_id
    [descriptor] = client.list_recordings(recording_id=recording.recording_id)
    assert descriptor["stopPosition"] == recording.stop_position


def test_archive_on_a_separate_java_driver(modern_peer: ModernPeerInstallation, tmp_path: Path) -> None:
    """driver + archive --external-driver: two processes, both stopped by PID."""
    aeron_dir = shm_tempdir("aeron-modern-driver-")
    try:
        with start_modern_java_driver(modern_peer, aeron_dir=aeron_dir, log_dir=tmp_path) as driver:
            assert driver.ready["role"] == "driver"
            with start_modern_java_archive(modern_peer, archive_dir=tmp_path / "archive", aeron_dir=aeron_dir,
                                           archive_id=4242, external_driver=True, log_dir=tmp_path) as server:
                assert (server.ready["externalDriver"], server.ready["archiveId"]) == (True, 4242)
                client = ModernPeerClient(modern_peer, ModernArchiveEndpoint(
                    control_channel=server.ready["controlChannel"], aeron_dir=aeron_dir))
                recorded = client.record("aeron:ipc", 1005, 50, 100)
                assert recorded.fields["archiveId"] == 4242
                assert recorded.digest == expected_digest(0, 50, 100)
            assert server.process.returncode == 0
        assert driver.process.returncode == 0
    finally:
        shutil.rmtree(aeron_dir, ignore_errors=True)


def test_java_archive_on_our_c_driver_records_what_our_c_client_publishes(modern_peer: ModernPeerInstallation,
                                                                          tmp_path: Path) -> None:
    """A 1.51.0 Java archive attached to our C driver (pyaeron 1.53, same CnC layout), fed by our C
    client over UDP; the Java client replays the same bytes."""
    from aeron_spark.driver_integration.client import AeronClient

    channel, stream_id, count, size = udp_channel(), 1006, 200, 48
    with AeronClient.with_embedded_driver() as aeron:
        with running_modern_java_archive(modern_peer, tmp_path, aeron_dir=Path(aeron.aeron_dir),
                                         external_driver=True) as archive:
            client = archive.client
            client.start_recording(channel, stream_id)
            publication = aeron.add_exclusive_publication(channel, stream_id)
            deadline = time.monotonic() + 30
            while not publication.is_connected:
                assert time.monotonic() < deadline, "the Java archive's recording subscription never connected"
                time.sleep(0.005)
            for payload in payloads(0, count, size):
                publication.offer_with_retry(payload.tobytes(), timeout=10)
            [descriptor] = [d for d in client.list_recordings()
                            if d["sessionId"] == publication.session_id and d["streamId"] == stream_id]
            stopped = client.stop_recording(channel, stream_id, recording_id=descriptor["recordingId"],
                                            await_position=publication.position)
            assert stopped["stopPosition"] == count * framed_length(size)
            replay = client.replay(descriptor["recordingId"], replay_channel="aeron:ipc", replay_stream_id=2006)
            assert (replay.messages, replay.digest) == (count, expected_digest(0, count, size))


def test_the_fetch_script_names_a_missing_mvn(tmp_path: Path) -> None:
    """PATH without mvn and an empty cache: one error line that names mvn, no traceback."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for entry in os.scandir(folder) if os.path.isdir(folder) else ():
            target = bin_dir / entry.name
            if entry.name != "mvn" and not target.exists():
                target.symlink_to(entry.path)
    environment = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "AERON_SPARK_JAVA_PEER_CACHE")}
    environment["PATH"] = str(bin_dir)

    completed = subprocess.run(["bash", str(fetch_script()), "--quiet", "--cache-dir", str(tmp_path / "cache")],
                               env=environment, capture_output=True, text=True, timeout=60, check=False)

    assert completed.returncode == 1
    [line] = completed.stderr.strip().splitlines()
    assert line.startswith("[fetch-modern-java-peer] error: mvn not found")
