"""The archive's data path against the real embedded Aeron driver: record an IPC publication
through a real subscription Image + RecordingSession into real segment files, then replay them
through a ReplaySession to a real subscriber.

Checked: messages and their stream positions identical (64 KiB terms, so term rotation with
padding; messages fragmented at mtu 1408), replay from a mid position, a tail replay of a
recording still being recorded (it ends at the stop position once the rec-pos counter closes),
a bounded replay following a limit counter owned by another client (capped at its last value
when closed), and a replay whose subscriber never connects (error after the timeout).

The recorder and the replayer run as agents on one AgentRunner thread (the simple threading
mode); the test plays the conductor's part.
"""

from __future__ import annotations

import functools
import random
import time

import pytest

from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.service.agent_runner import AgentRunner, BackoffIdleStrategy
from aeron_spark.archive.service.counters import IoCounters
from aeron_spark.archive.codecs.constants import ArchiveErrorCode
from aeron_spark.archive.service.limit_counter import LimitCounterReader
from aeron_spark.archive.service.recorder import Recorder
from aeron_spark.archive.service.recording_session import RecordingSession
from aeron_spark.archive.service.replay_plan import RecordingLayout, make_replay_session_id, plan_replay
from aeron_spark.archive.service.replay_session import ReplaySession
from aeron_spark.archive.service.replayer import Replayer
from aeron_spark.archive.storage.segment import SegmentWriter
from aeron_spark.driver_integration import channel_uri

from tests.support import waiting

pytestmark = pytest.mark.timeout(60)

TERM = 64 * 1024
MTU = 1408
ARCHIVE_ID = 77
WAIT = 15.0


wait_until = functools.partial(waiting.wait_until, timeout=WAIT)


class StoppedListener:
    """Plays the conductor: on stop, closes the session (and so its rec-pos counter)."""

    def __init__(self) -> None:
        self.stopped: list[RecordingSession] = []

    def on_recording_started(self, session) -> None:
        pass

    def on_recording_progress(self, session, position) -> bool:
        return True

    def on_recording_stopped(self, session) -> None:
        self.stopped.append(session)
        session.close()


@pytest.fixture
def agents(aeron_client):
    recorder = Recorder(IoCounters.allocate_recorder(aeron_client, ARCHIVE_ID))
    replayer = Replayer(IoCounters.allocate_replayer(aeron_client, ARCHIVE_ID))
    runner = AgentRunner([recorder, replayer], name="test-archive-agents",
                         idle_strategy=BackoffIdleStrategy(max_park_ns=200_000)).start()
    try:
        yield recorder, replayer
    finally:
        runner.close()


class Recording:
    """A publication on its own stream, recorded by a RecordingSession into ``archive_dir``."""

    def __init__(self, aeron, recorder: Recorder, archive_dir, stream_id: int, recording_id: int) -> None:
        self.aeron = aeron
        self.stream_id = stream_id
        self.recording_id = recording_id
        self.archive_dir = archive_dir
        self.subscription = aeron.add_subscription("aeron:ipc", stream_id)
        self.publication = aeron.add_exclusive_publication(f"aeron:ipc?term-length=64k|mtu={MTU}", stream_id)
        self.image = wait_until(lambda: self.subscription.image_by_session_id(self.publication.session_id),
                                "the recorded image")
        self.counter = recording_position.allocate(
            aeron, archive_id=ARCHIVE_ID, recording_id=recording_id, session_id=self.image.session_id,
            stream_id=stream_id, stripped_channel="aeron:ipc", source_identity=self.image.source_identity)
        self.counter.value = self.image.join_position
        self.counter_id = self.counter.counter_id
        self.start_position = self.image.join_position
        self.listener = StoppedListener()
        start = self.start_position
        self.session = RecordingSession(
            recording_id=recording_id, image=self.image, position_counter=self.counter,
            writer_factory=lambda: SegmentWriter(archive_dir, recording_id, start, TERM, 2 * TERM),
            listener=self.listener)
        self.messages: list[tuple[bytes, int]] = []  # (payload, position after it)
        recorder.add_session(self.session)

    def publish(self, payloads: list[bytes]) -> None:
        for payload in payloads:
            self.messages.append((payload, self.publication.offer_with_retry(payload, timeout=WAIT)))

    def wait_recorded(self) -> None:
        wait_until(lambda: self.session.recorded_position >= self.publication.position, "recorded position")

    def stop(self) -> int:
        self.publication.close()
        wait_until(lambda: self.listener.stopped, "the recording to stop")
        assert self.session.error is None, self.session.error
        return self.session.stop_position

    def layout(self, stop_position: int) -> RecordingLayout:
        return RecordingLayout(self.recording_id, self.start_position, stop_position,
                               self.publication.initial_term_id, 2 * TERM, TERM, MTU, self.stream_id)

    def close(self) -> None:
        self.publication.close()
        self.subscription.close()
        self.counter.close()


