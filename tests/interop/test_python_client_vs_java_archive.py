"""Our ArchiveClient against the REAL Java Aeron Archive 1.15.1.

The Java archive runs with its own Java media driver (tests/interop/peer/interop_peer.py); our
client runs on the test session's C driver and talks to it over UDP (control, response, recorded
stream, replay channels), in the 1.15.x protocol. Recordings are made by the real 1.15.1 client
(the peer) and by our own client and publication; both are listed and replayed by the other side
and the payload digests compared.

Every 1.15.1 request our client has is also run as the steps of the Java 1.15.1 client's scripted
session (tests/interop/legacy_script.py) against a fresh Java 1.15.1 archive and compared with the
Java client's answers; the requests a 1.15.1 archive does not have are refused by our client,
naming them. See docs/interop.md, "1.15.1 both ways".
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from aeron_spark.archive.cli import main as tool
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.codecs import ArchiveErrorCode, SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.interop.differential import ScriptRun, step_differences
from tests.interop.legacy_script import (
    FRAMED,
    INITIAL_TERM_ID,
    MTU,
    PORT_NAMES,
    SEGMENT_LENGTH,
    TERM_LENGTH,
    UNKNOWN_ID,
)
from tests.interop.legacy_script import MESSAGES as SCRIPT_MESSAGES
from tests.interop.legacy_script import REPLAY_STREAM_ID as SCRIPT_REPLAY_STREAM_ID
from tests.interop.legacy_script import SESSION_ID as SCRIPT_SESSION_ID
from tests.interop.legacy_script import SIZE as SCRIPT_SIZE
from tests.interop.legacy_script import STREAM_ID as SCRIPT_STREAM_ID
from tests.interop.peer.interop_peer import (
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
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def java_recording(java_archive: RunningJavaArchive) -> RecordResult:
    """Recorded over UDP (REMOTE) by the real 1.15.1 client."""
    return java_archive.client.record(udp_channel(free_udp_port()), 3001, MESSAGES, SIZE)


@pytest.fixture
def client(java_archive: RunningJavaArchive, aeron_client: AeronClient) -> Iterator[ArchiveClient]:
    with ArchiveClient.connect(control_channel=java_archive.endpoint.control_channel,
                               aeron=aeron_client, protocol="legacy", timeout=TIMEOUT) as connected:
        yield connected


def digest_of(messages) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.payload)
    return digest.hexdigest()


def replay_all(client: ArchiveClient, recording_id: int, position: int, length: int) -> list:
    with client.replay(recording_id, position, length, udp_channel(free_udp_port()), 4001) as replay:
        return list(replay.messages(idle_timeout=TIMEOUT))


def without_request_ids(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if k not in ("controlSessionId", "correlationId")}


def test_legacy_client_connects_and_lists_what_the_java_client_lists(
        java_archive: RunningJavaArchive, client: ArchiveClient, java_recording: RecordResult) -> None:
    assert client.is_legacy and client.archive_protocol_version == 0 and client.archive_id == -1
    ours = {d.recording_id: without_request_ids(d.to_aeron_dict()) for d in client.list_recordings()}
    theirs = {d["recordingId"]: without_request_ids(d) for d in java_archive.client.list_recordings()}
    assert ours == theirs and java_recording.recording_id in ours
    single = client.list_recording(java_recording.recording_id)
    assert without_request_ids(single.to_aeron_dict()) == ours[java_recording.recording_id]
    assert single.stop_position == java_recording.stop_position == MESSAGES * framed_length(SIZE)


def test_replay_of_a_java_recording_has_the_java_digest(client: ArchiveClient,
                                                         java_recording: RecordResult) -> None:
    messages = replay_all(client, java_recording.recording_id, 0, java_recording.stop_position)
    assert len(messages) == MESSAGES
    assert digest_of(messages) == java_recording.digest == expected_digest(0, MESSAGES, SIZE)
    middle = 500 * framed_length(SIZE)
    tail = replay_all(client, java_recording.recording_id, middle, java_recording.stop_position - middle)
    assert tail[0].position == middle and len(tail) == MESSAGES - 500
    assert digest_of(tail) == expected_digest(500, MESSAGES - 500, SIZE)


def test_positions_and_errors_from_the_java_archive(client: ArchiveClient,
                                                     java_recording: RecordResult) -> None:
    assert client.stop_position(java_recording.recording_id) == java_recording.stop_position
    assert client.max_recorded_position(java_recording.recording_id) == java_recording.stop_position
    assert client.start_position(java_recording.recording_id) == 0
    assert client.list_recording(987_654) is None
    with pytest.raises(ArchiveError) as raised:
        client.stop_position(987_654)
    assert raised.value.error_code == ArchiveErrorCode.UNKNOWN_RECORDING
    assert raised.value.archive_message  # the Java archive's own text
    assert client.stop_position(java_recording.recording_id) == java_recording.stop_position


def test_auto_protocol_detects_the_1_15_archive(java_archive: RunningJavaArchive,
                                                aeron_client: AeronClient,
                                                java_recording: RecordResult) -> None:
    with ArchiveClient.connect(control_channel=java_archive.endpoint.control_channel,
                               aeron=aeron_client, protocol="auto", timeout=TIMEOUT) as auto:
        assert auto.is_legacy
        assert auto.list_recording(java_recording.recording_id).stop_position == java_recording.stop_position


def test_our_client_records_our_stream_and_the_java_client_replays_it(
        java_archive: RunningJavaArchive, client: ArchiveClient) -> None:
    channel = udp_channel(free_udp_port())
    stream_id = 3002
    count = 300
    client.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = client.aeron.add_exclusive_publication(channel, stream_id)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not publication.is_connected:
            assert time.monotonic() < deadline, "the Java archive did not subscribe"
            time.sleep(0.005)
        for payload in payloads(0, count, SIZE):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
        end = publication.position
        [descriptor] = client.list_recordings_for_uri(0, 100, channel.split("?")[1], stream_id)
        while client.recording_position(descriptor.recording_id) < end:
            assert time.monotonic() < deadline, "the Java archive did not record the whole stream"
            time.sleep(0.005)
        client.stop_recording(channel, stream_id)
    finally:
        publication.close()
    while client.list_recording(descriptor.recording_id).stop_position != end:
        assert time.monotonic() < deadline, "the Java archive did not store the stop position"
        time.sleep(0.01)
    java_replay = java_archive.client.replay(descriptor.recording_id, replay_channel=udp_channel(free_udp_port()),
                                             replay_stream_id=4002)
    assert java_replay.digest == expected_digest(0, count, SIZE) and java_replay.messages == count
    ours = replay_all(client, descriptor.recording_id, 0, end)
    assert digest_of(ours) == java_replay.digest


def test_cli_lists_and_replays_from_the_java_archive(java_archive: RunningJavaArchive,
                                                      media_driver, java_recording: RecordResult) -> None:
    common = ["--control-channel", java_archive.endpoint.control_channel, "--aeron-dir",
              media_driver.dir, "--legacy"]
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(["recordings", "--recording-id", str(java_recording.recording_id), *common],
                     stdout=out, stderr=err) == 0, err.getvalue()
    [row] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert row["stopPosition"] == java_recording.stop_position
    out = io.StringIO()
    assert tool.main(["replay", str(java_recording.recording_id), "--length", str(5 * framed_length(SIZE)),
                      *common], stdout=out, stderr=err) == 0, err.getvalue()
    assert [json.loads(line)["position"] for line in out.getvalue().splitlines()] == [
        i * framed_length(SIZE) for i in range(5)]


# ---------------------------------------------------------------------------------------------
# Every 1.15.1 request our client has, compared with what the Java 1.15.1 client sees
#
# Our client (protocol="legacy") runs the steps of the Java 1.15.1 client's scripted session
# (tests/interop/legacy_script.py, ScriptedSession.java) that map to its API, under the same names,
# against a fresh Java 1.15.1 archive; the Java client ran the whole script against another fresh
# one (conftest.py). Same inputs (pinned session ids, initial term id, term length, MTU), so the
# answers compare field by field after the differential tests' normalisation.


@dataclass
class _OurScript:
    client: ArchiveClient
    ports: dict[int, str]
    channel: str
    channel_b: str
    replay_channel: str
    steps: list[dict] = field(default_factory=list)

    def step(self, name: str, action) -> None:
        result = error = None
        try:
            result = action()
        except ArchiveTimeoutError as timeout:
            error = {"exception": "timeout", "code": None, "message": str(timeout)}
        except ArchiveError as refused:
            error = _error(refused)
        self.steps.append({"event": "step", "step": name, "ok": error is None, "result": result, "error": error})

    # -- what the Java script's helpers return, in the same shape
    def value(self, call):
        try:
            return call()
        except ArchiveError as refused:
            return _error(refused)

    def positions(self, recording_id: int) -> dict:
        return {"recording": self.value(lambda: self.client.recording_position(recording_id)),
                "stop": self.value(lambda: self.client.stop_position(recording_id))}

    @staticmethod
    def descriptors(found) -> dict:
        found = [d for d in ([found] if not isinstance(found, list) else found) if d is not None]
        return {"count": len(found), "descriptors": [{"event": "descriptor", **d.to_aeron_dict()} for d in found]}

    def publish(self, publication, recording_id: int, count: int, first_index: int) -> dict:
        deadline = time.monotonic() + TIMEOUT
        while not publication.is_connected:
            assert time.monotonic() < deadline, "the Java archive did not subscribe"
            time.sleep(0.005)
        start = publication.position
        digest = hashlib.sha256()
        for payload in payloads(first_index, count, SCRIPT_SIZE):
            digest.update(payload.tobytes())
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
        position = publication.position
        while self.client.list_recording(recording_id) is None \
                or self.client.recording_position(recording_id) < position:
            assert time.monotonic() < deadline, f"recording {recording_id} did not reach {position}"
            time.sleep(0.005)
        return {"sessionId": publication.session_id, "startPosition": start, "position": position,
                "messages": count, "digest": digest.hexdigest(),
                "recordingPosition": self.client.recording_position(recording_id)}

    def await_stopped(self, recording_id: int) -> int:
        deadline = time.monotonic() + TIMEOUT
        while (descriptor := self.client.list_recording(recording_id)) is None or descriptor.stop_position == -1:
            assert time.monotonic() < deadline, f"recording {recording_id} did not stop"
            time.sleep(0.005)
        return descriptor.stop_position

    def replay(self, recording_id: int, position: int, length: int, end: int | None = None) -> dict:
        """Reads the replay up to ``end`` (default: position + length), as the Java script does."""
        end = position + length if end is None else end
        with self.client.replay(recording_id, position, length, self.replay_channel, SCRIPT_REPLAY_STREAM_ID) as replay:
            join = replay.join_position
            messages = []
            for message in replay.messages(idle_timeout=TIMEOUT):
                messages.append(message)
                if message.next_position >= end:
                    break
            indices = [int.from_bytes(m.payload[:8], "little") for m in messages]
            return {"messages": len(messages), "firstIndex": indices[0] if indices else -1,
                    "lastIndex": indices[-1] if indices else -1, "digest": digest_of(messages),
                    "replaySessionId": replay.image.session_id, "joinPosition": join,
                    "lastPosition": replay.position}

    def start_and_stop(self, recording_id: int, position: int, length: int) -> dict:
        replay_session_id = self.client.start_replay(recording_id, position, length, self.replay_channel,
                                                     IDLE_STREAM_ID)
        self.client.stop_replay(replay_session_id)
        return {"replaySessionId": replay_session_id}


#: As the Java script: replays started and stopped at once go to a stream nobody subscribes to.
IDLE_STREAM_ID = SCRIPT_REPLAY_STREAM_ID + 1


def _error(refused: ArchiveError) -> dict:
    # An ERROR response: the code a 1.15.1 ArchiveException carries (its relevantId).
    return {"exception": "io.aeron.archive.client.ArchiveException",
            "code": int(refused.error_code) if refused.error_code is not None else None,
            "message": refused.archive_message or str(refused)}


def _pinned(channel: str, session_id: int, position: int = 0) -> str:
    """As ScriptedSession.pinned: session id, MTU, initial term id 7, 64 KiB terms, starting at ``position``."""
    term_id = INITIAL_TERM_ID + position // TERM_LENGTH
    return (f"{channel}|session-id={session_id}|mtu={MTU}|init-term-id={INITIAL_TERM_ID}|term-id={term_id}"
            f"|term-offset={position % TERM_LENGTH}|term-length={TERM_LENGTH}")


def _run_our_script(client: ArchiveClient) -> _OurScript:
    ports = {free_udp_port(): name for name in PORT_NAMES}
    channel, channel_b, replay_channel = (udp_channel(port) for port in ports)
    s = _OurScript(client, ports, channel, channel_b, replay_channel)
    c, stream, session, frame = client, SCRIPT_STREAM_ID, SCRIPT_SESSION_ID, FRAMED
    record_a, record_b = f"{channel}|session-id={session}", f"{channel_b}|session-id={session + 1}"
    ipc = f"aeron:ipc?session-id={session + 2}"
    end = SCRIPT_MESSAGES * frame
    subscription_a: list[int] = []

    s.step("start-recording-udp", lambda: {"subscriptionId": subscription_a.append(
        c.start_recording(record_a, stream, SourceLocation.REMOTE)) or subscription_a[0]})
    s.step("start-recording-ipc", lambda: {"subscriptionId": c.start_recording(ipc, stream + 1, SourceLocation.LOCAL)})
    s.step("start-recording-duplicate", lambda: {"subscriptionId": c.start_recording(record_a, stream)})
    publication = c.aeron.add_exclusive_publication(_pinned(channel, session), stream)
    try:
        s.step("publish-a", lambda: s.publish(publication, 0, SCRIPT_MESSAGES, 0))
        s.step("list-recordings-active", lambda: s.descriptors(c.list_recordings(0, 10)))
        s.step("positions-active", lambda: s.positions(0))
        s.step("truncate-active", lambda: (c.truncate_recording(0, 0), s.positions(0))[1])
        s.step("extend-active", lambda: {"subscriptionId": c.extend_recording(0, record_a, stream)})
        s.step("stop-recording-by-subscription", lambda: (
            c.stop_recording_subscription(subscription_a[0]), {"stopped": s.await_stopped(0)})[1])
        s.step("stop-recording-ipc-by-channel", lambda: c.stop_recording(ipc, stream + 1) or {})
        s.step("stop-recording-unknown-channel", lambda: c.stop_recording(ipc, stream + 1) or {})
        s.step("stop-recording-unknown-subscription", lambda: c.stop_recording_subscription(UNKNOWN_ID) or {})
        s.step("stop-recording-subscription-again", lambda: c.stop_recording_subscription(subscription_a[0]) or {})
    finally:
        publication.close()

    s.step("list-recordings", lambda: s.descriptors(c.list_recordings(0, 10)))
    s.step("list-recordings-from-1", lambda: s.descriptors(c.list_recordings(1, 10)))
    s.step("list-recordings-negative-from", lambda: s.descriptors(c.list_recordings(-7, 3)))
    s.step("list-recordings-for-uri", lambda: s.descriptors(c.list_recordings_for_uri(0, 10, "localhost", stream)))
    s.step("list-recordings-for-uri-other-stream",
           lambda: s.descriptors(c.list_recordings_for_uri(0, 10, "localhost", stream + 9)))
    s.step("list-recordings-for-uri-no-match",
           lambda: s.descriptors(c.list_recordings_for_uri(0, 10, "aeron:ipc", stream)))
    s.step("list-recording", lambda: s.descriptors(c.list_recording(0)))
    s.step("list-recording-unknown", lambda: s.descriptors(c.list_recording(UNKNOWN_ID)))
    s.step("list-recording-negative", lambda: s.descriptors(c.list_recording(-5)))
    for name, args in (("find-last-matching", (0, "localhost", stream, session)),
                       ("find-last-matching-other-session", (0, "localhost", stream, session + 50)),
                       ("find-last-matching-any-session", (0, "localhost", stream, -1)),
                       ("find-last-matching-past-end", (UNKNOWN_ID, "localhost", stream, session)),
                       ("find-last-matching-negative", (-3, "localhost", stream, session)),
                       ("find-last-matching-no-channel", (0, "aeron:ipc", stream, session))):
        s.step(name, lambda args=args: {"recordingId": c.find_last_matching_recording(*args)})
    s.step("positions-stopped", lambda: s.positions(0))

    middle = SCRIPT_MESSAGES // 2 * frame
    s.step("replay-whole", lambda: s.replay(0, 0, end))
    s.step("replay-from-middle", lambda: s.replay(0, middle, end - middle))
    s.step("replay-bounded-length", lambda: s.replay(0, 10 * frame, 25 * frame))
    s.step("replay-length-max", lambda: s.replay(0, 0, 2**63 - 1, end))
    s.step("replay-length-null", lambda: s.replay(0, 0, -1, end))
    s.step("replay-unknown-recording", lambda: s.start_and_stop(UNKNOWN_ID, 0, end))
    s.step("replay-unaligned-position", lambda: s.start_and_stop(0, 13, frame))
    s.step("replay-position-past-end", lambda: s.start_and_stop(0, end + frame, frame))
    s.step("replay-at-stop", lambda: s.start_and_stop(0, end, frame))
    s.step("replay-position-before-start", lambda: s.start_and_stop(0, -2 * frame, frame))
    s.step("replay-position-null", lambda: s.start_and_stop(0, -1, frame))
    s.step("replay-length-past-end", lambda: s.start_and_stop(0, 0, end + 10 * frame))

    def stop_twice() -> dict:
        replay_session_id = c.start_replay(0, 0, 2**63 - 1, replay_channel, IDLE_STREAM_ID)
        c.stop_replay(replay_session_id)
        c.stop_replay(replay_session_id)
        return {"replaySessionId": replay_session_id}
    s.step("stop-replay-running", lambda: s.start_and_stop(0, 0, 2**63 - 1))
    s.step("stop-replay-again", stop_twice)
    s.step("stop-replay-unknown", lambda: c.stop_replay(UNKNOWN_ID) or {})
    for name, bad in (("start-recording-malformed-channel", "aeron:udp?endpoint"),
                      ("start-recording-unknown-media", "aeron:xyz?endpoint=localhost:1"),
                      ("start-recording-not-a-uri", "not-a-uri")):
        s.step(name, lambda bad=bad: {"subscriptionId": c.start_recording(bad, stream)})

    publication = c.aeron.add_exclusive_publication(_pinned(channel_b, session + 1), stream)
    try:
        s.step("start-recording-b", lambda: {"subscriptionId": c.start_recording(record_b, stream)})
        s.step("publish-b", lambda: s.publish(publication, 1, 300, 0))
        s.step("stop-recording-b-by-channel",
               lambda: (c.stop_recording(record_b, stream), {"stopped": s.await_stopped(1)})[1])
    finally:
        publication.close()
    extend_b = f"{channel_b}|session-id={session + 3}"
    publication = c.aeron.add_exclusive_publication(_pinned(channel_b, session + 3, 300 * frame), stream)
    try:
        s.step("extend", lambda: {"subscriptionId": c.extend_recording(1, extend_b, stream)})
        s.step("publish-extension", lambda: s.publish(publication, 1, 100, 300))
        s.step("extend-duplicate", lambda: {"subscriptionId": c.extend_recording(1, extend_b, stream)})
        s.step("positions-extending", lambda: s.positions(1))
        s.step("truncate-extending", lambda: (c.truncate_recording(1, 0), s.positions(1))[1])
        s.step("stop-extension", lambda: (c.stop_recording(extend_b, stream), {"stopped": s.await_stopped(1)})[1])
    finally:
        publication.close()
    s.step("extend-unknown", lambda: {"subscriptionId": c.extend_recording(UNKNOWN_ID, extend_b, stream)})
    s.step("extend-other-stream", lambda: {"subscriptionId": c.extend_recording(1, extend_b, stream + 3)})
    s.step("extend-malformed-channel", lambda: {"subscriptionId": c.extend_recording(1, "aeron:udp?endpoint", stream)})
    s.step("list-recording-extended", lambda: s.descriptors(c.list_recording(1)))
    s.step("positions-extended", lambda: s.positions(1))
    s.step("replay-extended", lambda: s.replay(1, 0, 400 * frame))
    for name, position in (("truncate-unaligned", 100), ("truncate-past-end", 401 * frame),
                           ("truncate-negative", -32)):
        s.step(name, lambda position=position: (c.truncate_recording(1, position), s.positions(1))[1])
    s.step("truncate-unknown", lambda: (c.truncate_recording(UNKNOWN_ID, 0), {})[1])
    s.step("truncate", lambda: (c.truncate_recording(1, 200 * frame), s.positions(1))[1])
    s.step("list-recording-truncated", lambda: s.descriptors(c.list_recording(1)))
    s.step("truncate-at-stop", lambda: (c.truncate_recording(1, 200 * frame), s.positions(1))[1])
    s.step("replay-truncated", lambda: s.replay(1, 0, 200 * frame))
    s.step("replay-past-truncation", lambda: s.start_and_stop(1, 0, 300 * frame))
    s.step("recording-position-unknown", lambda: {"position": c.recording_position(UNKNOWN_ID)})
    s.step("stop-position-unknown", lambda: {"position": c.stop_position(UNKNOWN_ID)})
    s.step("recording-position-negative", lambda: {"position": c.recording_position(-1)})
    s.step("stop-position-negative", lambda: {"position": c.stop_position(-1)})
    return s


@pytest.fixture(scope="module")
def our_script_on_java(peer_installation, aeron_client: AeronClient,
                       tmp_path_factory: pytest.TempPathFactory) -> ScriptRun:
    """Our client's steps against a fresh Java 1.15.1 archive, stopped by PID afterwards."""
    with running_java_archive(peer_installation, tmp_path_factory.mktemp("python-client-script"),
                              segment_length=SEGMENT_LENGTH) as java:
        with ArchiveClient.connect(control_channel=java.endpoint.control_channel, aeron=aeron_client,
                                   protocol="legacy", timeout=TIMEOUT) as connected:
            ours = _run_our_script(connected)
    return ScriptRun("ours", ours.steps, ours.ports)


