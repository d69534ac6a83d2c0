"""Replays that run alongside others or along a moving end, through the real sidecar: concurrent
replays from one and from several control sessions, a tail replay of a recording still being
recorded, a bounded replay that advances with its limit counter. Uses the ``sidecar`` and
``local_aeron`` fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest
from aeron_spark.archive.codecs import RecordingSignal
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.driver_integration import AeronClient

from tests.support.ports import udp_channel
from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import (
    IPC_RECORDED,
    RECORDED_STREAM,
    TIMEOUT,
    drain_until,
    expected,
    ipc_archive,
    nothing_more_within,
    payloads,
    poll_into,
    publish,
    record_ipc,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


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
            (first, quarter, published.end - quarter, udp_channel()),
            (first, 0, quarter, "aeron:ipc"),
            (second, 0, published.end, udp_channel()),
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
