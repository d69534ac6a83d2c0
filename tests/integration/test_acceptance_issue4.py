"""Acceptance of issue 4 (archive sidecar) with the real `aeron-archive serve` subprocess and the
real C media driver, for the points no earlier test proves (see docs/acceptance.md for the
full map of points to tests).

Covered here: record -> list -> replay over UDP with term rotation and fragmented messages;
concurrent replays from one and from several control sessions; a tail replay of a recording
still being recorded; a bounded replay that advances with its limit counter; error responses
for bad replay/truncate/purge requests (unknown recording, misaligned position, position
beyond stop, not a frame start, active recording); the rec-pos counter (key, label, value) and
the recorder/replayer I/O counters; a replay whose subscriber never connects ends with an error
after the (default 5 s) connect timeout; idle and vanished control sessions are closed; SIGINT
stops cleanly; kill -9 while messages are flowing, then restart: every complete frame written
before the kill replays.
"""

from __future__ import annotations

import io
import os
import random
import signal
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.service.counters import (
    RECORDER_MAX_WRITE_TIME_TYPE_ID,
    RECORDER_TOTAL_WRITE_BYTES_TYPE_ID,
    RECORDER_TOTAL_WRITE_TIME_TYPE_ID,
    REPLAYER_MAX_READ_TIME_TYPE_ID,
    REPLAYER_TOTAL_READ_BYTES_TYPE_ID,
    REPLAYER_TOTAL_READ_TIME_TYPE_ID,
    find_archive_counter,
)
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    ControlResponseCode,
    RecordingSignal,
    SourceLocation,
)
from aeron_spark.archive.storage.mark_file import read_mark_file
from aeron_spark.archive.client.replay_subscription import (
    ReplayedMessage,
    replay_image_session_id,
)
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.frame import compute_fragmented_frame_length
from aeron_spark.driver_integration.media_driver import MediaDriver

from tests.support.ports import free_udp_port
from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import Sidecar, running_sidecar
from tests.support.waiting import wait_until


pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 15.0  # generous: the machine is shared and noisy
TERM = 64 * 1024
IPC_RECORDED = f"aeron:ipc?term-length={TERM}"
RECORDED_STREAM = 1001


def udp(port: int | None = None) -> str:
    return f"aeron:udp?endpoint=localhost:{port or free_udp_port()}"


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


# ------------------------------------------------------------------------------------------------
# fixtures
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def sidecar(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Sidecar]:
    """`aeron-archive serve` with its embedded driver; extra options by indirect parametrization."""
    args = list(getattr(request, "param", []))
    with running_sidecar(tmp_path / "archive", args) as running:
        yield running


@pytest.fixture
def local_aeron(sidecar: Sidecar) -> Iterator[AeronClient]:
    """A client on the sidecar's own embedded driver (closed before the sidecar stops)."""
    client = AeronClient(sidecar.driver_dir, client_name="acceptance-local")
    try:
        yield client
    finally:
        client.close()


def ipc_archive(aeron: AeronClient) -> ArchiveClient:
    return ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11,
                                 response_channel="aeron:ipc", aeron=aeron, timeout=TIMEOUT)


def record_ipc(archive: ArchiveClient, messages: list[bytes], stream_id: int = RECORDED_STREAM,
               keep_open: bool = False):
    """Records ``messages`` published on IPC; returns (recording id, Published, publication).
    The recording is stopped (and the publication closed) unless ``keep_open``."""
    subscription_id = archive.start_recording(IPC_RECORDED, stream_id, SourceLocation.LOCAL)
    publication = archive.aeron.add_exclusive_publication(IPC_RECORDED, stream_id)
    started = archive.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id)
    published = publish(publication, messages)
    await_recorded(archive, started.recording_id, published.end)
    if not keep_open:
        archive.stop_recording(IPC_RECORDED, stream_id)
        archive.await_recording_signal(RecordingSignal.STOP, recording_id=started.recording_id)
        publication.close()
        publication = None
    return started.recording_id, published, publication