def test_every_1_15_1_request_gets_the_answer_the_java_client_gets(
        our_script_on_java: ScriptRun, java_1_15_1_client_on_java_archive: ScriptRun) -> None:
    """Connect, StartRecording, StopRecording, StopRecordingSubscription, ListRecordings,
    ListRecordingsForUri, ListRecording, RecordingPosition, StopPosition, FindLastMatchingRecording,
    Replay, StopReplay, ExtendRecording, TruncateRecording (and CloseSession on close): our client
    against a Java 1.15.1 archive, step by step equal to the Java 1.15.1 client's answers."""
    ours = our_script_on_java
    names = {s["step"] for s in ours.steps}
    java = ScriptRun("java", [s for s in java_1_15_1_client_on_java_archive.steps if s["step"] in names],
                     java_1_15_1_client_on_java_archive.ports)
    assert [s["step"] for s in java.steps] == [s["step"] for s in ours.steps]
    differences = step_differences(java, ours)
    assert not differences, f"{len(differences)} steps differ:\n" + "\n".join(differences)
    assert len(ours.steps) > 60 and sum(not s["ok"] for s in ours.steps) > 20
    assert ours.step("replay-whole")["result"]["digest"] == expected_digest(0, SCRIPT_MESSAGES, SCRIPT_SIZE)
    assert ours.step("replay-extended")["result"]["digest"] == expected_digest(0, 400, SCRIPT_SIZE)


