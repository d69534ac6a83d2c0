"""Our Python client asks a REAL Java archive (modern Aeron, the destination ``replica``) to replicate
recordings from another archive (the source: a second Java archive, or our sidecar), as an
analytics replica is fed (docs/deployment.md, "The analytics replica"):

* a stopped recording: the signals in Aeron's order (REPLICATE, EXTEND, SYNC at the source's stop
  position, REPLICATE_END, then the STOP of the replica's recording, which Java sends after it),
  the replica's descriptor positions and segment bytes equal the source's, its replay is byte-exact;
* up to a ``stop_position``;
* an ACTIVE source recording followed live, stopped mid-way by ``stop_replication`` (a valid
  prefix), then extended by a second replicate into the same destination recording once the
  source stopped: the replica ends equal to the source;
* a ``live_destination``: the replica catches up with the active source, joins the live (dynamic
  MDC) stream (MERGE) and records it on to the source's stop position, byte-exact;
* ``src_credentials`` for a source that authenticates (and the refusal without them);
* a source that does not answer: the destination's error (REPLICATION_CONNECTION_FAILURE) raised
  by ``await_replication``.

Our client runs on the destination's own Java media driver (a C client over its CnC file); the
publisher of the live source runs on the source's driver. Every archive and peer JVM is a real
process stopped by PID by the fixture or call that started it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, RecordingSignal
from aeron_spark.archive.codecs import ArchiveErrorCode, SourceLocation
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    ModernPeerClient,
    ModernPeerInstallation,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
    NumberedPublisher,
    payloads,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.recording_lookup import recording_of as find_recording_of
from tests.support.waiting import wait_until as wait_for
from tests.support.sidecar import Sidecar, running_sidecar

SIZE = 100
FRAMED = framed_length(SIZE)
TIMEOUT_S = 30.0
#: What a replica shares with its source (ids, timestamps and channels of the session differ).
REPLICATED = ("start_position", "stop_position", "initial_term_id", "segment_file_length", "term_buffer_length",
              "mtu_length", "session_id", "stream_id")


@dataclass
class Archives:
    source: RunningModernJavaArchive
    replica: RunningModernJavaArchive
    source_client: ArchiveClient  # ours, on the source's Java driver
    replica_client: ArchiveClient  # ours, on the replica's Java driver


@pytest.fixture(scope="module")
def archives(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archives]:
    work: Path = tmp_path_factory.mktemp("python-client-replicates")
    with running_modern_java_archive(modern_peer, work / "source") as source, \
            running_modern_java_archive(modern_peer, work / "replica",
                                        replication_channel=udp_channel(free_udp_port())) as replica, \
            AeronClient(str(source.aeron_dir), client_name="replication-source-test") as source_aeron, \
            AeronClient(str(replica.aeron_dir), client_name="replication-replica-test") as replica_aeron, \
            ArchiveClient.connect(control_channel=source.control_channel, aeron=source_aeron,
                                  timeout=TIMEOUT_S) as source_client, \
            ArchiveClient.connect(control_channel=replica.control_channel, aeron=replica_aeron,
                                  timeout=TIMEOUT_S) as replica_client:
        yield Archives(source, replica, source_client, replica_client)


# The shared helpers with this file's timeout.
wait_until = functools.partial(wait_for, timeout=TIMEOUT_S, interval=0.01)
recording_of = functools.partial(find_recording_of, timeout=TIMEOUT_S)



def replicated_fields(descriptor: RecordingDescriptor | None) -> dict[str, int]:
    assert descriptor is not None
    return {name: getattr(descriptor, name) for name in REPLICATED}


def segment_bytes(archive_dir: Path, recording_id: int, start: int, stop: int) -> bytes:
    """The recorded bytes [start, stop) of a recording that fits its first segment file."""
    return (archive_dir / f"{recording_id}-0.rec").read_bytes()[start:stop]


def replicate_to_end(client: ArchiveClient, *args, **kwargs) -> tuple[int, list]:
    """Replicates and returns the replication's signals up to REPLICATE_END, and the STOP of the
    destination's recording: the Java archive sends it after REPLICATE_END (the local recording
    stops once the replication session has closed)."""
    replication_id = client.replicate(*args, **kwargs)
    signals = list(client.await_replication(replication_id, until=("REPLICATE_END",), timeout=TIMEOUT_S))
    if RecordingSignal.EXTEND in [s.signal for s in signals]:
        signals.append(client.await_recording_signal(RecordingSignal.STOP, correlation_id=replication_id))
    return replication_id, signals


def resume_replication(client: ArchiveClient, recording_id: int, source_channel: str, replica_id: int) -> list:
    """Replicates into ``replica_id`` again. The source's replay publication of the stopped
    replication lingers (5 s in Aeron) with the session id the new replay needs: until it is gone
    the source refuses the replay ("clashing sessionId"), and the replication is asked again."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return replicate_to_end(client, recording_id, source_channel, dst_recording_id=replica_id)[1]
        except ArchiveError as error:
            if "clashing sessionId" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_stopped_java_recording_is_replicated_on_our_request(archives: Archives) -> None:
    recorded = archives.source.client.record(udp_channel(), 6001, 1000, SIZE)
    source_client, replica_client = archives.source_client, archives.replica_client

    replication_id, signals = replicate_to_end(replica_client, recorded.recording_id,
                                               archives.source.control_channel, archives.source.control_stream_id)

    assert all(s.correlation_id == replication_id for s in signals)
    # Aeron's order; the local recording's STOP comes after REPLICATE_END.
    assert [s.signal for s in signals] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND, RecordingSignal.SYNC,
                                           RecordingSignal.REPLICATE_END, RecordingSignal.STOP]
    replica_id = signals[0].recording_id
    assert {s.recording_id for s in signals} == {replica_id}
    assert signals[0].position == 0 and signals[2].position == signals[4].position == recorded.stop_position
    source = source_client.list_recording(recorded.recording_id)
    replica = replica_client.list_recording(replica_id)
    assert replicated_fields(replica) == replicated_fields(source)
    assert segment_bytes(archives.replica.archive_dir, replica_id, 0, recorded.stop_position) == \
        segment_bytes(archives.source.archive_dir, recorded.recording_id, 0, recorded.stop_position)
    replayed = archives.replica.client.replay(replica_id, replay_channel=udp_channel(), replay_stream_id=6002)
    assert (replayed.messages, replayed.digest) == (1000, recorded.digest)


