"""Our ArchiveClient against the REAL modern Java Aeron Archive (1.51.0: protocol 1.12.0, schema v13).

One Java archive (its own Java media driver, 64 KiB segments so segment operations are cheap to
reach) serves the module. Our client runs on the test session's C driver and reaches it over UDP
(control, responses, recorded streams, replays), except where a counter the archive must read is
needed (bounded replay): that client attaches to the archive's own Java driver. Recordings are made
by the real Java client (the peer) and by our client with our publications; what our client sees
(descriptors field by field, positions, replay digests, signals) is compared with what the Java
client sees and with the payloads' recomputed digests.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, RecordingSignal
from aeron_spark.archive.client import live_positions
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.archive.codecs import ArchiveErrorCode, SourceLocation, semantic_version
from aeron_spark.connector.archive_reading import ClientArchiveAccess
from aeron_spark.connector.connection_cache import ConnectionCache
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.publication import InitialPosition

from tests.interop.peer.modern_peer import (
    ModernPeerClient,
    ModernPeerInstallation,
    PeerError,
    RecordResult,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
    payloads,
    running_modern_java_archive,
)
from tests.support.ports import udp_channel

SIZE = 100
MESSAGES = 1_000
TERM_LENGTH = 64 * 1024
SEGMENT_LENGTH = 64 * 1024
TIMEOUT = 10.0
#: Unfragmented SIZE-byte messages per 64 KiB term (the rest of a term is one padding frame).
PER_TERM = TERM_LENGTH // framed_length(SIZE)
PROTOCOL_1_12_0 = semantic_version(1, 12, 0)


def position_of(index: int) -> int:
    """Where message ``index`` starts in a recording of SIZE-byte messages from position 0."""
    return (index // PER_TERM) * TERM_LENGTH + (index % PER_TERM) * framed_length(SIZE)


def end_of(count: int) -> int:
    return position_of(count - 1) + framed_length(SIZE)


def recorded_channel() -> str:
    return f"{udp_channel()}|term-length=64k"


@pytest.fixture(scope="module")
def java(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[RunningModernJavaArchive]:
    with running_modern_java_archive(modern_peer, tmp_path_factory.mktemp("modern-client"),
                                     segment_length=SEGMENT_LENGTH) as archive:
        yield archive


@pytest.fixture(scope="module")
def java_recording(java: RunningModernJavaArchive) -> RecordResult:
    """1,000 × 100 B recorded over UDP (REMOTE) by the real Java client: three 64 KiB segments."""
    recorded = java.client.record(recorded_channel(), 5001, MESSAGES, SIZE)
    assert recorded.stop_position == end_of(MESSAGES)
    return recorded


@pytest.fixture(scope="module")
def client(java: RunningModernJavaArchive, aeron_client: AeronClient) -> Iterator[ArchiveClient]:
    """Our client on our C driver, over UDP; used across the module (idle between the tests while
    the Java peer's commands run)."""
    with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT) as connected:
        yield connected


@pytest.fixture(scope="module")
def on_archive_driver(java: RunningModernJavaArchive) -> Iterator[ArchiveClient]:
    """Our client attached to the archive's own Java driver (counters the archive reads)."""
    aeron = AeronClient(str(java.aeron_dir), client_name="on-modern-java-driver")
    try:
        with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron, timeout=TIMEOUT) as connected:
            yield connected
    finally:
        aeron.close()


def digest_of(messages) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.payload)
    return digest.hexdigest()


def replay_all(client: ArchiveClient, recording_id: int, position: int, length: int) -> list:
    with client.replay(recording_id, position, length, udp_channel(), 6001) as replay:
        return list(replay.messages(idle_timeout=TIMEOUT))


def without_request_ids(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if k not in ("controlSessionId", "correlationId")}


def java_descriptor(java: RunningModernJavaArchive, recording_id: int) -> dict | None:
    found = java.client.list_recordings(recording_id=recording_id)
    return without_request_ids(found[0]) if found else None