@pytest.mark.parametrize(("request_name", "call"), [
    ("BoundedReplayRequest", lambda c: c.start_bounded_replay(0, 0, 32, 1, "aeron:udp?endpoint=localhost:1", 1)),
    ("StopAllReplaysRequest", lambda c: c.stop_all_replays(0)),
    ("PurgeRecordingRequest", lambda c: c.purge_recording(0)),
    ("DetachSegmentsRequest", lambda c: c.detach_segments(0, 0)),
    ("DeleteDetachedSegmentsRequest", lambda c: c.delete_detached_segments(0)),
    ("PurgeSegmentsRequest", lambda c: c.purge_segments(0, 0)),
    ("AttachSegmentsRequest", lambda c: c.attach_segments(0)),
    ("StopRecordingByIdentityRequest", lambda c: c.stop_recording_by_identity(0)),
    ("ListRecordingSubscriptionsRequest", lambda c: c.list_recording_subscriptions(0, 10, "", 1, False)),
    ("StartRecordingRequest2 (auto_stop)", lambda c: c.start_recording("aeron:ipc", 1, auto_stop=True)),
    ("ExtendRecordingRequest2 (auto_stop)", lambda c: c.extend_recording(0, "aeron:ipc", 1, auto_stop=True)),
    ("ReplayRequest with file_io_max_length",
     lambda c: c.start_replay(0, 0, 32, "aeron:udp?endpoint=localhost:1", 1, file_io_max_length=4096)),
    ("a replay over a response channel (ReplayTokenRequest)",
     lambda c: c.start_replay(0, 0, 32, "aeron:udp?control-mode=response|control=localhost:1", 1,
                              subscription_registration_id=1)),
])
def test_requests_a_1_15_1_archive_does_not_have_are_refused_naming_them(
        client: ArchiveClient, request_name: str, call) -> None:
    """Refused by our client before anything is sent (a 1.15.1 archive would not answer them), with
    an ArchiveError naming the request; the session stays usable."""
    with pytest.raises(ArchiveError) as raised:
        call(client)
    assert raised.value.request == request_name
    assert request_name in str(raised.value) and "1.15.x" in str(raised.value)
    assert raised.value.code is None and raised.value.error_code is None  # not an archive's answer
    assert client.list_recording(987_654) is None  # still connected
