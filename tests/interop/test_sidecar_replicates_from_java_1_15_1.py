"""Our sidecar replicating a stopped recording from a real Java Aeron 1.15.1 archive: the 1.15.x
protocol allows it (ConnectRequest, ListRecording and Replay exist in schema version 0). Our
sidecar's replication link sends AuthConnectRequest first; the 1.15.1 archive does not know it, so
after half the connect timeout the link also sends the 1.15.x ConnectRequest, is answered without a
protocol version and speaks version 0 from then on. The replica's positions and log parameters
equal the source's, its recorded bytes equal the Java segment files' (but for the frames' session
id: the replay's, given as replicationSessionId) and the 1.15.1 Java client replays the same
messages from our sidecar. The requester is our test client (ReplicateRequest2).
Every process is stopped by PID by the fixture that started it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ControlResponseCode, RecordingSignal
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.interop_peer import ArchiveEndpoint, PeerClient, PeerInstallation, RunningJavaArchive
from tests.support.ports import free_udp_port, udp_channel
from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.timeout(300)

SIZE = 100
NULL = -1
#: The replay's session id (ReplicateRequest2's replicationSessionId): the 1.15.1 driver refuses a
#: replay publication with the session id of the recorded publication while that one lingers
#: ("existing publication has same session id"), which the source session id would be.
REPLAY_SESSION_ID = 0x5EED


def recorded_stream(archive_dir: Path, recording_id: int, segment_length: int, stop: int) -> bytes:
    """A recording that starts at 0: its bytes 0..stop from its segment files in order (1.15.1 names
    a segment by its index, the modern archives by its base position: the order is the same)."""
    data = b""
    for path in sorted(archive_dir.glob(f"{recording_id}-*.rec"), key=lambda p: int(p.stem.split("-", 1)[1])):
        with path.open("rb") as segment:
            data += segment.read(min(segment_length, stop - len(data))).ljust(min(segment_length, stop - len(data)),
                                                                              b"\0")
        if len(data) >= stop:
            break
    return data


def without_session_ids(log: bytes) -> bytes:
    """The frames with their sessionId field (bytes 12..16) zeroed: the replica's frames carry the
    replay's session id, everything else must be equal."""
    data = bytearray(log)
    offset = 0
    while offset + 32 <= len(data):
        frame_length = struct.unpack_from("<i", data, offset)[0]
        if frame_length <= 0:
            break
        data[offset + 12:offset + 16] = bytes(4)
        offset += (frame_length + 31) & ~31
    return bytes(data)


def test_our_sidecar_replicates_a_stopped_recording_from_java_1_15_1(
        java_archive: RunningJavaArchive, peer_installation: PeerInstallation, aeron_client: AeronClient,
        tmp_path: Path) -> None:
    recorded = java_archive.client.record(udp_channel(free_udp_port()), 6001, 500, SIZE)
    (source,) = java_archive.client.list_recordings(recording_id=recorded.recording_id)
    with running_sidecar(tmp_path / "replica") as sidecar:
        client = RawArchiveClient(aeron_client, sidecar.control_channel, 10)
        try:
            assert client.connect().code == ControlResponseCode.OK
            answer = client.call(lambda s, c: codecs.ReplicateRequest2(
                s, c, recorded.recording_id, NULL, NULL, NULL, NULL, 10, NULL, REPLAY_SESSION_ID,
                java_archive.endpoint.control_channel, "", "", b"", ""))
            assert answer.code == ControlResponseCode.OK, answer
            signals = []
            while not signals or signals[-1][0] != "REPLICATE_END":
                message = client.await_message(
                    lambda m: isinstance(m, (codecs.RecordingSignalEvent, codecs.ControlResponse))
                    and m.correlation_id == answer.relevant_id,
                    "replication signal", 60)
                if isinstance(message, codecs.ControlResponse):
                    assert message.code == ControlResponseCode.OK, message  # the extension's OK
                    continue
                signals.append((RecordingSignal(message.signal).name, message.position, message.recording_id))
        finally:
            client.close_session()
            client.close()
        assert [s[0] for s in signals] == ["REPLICATE", "EXTEND", "SYNC", "STOP", "REPLICATE_END"], signals
        dst_id = signals[0][2]
        on_sidecar = PeerClient(peer_installation, ArchiveEndpoint(control_channel=sidecar.control_channel,
                                                                   response_channel=None))
        (replica,) = on_sidecar.list_recordings(recording_id=dst_id)
        for name in ("startPosition", "stopPosition", "initialTermId", "termBufferLength", "mtuLength",
                     "segmentFileLength", "streamId"):
            assert replica[name] == source[name], name
        assert replica["sessionId"] == REPLAY_SESSION_ID  # the extension's image's, as Aeron's catalog
        assert any("Aeron 1.15.x" in line for line in sidecar.stderr_lines)
        segment_length = source["segmentFileLength"]
        assert without_session_ids(recorded_stream(sidecar.archive_dir, dst_id, segment_length,
                                                   recorded.stop_position)) == \
            without_session_ids(recorded_stream(java_archive.archive_dir, recorded.recording_id, segment_length,
                                                recorded.stop_position))
        replayed = on_sidecar.replay(dst_id, replay_channel=udp_channel(free_udp_port()), replay_stream_id=6002)
        assert (replayed.messages, replayed.digest) == (500, recorded.digest)