def test_serve_options_and_their_defaults(tmp_path: Path):
    """`aeron-archive serve`'s options as issue 4 names them, with Aeron's defaults."""
    from aeron_spark.archive.cli import serve_command
    from aeron_spark.archive.cli import tool

    tool._load_command_modules()
    args = tool.build_parser().parse_args(["serve", "--dir", str(tmp_path)])
    options = serve_command.options_from_args(args)
    assert (options.control_channel, options.control_stream_id) == ("aeron:udp?endpoint=localhost:8010", 10)
    assert (options.local_control_channel, options.local_control_stream_id) == ("aeron:ipc", 11)
    assert options.recording_events_channel is None  # off by default
    assert options.aeron_dir is None  # an embedded driver
    assert (options.file_sync, options.checksum, options.archive_id) == (0, None, None)
    assert options.replay_checksum is None
    assert options.replay_buffer_length == 1024 * 1024 and options.connect_timeout_ms == 5_000
    assert options.segment_file_length == 128 * 1024 * 1024 and options.authenticator is None
    out = io.StringIO()
    assert tool.main(["serve", "--help"], stdout=out) == 0
    for option in ("--dir", "--aeron-dir", "--control-channel", "--control-stream-id",
                   "--local-control-channel", "--recording-events-channel", "--archive-id",
                   "--segment-length", "--file-sync", "--checksum", "--replay-checksum",
                   "--replay-buffer-length", "--auth-credentials-file"):
        assert option in out.getvalue(), option
    err = io.StringIO()
    assert tool.main(["serve", "--dir", str(tmp_path), "--file-sync", "3"], stderr=err) == 2
    assert "--file-sync" in err.getvalue()


# ------------------------------------------------------------------------------------------------
# record -> list -> replay over UDP, with term rotation and fragments
# ------------------------------------------------------------------------------------------------

def test_udp_record_list_replay_with_term_rotation_and_fragments(sidecar: Sidecar, aeron_client: AeronClient):
    """Everything over UDP between the test's driver and the sidecar's embedded driver: control,
    the recorded stream (64 KiB terms, so several term rotations with padding and a 64 KiB
    segment rollover) and the replay; positions and payloads identical to what was published."""
    channel = f"{udp()}|term-length={TERM}"
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT) as archive:
        subscription_id = archive.start_recording(channel, RECORDED_STREAM, SourceLocation.REMOTE)
        publication = aeron_client.add_exclusive_publication(channel, RECORDED_STREAM)
        try:
            recording_id = archive.await_recording_signal(
                RecordingSignal.START, subscription_id=subscription_id).recording_id
            published = publish(publication, payloads(300, seed=4))
            assert published.end > 3 * TERM  # several term rotations
            assert any(len(m) > 1408 for m in published.messages)  # fragmented messages
            await_recorded(archive, recording_id, published.end)
            archive.stop_recording(channel, RECORDED_STREAM)
            assert archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id).position \
                == published.end
        finally:
            publication.close()

        [descriptor] = [d for d in archive.list_recordings() if d.recording_id == recording_id]
        assert (descriptor.start_position, descriptor.stop_position) == (0, published.end)
        assert (descriptor.term_buffer_length, descriptor.stream_id) == (TERM, RECORDED_STREAM)
        assert descriptor.original_channel == channel
        assert len(list(sidecar.archive_dir.glob(f"{recording_id}-*.rec"))) > 1  # segment rollover

        with archive.replay(recording_id, 0, published.end, udp(), 2001) as replay:
            assert replay.image.session_id == replay_image_session_id(replay.replay_session_id)
            replayed = list(replay.messages(idle_timeout=TIMEOUT))
        assert as_pairs(replayed) == expected(published)
        assert replayed[-1].next_position == published.end

        middle = published.starts[150]
        with archive.replay(recording_id, middle, published.end - middle, udp(), 2002) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published, middle)


def test_replay_of_a_recording_that_ends_with_term_padding_completes(sidecar: Sidecar, local_aeron: AeronClient):
    """A recording truncated at a term boundary ends with the padding frame of that term (what a
    crash can also leave). Its replay delivers every message and completes - found by the kill -9
    test: `ReplaySubscription.messages` used to raise ReplayError because padding moves the
    position without a message (fixed in archive/replay_subscription.py)."""
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(150, seed=4))
        in_first_term = expected(published, 0, TERM)
        last_start, last_message = in_first_term[-1]
        assert last_start + len(last_message) + 32 < TERM  # so the term ends with padding
        archive.truncate_recording(recording_id, TERM)
        archive.await_recording_signal(RecordingSignal.DELETE, recording_id=recording_id)
        with archive.replay(recording_id, 0, TERM, "aeron:ipc", 2001) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == in_first_term
            assert replay.position == TERM


