"""`ReplicationSession`'s state machine with a fake source archive, a fake local recorder and a fake
requester: the requests it sends the source, the local extension, the signals and errors in Aeron's
order (all under the replicationId), the timeouts and the stop paths."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode, RecordingSignal
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.archive.service.replication_link import SourceLinkError
from aeron_spark.archive.service.replication_session import (
    ReplicationParams,
    ReplicationSession,
    ReplicationState,
    ReplicationTimeouts,
)

REPLICATION_ID = 77
SRC_SESSION = 5
REPLAY_SESSION_ID = (3 << 32) | 4242
TERM = 64 * 1024

SOURCE = RecordingDescriptor(
    recording_id=9, start_timestamp=1000, stop_timestamp=2000, start_position=0, stop_position=8192,
    initial_term_id=11, segment_file_length=128 * 1024, term_buffer_length=TERM, mtu_length=1408,
    session_id=321, stream_id=1001, stripped_channel="aeron:udp?endpoint=localhost:9000",
    original_channel="aeron:udp?endpoint=localhost:9000|term-length=65536", source_identity="127.0.0.1:40000")


@dataclass
class FakeSource:
    """Answers ListRecording with ``descriptor`` (or RECORDING_UNKNOWN) and Replay with OK."""

    descriptor: RecordingDescriptor | None = SOURCE
    connect_after: int | None = 2  # steps; None: never connects
    live_position: int = -1  # RecordingPosition's answer
    request_connected: bool = True
    sent: list[codecs.ControlMessage] = field(default_factory=list)
    inbox: list[codecs.ControlMessage] = field(default_factory=list)
    control_session_id: int | None = None
    closed: bool = False
    steps: int = 0
    _next: int = 100

    @property
    def is_connected(self) -> bool:
        return self.control_session_id is not None

    @property
    def is_request_connected(self) -> bool:
        return self.request_connected

    def connect_step(self) -> int:
        self.steps += 1
        if self.connect_after is not None and self.steps >= self.connect_after:
            self.control_session_id = SRC_SESSION
        return 1

    def next_correlation_id(self) -> int:
        self._next += 1
        return self._next

    def offer(self, message: codecs.ControlMessage) -> bool:
        self.sent.append(message)
        if isinstance(message, codecs.ListRecordingRequest):
            if self.descriptor is None:
                self.inbox.append(codecs.ControlResponse(SRC_SESSION, message.correlation_id, message.recording_id,
                                                         ControlResponseCode.RECORDING_UNKNOWN, 0, ""))
            else:
                self.inbox.append(codecs.RecordingDescriptorMessage.from_descriptor(
                    self.descriptor, control_session_id=SRC_SESSION, correlation_id=message.correlation_id))
        elif isinstance(message, codecs.RecordingPositionRequest):
            self.inbox.append(codecs.ControlResponse(SRC_SESSION, message.correlation_id, self.live_position,
                                                     ControlResponseCode.OK, 0, ""))
        elif isinstance(message, codecs.ReplayRequest):
            self.inbox.append(codecs.ControlResponse(SRC_SESSION, message.correlation_id, REPLAY_SESSION_ID,
                                                     ControlResponseCode.OK, 0, ""))
        return True

    def poll(self) -> list[codecs.ControlMessage]:
        messages, self.inbox = self.inbox, []
        return messages

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeSubscription:
    subscription_id: int
    resolved: str | None = "aeron:udp?endpoint=localhost:45678|rejoin=false|session-id=321"
    destinations: list[tuple[str, str]] = field(default_factory=list)

    def resolved_channel(self) -> str | None:
        return self.resolved

    def resolved_endpoint(self) -> str | None:
        return "127.0.0.1:45679"

    def add_destination(self, destination: str) -> None:
        self.destinations.append(("add", destination))

    def remove_destination(self, destination: str) -> None:
        self.destinations.append(("remove", destination))


@dataclass
class FakeRecorder:
    """The local catalog and recordings; the test moves ``position`` and starts/stops recording."""

    descriptors: dict[int, RecordingDescriptor] = field(default_factory=dict)
    extended: list[tuple[int, int, str, int]] = field(default_factory=list)
    recording: set[int] = field(default_factory=set)
    position: int = 0
    open_subscriptions: set[int] = field(default_factory=set)
    stopped_subscriptions: list[int] = field(default_factory=list)
    subscription: FakeSubscription = field(default_factory=lambda: FakeSubscription(555))
    transports: int = 1

    def add_replica(self, source: RecordingDescriptor) -> int:
        recording_id = len(self.descriptors)
        self.descriptors[recording_id] = dataclasses.replace(source, recording_id=recording_id,
                                                             stop_position=source.start_position)
        return recording_id

    def descriptor(self, recording_id: int) -> RecordingDescriptor | None:
        return self.descriptors.get(recording_id)

    def extend(self, replication_id: int, recording_id: int, channel: str, stream_id: int) -> FakeSubscription:
        self.extended.append((replication_id, recording_id, channel, stream_id))
        self.open_subscriptions.add(self.subscription.subscription_id)
        return self.subscription

    def is_recording(self, recording_id: int) -> bool:
        return recording_id in self.recording

    def recorded_position(self, recording_id: int) -> int | None:
        return self.position if recording_id in self.recording else None

    def is_subscription_open(self, subscription_id: int) -> bool:
        return subscription_id in self.open_subscriptions

    def stop_subscription(self, subscription_id: int) -> None:
        self.stopped_subscriptions.append(subscription_id)

    def active_transport_count(self, recording_id: int) -> int:
        return self.transports

    def stop_recording(self, recording_id: int) -> None:
        """What the recorder does when it has stopped: the catalog gets the stop position."""
        self.recording.discard(recording_id)
        self.descriptors[recording_id] = dataclasses.replace(self.descriptors[recording_id],
                                                             stop_position=self.position)
        self.open_subscriptions.clear()


@dataclass
class FakeRequester:
    sent: list[tuple] = field(default_factory=list)

    def send_signal(self, correlation_id: int, recording_id: int, subscription_id: int, position: int,
                    signal: RecordingSignal) -> None:
        self.sent.append((RecordingSignal(signal).name, correlation_id, recording_id, subscription_id, position))

    def send_error(self, correlation_id: int, message: str, error_code: int = ArchiveErrorCode.GENERIC) -> None:
        self.sent.append(("ERROR", correlation_id, int(error_code), message))

    def names(self) -> list[str]:
        return [entry[0] for entry in self.sent]


@dataclass
class Clock:
    now: int = 1_000

    def __call__(self) -> int:
        return self.now


def params(**changes: Any) -> ReplicationParams:
    base = ReplicationParams(replication_id=REPLICATION_ID, src_recording_id=9, dst_recording_id=-1, stop_position=-1,
                             channel_tag_id=-1, subscription_tag_id=-1, live_destination="",
                             replication_channel="aeron:udp?endpoint=localhost:0", file_io_max_length=-1,
                             replication_session_id=-1)
    return dataclasses.replace(base, **changes)


def make(source: FakeSource | None = None, recorder: FakeRecorder | None = None, **changes: Any):
    source = source or FakeSource()
    recorder = recorder or FakeRecorder()
    requester = FakeRequester()
    clock = Clock()
    session = ReplicationSession(params(**changes), source=source, recorder=recorder, requester=requester,
                                 timeouts=ReplicationTimeouts(connect_ms=5_000, action_ms=10_000, stop_ms=5_000),
                                 clock=clock)
    return session, source, recorder, requester, clock


def run(session: ReplicationSession, cycles: int = 10) -> None:
    for _ in range(cycles):
        session.do_work()


def test_a_stopped_source_is_replicated_into_a_new_recording_with_signals_in_aerons_order() -> None:
    session, source, recorder, requester, _ = make()
    run(session)
    assert session.state is ReplicationState.AWAIT_IMAGE
    list_request, replay = source.sent
    assert isinstance(list_request, codecs.ListRecordingRequest) and list_request.recording_id == 9
    [(replication_id, dst_id, channel, stream_id)] = recorder.extended
    assert (replication_id, dst_id, stream_id) == (REPLICATION_ID, 0, 1001)
    assert "rejoin=false" in channel and "session-id=321" in channel
    assert isinstance(replay, codecs.ReplayRequest)
    assert (replay.recording_id, replay.position, replay.length, replay.replay_stream_id) == (9, 0, -1, 1001)
    assert "endpoint=localhost:45678" in replay.replay_channel and "session-id=321" in replay.replay_channel
    assert "rejoin" not in replay.replay_channel
    assert recorder.descriptors[0].start_position == recorder.descriptors[0].stop_position == 0

    recorder.recording.add(0)
    recorder.position = 4096
    run(session)
    assert session.state is ReplicationState.REPLICATE
    recorder.position = SOURCE.stop_position
    run(session, 2)
    assert session.state is ReplicationState.STOPPING  # waits for the recording's STOP
    assert recorder.stopped_subscriptions == [555]
    recorder.stop_recording(0)
    run(session, 2)
    assert session.is_done and source.closed
    assert requester.sent == [
        ("REPLICATE", REPLICATION_ID, 0, -1, 0),
        ("SYNC", REPLICATION_ID, 0, 555, SOURCE.stop_position),
        ("REPLICATE_END", REPLICATION_ID, 0, -1, -1),
    ]
    # the replay ends with the source's stop position: no StopReplay (as Aeron)
    assert not any(isinstance(m, codecs.StopReplayRequest) for m in source.sent)


def test_an_existing_destination_is_extended_from_its_stop_position() -> None:
    recorder = FakeRecorder()
    recorder.descriptors[4] = dataclasses.replace(SOURCE, recording_id=4, stop_position=4096)
    session, source, _, requester, _ = make(recorder=recorder, dst_recording_id=4, stop_position=6144)
    run(session)
    replay = source.sent[-1]
    assert isinstance(replay, codecs.ReplayRequest) and (replay.position, replay.length) == (4096, 2048)
    assert "REPLICATE" not in requester.names()
    recorder.recording.add(4)
    recorder.position = 6144
    run(session, 2)
    recorder.stop_recording(4)
    run(session, 2)
    assert requester.names() == ["REPLICATE_END"]  # a stop position is not a SYNC
    assert recorder.descriptors[4].stop_position == 6144


def test_a_destination_that_does_not_continue_the_source_is_an_invalid_extension() -> None:
    recorder = FakeRecorder()
    recorder.descriptors[4] = dataclasses.replace(SOURCE, recording_id=4, stop_position=4096, term_buffer_length=2 * TERM)
    session, _, _, requester, _ = make(recorder=recorder, dst_recording_id=4)
    run(session)
    assert session.is_done and not recorder.extended
    assert requester.sent[0][:3] == ("ERROR", REPLICATION_ID, ArchiveErrorCode.INVALID_EXTENSION)
    assert "term_buffer_length" in requester.sent[0][3]
    assert requester.names() == ["ERROR", "REPLICATE_END"]


def test_already_in_sync_is_sync_then_replicate_end() -> None:
    recorder = FakeRecorder()
    recorder.descriptors[4] = dataclasses.replace(SOURCE, recording_id=4)
    session, source, _, requester, _ = make(recorder=recorder, dst_recording_id=4)
    run(session)
    assert session.is_done and not recorder.extended
    assert [entry[0] for entry in requester.sent] == ["SYNC", "REPLICATE_END"]
    assert not any(isinstance(m, codecs.ReplayRequest) for m in source.sent)


def test_an_unreachable_source_is_replication_connection_failure_after_the_connect_timeout() -> None:
    session, _, _, requester, clock = make(source=FakeSource(connect_after=None))
    run(session, 3)
    assert session.state is ReplicationState.CONNECT and requester.sent == []
    clock.now += 5_000
    run(session, 2)
    assert session.is_done
    assert requester.sent[0][:3] == ("ERROR", REPLICATION_ID, ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE)
    assert requester.names() == ["ERROR", "REPLICATE_END"]


def test_a_refused_connection_keeps_the_links_code() -> None:
    class Refusing(FakeSource):
        def connect_step(self) -> int:
            raise SourceLinkError("the source archive refused the connection: bad credentials",
                                  ArchiveErrorCode.AUTHENTICATION_REJECTED)

    session, _, _, requester, _ = make(source=Refusing())
    run(session, 2)
    assert requester.sent[0][2] == ArchiveErrorCode.AUTHENTICATION_REJECTED and "bad credentials" in requester.sent[0][3]


def test_an_unknown_source_recording_is_unknown_recording() -> None:
    session, _, _, requester, _ = make(source=FakeSource(descriptor=None))
    run(session)
    assert requester.sent[0][:3] == ("ERROR", REPLICATION_ID, ArchiveErrorCode.UNKNOWN_RECORDING)
    assert requester.names() == ["ERROR", "REPLICATE_END"]


def test_file_io_max_length_below_the_mtu_is_refused() -> None:
    session, _, recorder, requester, _ = make(file_io_max_length=1024)
    run(session)
    assert requester.names() == ["ERROR", "REPLICATE_END"] and "mtuLength" in requester.sent[0][3]
    assert not recorder.extended


def test_stop_replication_mid_way_stops_the_source_replay_and_ends_after_the_recordings_stop() -> None:
    session, source, recorder, requester, _ = make()
    run(session)
    recorder.recording.add(0)
    recorder.position = 2048
    run(session)
    session.abort("stop replication")
    assert session.state is ReplicationState.STOPPING
    assert recorder.stopped_subscriptions == [555]
    assert isinstance(source.sent[-1], codecs.StopReplayRequest)
    run(session, 2)
    assert not session.is_done  # the recording has not stopped yet
    recorder.stop_recording(0)
    run(session)
    assert requester.names() == ["REPLICATE", "REPLICATE_END"] and session.is_done


def test_a_lost_source_is_reported_and_ends_the_replication() -> None:
    session, source, recorder, requester, _ = make()
    run(session)
    recorder.recording.add(0)
    run(session)
    source.request_connected = False
    run(session)
    recorder.stop_recording(0)
    run(session)
    assert requester.sent[1][:3] == ("ERROR", REPLICATION_ID, ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE)
    assert requester.names() == ["REPLICATE", "ERROR", "REPLICATE_END"]


def test_no_replay_image_within_the_action_timeout_is_an_error() -> None:
    session, _, _, requester, clock = make()
    run(session)
    assert session.state is ReplicationState.AWAIT_IMAGE
    clock.now += 10_000
    run(session)
    clock.now += 5_000  # STOPPING gives up waiting for a recording that never started
    run(session)
    assert requester.names() == ["REPLICATE", "ERROR", "REPLICATE_END"]
    assert "replay image" in requester.sent[1][3]


def test_tags_go_on_the_replication_subscription() -> None:
    session, _, recorder, _, _ = make(channel_tag_id=7, subscription_tag_id=-1)
    run(session)
    assert f"tags=7,{REPLICATION_ID}" in recorder.extended[0][2]


LIVE = "aeron:udp?endpoint=localhost:46000"


def test_a_live_destination_merges_into_the_live_stream() -> None:
    """Aeron's order: REPLICATE, then the source's live position, an MDS extension with the replay
    destination, a replay that neither lingers nor ends the stream, CATCHUP, the live destination
    added within the window, the replay destination removed once caught up with two transports:
    MERGE, REPLICATE_END; the recording is not stopped (it goes on with the live stream)."""
    source = FakeSource(descriptor=dataclasses.replace(SOURCE, stop_position=-1), live_position=40_000)
    session, source, recorder, requester, _ = make(source=source, live_destination=LIVE)
    run(session)
    assert [type(m).__name__ for m in source.sent] == ["ListRecordingRequest", "RecordingPositionRequest",
                                                       "ReplayRequest"]
    channel = recorder.extended[0][2]
    assert "control-mode=manual" in channel and "endpoint" not in channel
    assert f"tags={REPLICATION_ID},{REPLICATION_ID}" in channel
    assert recorder.subscription.destinations == [("add", "aeron:udp?endpoint=localhost:0")]
    replay = source.sent[-1]
    assert isinstance(replay, codecs.ReplayRequest) and replay.length == -1
    for expected in ("endpoint=localhost:45679", "linger=0", "eos=false", "session-id=321"):
        assert expected in replay.replay_channel
    recorder.recording.add(0)
    recorder.position = 10_000
    run(session, 2)
    assert session.state is ReplicationState.CATCHUP
    recorder.position = 40_000  # caught up with the position asked first; the source moved on
    source.live_position = 50_000
    run(session, 2)
    assert session.state is ReplicationState.ATTEMPT_LIVE_JOIN
    run(session, 4)
    assert recorder.subscription.destinations[-1] == ("add", LIVE)  # 10_000 behind <= 64 KiB / 4
    recorder.position = 50_000
    run(session, 4)
    assert session.state is ReplicationState.ATTEMPT_LIVE_JOIN  # one transport: not yet
    recorder.transports = 2
    run(session, 4)
    assert recorder.subscription.destinations[-1] == ("remove", "aeron:udp?endpoint=localhost:0")
    assert session.is_done and recorder.stopped_subscriptions == []
    assert [e[0] for e in requester.sent] == ["REPLICATE", "MERGE", "REPLICATE_END"]
    assert requester.sent[1] == ("MERGE", REPLICATION_ID, 0, -1, 50_000)
    assert isinstance(source.sent[-1], codecs.StopReplayRequest)  # the replay is no longer needed


def test_a_live_destination_needs_an_active_source() -> None:
    session, _, _, requester, _ = make(live_destination=LIVE)
    run(session)
    assert [e[0] for e in requester.sent] == ["REPLICATE", "ERROR", "REPLICATE_END"]
    assert requester.sent[1][3] == "cannot live merge without active source recording"
