"""kill -9 of either archive in the middle of a live replication, both archives real Java archives
(the replica asked by our Python client), then the replication resumed:

* the SOURCE killed: the replica reports it (the replication's ERROR, or its REPLICATE_END), keeps
  a stopped, valid prefix; the source restarted on its directory recovers its recording, and a new
  replicate into the same replica recording brings it to the source's recovered stop position;
* the REPLICA killed: Aeron's ArchiveTool verifies its catalog (the cut recording included), the
  replica restarted on its directory recovers the recording, and a new replicate extends it to
  the source's stop position.

Our clients and the publisher run on the test session's own C media driver, so killing a Java
archive (its driver with it) never takes them down. Every Java process is stopped by PID (kill -9
by PID for the crash; the fixtures' SIGTERM/SIGKILL otherwise).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, RecordingSignal
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    PeerError,
    RunningModernJavaArchive,
    expected_digest,
    payloads,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel

SIZE = 100
TIMEOUT_S = 30.0
#: A dead source is noticed by the replica when its replay image times out (Aeron's default image
#: liveness timeout is 10 s) or its control session to the source does.
DEATH_NOTICED_S = 60.0


def wait_until(condition, what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@contextlib.contextmanager
def client_of(archive: RunningModernJavaArchive, aeron: AeronClient) -> Iterator[ArchiveClient]:
    with ArchiveClient.connect(control_channel=archive.control_channel, aeron=aeron, timeout=TIMEOUT_S) as client:
        yield client


class LiveSource:
    """A stream our session driver publishes to the source archive over UDP, recorded there."""

    def __init__(self, client: ArchiveClient, aeron: AeronClient, stream_id: int) -> None:
        self.client, self.channel, self.stream_id = client, udp_channel(), stream_id
        client.start_recording(self.channel, stream_id, SourceLocation.REMOTE)
        self.publication = aeron.add_exclusive_publication(self.channel, stream_id)
        self.published = 0
        self.end = 0  # the publication's position after the last message published
        wait_until(lambda: self.publication.is_connected, "the source's recording subscription")
        found: list[int] = []
        wait_until(lambda: found.append(client.find_last_matching_recording(
            0, self.channel, stream_id, self.publication.session_id)) or found[-1] >= 0, "the source recording")
        self.recording_id = found[-1]

    def publish(self, count: int) -> int:
        for payload in payloads(self.published, count, SIZE):
            self.publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT_S)
        self.published += count
        self.end = end = self.publication.position
        wait_until(lambda: self.client.recording_position(self.recording_id) >= end, "the source to record")
        return end


def start_following(replica: ArchiveClient, source: RunningModernJavaArchive, recording_id: int,
                    until_position: int) -> tuple[int, int]:
    """A replication following the live source; (replication id, replica recording id) once the
    replica has recorded up to ``until_position``."""
    replication_id = replica.replicate(recording_id, source.control_channel)
    started = list(replica.await_replication(replication_id, until=("EXTEND",), timeout=TIMEOUT_S))
    replica_id = started[-1].recording_id
    wait_until(lambda: replica.recording_position(replica_id) >= until_position, "the replica to follow")
    return replication_id, replica_id


def replicate_again(replica: ArchiveClient, source: RunningModernJavaArchive, recording_id: int,
                    replica_id: int) -> list[RecordingSignal]:
    """A new replicate into ``replica_id`` up to REPLICATE_END, asked again while the source still
    holds the previous replay's publication (it lingers 5 s: "clashing sessionId")."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        replication_id = replica.replicate(recording_id, source.control_channel, dst_recording_id=replica_id)
        try:
            return [s.signal for s in replica.await_replication(replication_id, until=("REPLICATE_END",),
                                                                 timeout=TIMEOUT_S)]
        except ArchiveError as error:
            if "clashing sessionId" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@contextlib.contextmanager
def restarted(installation: ModernPeerInstallation, work: Path, **options) -> Iterator[RunningModernJavaArchive]:
    """The Java archive started again on a killed one's directory: it refuses while the dead
    archive's mark file still looks active (updated within its timeout), so it is started again
    until the mark file has aged."""
    deadline = time.monotonic() + DEATH_NOTICED_S
    attempt = 0
    with contextlib.ExitStack() as stack:
        while True:
            attempt += 1
            (work / f"attempt-{attempt}").mkdir(parents=True, exist_ok=True)
            try:
                archive = stack.enter_context(
                    running_modern_java_archive(installation, work / f"attempt-{attempt}", **options))
                break
            except PeerError as error:
                if "active mark file detected" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
        yield archive


def replay_count_and_digest(archive: RunningModernJavaArchive, recording_id: int, stream_id: int) -> tuple[int, str]:
    replayed = archive.client.replay(recording_id, replay_channel=udp_channel(), replay_stream_id=stream_id)
    return replayed.messages, replayed.digest