@pytest.fixture
def recordings(aeron_client, agents, tmp_path):
    made: list[Recording] = []

    def make(stream_id: int, recording_id: int) -> Recording:
        made.append(Recording(aeron_client, agents[0], tmp_path, stream_id, recording_id))
        return made[-1]

    try:
        yield make
    finally:
        for recording in made:
            recording.close()


def payloads(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    sizes = [0, 1, 100, 1376, 1377, 3000, 5000, 8000]
    return [bytes([i % 251]) * rng.choice(sizes) + i.to_bytes(4, "little") for i in range(count)]


class Replay:
    """A replay publication on ``replay_stream`` plus a subscriber receiving whole messages."""

    def __init__(self, aeron, replayer: Replayer, archive_dir, layout: RecordingLayout, position: int,
                 length: int, replay_stream: int, *, limit=None, subscribe: bool = True,
                 connect_timeout_ns: int = 5_000_000_000) -> None:
        plan = plan_replay(layout, position, length, limit_position=None if limit is None else limit.position())
        channel = channel_uri.replay_channel("aeron:ipc", plan.replay_position, layout.initial_term_id,
                                             layout.term_buffer_length, layout.mtu_length, 100_000_000)
        self.publication = aeron.add_exclusive_publication(channel, replay_stream)
        self.subscription = aeron.add_subscription("aeron:ipc", replay_stream) if subscribe else None
        self.received: list[tuple[bytes, int]] = []
        self.session = ReplaySession(
            replay_session_id=make_replay_session_id(1, self.publication.session_id), recording=layout,
            plan=plan, publication=self.publication, archive_dir=archive_dir, limit=limit,
            connect_timeout_ns=connect_timeout_ns)
        replayer.add_session(self.session)

    def poll_until(self, count: int) -> list[tuple[bytes, int]]:
        def handler(payload, header) -> None:
            self.received.append((bytes(payload), header.position))
        wait_until(lambda: self.subscription.poll(handler, 100) >= 0 and len(self.received) >= count,
                   f"{count} replayed messages (got {len(self.received)})")
        return self.received

    def image(self):
        return wait_until(lambda: self.subscription.image_by_session_id(self.publication.session_id),
                          "the replay image")

    def close(self) -> None:
        if self.subscription is not None:
            self.subscription.close()


def test_record_then_replay_is_identical_across_terms_with_fragments(aeron_client, agents, recordings, tmp_path):
    recorder, replayer = agents
    recording = recordings(4101, 1)
    messages = payloads(1, 120)  # ~350 KiB: several 64 KiB terms, end-of-term padding, fragments
    recording.publish(messages)
    recording.wait_recorded()
    assert recording.counter.value == recording.publication.position
    assert aeron_client.counters_reader.value(recording.counter_id) == recording.publication.position
    assert recording_position.find_counter_id_by_recording(aeron_client.counters_reader, 1, ARCHIVE_ID) \
        == recording.counter_id
    stop = recording.stop()
    assert stop == recording.messages[-1][1] > 3 * TERM
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"1-{b}.rec" for b in range(0, stop, 2 * TERM)]

    replay = Replay(aeron_client, replayer, tmp_path, recording.layout(stop), -1, -1, 4102)
    try:
        assert replay.image().join_position == recording.start_position
        received = replay.poll_until(len(messages))
        assert received == recording.messages  # payloads and end positions identical
        wait_until(lambda: replay.session.is_done, "the replay to end")
        assert replay.session.error is None and replay.session.replay_position == stop
        wait_until(lambda: replay.image().is_end_of_stream, "end of stream on the replay image")
        assert aeron_client.counters_reader.value(replayer._counters.total_bytes.counter_id) >= stop
    finally:
        replay.close()