def test_replication_up_to_a_stop_position(archives: Archives) -> None:
    recorded = archives.source.client.record(udp_channel(), 6011, 1000, SIZE)
    stop_position = 400 * FRAMED

    _, signals = replicate_to_end(archives.replica_client, recorded.recording_id, archives.source.control_channel,
                                  stop_position=stop_position)

    # No SYNC: the replica stopped at the requested position, short of the source's stop position.
    assert [s.signal for s in signals] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND,
                                           RecordingSignal.REPLICATE_END, RecordingSignal.STOP]
    assert signals[-1].position == stop_position
    replica = archives.replica_client.list_recording(signals[0].recording_id)
    assert replica is not None and (replica.start_position, replica.stop_position) == (0, stop_position)
    replayed = archives.replica.client.replay(replica.recording_id, replay_channel=udp_channel(),
                                              replay_stream_id=6012)
    assert (replayed.messages, replayed.digest) == (400, expected_digest(0, 400, SIZE))


def test_a_live_replication_stopped_mid_way_leaves_a_prefix_a_new_replicate_extends(archives: Archives) -> None:
    source_client, replica_client = archives.source_client, archives.replica_client
    channel, stream_id = udp_channel(), 6021
    source_client.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = source_client.aeron.add_exclusive_publication(channel, stream_id)
    publisher = NumberedPublisher(publication, SIZE, TIMEOUT_S)

    def publish(count: int) -> int:
        end = publisher.publish(count)
        wait_until(lambda: source_client.recording_position(recording_id) >= end, "the source to record")
        return end

    try:
        wait_until(lambda: publication.is_connected, "the source's recording subscription")
        recording_id = recording_of(source_client, channel, stream_id, publication.session_id)
        first_end = publish(600)

        replication_id = replica_client.replicate(recording_id, archives.source.control_channel)
        started = list(replica_client.await_replication(replication_id, until=("EXTEND",), timeout=TIMEOUT_S))
        assert [s.signal for s in started] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND]
        replica_id = started[0].recording_id
        wait_until(lambda: replica_client.recording_position(replica_id) >= first_end, "the replica to follow")
        assert source_client.stop_position(recording_id) == -1  # the source is still recording

        replica_client.stop_replication(replication_id)
        ended = list(replica_client.await_replication(replication_id, until=("REPLICATE_END",), timeout=TIMEOUT_S))
        assert [s.signal for s in ended] == [RecordingSignal.REPLICATE_END]
        stopped = replica_client.await_recording_signal(RecordingSignal.STOP, correlation_id=replication_id)
        # A valid prefix: stopped where it had got to, replaying the source's first messages exactly.
        prefix = replica_client.list_recording(replica_id)
        assert prefix is not None and prefix.stop_position == stopped.position == first_end
        replayed = archives.replica.client.replay(replica_id, replay_channel=udp_channel(), replay_stream_id=6022)
        assert (replayed.messages, replayed.digest) == (600, expected_digest(0, 600, SIZE))
        with pytest.raises(ArchiveError) as unknown:
            replica_client.stop_replication(replication_id)
        assert unknown.value.error_code == ArchiveErrorCode.UNKNOWN_REPLICATION

        publish(400)
    finally:
        publication.close()
    wait_until(lambda: source_client.stop_position(recording_id) == publisher.published * FRAMED, "the source to stop")

    resumed = resume_replication(replica_client, recording_id, archives.source.control_channel, replica_id)
    assert RecordingSignal.REPLICATE not in [s.signal for s in resumed]  # the same destination recording
    assert resumed[0].signal == RecordingSignal.EXTEND and resumed[0].position == first_end
    assert [s.signal for s in resumed][-2:] == [RecordingSignal.REPLICATE_END, RecordingSignal.STOP]
    assert replicated_fields(replica_client.list_recording(replica_id)) == \
        replicated_fields(source_client.list_recording(recording_id))
    assert segment_bytes(archives.replica.archive_dir, replica_id, 0, publisher.published * FRAMED) == \
        segment_bytes(archives.source.archive_dir, recording_id, 0, publisher.published * FRAMED)