@pytest.mark.parametrize("sidecar", [["--checksum", "crc32c", "--replay-checksum", "crc32c"]], indirect=True,
                         ids=["crc32c"])
def test_replay_verifies_record_checksums_when_enabled(sidecar: Sidecar, local_aeron: AeronClient):
    """With --replay-checksum the replayer verifies each frame's stored CRC-32C before sending it
    (and restores the session id): a clean recording replays exactly; after one payload byte on
    disk is flipped, the replay delivers what precedes the damaged block and ends with an ERROR
    naming the position. (`serve` had no way to enable this until the audit added the option.)"""
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(100, seed=16))
        with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2001) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)

        victim = published.starts[60]
        with open(sidecar.archive_dir / f"{recording_id}-0.rec", "r+b") as segment:
            segment.seek(victim + 40)
            byte = segment.read(1)
            segment.seek(victim + 40)
            segment.write(bytes([byte[0] ^ 0xFF]))
        received: list[ReplayedMessage] = []
        with pytest.raises(ArchiveError) as failed:
            with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2002) as replay:
                for message in replay.messages(idle_timeout=TIMEOUT):
                    received.append(message)
        assert f"checksum mismatch at position={victim}" in failed.value.archive_message
        assert as_pairs(received) == expected(published, 0, victim)[:len(received)]
        assert all(m.position < victim for m in received)


# ------------------------------------------------------------------------------------------------
# concurrent replays
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sidecar", [["--replay-buffer-length", "64k"]], indirect=True, ids=["64k-buffer"])
def test_concurrent_replays_from_one_and_from_several_sessions(sidecar: Sidecar, local_aeron: AeronClient):
    """Five replays at once - three started by one control session, two by another, over IPC
    and UDP - all running before any is consumed; with a 64 KiB replay buffer each needs many
    duty cycles, so they interleave. Each delivers exactly its range."""
    with ipc_archive(local_aeron) as first, ipc_archive(local_aeron) as second, ExitStack() as stack:
        assert first.control_session_id != second.control_session_id
        recording_id, published, _ = record_ipc(first, payloads(400, seed=5))
        assert published.end > 5 * 64 * 1024
        assert second.poll_for_recording_signals() == []  # signals go only to the session that asked
        quarter = published.starts[100]
        requests = [  # (session, from position, length, channel)
            (first, 0, published.end, "aeron:ipc"),
            (first, quarter, published.end - quarter, udp()),
            (first, 0, quarter, "aeron:ipc"),
            (second, 0, published.end, udp()),
            (second, published.starts[300], published.end - published.starts[300], "aeron:ipc"),
        ]
        replays = []
        for index, (archive, position, length, channel) in enumerate(requests):
            replay = stack.enter_context(archive.replay(recording_id, position, length, channel, 3000 + index))
            replays.append((replay, expected(published, position, position + length)))
        # replaySessionId = (replay counter << 32) | the replay publication's session id
        counters_part = [r.replay_session_id >> 32 for r, _ in replays]
        assert len(set(counters_part)) == len(replays) and all(c > 0 for c in counters_part)
        assert all(r.image.session_id == replay_image_session_id(r.replay_session_id) for r, _ in replays)

        received: list[list[tuple[int, bytes]]] = [[] for _ in replays]
        deadline = time.monotonic() + 2 * TIMEOUT
        while any(len(got) < len(want) for got, (_, want) in zip(received, replays, strict=True)):
            work = sum(poll_into(replay, got) for got, (replay, _) in zip(received, replays, strict=True))
            if work == 0:
                assert time.monotonic() < deadline, [len(g) for g in received]
                time.sleep(0.0005)
        for got, (_, want) in zip(received, replays, strict=True):
            assert got == want


# ------------------------------------------------------------------------------------------------
# tail replay, bounded replay
# ------------------------------------------------------------------------------------------------