def wait_until(condition, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def connected_publication(aeron: AeronClient, channel: str, stream_id: int, **kw):
    publication = aeron.add_exclusive_publication(channel, stream_id, **kw)
    wait_until(lambda: publication.is_connected, "the Java archive to subscribe")
    return publication


def publish(publication, first_index: int, count: int) -> int:
    for payload in payloads(first_index, count, SIZE):
        publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
    return publication.position


# --------------------------------------------------------------------------------------------- login


def test_login_without_credentials_gets_the_archive_id(java: RunningModernJavaArchive, client: ArchiveClient,
                                                       aeron_client: AeronClient) -> None:
    assert not client.is_legacy
    assert client.archive_protocol_version == PROTOCOL_1_12_0
    assert client.archive_id == java.archive_id == java.client.connect().archive_id
    assert client.control_session_id >= 0 and client.is_connected
    with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client, protocol="auto",
                               timeout=TIMEOUT) as auto:  # ConnectRequest (2): 1.51 still takes it
        assert not auto.is_legacy and auto.archive_protocol_version == PROTOCOL_1_12_0
        assert auto.archive_id == java.archive_id


def test_a_session_costs_the_java_driver_no_more_than_the_java_clients(java: RunningModernJavaArchive,
                                                                        aeron_client: AeronClient) -> None:
    """Like Aeron's client, ours asks for 64 KiB terms on its control request channel: the image of
    it on the archive's driver is 3 x 64 KiB (+ metadata), not 3 x 16 MiB (Aeron's default term
    length, which a Java driver without sparse files allocates in full for every client session)."""
    images = Path(java.aeron_dir) / "images"

    def image_sizes() -> dict[str, int]:
        return {path.name: path.stat().st_size for path in images.glob("*.logbuffer")}

    before = image_sizes()
    with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client, timeout=TIMEOUT):
        new = {name: size for name, size in image_sizes().items() if name not in before}
    assert new and all(size <= 3 * TERM_LENGTH + 4096 for size in new.values()), new


def test_login_with_credentials(modern_peer: ModernPeerInstallation, tmp_path: Path,
                                aeron_client: AeronClient) -> None:
    with running_modern_java_archive(modern_peer, tmp_path, credentials="spark:s3cret") as secured:
        assert secured.server.ready["authenticated"] is True
        with ArchiveClient.connect(control_channel=secured.control_channel, aeron=aeron_client,
                                   credentials=b"spark:s3cret", timeout=TIMEOUT) as ours:
            assert ours.archive_id == secured.archive_id
            assert ours.list_recordings() == []
        for wrong in (b"spark:wrong", None):
            started = time.monotonic()
            with pytest.raises(ArchiveError) as refused:
                ArchiveClient.connect(control_channel=secured.control_channel, aeron=aeron_client,
                                      credentials=wrong, timeout=TIMEOUT)
            assert refused.value.error_code == ArchiveErrorCode.AUTHENTICATION_REJECTED, refused.value
            assert time.monotonic() - started < TIMEOUT / 2  # refused at once, not a timeout
        # The Java client sees the same archive the same way.
        java_client = ModernPeerClient(modern_peer, secured.endpoint, credentials="spark:s3cret")
        assert java_client.connect().archive_id == secured.archive_id
        with pytest.raises(PeerError):
            ModernPeerClient(modern_peer, secured.endpoint, credentials="spark:wrong").connect()


def test_idle_connections_stay_usable(java: RunningModernJavaArchive, aeron_client: AeronClient,
                                      java_recording: RecordResult) -> None:
    """The Java archive pings every second and drops a session it cannot reach for 5 s: a client
    that reads nothing for 6.5 s (its pings pile up unread), and one held by the connection cache
    (kept alive between leases), both still answer afterwards."""
    def connect(_key: str) -> ArchiveClient:
        return ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client, timeout=TIMEOUT)

    cache: ConnectionCache[str, ArchiveClient] = ConnectionCache(connect, keep_alive_interval_s=2.0)
    with connect("plain") as plain:
        with cache.lease("cached") as (leased, reused):
            assert not reused and leased.list_recording(java_recording.recording_id) is not None
        time.sleep(6.5)
        assert plain.is_connected
        assert plain.list_recording(java_recording.recording_id).stop_position == java_recording.stop_position
        with cache.lease("cached") as (again, reused):
            assert reused and again is leased
            assert again.list_recording(java_recording.recording_id).stop_position == java_recording.stop_position
        assert cache.keep_alives >= 2
        cache.forget("cached")


# --------------------------------------------------------------------------------------------- listings


