"""Our sidecar as the analytics replica of a modern Java archive (Aeron 1.51, the 1.52 protocol).

The requester is the Java ``AeronArchive`` client (the peer's ``replicate``, ReplicateRequest2) on OUR
sidecar; our sidecar then connects to the Java archive as a client over UDP (AuthConnect, ListRecording,
Replay to its own replication endpoint) and records the replay locally. Proven:

* a stopped recording: REPLICATE, EXTEND, SYNC, STOP, REPLICATE_END; the replica's descriptor
  positions and log parameters equal the source's, its segment bytes equal the Java archive's and
  it replays the same messages;
* a live recording: the Java archive keeps recording while our replica follows it; after the
  publisher stops and the source recording stops, the replica's stop position equals the source's;
* ReplicateRequest2's source credentials: a Java archive accepting only ``user:pass`` is replicated
  from with them and refuses the replication without them (ERROR 14);
* kill -9 of the Java archive while our replica follows it: ERROR 14, STOP, REPLICATE_END; our
  catalog verifies; after the Java archive restarts on its directory, a replicate into the same
  recording continues to the recovered source's stop position with the same messages.

Every process (our sidecar, the Java archive, the peer JVMs) is stopped by PID by the fixture or
call that started it. See docs/interop.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode, RecordingSignal
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
    payloads,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = pytest.mark.timeout(300)

SIZE = 100
FRAMED = framed_length(SIZE)
TIMEOUT_S = 30.0
#: How old a killed Java archive's mark file activity must be before another archive may use the
#: directory (Java refuses "active mark file detected" until then; the driver timeout, 10 s, plus slack).
JAVA_MARK_FILE_TIMEOUT_S = 12.0
REPLICATED_FIELDS = ("startPosition", "stopPosition", "streamId", "termBufferLength", "segmentFileLength",
                     "mtuLength", "initialTermId", "sessionId", "startTimestamp", "originalChannel")


@dataclass(frozen=True)
class Archives:
    sidecar: Sidecar
    on_sidecar: ModernPeerClient  # the Java client asking OUR sidecar to replicate
    java: RunningModernJavaArchive  # the source


@pytest.fixture(scope="module")
def archives(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archives]:
    work: Path = tmp_path_factory.mktemp("sidecar-replicates-from-java")
    with running_sidecar(work / "sidecar") as sidecar, \
            running_modern_java_archive(modern_peer, work / "java") as java:
        on_sidecar = ModernPeerClient(modern_peer, ModernArchiveEndpoint(control_channel=sidecar.control_channel),
                                      timeout=120.0)
        yield Archives(sidecar, on_sidecar, java)


def wait_until(condition, what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def descriptor(client: ModernPeerClient, recording_id: int) -> dict[str, Any]:
    (found,) = client.list_recordings(recording_id=recording_id)
    return found


def replayed_digest(client: ModernPeerClient, recording_id: int, stream_id: int) -> tuple[int, str]:
    replay = client.replay(recording_id, replay_channel=udp_channel(free_udp_port()), replay_stream_id=stream_id)
    return replay.messages, replay.digest


def recorded_bytes(archive_dir: Path, recording_id: int, stop_position: int, segment_length: int) -> dict[str, bytes]:
    """Each segment file's bytes up to the recording's stop position (Java pre-sizes its segment
    files; the bytes past the stop position are not part of the recording)."""
    found = {}
    for path in sorted(archive_dir.glob(f"{recording_id}-*.rec")):
        base = int(path.stem.split("-", 1)[1])
        found[path.name] = path.read_bytes()[:max(0, min(segment_length, stop_position - base))]
    return found


def test_our_sidecar_replicates_a_stopped_recording_from_java(archives: Archives) -> None:
    recorded = archives.java.client.record(udp_channel(free_udp_port()), 5001, 1000, SIZE)
    assert recorded.stop_position == 1000 * FRAMED

    result = archives.on_sidecar.replicate(recorded.recording_id, archives.java.control_channel)

    assert result.signal_names == ["REPLICATE", "EXTEND", "SYNC", "STOP", "REPLICATE_END"], result.signals
    assert {s["position"] for s in result.signals if s["signal"] in ("SYNC", "STOP")} == {recorded.stop_position}
    source = descriptor(archives.java.client, recorded.recording_id)
    replica = descriptor(archives.on_sidecar, result.dst_recording_id)
    assert {f: replica[f] for f in REPLICATED_FIELDS} == {f: source[f] for f in REPLICATED_FIELDS}
    segment_length = source["segmentFileLength"]
    assert recorded_bytes(archives.sidecar.archive_dir, result.dst_recording_id, recorded.stop_position,
                          segment_length) == \
        {name.replace(f"{recorded.recording_id}-", f"{result.dst_recording_id}-", 1): data
         for name, data in recorded_bytes(archives.java.archive_dir, recorded.recording_id,
                                          recorded.stop_position, segment_length).items()}
    assert replayed_digest(archives.on_sidecar, result.dst_recording_id, 5002) == \
        replayed_digest(archives.java.client, recorded.recording_id, 5003) == (1000, recorded.digest)


def test_our_sidecar_follows_a_live_recording_on_java(archives: Archives, aeron_client: AeronClient) -> None:
    """The Java archive records a UDP stream the test's driver publishes; our replica follows it while
    more is published; the publisher stops, the source recording stops, and the replica ends with
    the same stop position and messages."""
    channel, stream_id = f"{udp_channel(free_udp_port())}|term-length=65536", 5021
    counts = (800, 600, 600)
    java = archives.java.client
    java.start_recording(channel, stream_id, source_location="remote")
    publication = aeron_client.add_exclusive_publication(channel, stream_id)
    ends: list[int] = []

    def publish(batch: int) -> None:
        for payload in payloads(sum(counts[:batch]), counts[batch], SIZE):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT_S)
        ends.append(publication.position)

    try:
        wait_until(lambda: publication.is_connected, "the Java archive's recording subscription to connect")
        recording_id = max(d["recordingId"] for d in java.list_recordings()
                           if d["streamId"] == stream_id and d["sessionId"] == publication.session_id)
        publish(0)
        wait_until(lambda: java.positions(recording_id).recording_position >= ends[0], "batch 0 recorded")
        followed: dict[str, Any] = {}

        def follow_then_stop(signal: dict[str, Any]) -> None:
            if signal["signal"] != "EXTEND" or followed:
                return
            publish(1)
            with ArchiveClient.connect(control_channel=archives.sidecar.control_channel, aeron=aeron_client,
                                       timeout=TIMEOUT_S) as ours:
                wait_until(lambda: ours.recording_position(signal["recordingId"]) >= ends[1],
                           "our replica to follow the live Java recording")
            followed["sourceActive"] = java.positions(recording_id).active
            publish(2)
            publication.close()  # the publisher stops: the source recording ends
            java.stop_recording(channel, stream_id)

        result = archives.on_sidecar.replicate(recording_id, archives.java.control_channel,
                                               on_signal=follow_then_stop)
    finally:
        publication.close()

    total = sum(counts)
    assert followed == {"sourceActive": True}
    assert result.signal_names[:2] == ["REPLICATE", "EXTEND"] and result.signal_names[-2:] == ["STOP", "REPLICATE_END"]
    source = descriptor(java, recording_id)
    replica = descriptor(archives.on_sidecar, result.dst_recording_id)
    assert replica["stopPosition"] == source["stopPosition"] == ends[2]
    assert {f: replica[f] for f in REPLICATED_FIELDS} == {f: source[f] for f in REPLICATED_FIELDS}
    assert replayed_digest(archives.on_sidecar, result.dst_recording_id, 5022) == \
        (total, expected_digest(0, total, SIZE))


def test_kill_of_the_java_source_mid_replication_then_a_new_replicate_continues(
        archives: Archives, modern_peer: ModernPeerInstallation, aeron_client: AeronClient,
        tmp_path: Path) -> None:
    """A Java archive of its own records a live stream our replica follows; kill -9 of that Java
    archive: our sidecar reports it (ERROR 14, STOP, REPLICATE_END), its catalog verifies, and a
    replicate from the Java archive restarted on its directory continues the replica to the
    recovered source's stop position."""
    channel, stream_id = f"{udp_channel(free_udp_port())}|term-length=65536", 5031
    archive_dir = tmp_path / "java-source"
    with running_modern_java_archive(modern_peer, tmp_path, archive_dir=archive_dir) as java:
        java.client.start_recording(channel, stream_id, source_location="remote")
        publication = aeron_client.add_exclusive_publication(channel, stream_id)
        try:
            wait_until(lambda: publication.is_connected, "the Java archive's recording subscription to connect")
            recording_id = max(d["recordingId"] for d in java.client.list_recordings()
                               if d["streamId"] == stream_id and d["sessionId"] == publication.session_id)
            for payload in payloads(0, 500, SIZE):
                publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT_S)
            client = RawArchiveClient(aeron_client, archives.sidecar.control_channel, 10)
            try:
                assert client.connect().code == ControlResponseCode.OK
                replication_id = client.call(lambda s, c: codecs.ReplicateRequest2(
                    s, c, recording_id, -1, -1, -1, -1, java.control_stream_id, -1, -1, java.control_channel,
                    "", "", b"", "")).relevant_id
                dst_id = client.await_signal(RecordingSignal.EXTEND, timeout=30).recording_id
                wait_until(lambda: _max_recorded(client, dst_id) >= publication.position,
                           "our replica to follow the Java recording")
                os.kill(java.server.pid, signal.SIGKILL)
                events = []
                while not events or events[-1] != "REPLICATE_END":
                    message = client.await_message(
                        lambda m: getattr(m, "correlation_id", None) == replication_id
                        and isinstance(m, (codecs.RecordingSignalEvent, codecs.ControlResponse)), "report", 60)
                    if isinstance(message, codecs.ControlResponse):
                        events.append("OK" if message.code == ControlResponseCode.OK else
                                      f"ERROR {message.relevant_id}")
                    else:
                        events.append(RecordingSignal(message.signal).name)
                assert [e for e in events if e not in ("OK", "REPLICATE")] == [
                    f"ERROR {ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE}", "STOP", "REPLICATE_END"], events
                reached = _max_recorded(client, dst_id)
            finally:
                client.close_session()
                client.close()
        finally:
            publication.close()
    verify = subprocess.run([str(Path(sys.executable).parent / "aeron-archive"), "verify", "--dir",
                             str(archives.sidecar.archive_dir)], capture_output=True, text=True, timeout=120,
                            check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # The killed archive's mark file stays "active" until its activity timestamp is old enough.
    mark_file = archive_dir / "archive-mark.dat"
    time.sleep(max(0.0, mark_file.stat().st_mtime + JAVA_MARK_FILE_TIMEOUT_S - time.time()))
    with running_modern_java_archive(modern_peer, tmp_path / "restarted", archive_dir=archive_dir) as java:
        source = descriptor(java.client, recording_id)
        assert source["stopPosition"] >= reached
        result = archives.on_sidecar.replicate(recording_id, java.control_channel, dst_recording_id=dst_id)
        assert "REPLICATE_END" == result.signal_names[-1] and "REPLICATE" not in result.signal_names
        replica = descriptor(archives.on_sidecar, dst_id)
        assert replica["stopPosition"] == source["stopPosition"]
        assert replayed_digest(archives.on_sidecar, dst_id, 5032) == \
            replayed_digest(java.client, recording_id, 5033)


def _max_recorded(client: RawArchiveClient, recording_id: int) -> int:
    return client.call(lambda s, c: codecs.MaxRecordedPositionRequest(s, c, recording_id)).relevant_id


def test_source_credentials_reach_a_java_archive_that_authenticates(
        archives: Archives, modern_peer: ModernPeerInstallation, aeron_client: AeronClient, tmp_path: Path) -> None:
    """ReplicateRequest2's encodedCredentials go to the source in AuthConnectRequest: a Java archive
    that accepts only ``user:pass`` (Aeron's SimpleAuthenticator) is replicated from with them, and
    refuses the replication without them (ERROR 14 REPLICATION_CONNECTION_FAILURE, as Aeron)."""
    with running_modern_java_archive(modern_peer, tmp_path, credentials="user:pass") as java:
        recorded = ModernPeerClient(modern_peer, java.endpoint, credentials="user:pass").record(
            udp_channel(free_udp_port()), 5041, 200, SIZE)
        client = RawArchiveClient(aeron_client, archives.sidecar.control_channel, 10)
        try:
            assert client.connect().code == ControlResponseCode.OK
            outcomes = []
            for credentials in (b"", b"user:pass"):
                replication_id = client.call(lambda s, c: codecs.ReplicateRequest2(
                    s, c, recorded.recording_id, -1, -1, -1, -1, java.control_stream_id, -1, -1,
                    java.control_channel, "", "", credentials, "")).relevant_id
                events: list[Any] = []
                while not events or events[-1] != "REPLICATE_END":
                    message = client.await_message(
                        lambda m: getattr(m, "correlation_id", None) == replication_id
                        and isinstance(m, (codecs.RecordingSignalEvent, codecs.ControlResponse)), "signal", 60)
                    if isinstance(message, codecs.ControlResponse):
                        events.append("OK" if message.code == ControlResponseCode.OK else
                                      ("ERROR", message.relevant_id))
                    else:
                        events.append(RecordingSignal(message.signal).name)
                outcomes.append(events)
        finally:
            client.close_session()
            client.close()
    assert outcomes[0] == [("ERROR", ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE), "REPLICATE_END"]
    assert outcomes[1] == ["REPLICATE", "OK", "EXTEND", "SYNC", "STOP", "REPLICATE_END"], outcomes