def test_tail_replay_of_a_recording_still_being_recorded(sidecar: Sidecar, local_aeron: AeronClient):
    """A replay with length -1 (follow) of an active recording delivers what was recorded, then
    what is recorded while it runs, and ends at the stop position when the recording stops."""
    with ipc_archive(local_aeron) as archive:
        recording_id, first, publication = record_ipc(archive, payloads(120, seed=6), keep_open=True)
        with archive.replay(recording_id, 0, -1, "aeron:ipc", 2001) as replay:
            received: list[tuple[int, bytes]] = []
            drain_until(replay, received, len(first.messages), "the recorded part")
            assert received == expected(first)
            nothing_more_within(replay, received, 0.3)  # it waits at the live position

            second = publish(publication, payloads(150, seed=7, start=120), first.end)
            drain_until(replay, received, 270, "the part recorded during the replay")
            assert received[120:] == expected(second)

            archive.stop_recording(IPC_RECORDED, RECORDED_STREAM)
            stop = archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id).position
            assert stop == second.end
            deadline = time.monotonic() + TIMEOUT
            while not replay.image.is_end_of_stream and not replay.image.is_closed:
                poll_into(replay, received)
                assert time.monotonic() < deadline, "the tail replay did not end with the recording"
                time.sleep(0.001)
            assert len(received) == 270 and replay.position == stop
        publication.close()


def test_bounded_replay_advances_with_its_limit_counter(sidecar: Sidecar, local_aeron: AeronClient):
    """BoundedReplay with a limit counter owned by the client (on the sidecar's driver): the
    replay stops at the counter's value, moves on each time the counter is raised, and ends
    when the counter reaches the requested end."""
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(200, seed=8))
        limit = local_aeron.add_counter(1001, b"acceptance-limit", "acceptance bounded replay limit")

        def limit_at(messages: int) -> int:  # the position after the first ``messages`` messages
            return published.starts[messages] if messages < len(published.starts) else published.end
        try:
            limit.value = limit_at(50)
            subscription = local_aeron.add_subscription("aeron:ipc", 2001)
            try:
                replay_session_id = archive.start_bounded_replay(
                    recording_id, 0, published.end, limit.counter_id, "aeron:ipc", 2001)
                image_session = replay_image_session_id(replay_session_id)
                wait_until(lambda: subscription.image_by_session_id(image_session) is not None, "replay image")

                class Replay:  # what poll_into needs
                    image = subscription.image_by_session_id(image_session)

                received: list[tuple[int, bytes]] = []
                for step in (50, 120, 199, 200):
                    limit.value = limit_at(step)
                    drain_until(Replay, received, step, f"the replay up to message {step}")
                    nothing_more_within(Replay, received, 0.3)
                    assert received == expected(published, 0, limit_at(step))
                assert received == expected(published)
                wait_until(lambda: Replay.image.is_end_of_stream or Replay.image.is_closed, "the end of the replay")
            finally:
                subscription.close()
        finally:
            limit.close()


def test_one_recording_per_image_and_a_spy_for_a_local_udp_publication(sidecar: Sidecar, local_aeron: AeronClient):
    """Two publications (two images) on one recorded UDP channel of the sidecar's own driver,
    recorded with sourceLocation LOCAL: the archive subscribes with aeron-spy: (images appear for
    local publications only) and makes one recording per image, each replaying its own messages."""
    channel = udp()
    with ipc_archive(local_aeron) as archive:
        subscription_id = archive.start_recording(channel, RECORDED_STREAM, SourceLocation.LOCAL)
        [(_, described)] = [(d.subscription_id, d.stripped_channel) for d in
                            archive.list_recording_subscriptions(0, 10, "", RECORDED_STREAM, True)]
        assert described.startswith("aeron-spy:aeron:udp")
        # a UDP publication needs a receiver to be connected (spies do not count by default)
        receiver = local_aeron.add_subscription(channel, RECORDED_STREAM)
        publications = [local_aeron.add_exclusive_publication(channel, RECORDED_STREAM) for _ in range(2)]
        try:
            starts = [archive.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id)
                      for _ in publications]
            by_session = {archive.list_recording(s.recording_id).session_id: s.recording_id for s in starts}
            assert set(by_session) == {p.session_id for p in publications}
            published = [publish(p, payloads(40, seed=20 + i)) for i, p in enumerate(publications)]
            for publication, messages in zip(publications, published, strict=True):
                await_recorded(archive, by_session[publication.session_id], messages.end)
        finally:
            for publication in publications:
                publication.close()
            receiver.close()
        archive.stop_recording(channel, RECORDED_STREAM)
        for publication, messages in zip(publications, published, strict=True):
            recording_id = by_session[publication.session_id]
            archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
            with archive.replay(recording_id, 0, messages.end, "aeron:ipc", 2001) as replay:
                assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(messages)