def test_every_listing_matches_the_java_client(java: RunningModernJavaArchive, client: ArchiveClient,
                                               java_recording: RecordResult) -> None:
    theirs = {d["recordingId"]: without_request_ids(d) for d in java.client.list_recordings()}
    ours = {d.recording_id: without_request_ids(d.to_aeron_dict()) for d in client.list_recordings()}
    assert ours == theirs and java_recording.recording_id in ours
    expected = theirs[java_recording.recording_id]
    assert expected["stopPosition"] == java_recording.stop_position and expected["sessionId"] == java_recording.session_id

    single = client.list_recording(java_recording.recording_id)
    assert without_request_ids(single.to_aeron_dict()) == expected
    assert client.list_recording(987_654) is None

    endpoint = java_recording.fields["recordingChannel"].split("?")[1].split("|")[0]  # endpoint=localhost:P
    [by_uri] = client.list_recordings_for_uri(0, None, endpoint, 5001)
    assert without_request_ids(by_uri.to_aeron_dict()) == expected
    page = client.list_recordings_for_uri_page(0, 10, endpoint, 5001)
    assert [d.recording_id for d in page.descriptors] == [java_recording.recording_id]
    assert client.list_recordings_for_uri(0, None, endpoint, 5002) == []
    assert client.list_recordings(java_recording.recording_id, 1)[0].recording_id == java_recording.recording_id

    assert client.find_last_matching_recording(0, endpoint, 5001, java_recording.session_id) == \
        java_recording.recording_id
    assert client.find_last_matching_recording(0, endpoint, 5001, java_recording.session_id + 1) == -1
    assert client.find_last_matching_recording(java_recording.recording_id + 1, endpoint, 5001,
                                               java_recording.session_id) == -1


# --------------------------------------------------------------------------------------------- recording


def test_start_and_stop_recording_three_ways_with_signals_and_positions(
        java: RunningModernJavaArchive, client: ArchiveClient) -> None:
    """Ours starts recordings of our publications; they stop by subscription id, by identity and by
    channel; START/STOP signals, subscriptions, positions and the Java client's replays agree."""
    stops = ("subscription", "identity", "channel")
    started = []
    for offset, how in enumerate(stops):
        channel, stream_id = recorded_channel(), 5101 + offset
        subscription_id = client.start_recording(channel, stream_id, SourceLocation.REMOTE)
        [listed] = [s for s in client.list_recording_subscriptions(0, 10, "aeron:udp", stream_id, True)]
        assert (listed.subscription_id, listed.stream_id) == (subscription_id, stream_id)
        assert channel.split("?")[1].split("|")[0] in listed.stripped_channel
        publication = connected_publication(client.aeron, channel, stream_id)
        signal = client.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id)
        count = 200 + 50 * offset
        end = publish(publication, 0, count)
        recording_id = signal.recording_id
        wait_until(lambda: client.recording_position(recording_id) >= end, "the recording to catch up")
        started.append((how, channel, stream_id, subscription_id, recording_id, publication, count, end))

        # Active: positions agree with the Java client's view.
        theirs = java.client.positions(recording_id)
        assert theirs.active and theirs.recording_position == end == client.recording_position(recording_id)
        assert client.stop_position(recording_id) == -1 == theirs.stop_position
        assert client.max_recorded_position(recording_id) == end == theirs.max_recorded_position
        assert client.start_position(recording_id) == 0 == theirs.start_position

    for how, channel, stream_id, subscription_id, recording_id, publication, count, end in started:
        if how == "subscription":
            client.stop_recording_subscription(subscription_id)
        elif how == "identity":
            assert client.stop_recording_by_identity(recording_id) is True
        else:
            client.stop_recording(channel, stream_id)
        stopped = client.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
        assert stopped.position == end
        publication.close()
        wait_until(lambda: client.stop_position(recording_id) == end, "the stop position")
        assert client.recording_position(recording_id) == -1
        assert client.max_recorded_position(recording_id) == end
        if how == "identity":
            assert client.stop_recording_by_identity(recording_id) is False  # no longer active
        theirs = java.client.positions(recording_id)
        assert (theirs.active, theirs.stop_position, theirs.max_recorded_position) == (False, end, end)
        assert without_request_ids(client.list_recording(recording_id).to_aeron_dict()) == \
            java_descriptor(java, recording_id)
        replayed = java.client.replay(recording_id, replay_channel=udp_channel(), replay_stream_id=6002)
        assert (replayed.messages, replayed.digest) == (count, expected_digest(0, count, SIZE)), how
    # Stopping by identity or by channel leaves the subscription to the archive (as in Aeron): only
    # the one stopped by its id is surely gone.
    stream_ids = {s.stream_id for s in client.list_recording_subscriptions(0, 10, "aeron:udp", 0, False)}
    assert 5101 not in stream_ids and 5103 not in stream_ids


