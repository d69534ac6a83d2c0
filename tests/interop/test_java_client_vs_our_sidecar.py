"""The real Java 1.15.1 AeronArchive client against OUR archive sidecar (`aeron-archive serve`).

A 1.15.1 Java client cannot attach to our 1.53 C driver (CnC version mismatch), so every peer
command runs its own embedded 1.15.1 Java driver and reaches the sidecar's C driver over UDP:
control requests to the sidecar's control channel, responses on a fresh UDP port per command,
the recorded stream and the replays over UDP too. Nothing of ours is on the client side.

What is proven, per command of the peer (see docs/interop.md for what each one sends):

* ``record``: Connect (v0 ConnectRequest), StartRecording of a UDP channel the client publishes to,
  RecordingPosition polling (the client cannot see our ``rec-pos`` counter), StopRecording,
  ListRecording until the stop position is set; the stop position equals the publication
  position and equals start + n * framed length.
* ``list``: the descriptor (Aeron field names) agrees with the recording.
* ``replay``: whole recording and from a mid-recording position give the expected digests,
  indices and positions (the digests are recomputed here, not taken from the peer).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interop.peer.interop_peer import (
    ArchiveEndpoint,
    PeerClient,
    PeerInstallation,
    RecordResult,
    expected_digest,
    framed_length,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.sidecar import Sidecar, running_sidecar


MESSAGES = 1000
SIZE = 100
STREAM_ID = 1001
REPLAY_STREAM_ID = 2002
FRAGMENTED_MESSAGES = 20
FRAGMENTED_SIZE = 5000  # > mtu - 32 of the 1.15.1 default UDP mtu (1408): several fragments each


@dataclass(frozen=True)
class SidecarUnderTest:
    sidecar: Sidecar
    client: PeerClient
    recorded: RecordResult
    channel: str


@pytest.fixture(scope="module")
def sidecar_with_recording(peer_installation: PeerInstallation,
                           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidecarUnderTest]:
    """Our sidecar (own embedded C driver) holding one recording made by the Java client's `record`."""
    work: Path = tmp_path_factory.mktemp("our-sidecar")
    with running_sidecar(work / "archive") as sidecar:
        # response_channel=None: a fresh UDP response port per command, so a previous session's
        # lingering response publication never lands on the next command.
        endpoint = ArchiveEndpoint(control_channel=sidecar.control_channel, response_channel=None,
                                   aeron_dir=None)
        client = PeerClient(peer_installation, endpoint, timeout=60)
        channel = udp_channel(free_udp_port())
        recorded = client.record(channel, STREAM_ID, MESSAGES, SIZE, timeout_ms=20_000)
        yield SidecarUnderTest(sidecar, client, recorded, channel)


def test_record_stop_position_equals_publication_position(sidecar_with_recording: SidecarUnderTest) -> None:
    recorded = sidecar_with_recording.recorded
    # The client cannot see our C driver's rec-pos counter: it followed ListRecordings + RecordingPosition.
    assert recorded.fields["progressVia"] == "protocol"
    assert recorded.start_position == 0
    assert recorded.publication_position == MESSAGES * framed_length(SIZE)
    assert recorded.stop_position == recorded.publication_position
    assert recorded.messages == MESSAGES
    assert recorded.digest == expected_digest(0, MESSAGES, SIZE)