# ------------------------------------------------------------------------------------------------
# stop recording (by subscription, by identity), stop replay, stop all replays
# ------------------------------------------------------------------------------------------------

def await_gone(image, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not image.is_closed and not image.is_end_of_stream:
        assert time.monotonic() < deadline, what
        image.poll(lambda payload, header: None, 64)
        time.sleep(0.002)


def test_stop_recording_by_subscription_and_by_identity_and_stopping_replays(sidecar: Sidecar,
                                                                            local_aeron: AeronClient):
    with ipc_archive(local_aeron) as archive:
        recordings = []
        for stream_id in (1001, 1002):
            subscription_id = archive.start_recording(IPC_RECORDED, stream_id, SourceLocation.LOCAL)
            publication = local_aeron.add_exclusive_publication(IPC_RECORDED, stream_id)
            recording_id = archive.await_recording_signal(
                RecordingSignal.START, subscription_id=subscription_id).recording_id
            published = publish(publication, payloads(80, seed=stream_id))
            await_recorded(archive, recording_id, published.end)
            recordings.append((subscription_id, recording_id, published, publication))

        (subscription_id, first_id, first, first_publication), (_, second_id, second, second_publication) = recordings
        archive.stop_recording_subscription(subscription_id)
        assert archive.await_recording_signal(RecordingSignal.STOP, recording_id=first_id).position == first.end
        assert archive.stop_recording_by_identity(second_id) is True
        assert archive.await_recording_signal(RecordingSignal.STOP, recording_id=second_id).position == second.end
        assert archive.stop_recording_by_identity(second_id) is False  # no longer active
        with pytest.raises(ArchiveError) as unknown:
            archive.stop_recording_subscription(subscription_id)
        assert unknown.value.error_code == ArchiveErrorCode.UNKNOWN_SUBSCRIPTION
        assert [archive.stop_position(r) for r in (first_id, second_id)] == [first.end, second.end]
        first_publication.close()
        second_publication.close()

        # replays held at a limit counter stay alive until stopped
        limit = local_aeron.add_counter(1001, b"acceptance-stop", "acceptance stop-replay limit")
        limit.value = first.starts[10]
        subscription = local_aeron.add_subscription("aeron:ipc", 2001)
        try:
            images = []
            for recording_id, end in ((first_id, first.end), (first_id, first.end), (second_id, second.end)):
                replay_session_id = archive.start_bounded_replay(recording_id, 0, end, limit.counter_id,
                                                                 "aeron:ipc", 2001)
                session = replay_image_session_id(replay_session_id)
                wait_until(lambda s=session: subscription.image_by_session_id(s) is not None, "a replay image")
                images.append((replay_session_id, subscription.image_by_session_id(session)))
            time.sleep(0.3)
            assert not any(image.is_closed or image.is_end_of_stream for _, image in images)

            archive.stop_replay(images[0][0])
            await_gone(images[0][1], "the stopped replay to end")
            archive.stop_all_replays(first_id)
            await_gone(images[1][1], "the other replay of the first recording to end")
            time.sleep(0.3)
            third = images[2][1]
            assert not third.is_closed and not third.is_end_of_stream  # another recording's replay
            archive.stop_all_replays()
            await_gone(third, "every replay to end")
        finally:
            subscription.close()
            limit.close()


# ------------------------------------------------------------------------------------------------
# segment maintenance
# ------------------------------------------------------------------------------------------------

def test_detach_attach_delete_and_purge_segments_through_the_sidecar(sidecar: Sidecar, local_aeron: AeronClient):
    """Segments of 64 KiB (the fixture's --segment-length): detach moves the start to a segment
    base and keeps the files, attach brings them back, delete-detached removes them, purge-segments
    does both; a replay from the new start still works and one before it is refused."""
    segment = 64 * 1024
    directory = sidecar.archive_dir
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(500, seed=15))
        assert published.end > 4 * segment

        def bases() -> list[int]:
            return sorted(int(p.stem.split("-")[1]) for p in directory.glob(f"{recording_id}-*.rec"))
        all_bases = bases()
        assert all_bases[:4] == [0, segment, 2 * segment, 3 * segment]

        archive.detach_segments(recording_id, 2 * segment)
        assert archive.start_position(recording_id) == 2 * segment and bases() == all_bases
        assert archive.attach_segments(recording_id) == 2
        assert archive.start_position(recording_id) == 0

        archive.detach_segments(recording_id, segment)
        assert archive.delete_detached_segments(recording_id) == 1
        archive.await_recording_signal(RecordingSignal.DELETE, recording_id=recording_id)
        assert bases() == all_bases[1:]
        assert archive.purge_segments(recording_id, 3 * segment) == 2
        archive.await_recording_signal(RecordingSignal.DELETE, recording_id=recording_id)
        assert bases() == all_bases[3:] and archive.start_position(recording_id) == 3 * segment

        bad = error_of(lambda: archive.detach_segments(recording_id, 3 * segment + 1024))
        assert "is not a segment base" in bad.archive_message
        before = error_of(lambda: archive.start_replay(recording_id, 0, 1024, "aeron:ipc", 2001))
        assert before.error_code == ArchiveErrorCode.INVALID_POSITION
        with archive.replay(recording_id, 3 * segment, published.end - 3 * segment, "aeron:ipc", 2002) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published, 3 * segment)