def test_the_java_rec_pos_counter_is_found_and_read_on_the_archive_driver(java: RunningModernJavaArchive,
                                                                          on_archive_driver: ArchiveClient) -> None:
    """A client on the archive's driver (archive.dir on its host) follows an active recording by the
    Java archive's rec-pos counter (type 100, keyed by recording id and archive id), with no request."""
    ours = on_archive_driver
    subscription_id = ours.start_recording("aeron:ipc?term-length=64k", 5150, SourceLocation.LOCAL)
    publication = connected_publication(ours.aeron, "aeron:ipc?term-length=64k", 5150)
    try:
        recording_id = ours.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id).recording_id
        end = publish(publication, 0, 300)
        counters = ours.aeron.counters_reader
        counter_id = live_positions.counter_ids_by_recording(counters, java.archive_id)[recording_id]
        wait_until(lambda: live_positions.recorded_position(counters, counter_id) == end, "the counter to reach the end")
        assert live_positions.is_counter_of(counters, counter_id, recording_id)
        assert ClientArchiveAccess(ours).live_position(recording_id) == end == ours.recording_position(recording_id)
    finally:
        ours.stop_recording_subscription(subscription_id)
        publication.close()
    ours.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
    wait_until(lambda: not live_positions.is_counter_of(counters, counter_id, recording_id), "the counter to go")


def test_extend_a_java_recording(java: RunningModernJavaArchive, client: ArchiveClient) -> None:
    base = java.client.record(recorded_channel(), 5201, 300, SIZE)
    descriptor = client.list_recording(base.recording_id)
    channel = recorded_channel()
    subscription_id = client.extend_recording(base.recording_id, channel, 5201, SourceLocation.REMOTE)
    publication = connected_publication(client.aeron, channel, 5201, initial_position=InitialPosition(
        descriptor.stop_position, descriptor.initial_term_id, descriptor.term_buffer_length,
        descriptor.mtu_length))
    extended = client.await_recording_signal(RecordingSignal.EXTEND, subscription_id=subscription_id)
    assert (extended.recording_id, extended.position) == (base.recording_id, base.stop_position)
    end = publish(publication, 300, 200)
    assert end == end_of(500)
    wait_until(lambda: client.recording_position(base.recording_id) >= end, "the extension to be recorded")
    client.stop_recording_subscription(subscription_id)
    client.await_recording_signal(RecordingSignal.STOP, recording_id=base.recording_id)
    publication.close()
    wait_until(lambda: client.stop_position(base.recording_id) == end, "the stop position")
    replayed = java.client.replay(base.recording_id, replay_channel=udp_channel(), replay_stream_id=6003)
    assert (replayed.messages, replayed.first_index, replayed.last_index) == (500, 0, 499)
    assert replayed.digest == expected_digest(0, 500, SIZE)
    assert digest_of(replay_all(client, base.recording_id, 0, end)) == replayed.digest


# --------------------------------------------------------------------------------------------- replay


