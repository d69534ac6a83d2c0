"""Recordings through the real sidecar from start to stop: one recording per image (and a spy
subscription for local UDP publications); stopping a recording by subscription and by identity;
stopping one replay, the replays of one recording, and all replays. Uses the ``sidecar`` and
``local_aeron`` fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import time

import pytest
from aeron_spark.archive.client.archive_client import ArchiveError
from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal, SourceLocation
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.driver_integration import AeronClient

from tests.support.ports import udp_channel
from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import (
    IPC_RECORDED,
    RECORDED_STREAM,
    TIMEOUT,
    as_pairs,
    await_recorded,
    expected,
    ipc_archive,
    payloads,
    publish,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def test_one_recording_per_image_and_a_spy_for_a_local_udp_publication(sidecar: Sidecar, local_aeron: AeronClient):
    """Two publications (two images) on one recorded UDP channel of the sidecar's own driver,
    recorded with sourceLocation LOCAL: the archive subscribes with aeron-spy: (images appear for
    local publications only) and makes one recording per image, each replaying its own messages."""
    channel = udp_channel()
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