# ------------------------------------------------------------------------------------------------
# bad requests
# ------------------------------------------------------------------------------------------------

def error_of(call) -> ArchiveError:
    with pytest.raises(ArchiveError) as raised:
        call()
    assert raised.value.code == ControlResponseCode.ERROR, raised.value
    return raised.value


def test_bad_replay_truncate_and_purge_requests_get_useful_errors(sidecar: Sidecar, local_aeron: AeronClient):
    with ipc_archive(local_aeron) as archive:
        stopped_id, published, _ = record_ipc(archive, payloads(60, seed=9))
        big = next(i for i, m in enumerate(published.messages) if len(m) > 1408)
        inside_a_message = published.starts[big] + 64  # 32-aligned, inside a frame's payload
        channel = "aeron:ipc"

        unknown = error_of(lambda: archive.start_replay(4242, 0, 64, channel, 2001))
        assert unknown.error_code == ArchiveErrorCode.UNKNOWN_RECORDING
        assert "unknown recording id: 4242" in unknown.archive_message
        for call in (lambda: archive.truncate_recording(4242, 0), lambda: archive.purge_recording(4242),
                     lambda: archive.extend_recording(4242, IPC_RECORDED, RECORDED_STREAM, SourceLocation.LOCAL)):
            error = error_of(call)
            assert error.error_code == ArchiveErrorCode.UNKNOWN_RECORDING and "4242" in error.archive_message

        misaligned = error_of(lambda: archive.start_replay(stopped_id, 16, 64, channel, 2001))
        assert "position=16 is not a multiple of FRAME_ALIGNMENT (32)" in misaligned.archive_message

        beyond = error_of(lambda: archive.start_replay(stopped_id, published.end + 32, 64, channel, 2001))
        assert beyond.error_code == ArchiveErrorCode.INVALID_POSITION
        assert f"position={published.end + 32} must be less than the limit position={published.end}" \
            in beyond.archive_message

        not_a_frame = error_of(lambda: archive.start_replay(stopped_id, inside_a_message, 64, channel, 2001))
        assert not_a_frame.error_code == ArchiveErrorCode.INVALID_POSITION
        assert f"replayPosition={inside_a_message} does not point to a valid frame" in not_a_frame.archive_message

        truncate_beyond = error_of(lambda: archive.truncate_recording(stopped_id, published.end + 32))
        assert truncate_beyond.error_code == ArchiveErrorCode.INVALID_POSITION
        assert str(published.end + 32) in truncate_beyond.archive_message
        truncate_misaligned = error_of(lambda: archive.truncate_recording(stopped_id, 40))
        assert truncate_misaligned.error_code == ArchiveErrorCode.INVALID_POSITION

        active_id, _, publication = record_ipc(archive, payloads(10, seed=10), stream_id=1002, keep_open=True)
        try:
            truncate_active = error_of(lambda: archive.truncate_recording(active_id, 0))
            assert truncate_active.error_code == ArchiveErrorCode.ACTIVE_RECORDING
            assert f"cannot truncate active recording {active_id}" in truncate_active.archive_message
            purge_active = error_of(lambda: archive.purge_recording(active_id))
            assert purge_active.error_code == ArchiveErrorCode.ACTIVE_RECORDING
            assert f"cannot purge active recording {active_id}" in purge_active.archive_message
            extend_active = error_of(lambda: archive.extend_recording(
                active_id, IPC_RECORDED, 1002, SourceLocation.LOCAL))
            assert extend_active.error_code == ArchiveErrorCode.ACTIVE_RECORDING
        finally:
            publication.close()
        # the session and the recordings are intact after all that
        assert archive.stop_position(stopped_id) == published.end
        with archive.replay(stopped_id, 0, published.end, channel, 2003) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)


