"""Response channels (``control-mode=response``) with the real modern Java Aeron (1.51.0), both ways.

* The real Java ``AeronArchive`` whose control response channel is
  ``aeron:udp?control-mode=response|control=localhost:P`` connects to our sidecar, records over UDP,
  lists, and replays byte for byte over a ``control-mode=response`` replay channel (the modern
  peer's replay asks a ReplayToken and sends the request over a publication of its own, as
  ``AeronArchive.replay(recordingId, channel, streamId, ReplayParams)`` does).
* Our ``ArchiveClient`` on a C media driver of its own connects to the real Java archive with a
  response channel, lists, and replays byte for byte over a response channel.

Digests are the peer's (``expected_digest``): SHA-256 over the deterministic payloads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.driver_integration import AeronClient, MediaDriver

from tests.interop.peer.modern_peer import (
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.sidecar import Sidecar, running_sidecar

MESSAGES = 1_000
SIZE = 100
STREAM_ID = 1001
REPLAY_STREAM_ID = 2001
TIMEOUT = 20.0


def response_channel(port: int | None = None) -> str:
    return f"aeron:udp?control-mode=response|control=localhost:{free_udp_port() if port is None else port}"


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    with running_sidecar(tmp_path_factory.mktemp("response-channels") / "archive") as running:
        yield running


@pytest.fixture
def python_client_driver() -> Iterator[AeronClient]:
    """Our client on a C media driver of its own (not the archive's)."""
    with MediaDriver(threading_mode="shared") as driver:
        client = AeronClient(driver.dir, client_name="response-channel interop")
        try:
            yield client
        finally:
            client.close()


def test_the_java_client_over_response_channels_records_lists_and_replays_on_our_sidecar(
        modern_peer: ModernPeerInstallation, sidecar: Sidecar) -> None:
    java = ModernPeerClient(modern_peer, ModernArchiveEndpoint(
        control_channel=sidecar.control_channel, response_channel=response_channel()))
    connected = java.connect()
    assert connected.archive_protocol_version == "1.12.0"
    assert "control-mode=response" in connected.fields["controlResponseChannel"]

    recorded = java.record(udp_channel(), STREAM_ID, MESSAGES, SIZE)
    assert recorded.stop_position == recorded.publication_position == MESSAGES * framed_length(SIZE)
    assert recorded.digest == expected_digest(0, MESSAGES, SIZE)

    [descriptor] = [d for d in java.list_recordings() if d["recordingId"] == recorded.recording_id]
    assert (descriptor["startPosition"], descriptor["stopPosition"]) == (0, recorded.stop_position)

    replayed = java.replay(recorded.recording_id, replay_channel=response_channel(),
                           replay_stream_id=REPLAY_STREAM_ID, position=0, length=recorded.stop_position)
    assert replayed.messages == MESSAGES and replayed.digest == expected_digest(0, MESSAGES, SIZE)
    # ... a part of it, from a later message, on the same response port as the control responses
    shared = response_channel()
    java_shared = ModernPeerClient(modern_peer, ModernArchiveEndpoint(
        control_channel=sidecar.control_channel, response_channel=shared))
    start = 400 * framed_length(SIZE)
    part = java_shared.replay(recorded.recording_id, replay_channel=shared, replay_stream_id=REPLAY_STREAM_ID,
                              position=start, length=recorded.stop_position - start)
    assert part.messages == MESSAGES - 400 and part.digest == expected_digest(400, MESSAGES - 400, SIZE)

    replays = [line for line in sidecar.stderr_lines
               if "replay_requests: replay" in line and " from " in line]
    assert len(replays) == 2 and all("response-correlation-id=" in line for line in replays), sidecar.log_tail()


def test_our_client_over_response_channels_lists_and_replays_from_the_java_archive(
        modern_java_archive: RunningModernJavaArchive, python_client_driver: AeronClient, tmp_path: Path) -> None:
    recorded = modern_java_archive.client.record(udp_channel(), STREAM_ID, MESSAGES, SIZE)
    with ArchiveClient.connect(control_channel=modern_java_archive.control_channel,
                               control_stream_id=modern_java_archive.control_stream_id,
                               response_channel=response_channel(), aeron=python_client_driver,
                               timeout=TIMEOUT) as archive:
        assert archive.archive_id == modern_java_archive.archive_id
        assert not archive.is_legacy and archive.archive_protocol_version == (1 << 16) | (12 << 8)
        descriptor = archive.list_recording(recorded.recording_id)
        assert descriptor is not None and descriptor.stop_position == recorded.stop_position
        assert recorded.recording_id in [d.recording_id for d in archive.list_recordings()]

        with archive.replay(recorded.recording_id, 0, recorded.stop_position, response_channel(),
                            REPLAY_STREAM_ID) as replay:
            payloads = [m.payload for m in replay.messages(idle_timeout=TIMEOUT)]
        assert len(payloads) == MESSAGES
        assert hashlib.sha256(b"".join(payloads)).hexdigest() == expected_digest(0, MESSAGES, SIZE)

        start = 250 * framed_length(SIZE)
        with archive.replay(recorded.recording_id, start, recorded.stop_position - start,
                            archive.response_channel, REPLAY_STREAM_ID + 1) as replay:
            payloads = [m.payload for m in replay.messages(idle_timeout=TIMEOUT)]
        assert hashlib.sha256(b"".join(payloads)).hexdigest() == expected_digest(250, MESSAGES - 250, SIZE)