def test_a_source_that_does_not_answer_is_reported_as_the_replication_error(archives: Archives) -> None:
    nobody = udp_channel(free_udp_port())
    replication_id = archives.replica_client.replicate(0, nobody)
    with pytest.raises(ArchiveError) as failed:
        list(archives.replica_client.await_replication(replication_id, timeout=TIMEOUT_S))
    assert failed.value.error_code == ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE
    assert failed.value.correlation_id == replication_id


def test_our_sidecar_as_the_source_on_our_request(archives: Archives, tmp_path: Path) -> None:
    """Java archive B replicates from our sidecar when our client asks B (the peer's Java client
    asking the same is in test_java_tools_on_our_sidecar)."""
    sidecar: Sidecar
    with running_sidecar(tmp_path / "sidecar") as sidecar, \
            AeronClient(sidecar.driver_dir, client_name="replication-sidecar-source") as aeron, \
            ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                  timeout=TIMEOUT_S) as ours:
        channel, stream_id = udp_channel(), 6031
        ours.start_recording(channel, stream_id, SourceLocation.REMOTE)
        publication = aeron.add_exclusive_publication(channel, stream_id)
        session_id = publication.session_id
        try:
            wait_until(lambda: publication.is_connected, "the sidecar's recording subscription")
            for payload in payloads(0, 500, SIZE):
                publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT_S)
        finally:
            publication.close()
        recording_id = recording_of(ours, channel, stream_id, session_id)
        wait_until(lambda: ours.stop_position(recording_id) == 500 * FRAMED, "the sidecar recording to stop")

        _, signals = replicate_to_end(archives.replica_client, recording_id, sidecar.control_channel)

        assert [s.signal for s in signals] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND, RecordingSignal.SYNC,
                                               RecordingSignal.REPLICATE_END, RecordingSignal.STOP]
        replica = archives.replica_client.list_recording(signals[0].recording_id)
        assert replicated_fields(replica) == replicated_fields(ours.list_recording(recording_id))
        replayed = archives.replica.client.replay(signals[0].recording_id, replay_channel=udp_channel(),
                                                  replay_stream_id=6032)
        assert (replayed.messages, replayed.digest) == (500, expected_digest(0, 500, SIZE))