# ------------------------------------------------------------------------------------------------
# counters
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sidecar", [["--archive-id", "777"]], indirect=True, ids=["archive-id-777"])
def test_rec_pos_counter_and_recorder_replayer_io_counters(sidecar: Sidecar, local_aeron: AeronClient):
    counters = local_aeron.counters_reader
    with ipc_archive(local_aeron) as archive:
        archive_id = archive.archive_id
        assert archive_id == int(sidecar.ready["archiveId"]) == 777
        recording_id, published, publication = record_ipc(archive, payloads(150, seed=11), keep_open=True)
        try:
            counter_id = recording_position.find_counter_id_by_recording(counters, recording_id, archive_id)
            assert counter_id >= 0
            assert recording_position.find_counter_id_by_session(counters, publication.session_id,
                                                                 archive_id) == counter_id
            assert recording_position.find_counter_id_by_recording(counters, recording_id, archive_id + 1) == -1
            assert counters.type_id(counter_id) == 100
            key = recording_position.decode_key(counters.key(counter_id))
            assert (key.recording_id, key.session_id, key.archive_id) == (
                recording_id, publication.session_id, archive_id)
            assert key.source_identity == "aeron:ipc"
            assert counters.label(counter_id) == (
                f"rec-pos: {recording_id} {publication.session_id} {RECORDED_STREAM} aeron:ipc"
                f" - archiveId={archive_id}")
            assert counters.value(counter_id) == published.end == archive.recording_position(recording_id)
        finally:
            publication.close()
        archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
        wait_until(lambda: recording_position.find_counter_id_by_recording(counters, recording_id) == -1,
                   "the rec-pos counter to close with the recording")

        def value(type_id: int) -> int:
            counter = find_archive_counter(counters, type_id, archive_id)
            assert counter >= 0, f"no counter of type {type_id} for archive {archive_id}"
            return counters.value(counter)

        labels = {counters.label(find_archive_counter(counters, t, archive_id)) for t in range(105, 111)}
        assert f"archive-recorder total write bytes - archiveId={archive_id}" in labels
        assert f"archive-replayer total read bytes - archiveId={archive_id}" in labels
        assert value(RECORDER_TOTAL_WRITE_BYTES_TYPE_ID) == published.end
        assert value(RECORDER_TOTAL_WRITE_TIME_TYPE_ID) >= value(RECORDER_MAX_WRITE_TIME_TYPE_ID) > 0
        assert value(REPLAYER_TOTAL_READ_BYTES_TYPE_ID) == 0

        for stream_id in (2001, 2002):
            with archive.replay(recording_id, 0, published.end, "aeron:ipc", stream_id) as replay:
                assert len(list(replay.messages(idle_timeout=TIMEOUT))) == 150
        wait_until(lambda: value(REPLAYER_TOTAL_READ_BYTES_TYPE_ID) == 2 * published.end,
                   "the replayer's read bytes to count both replays")
        assert value(REPLAYER_TOTAL_READ_TIME_TYPE_ID) >= value(REPLAYER_MAX_READ_TIME_TYPE_ID) > 0


