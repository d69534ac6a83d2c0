"""Messages through a running sidecar, for the sidecar tests: deterministic payloads, publishing
them (remembering where each message starts), recording them over IPC through the archive
client, polling replays into (position, payload) pairs, and what a replay must deliver.

The constants are the tests' shared settings: a generous ``TIMEOUT`` (the machine is shared and
noisy), 64 KiB terms (``TERM``) and the IPC channel and stream ``record_ipc`` records.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.client.replay_subscription import ReplayedMessage
from aeron_spark.archive.codecs import ControlResponseCode, RecordingSignal, SourceLocation
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.frame import compute_fragmented_frame_length

TIMEOUT = 15.0  # generous: the machine is shared and noisy
TERM = 64 * 1024
IPC_RECORDED = f"aeron:ipc?term-length={TERM}"
RECORDED_STREAM = 1001


def payloads(count: int, seed: int, start: int = 0) -> list[bytes]:
    """Deterministic messages of mixed sizes; every 7th is 3000-6000 bytes, longer than the
    1408-byte MTU, so it travels as several fragments. No zero bytes (see the kill -9 test)."""
    rng = random.Random(seed)
    messages = []
    for index in range(start, start + count):
        size = rng.randrange(3000, 6000) if index % 7 == 6 else rng.randrange(8, 300)
        head = b"%08d:" % index
        messages.append(head + bytes(rng.randrange(1, 256) for _ in range(size - len(head))))
    return messages


@dataclass
class Published:
    messages: list[bytes]
    starts: list[int]  # stream position where each message begins
    end: int


def message_start(publication, message: bytes, end: int) -> int:
    """Where a message that ended at ``end`` began (not the previous end: a term's padding may
    lie in between)."""
    return end - compute_fragmented_frame_length(len(message), publication.max_payload_length)


def publish(publication, messages: list[bytes], start_position: int = 0) -> Published:
    starts, position = [], start_position
    for message in messages:
        position = publication.offer_with_retry(message, timeout=TIMEOUT)
        starts.append(message_start(publication, message, position))
    return Published(messages, starts, position)


def expected(published: Published, from_position: int = 0, to_position: int | None = None) -> list[tuple[int, bytes]]:
    end = published.end if to_position is None else to_position
    return [(start, message) for start, message in zip(published.starts, published.messages, strict=True)
            if from_position <= start < end]


def as_pairs(messages: list[ReplayedMessage]) -> list[tuple[int, bytes]]:
    return [(m.position, m.payload) for m in messages]


def await_recorded(archive: ArchiveClient, recording_id: int, position: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while archive.recording_position(recording_id) < position:
        assert time.monotonic() < deadline, f"recording {recording_id} did not reach {position}"
        time.sleep(0.005)


def poll_into(replay, received: list[tuple[int, bytes]]) -> int:
    """Polls one replay image; appends (start position, payload) of each whole message."""
    from aeron_spark.driver_integration.position import compute_position

    image = replay.image
    bits, initial = image.position_bits_to_shift, image.initial_term_id

    def on_message(payload, header) -> None:
        received.append((compute_position(header.term_id, header.term_offset, bits, initial), bytes(payload)))
    return image.poll(on_message, 64)


def drain_until(replay, received: list, count: int, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while len(received) < count:
        if poll_into(replay, received) == 0:
            assert time.monotonic() < deadline, f"{what}: got {len(received)} of {count} messages"
            time.sleep(0.0005)


def nothing_more_within(replay, received: list, seconds: float) -> None:
    before = len(received)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        poll_into(replay, received)
        time.sleep(0.002)
    assert len(received) == before, f"unexpected messages {received[before:]!r:.300}"


def ipc_archive(aeron: AeronClient) -> ArchiveClient:
    return ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11,
                                 response_channel="aeron:ipc", aeron=aeron, timeout=TIMEOUT)


def record_ipc(archive: ArchiveClient, messages: list[bytes], stream_id: int = RECORDED_STREAM,
               keep_open: bool = False):
    """Records ``messages`` published on IPC; returns (recording id, Published, publication).
    The recording is stopped (and the publication closed) unless ``keep_open``."""
    subscription_id = archive.start_recording(IPC_RECORDED, stream_id, SourceLocation.LOCAL)
    publication = archive.aeron.add_exclusive_publication(IPC_RECORDED, stream_id)
    started = await_recording_of(archive, subscription_id, publication.session_id)
    published = publish(publication, messages)
    await_recorded(archive, started.recording_id, published.end)
    if not keep_open:
        archive.stop_recording(IPC_RECORDED, stream_id)
        archive.await_recording_signal(RecordingSignal.STOP, recording_id=started.recording_id)
        publication.close()
        return started.recording_id, published, None
    return started.recording_id, published, publication


def await_recording_of(archive: ArchiveClient, subscription_id: int, session_id: int):
    """The START signal of the recording of this publication (``session_id``). A previous test
    step's IPC publication that is closing (draining) can still be joined by a new recording
    subscription: that image becomes a recording of its own, which ends at once; skip it."""
    while True:
        started = archive.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id)
        descriptor = archive.list_recording(started.recording_id)
        if descriptor is not None and descriptor.session_id == session_id:
            return started


def error_of(call) -> ArchiveError:
    with pytest.raises(ArchiveError) as raised:
        call()
    assert raised.value.code == ControlResponseCode.ERROR, raised.value
    return raised.value