def test_replay_from_a_mid_position(aeron_client, agents, recordings, tmp_path):
    recorder, replayer = agents
    recording = recordings(4111, 2)
    recording.publish(payloads(2, 80))
    stop = recording.stop()
    index = 37
    mid = recording.messages[index - 1][1]  # where message `index` (or the padding before it) starts
    replay = Replay(aeron_client, replayer, tmp_path, recording.layout(stop), mid, -1, 4112)
    try:
        assert replay.image().join_position == mid
        assert replay.poll_until(80 - index) == recording.messages[index:]
        wait_until(lambda: replay.session.is_done, "the replay to end")
        assert replay.session.error is None
    finally:
        replay.close()


def test_tail_replay_of_an_active_recording_ends_at_its_stop(aeron_client, agents, recordings, tmp_path):
    recorder, replayer = agents
    recording = recordings(4121, 3)
    messages = payloads(3, 90)
    recording.publish(messages[:30])
    recording.wait_recorded()
    limit = LimitCounterReader(aeron_client.counters_reader, recording.counter_id)
    replay = Replay(aeron_client, replayer, tmp_path, recording.layout(-1), -1, -1, 4122, limit=limit)
    try:
        assert replay.poll_until(30) == recording.messages[:30]
        recording.publish(messages[30:])  # still recording: the replay follows rec-pos
        assert replay.poll_until(90) == recording.messages
        assert not replay.session.is_done
        stop = recording.stop()  # the counter closes with its final value = stop position
        wait_until(lambda: replay.session.is_done, "the follow replay to end at the stop position")
        assert replay.session.error is None and replay.session.replay_position == stop
        assert limit.is_closed and limit.position() == stop
    finally:
        replay.close()


def test_bounded_replay_follows_its_limit_counter(aeron_client, new_aeron_client, agents, recordings, tmp_path):
    recorder, replayer = agents
    recording = recordings(4131, 4)
    recording.publish(payloads(4, 60))
    stop = recording.stop()
    other = new_aeron_client(client_name="limit-owner")  # the counter belongs to another client
    counter = other.add_counter(1001, b"commit-position", "test limit")
    counter.value = recording.messages[19][1]
    limit = LimitCounterReader(aeron_client.counters_reader, counter.counter_id)
    replay = Replay(aeron_client, replayer, tmp_path, recording.layout(stop), -1, -1, 4132, limit=limit)
    try:
        assert replay.poll_until(20) == recording.messages[:20]
        time.sleep(0.1)
        assert len(replay.received) == 20 and replay.session.replay_position == recording.messages[19][1]
        counter.value = recording.messages[44][1]
        assert replay.poll_until(45) == recording.messages[:45]
        counter.close()  # the owner goes away: the replay is capped at the last value
        wait_until(lambda: replay.session.is_done, "the bounded replay to end")
        assert replay.session.error is None and replay.session.replay_position == recording.messages[44][1]
        time.sleep(0.05)
        replay.subscription.poll(lambda payload, header: replay.received.append((bytes(payload), header.position)),
                                 100)
        assert len(replay.received) == 45
    finally:
        replay.close()


def test_subscriber_that_never_connects_is_an_error(aeron_client, agents, recordings, tmp_path):
    recorder, replayer = agents
    recording = recordings(4141, 5)
    recording.publish(payloads(5, 5))
    stop = recording.stop()
    started = time.monotonic()
    replay = Replay(aeron_client, replayer, tmp_path, recording.layout(stop), -1, -1, 4142, subscribe=False,
                    connect_timeout_ns=300_000_000)
    wait_until(lambda: replay.session.is_done, "the replay to time out")
    assert time.monotonic() - started >= 0.3
    assert replay.session.error.code == ArchiveErrorCode.GENERIC
    assert "no connection established for replayChannel=aeron:ipc" in replay.session.error.message
    wait_until(lambda: replay.publication.is_closed, "the replayer to close the publication")