# ------------------------------------------------------------------------------------------------
# timeouts
# ------------------------------------------------------------------------------------------------

def test_replay_whose_subscriber_never_connects_ends_with_an_error_after_5_s(sidecar: Sidecar,
                                                                            local_aeron: AeronClient):
    """The default connect timeout (5 s): OK first (the replay is set up), then ERROR naming the
    replay channel once nobody has subscribed for 5 s; the archive carries on."""
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(20, seed=12))
        nobody = udp()
        started = time.monotonic()
        replay_session_id = archive.start_replay(recording_id, 0, published.end, nobody, 2001)
        deadline = started + 20
        while True:
            try:
                archive.check_replay_error(replay_session_id)
            except ArchiveError as error:
                failed = error
                break
            assert time.monotonic() < deadline, "no error for a replay nobody subscribed to"
            time.sleep(0.01)
        elapsed = time.monotonic() - started
        assert 4.5 <= elapsed < 15, elapsed
        assert f"no connection established for replayChannel={nobody}" in failed.archive_message
        assert "replayStreamId=2001" in failed.archive_message
        with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2002) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)


@pytest.mark.parametrize("sidecar", [["--session-idle-timeout-ms", "1000"]], indirect=True, ids=["idle-1s"])
def test_idle_and_vanished_control_sessions_time_out(sidecar: Sidecar, local_aeron: AeronClient):
    idle = RawArchiveClient(local_aeron, sidecar.control_channel, 10)
    kept_alive = RawArchiveClient(local_aeron, sidecar.control_channel, 10)
    vanished = RawArchiveClient(local_aeron, "aeron:ipc", 11, response_stream_id=21)
    for client in (idle, kept_alive, vanished):
        assert client.connect().code == ControlResponseCode.OK
        assert client.call(lambda s, c: codecs.ArchiveIdRequest(s, c)).code == ControlResponseCode.OK
    vanished.responses.close()  # the client goes away without CloseSession
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:  # only kept_alive talks for 2.5 s (> the 1 s idle timeout)
        kept_alive.send(codecs.KeepAliveRequest(kept_alive.control_session_id, kept_alive.next_correlation_id()))
        time.sleep(0.2)

    def closed(client: RawArchiveClient, reason: str) -> bool:
        return any(f"control session {client.control_session_id} closed: {reason}" in line
                   for line in sidecar.stderr_lines)
    wait_until(lambda: closed(idle, "no request for more than idleTimeoutMs=1000"), "the idle session to close")
    wait_until(lambda: closed(vanished, "control response publication is not connected"),
               "the vanished client's session to close")
    assert not any(f"control session {kept_alive.control_session_id} closed" in line for line in sidecar.stderr_lines)
    assert kept_alive.call(lambda s, c: codecs.ArchiveIdRequest(s, c)).code == ControlResponseCode.OK
    # the idle session is gone: a request naming it is refused (no session on that image to answer)
    idle.send(codecs.ArchiveIdRequest(idle.control_session_id, idle.next_correlation_id()))
    wait_until(lambda: any(f"unknown controlSessionId={idle.control_session_id}" in line
                           for line in sidecar.stderr_lines), "the idle session's request to be refused")
    for client in (idle, kept_alive, vanished):
        client.close()


# ------------------------------------------------------------------------------------------------
# SIGINT, kill -9
# ------------------------------------------------------------------------------------------------

def test_sigint_stops_cleanly_with_stop_positions_and_closes_the_embedded_driver(tmp_path: Path,
                                                                                 aeron_client: AeronClient):
    """SIGINT while a recording is active, a client session is open and a tail replay of that
    recording is running: exit 0, the stop position stored, the replay ended at it, the mark file
    marked terminated, the embedded driver's directory removed."""
    archive_dir = tmp_path / "archive"
    sidecar = Sidecar(archive_dir)
    channel = udp()
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
            replay = replays.enter_context(archive.replay(recording_id, 0, -1, udp(), 2001))
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