def test_replays_whole_from_a_position_and_bounded(java: RunningModernJavaArchive, client: ArchiveClient,
                                                   on_archive_driver: ArchiveClient,
                                                   java_recording: RecordResult) -> None:
    recording_id, stop = java_recording.recording_id, java_recording.stop_position
    whole = replay_all(client, recording_id, 0, stop)
    assert len(whole) == MESSAGES and digest_of(whole) == java_recording.digest == expected_digest(0, MESSAGES, SIZE)

    middle = position_of(500)
    tail = replay_all(client, recording_id, middle, stop - middle)
    theirs = java.client.replay(recording_id, position=middle, replay_channel=udp_channel(), replay_stream_id=6004)
    assert (tail[0].position, tail[-1].next_position) == (middle, stop)
    assert digest_of(tail) == theirs.digest == expected_digest(500, MESSAGES - 500, SIZE)
    assert theirs.first_position == middle

    # Bounded: a limit counter on the archive's driver holds the replay at message 700.
    ours = on_archive_driver
    assert ours.shares_archive_driver()
    limit = ours.aeron.add_counter(1001, b"limit", "aeron-spark test replay limit")
    try:
        limit.value = position_of(700)
        subscription = ours.aeron.add_subscription("aeron:ipc", 6005)
        try:
            replay_session_id = ours.start_bounded_replay(recording_id, middle, stop - middle, limit.counter_id,
                                                          "aeron:ipc", 6005)
            received = _read_until(subscription, replay_session_id, position_of(700))
            assert [_index(p) for p in received] == list(range(500, 700))
            time.sleep(0.2)
            assert not _poll_payloads(subscription, replay_session_id)  # held at the limit
            limit.value = position_of(750)
            more = _read_until(subscription, replay_session_id, position_of(750))
            assert _digest(received + more) == expected_digest(500, 250, SIZE)
            ours.stop_replay(replay_session_id)
        finally:
            subscription.close()
    finally:
        limit.close()
    java_bounded = java.client.replay(recording_id, position=middle, limit_counter_id=None,
                                      limit_position=position_of(750), replay_channel="aeron:ipc",
                                      replay_stream_id=6006)
    assert java_bounded.digest == expected_digest(500, 250, SIZE)


def _index(payload: bytes) -> int:
    return int.from_bytes(payload[:8], "little")


def _digest(items: list[bytes]) -> str:
    return hashlib.sha256(b"".join(items)).hexdigest()


def _poll_payloads(subscription, replay_session_id: int) -> list[bytes]:
    image = subscription.image_by_session_id(replay_image_session_id(replay_session_id))
    got: list[bytes] = []
    if image is not None:
        image.poll(lambda payload, _header: got.append(bytes(payload)), 100)
    return got


def _read_until(subscription, replay_session_id: int, end: int) -> list[bytes]:
    session_id = replay_image_session_id(replay_session_id)
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while True:
        image = subscription.image_by_session_id(session_id)
        if image is not None:
            image.poll(lambda payload, _header: got.append(bytes(payload)), 100)
            if image.position >= end:
                return got
        assert time.monotonic() < deadline, f"the bounded replay did not reach {end}"
        time.sleep(0.001)


# --------------------------------------------------------------------------------------------- maintenance


def test_truncate_and_purge_like_the_java_client(java: RunningModernJavaArchive, client: ArchiveClient) -> None:
    """Twin recordings: ours truncates/purges one, the Java client the other; same answers."""
    mine = java.client.record(recorded_channel(), 5301, MESSAGES, SIZE)
    twin = java.client.record(recorded_channel(), 5302, MESSAGES, SIZE)
    at = position_of(600)  # inside the second segment: the third is deleted
    deleted = client.truncate_recording(mine.recording_id, at)
    theirs = java.client.truncate(twin.recording_id, at)
    assert deleted == theirs["deletedSegments"]
    assert client.stop_position(mine.recording_id) == at == theirs["stopPosition"]
    assert java_descriptor(java, mine.recording_id)["stopPosition"] == at
    replayed = java.client.replay(mine.recording_id, replay_channel=udp_channel(), replay_stream_id=6007)
    assert (replayed.messages, replayed.digest) == (600, expected_digest(0, 600, SIZE))
    assert digest_of(replay_all(client, mine.recording_id, 0, at)) == replayed.digest
    with pytest.raises(ArchiveError) as beyond:
        client.truncate_recording(mine.recording_id, at + TERM_LENGTH)
    assert beyond.value.archive_message

    purged = client.purge_recording(mine.recording_id)
    their_purge = java.client.purge(twin.recording_id)
    assert purged == their_purge["deletedSegments"] and their_purge["stillListed"] is False
    client.await_recording_signal(RecordingSignal.DELETE, recording_id=mine.recording_id)
    assert client.list_recording(mine.recording_id) is None
    assert java_descriptor(java, mine.recording_id) is None
    with pytest.raises(ArchiveError) as gone:
        client.stop_position(mine.recording_id)
    assert gone.value.error_code == ArchiveErrorCode.UNKNOWN_RECORDING