def test_the_source_killed_mid_replication(modern_peer: ModernPeerInstallation, aeron_client: AeronClient,
                                           tmp_path: Path) -> None:
    source_dir, source_control = tmp_path / "source" / "archive", udp_channel(free_udp_port())
    with running_modern_java_archive(modern_peer, tmp_path / "replica",
                                     replication_channel=udp_channel(free_udp_port())) as replica, \
            client_of(replica, aeron_client) as replica_client:
        with running_modern_java_archive(modern_peer, tmp_path / "source", archive_dir=source_dir,
                                         control_channel=source_control) as source, \
                client_of(source, aeron_client) as source_client:
            live = LiveSource(source_client, aeron_client, 6201)
            first_end = live.publish(1_000)
            replication_id, replica_id = start_following(replica_client, source, live.recording_id, first_end)
            live.publish(20_000)  # a burst: the replica may still be copying it when the source dies

            os.kill(source.server.pid, signal.SIGKILL)  # the source archive and its driver, by PID
            source.server.process.wait(timeout=TIMEOUT_S)
            live.publication.close()
            # The replica reports the dead source: the replication's ERROR, or it ends.
            try:
                reported = [s.signal for s in replica_client.await_replication(
                    replication_id, until=("REPLICATE_END",), timeout=DEATH_NOTICED_S)]
                assert reported[-1] == RecordingSignal.REPLICATE_END
            except ArchiveError as error:
                assert error.correlation_id == replication_id and not isinstance(error, TimeoutError)
            wait_until(lambda: replica_client.stop_position(replica_id) >= 0, "the replica's recording to stop",
                       DEATH_NOTICED_S)
        # A valid prefix: the source's first messages, replaying exactly.
        prefix = replica_client.stop_position(replica_id)
        assert first_end <= prefix <= live.end
        count, digest = replay_count_and_digest(replica, replica_id, 6202)
        assert count >= 1_000 and digest == expected_digest(0, count, SIZE)

        # The source restarted on its directory: its recording recovered (stopped where it was cut).
        with restarted(modern_peer, tmp_path / "source-again", archive_dir=source_dir,
                       control_channel=source_control) as source_again, \
                client_of(source_again, aeron_client) as restarted_client:
            recovered = restarted_client.stop_position(live.recording_id)
            assert recovered >= prefix
            signals = replicate_again(replica_client, source_again, live.recording_id, replica_id)
            # It continues from the replica's stop position; a replica that had it all is in sync.
            assert signals == ([RecordingSignal.SYNC, RecordingSignal.REPLICATE_END] if recovered == prefix
                               else [RecordingSignal.EXTEND, RecordingSignal.SYNC, RecordingSignal.REPLICATE_END])
            wait_until(lambda: replica_client.stop_position(replica_id) == recovered, "the replica to catch up")
            count, digest = replay_count_and_digest(source_again, live.recording_id, 6204)
            assert digest == expected_digest(0, count, SIZE)  # the source's recovered recording
            assert replay_count_and_digest(replica, replica_id, 6203) == (count, digest)


def test_the_replica_killed_mid_replication(modern_peer: ModernPeerInstallation, aeron_client: AeronClient,
                                            tmp_path: Path) -> None:
    replica_dir, replica_control = tmp_path / "replica" / "archive", udp_channel(free_udp_port())
    replication_channel = udp_channel(free_udp_port())
    with running_modern_java_archive(modern_peer, tmp_path / "source") as source, \
            client_of(source, aeron_client) as source_client:
        live = LiveSource(source_client, aeron_client, 6211)
        try:
            first_end = live.publish(1_000)
            with running_modern_java_archive(modern_peer, tmp_path / "replica", archive_dir=replica_dir,
                                             control_channel=replica_control,
                                             replication_channel=replication_channel) as replica:
                with client_of(replica, aeron_client) as replica_client:
                    _, replica_id = start_following(replica_client, source, live.recording_id, first_end)
                    os.kill(replica.server.pid, signal.SIGKILL)  # the replica archive and its driver, by PID
                    replica.server.process.wait(timeout=TIMEOUT_S)
            live.publish(500)  # the source goes on recording
        finally:
            live.publication.close()
        source_end = live.end
        wait_until(lambda: source_client.stop_position(live.recording_id) == source_end, "the source to stop")

        # The killed replica's directory verifies with Aeron's own tool.
        verified = modern_peer.archive_tool(replica_dir, "verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr

        with restarted(modern_peer, tmp_path / "replica-again", archive_dir=replica_dir,
                       control_channel=replica_control, replication_channel=replication_channel) as replica_again, \
                client_of(replica_again, aeron_client) as replica_client:
            recovered = replica_client.stop_position(replica_id)
            assert first_end <= recovered <= source_end
            signals = replicate_again(replica_client, source, live.recording_id, replica_id)
            assert signals == [RecordingSignal.EXTEND, RecordingSignal.SYNC, RecordingSignal.REPLICATE_END]
            wait_until(lambda: replica_client.stop_position(replica_id) == source_end, "the replica to catch up")
            assert replay_count_and_digest(replica_again, replica_id, 6212) == (1_500, expected_digest(0, 1_500, SIZE))