def test_list_recordings_describes_the_recording(sidecar_with_recording: SidecarUnderTest) -> None:
    recorded = sidecar_with_recording.recorded
    descriptors = sidecar_with_recording.client.list_recordings()
    ids = [d["recordingId"] for d in descriptors]
    assert ids == sorted(set(ids)) and recorded.recording_id in ids
    (descriptor,) = [d for d in descriptors if d["recordingId"] == recorded.recording_id]
    assert descriptor["startPosition"] == recorded.start_position
    assert descriptor["stopPosition"] == recorded.stop_position
    assert descriptor["sessionId"] == recorded.session_id
    assert descriptor["streamId"] == STREAM_ID
    assert descriptor["startTimestamp"] <= descriptor["stopTimestamp"]
    # The client records `channel|session-id=<its session>`; 1.15.1 keeps the whole channel.
    assert descriptor["originalChannel"] == f"{sidecar_with_recording.channel}|session-id={recorded.session_id}"
    assert descriptor["strippedChannel"].startswith(sidecar_with_recording.channel)
    term_length = descriptor["termBufferLength"]
    assert term_length & (term_length - 1) == 0
    assert descriptor["segmentFileLength"] >= term_length
    assert descriptor["mtuLength"] == 1408  # the 1.15.1 Java driver's default UDP mtu
    # The single-recording form (ListRecording) gives the same descriptor.
    single = sidecar_with_recording.client.list_recordings(recording_id=recorded.recording_id)
    assert [{k: v for k, v in d.items() if k not in ("controlSessionId", "correlationId")} for d in single] == \
        [{k: v for k, v in descriptor.items() if k not in ("controlSessionId", "correlationId")}]


def test_replay_whole_recording(sidecar_with_recording: SidecarUnderTest) -> None:
    recorded = sidecar_with_recording.recorded
    replayed = sidecar_with_recording.client.replay(
        recorded.recording_id, replay_channel=udp_channel(free_udp_port()), replay_stream_id=REPLAY_STREAM_ID,
        timeout_ms=20_000)
    assert (replayed.messages, replayed.first_index, replayed.last_index) == (MESSAGES, 0, MESSAGES - 1)
    assert (replayed.first_position, replayed.last_position) == (0, recorded.stop_position)
    assert replayed.digest == expected_digest(0, MESSAGES, SIZE) == recorded.digest


def test_replay_from_mid_recording_position(sidecar_with_recording: SidecarUnderTest) -> None:
    recorded = sidecar_with_recording.recorded
    middle = 437
    position = middle * framed_length(SIZE)
    replayed = sidecar_with_recording.client.replay(
        recorded.recording_id, position=position, replay_channel=udp_channel(free_udp_port()),
        replay_stream_id=REPLAY_STREAM_ID, timeout_ms=20_000)
    assert (replayed.position, replayed.length) == (position, recorded.stop_position - position)
    assert (replayed.messages, replayed.first_index, replayed.last_index) == (MESSAGES - middle, middle, MESSAGES - 1)
    assert (replayed.first_position, replayed.last_position) == (position, recorded.stop_position)
    assert replayed.digest == expected_digest(middle, MESSAGES - middle, SIZE)


def test_bounded_replay_from_the_middle(sidecar_with_recording: SidecarUnderTest) -> None:
    recorded = sidecar_with_recording.recorded
    first, count = 250, 50
    replayed = sidecar_with_recording.client.replay(
        recorded.recording_id, position=first * framed_length(SIZE), length=count * framed_length(SIZE),
        replay_channel=udp_channel(free_udp_port()), replay_stream_id=REPLAY_STREAM_ID, timeout_ms=20_000)
    assert (replayed.messages, replayed.first_index, replayed.last_index) == (count, first, first + count - 1)
    assert replayed.last_position == (first + count) * framed_length(SIZE)
    assert replayed.digest == expected_digest(first, count, SIZE)


def test_fragmented_messages_round_trip(sidecar_with_recording: SidecarUnderTest) -> None:
    """A second recording (id 1) of messages the Java driver splits into several frames each."""
    client = sidecar_with_recording.client
    recorded = client.record(udp_channel(free_udp_port()), STREAM_ID + 1, FRAGMENTED_MESSAGES, FRAGMENTED_SIZE,
                             fragmented=True, timeout_ms=20_000)
    assert recorded.recording_id != sidecar_with_recording.recorded.recording_id
    assert recorded.stop_position == recorded.publication_position > FRAGMENTED_MESSAGES * FRAGMENTED_SIZE
    replayed = client.replay(recorded.recording_id, replay_channel=udp_channel(free_udp_port()),
                             replay_stream_id=REPLAY_STREAM_ID, timeout_ms=20_000)
    assert replayed.messages == FRAGMENTED_MESSAGES
    assert replayed.digest == expected_digest(0, FRAGMENTED_MESSAGES, FRAGMENTED_SIZE) == recorded.digest
    assert replayed.last_position == recorded.stop_position