def test_segment_operations(java: RunningModernJavaArchive, client: ArchiveClient) -> None:
    recorded = java.client.record(recorded_channel(), 5401, MESSAGES, SIZE)  # segments at 0, 64k, 128k
    recording_id = recorded.recording_id

    client.detach_segments(recording_id, SEGMENT_LENGTH)
    assert client.start_position(recording_id) == SEGMENT_LENGTH == java.client.positions(recording_id).start_position
    assert client.attach_segments(recording_id) == 1
    assert client.start_position(recording_id) == 0 == java.client.positions(recording_id).start_position

    assert client.purge_segments(recording_id, SEGMENT_LENGTH) == 1
    assert client.start_position(recording_id) == SEGMENT_LENGTH
    client.detach_segments(recording_id, 2 * SEGMENT_LENGTH)
    assert client.delete_detached_segments(recording_id) == 1
    assert client.attach_segments(recording_id) == 0  # nothing detached is left
    start = 2 * SEGMENT_LENGTH
    assert client.start_position(recording_id) == start
    assert java_descriptor(java, recording_id) == without_request_ids(client.list_recording(recording_id).to_aeron_dict())
    assert java_descriptor(java, recording_id)["startPosition"] == start

    first = 2 * PER_TERM  # the first message of the third segment
    replayed = java.client.replay(recording_id, position=start, replay_channel=udp_channel(), replay_stream_id=6008)
    assert (replayed.first_index, replayed.last_index) == (first, MESSAGES - 1)
    assert replayed.digest == expected_digest(first, MESSAGES - first, SIZE)
    assert digest_of(replay_all(client, recording_id, start, recorded.stop_position - start)) == replayed.digest
    with pytest.raises(ArchiveError):
        client.detach_segments(recording_id, start + SEGMENT_LENGTH)  # would detach the segment being read to


def test_migrate_segments_like_the_java_client(java: RunningModernJavaArchive, client: ArchiveClient) -> None:
    """Two pairs: a Java recording of exactly one segment (the head) and a recording of ours that
    continues it (same stream, initial term id, term length and mtu, starting at the head's stop
    position, a segment boundary). Ours moves the first pair's head onto the start of its
    continuation, the Java client the second's; same outcome, and the continuation replays as one
    stream from 0. (Appending the other way round is refused by 1.51: the head already holds its next,
    empty, segment file.)"""
    size, per_segment = 96, SEGMENT_LENGTH // framed_length(96)

    def pair(stream_id: int) -> tuple[int, int, int]:
        head = java.client.record(recorded_channel(), stream_id, per_segment, size)
        assert head.stop_position == SEGMENT_LENGTH
        descriptor = client.list_recording(head.recording_id)
        channel = recorded_channel()
        subscription_id = client.start_recording(channel, stream_id, SourceLocation.REMOTE)
        publication = connected_publication(client.aeron, channel, stream_id, initial_position=InitialPosition(
            SEGMENT_LENGTH, descriptor.initial_term_id, TERM_LENGTH, descriptor.mtu_length))
        tail_id = client.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id).recording_id
        for payload in payloads(per_segment, per_segment, size):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
        end = publication.position
        wait_until(lambda: client.recording_position(tail_id) >= end, "the continuation to be recorded")
        client.stop_recording_subscription(subscription_id)
        publication.close()
        wait_until(lambda: client.stop_position(tail_id) == end, "the continuation to stop")
        assert client.start_position(tail_id) == SEGMENT_LENGTH
        return head.recording_id, tail_id, end

    ours_head, ours_tail, end = pair(5501)
    theirs_head, theirs_tail, their_end = pair(5502)
    moved = client.migrate_segments(ours_head, ours_tail)
    theirs = java.client.migrate_segments(theirs_head, theirs_tail)
    assert moved == theirs["count"] == 1
    assert (client.start_position(ours_tail), client.stop_position(ours_tail)) == (0, end)
    assert (java.client.positions(theirs_tail).start_position, their_end) == (0, end)
    for head, tail in ((ours_head, ours_tail), (theirs_head, theirs_tail)):
        assert without_request_ids(client.list_recording(tail).to_aeron_dict()) == java_descriptor(java, tail)
        head_view = client.list_recording(head)
        assert (without_request_ids(head_view.to_aeron_dict()) if head_view else None) == java_descriptor(java, head)
    replayed = java.client.replay(ours_tail, replay_channel=udp_channel(), replay_stream_id=6009)
    assert (replayed.messages, replayed.digest) == (2 * per_segment, expected_digest(0, 2 * per_segment, size))
    assert digest_of(replay_all(client, ours_tail, 0, end)) == replayed.digest


# --------------------------------------------------------------------------------------------- the rest