def test_a_replication_with_a_live_destination_merges_and_records_the_live_stream(archives: Archives) -> None:
    """``live_destination``: the replica replays the active source, joins the live (dynamic MDC)
    stream once caught up (MERGE), and goes on recording it: no gap, no duplicate."""
    source_client, replica_client = archives.source_client, archives.replica_client
    control, stream_id = f"localhost:{free_udp_port()}", 6041
    publication = source_client.aeron.add_exclusive_publication(
        f"aeron:udp?control={control}|control-mode=dynamic", stream_id)
    session_id = publication.session_id
    source_client.start_recording(f"aeron:udp?endpoint=localhost:0|control={control}|session-id={session_id}",
                                  stream_id, SourceLocation.REMOTE)
    publisher = NumberedPublisher(publication, SIZE, TIMEOUT_S)
    publish = publisher.publish

    try:
        wait_until(lambda: publication.is_connected, "the source's recording subscription")
        recording_id = recording_of(source_client, "aeron:udp", stream_id, session_id)
        publish(500)
        # A replication channel of its own: the replica's default one (a fixed port) may still be
        # held by the subscription of an earlier replication, and a merge adds it to a
        # multi-destination subscription instead.
        replication_id = replica_client.replicate(recording_id, archives.source.control_channel,
                                                  live_destination=f"aeron:udp?endpoint=localhost:0|control={control}",
                                                  replication_channel=udp_channel(free_udp_port()))
        seen: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while RecordingSignal.MERGE not in [s.signal for s in seen]:
            assert time.monotonic() < deadline, f"no MERGE within {TIMEOUT_S} s (signals {seen})"
            publish(2)  # live traffic flows while the replica catches up and joins
            seen += replica_client.poll_replication(replication_id)
            time.sleep(0.002)
        assert [s.signal for s in seen][:3] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND,
                                                RecordingSignal.MERGE]
        replica_id = seen[0].recording_id
        publish(300)  # after the merge: recorded by the replica from the live stream only
    finally:
        publication.close()
    total_end = publisher.published * FRAMED
    wait_until(lambda: source_client.stop_position(recording_id) == total_end, "the source to stop")
    wait_until(lambda: replica_client.stop_position(replica_id) == total_end, "the replica to stop with the live stream")
    assert replicated_fields(replica_client.list_recording(replica_id)) == \
        replicated_fields(source_client.list_recording(recording_id))
    replayed = archives.replica.client.replay(replica_id, replay_channel=udp_channel(), replay_stream_id=6042)
    assert (replayed.messages, replayed.digest) == (publisher.published, expected_digest(0, publisher.published, SIZE))


def test_src_credentials_reach_a_source_that_authenticates(archives: Archives, modern_peer: ModernPeerInstallation,
                                                           tmp_path: Path) -> None:
    """A source archive with Aeron's SimpleAuthenticator: the replica logs in with the
    ``src_credentials`` our client gives (ReplicateRequest2's encodedCredentials); without them the
    source refuses the replica, and the replication reports it."""
    with running_modern_java_archive(modern_peer, tmp_path / "secured", credentials="replica:s3cret") as secured:
        recorded = ModernPeerClient(modern_peer, secured.endpoint, credentials="replica:s3cret").record(
            udp_channel(), 6051, 300, SIZE)

        _, signals = replicate_to_end(archives.replica_client, recorded.recording_id, secured.control_channel,
                                      src_credentials=b"replica:s3cret")
        assert [s.signal for s in signals] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND, RecordingSignal.SYNC,
                                               RecordingSignal.REPLICATE_END, RecordingSignal.STOP]
        replayed = archives.replica.client.replay(signals[0].recording_id, replay_channel=udp_channel(),
                                                  replay_stream_id=6052)
        assert (replayed.messages, replayed.digest) == (300, recorded.digest)

        refused = archives.replica_client.replicate(recorded.recording_id, secured.control_channel)
        with pytest.raises(ArchiveError) as failed:
            list(archives.replica_client.await_replication(refused, timeout=TIMEOUT_S))
        assert failed.value.correlation_id == refused
        assert failed.value.error_code == ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE
        assert "authentication rejected" in failed.value.archive_message