def test_auto_stop_recordings_keep_alive_stop_all_replays_and_close(java: RunningModernJavaArchive,
                                                                     client: ArchiveClient,
                                                                     aeron_client: AeronClient) -> None:
    """StartRecording2 and ExtendRecording2 (auto-stop: the archive stops the recording when the
    image goes), KeepAlive (no answer; the session stays usable), StopAllReplays (a following replay
    of a live recording ends) and CloseSession (sent when a client closes)."""
    channel, stream_id = recorded_channel(), 5601
    subscription_id = client.start_recording(channel, stream_id, SourceLocation.REMOTE, auto_stop=True)
    publication = connected_publication(client.aeron, channel, stream_id)
    recording_id = client.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id).recording_id
    end = publish(publication, 0, 100)
    wait_until(lambda: client.recording_position(recording_id) >= end, "the recording to catch up")

    # A replay following the live recording, ended by StopAllReplays of this recording.
    replay_channel = udp_channel()
    subscription = client.aeron.add_subscription(replay_channel, 6010)
    try:
        replay_session_id = client.start_replay(recording_id, 0, -1, replay_channel, 6010)
        wait_until(lambda: subscription.image_by_session_id(replay_image_session_id(replay_session_id)) is not None,
                   "the following replay's image")
        client.stop_all_replays(recording_id)
        wait_until(lambda: subscription.image_by_session_id(replay_image_session_id(replay_session_id)) is None,
                   "the replay to end")
    finally:
        subscription.close()

    client.keep_alive()
    assert client.recording_position(recording_id) == end  # still answered after the keep-alive

    publication.close()  # auto-stop: the image goes, the archive stops the recording by itself
    stopped = client.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
    assert stopped.position == end
    wait_until(lambda: client.stop_position(recording_id) == end, "the auto-stopped stop position")
    assert stream_id not in {s.stream_id for s in client.list_recording_subscriptions(0, 10, "aeron:udp", 0, False)}

    descriptor = client.list_recording(recording_id)
    extension_channel = recorded_channel()
    extension_id = client.extend_recording(recording_id, extension_channel, stream_id, SourceLocation.REMOTE,
                                           auto_stop=True)
    extension = connected_publication(client.aeron, extension_channel, stream_id, initial_position=InitialPosition(
        end, descriptor.initial_term_id, descriptor.term_buffer_length, descriptor.mtu_length))
    assert client.await_recording_signal(RecordingSignal.EXTEND, subscription_id=extension_id).position == end
    extended_end = publish(extension, 100, 50)
    wait_until(lambda: client.recording_position(recording_id) >= extended_end, "the extension to be recorded")
    extension.close()
    assert client.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id).position == extended_end
    replayed = java.client.replay(recording_id, replay_channel=udp_channel(), replay_stream_id=6011)
    assert (replayed.messages, replayed.digest) == (150, expected_digest(0, 150, SIZE))

    # CloseSession on close.
    with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client, timeout=TIMEOUT) as closing:
        assert closing.list_recording(recording_id) is not None
    assert closing.is_closed


def test_login_answering_a_challenge(modern_peer: ModernPeerInstallation, tmp_path: Path,
                                     aeron_client: AeronClient) -> None:
    """Challenge (59) and ChallengeResponse (60) with the Java archive: connect with the principal,
    answer the archive's challenge; a wrong answer is rejected at once."""
    seen: list[bytes] = []

    def answer(secret: bytes):
        def on_challenge(challenge: bytes) -> bytes:
            seen.append(challenge)
            return secret
        return on_challenge

    with running_modern_java_archive(modern_peer, tmp_path, credentials="spark:s3cret",
                                     challenge="prove-it") as secured:
        with ArchiveClient.connect(control_channel=secured.control_channel, aeron=aeron_client, credentials=b"spark",
                                   on_challenge=answer(b"spark:s3cret"), timeout=TIMEOUT) as ours:
            assert ours.archive_id == secured.archive_id
            assert ours.list_recordings() == []
        assert seen == [b"prove-it"]
        with pytest.raises(ArchiveError) as refused:
            ArchiveClient.connect(control_channel=secured.control_channel, aeron=aeron_client, credentials=b"spark",
                                  on_challenge=answer(b"spark:wrong"), timeout=TIMEOUT)
        assert refused.value.error_code == ArchiveErrorCode.AUTHENTICATION_REJECTED, refused.value
