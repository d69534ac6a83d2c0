"""Mixed media drivers: our sidecar and connector next to the real Java Aeron 1.51.0, each on the
other's driver, with the bytes compared end to end.

Deployments mix drivers, so each direction is proven with real processes:

* (a) our sidecar attached to a **Java 1.51 media driver** (``serve --aeron-dir``): the Java client
  and our C client (pyaeron 1.53, attached to that Java driver) record through it, and both replay;
* (b) **Java publishers** (the peer's ``publish``, its own embedded Java driver) recorded over UDP
  by our sidecar's embedded C driver, replayed by a Java client and by ours;
* (c) our connector's own embedded C driver (``aeron.driver=embedded``: what ``auto`` falls back to
  when no driver runs) **replaying from the Java 1.51 archive** over UDP;
* (d) the Java 1.51 archive **on our C driver** (a standalone driver process, ``external_driver``).

What the CnC versions allow (both are 0.2.0) is written down in docs/interop.md, "Mixed drivers".
Every process is stopped by PID by the fixture that started it, also when a test fails.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.connector.archive_connection import connect_client
from aeron_spark.connector.options import ArchiveConnection
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.process_driver import close_process_driver

from tests.interop.peer.interop_peer import shm_tempdir
from tests.interop.peer.modern_peer import (
    JavaServer,
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
    payloads,
    running_modern_java_archive,
    start_modern_java_driver,
)
from tests.support.driver_process import running_driver_process
from tests.support.ports import free_udp_port, udp_channel
from tests.support.sidecar import Sidecar, running_sidecar

MESSAGES = 500
SIZE = 100
FRAGMENTED_MESSAGES = 20
FRAGMENTED_SIZE = 5_000  # > mtu 1408 - 32: each message crosses drivers as 4 fragments
TIMEOUT_S = 20.0
#: Aeron's CnC layout version both drivers write (semantic 0.2.0); a client accepts a CnC whose
#: major version equals its own. The 1.15.1 Java client wanted exactly its older layout.
CNC_VERSION_0_2_0 = 0x000200


def cnc_version(aeron_dir: Path | str) -> int:
    """The first int32 of ``cnc.dat``: the CnC layout version the driver wrote."""
    with open(Path(aeron_dir) / "cnc.dat", "rb") as cnc:
        return struct.unpack("<i", cnc.read(4))[0]


def digest_of(messages) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.payload)
    return digest.hexdigest()


def replay_all(client: ArchiveClient, recording_id: int, start: int, stop: int, channel: str, stream_id: int) -> list:
    with client.replay(recording_id, start, stop - start, channel, stream_id) as replay:
        return list(replay.messages(idle_timeout=TIMEOUT_S))


def wait_for_stop_position(client: ArchiveClient, recording_id: int, expected: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while (stop := client.stop_position(recording_id)) != expected:
        assert time.monotonic() < deadline, f"recording {recording_id} stopped at {stop}, expected {expected}"
        time.sleep(0.01)


# ---------------------------------------------------------------------------------------------
# (a) our sidecar on a Java 1.51 media driver


@dataclass(frozen=True)
class SidecarOnJavaDriver:
    java_driver: JavaServer
    aeron_dir: Path
    sidecar: Sidecar
    java_client: ModernPeerClient  # on the Java driver, control over UDP to the sidecar


@pytest.fixture(scope="module")
def sidecar_on_java_driver(modern_peer: ModernPeerInstallation,
                           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SidecarOnJavaDriver]:
    work_dir = tmp_path_factory.mktemp("sidecar-on-java-driver")
    aeron_dir = Path(shm_tempdir("aeron-modern-java-driver-"))
    java_driver = start_modern_java_driver(modern_peer, aeron_dir=aeron_dir, log_dir=work_dir)
    try:
        with running_sidecar(work_dir / "archive", aeron_dir=str(aeron_dir)) as sidecar:
            endpoint = ModernArchiveEndpoint(control_channel=sidecar.control_channel, aeron_dir=aeron_dir)
            yield SidecarOnJavaDriver(java_driver, aeron_dir, sidecar,
                                      ModernPeerClient(modern_peer, endpoint, timeout=60.0))
    finally:
        java_driver.stop()
        shutil.rmtree(aeron_dir, ignore_errors=True)


@pytest.fixture
def client_on_java_driver(sidecar_on_java_driver: SidecarOnJavaDriver) -> Iterator[ArchiveClient]:
    """Our ArchiveClient with its C client (1.53) attached to the Java 1.51 driver."""
    with AeronClient(str(sidecar_on_java_driver.aeron_dir), client_name="mixed-drivers") as aeron, \
            ArchiveClient.connect(control_channel=sidecar_on_java_driver.sidecar.control_channel, aeron=aeron,
                                  timeout=TIMEOUT_S) as client:
        yield client


def test_our_sidecar_runs_on_the_java_driver_with_the_cnc_both_accept(
        sidecar_on_java_driver: SidecarOnJavaDriver) -> None:
    assert sidecar_on_java_driver.sidecar.driver_dir == str(sidecar_on_java_driver.aeron_dir)
    assert cnc_version(sidecar_on_java_driver.aeron_dir) == CNC_VERSION_0_2_0
    assert sidecar_on_java_driver.java_driver.ready["aeronVersion"] == "1.51.0"


def test_a_java_recording_through_our_sidecar_on_the_java_driver_replays_byte_exactly(
        sidecar_on_java_driver: SidecarOnJavaDriver, client_on_java_driver: ArchiveClient) -> None:
    java_client = sidecar_on_java_driver.java_client
    recorded = java_client.record(udp_channel(free_udp_port()), 5101, MESSAGES, SIZE)
    assert recorded.stop_position == recorded.publication_position == MESSAGES * framed_length(SIZE)
    assert recorded.digest == expected_digest(0, MESSAGES, SIZE)
    # The Java client found our sidecar's rec-pos counter in the Java driver's CnC (the sidecar
    # allocates it through its C client), so progress came from the counter, not the protocol.
    assert recorded.fields["progressVia"] == "counter"

    java_replay = java_client.replay(recorded.recording_id, replay_channel=udp_channel(free_udp_port()),
                                     replay_stream_id=5102)
    assert (java_replay.messages, java_replay.digest) == (MESSAGES, recorded.digest)
    ours = replay_all(client_on_java_driver, recorded.recording_id, 0, recorded.stop_position, "aeron:ipc", 5103)
    assert len(ours) == MESSAGES and digest_of(ours) == recorded.digest


def test_our_c_client_publishing_into_the_java_driver_is_recorded_and_replayed_byte_exactly(
        sidecar_on_java_driver: SidecarOnJavaDriver, client_on_java_driver: ArchiveClient) -> None:
    client = client_on_java_driver
    channel, stream_id = "aeron:ipc", 5104
    client.start_recording(channel, stream_id, SourceLocation.LOCAL)
    publication = client.aeron.add_exclusive_publication(channel, stream_id)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not publication.is_connected:
            assert time.monotonic() < deadline, "the sidecar's recording subscription did not connect"
            time.sleep(0.005)
        for payload in payloads(0, FRAGMENTED_MESSAGES, FRAGMENTED_SIZE):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT_S)
        end = publication.position
        recording_id = client.find_last_matching_recording(0, channel, stream_id, publication.session_id)
        while client.recording_position(recording_id) < end:
            assert time.monotonic() < deadline, "the sidecar did not record the whole stream"
            time.sleep(0.005)
        client.stop_recording(channel, stream_id)
    finally:
        publication.close()
    wait_for_stop_position(client, recording_id, end)

    expected = expected_digest(0, FRAGMENTED_MESSAGES, FRAGMENTED_SIZE)
    ours = replay_all(client, recording_id, 0, end, "aeron:ipc", 5105)
    assert len(ours) == FRAGMENTED_MESSAGES and digest_of(ours) == expected
    java_replay = sidecar_on_java_driver.java_client.replay(recording_id, replay_channel="aeron:ipc",
                                                            replay_stream_id=5106)
    assert (java_replay.messages, java_replay.digest) == (FRAGMENTED_MESSAGES, expected)


# ---------------------------------------------------------------------------------------------
# (b) Java publishers recorded by our sidecar's embedded C driver over UDP


@pytest.fixture(scope="module")
def sidecar_on_its_c_driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    with running_sidecar(tmp_path_factory.mktemp("sidecar-on-c-driver") / "archive") as sidecar:
        yield sidecar


@pytest.mark.parametrize(("messages", "size", "fragmented"), [
    (MESSAGES, SIZE, False), (FRAGMENTED_MESSAGES, FRAGMENTED_SIZE, True)], ids=["100B", "5000B-fragmented"])
def test_a_java_publisher_on_its_own_driver_is_recorded_by_our_c_driver_and_replayed_byte_exactly(
        modern_peer: ModernPeerInstallation, sidecar_on_its_c_driver: Sidecar, aeron_client: AeronClient,
        messages: int, size: int, fragmented: bool) -> None:
    # Every command is a JVM with its own embedded Java 1.51 driver: the stream, the control and
    # the replay all cross between the Java driver and the sidecar's C driver over UDP.
    java_client = ModernPeerClient(modern_peer, ModernArchiveEndpoint(control_channel=sidecar_on_its_c_driver.control_channel),
                                   timeout=60.0)
    channel, stream_id = udp_channel(free_udp_port()), 5201 + int(fragmented)
    java_client.start_recording(channel, stream_id, source_location="remote")
    published = java_client.publish(channel, stream_id, messages, size, fragmented=fragmented, first_index=3)
    assert published.digest == expected_digest(3, messages, size)
    with ArchiveClient.connect(control_channel=sidecar_on_its_c_driver.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT_S) as client:
        [descriptor] = [d for d in client.list_recordings_for_uri(0, 100, channel.split("?")[1], stream_id)
                        if d.session_id == published.session_id]
        stopped = java_client.stop_recording(channel, stream_id, recording_id=descriptor.recording_id,
                                             await_position=published.position)
        assert stopped["stopPosition"] == published.position
        ours = replay_all(client, descriptor.recording_id, 0, published.position, udp_channel(free_udp_port()), 5203)
    assert len(ours) == messages and digest_of(ours) == published.digest

    java_replay = java_client.replay(descriptor.recording_id, replay_channel=udp_channel(free_udp_port()),
                                     replay_stream_id=5204)
    assert (java_replay.messages, java_replay.first_index, java_replay.digest) == (messages, 3, published.digest)


# ---------------------------------------------------------------------------------------------
# (c) our connector's embedded C driver replaying from the Java archive, and (d) the Java archive on our C driver


@pytest.fixture
def connector_client(modern_java_archive: RunningModernJavaArchive) -> Iterator[ArchiveClient]:
    """What the Spark source does on a worker with no driver running: ``aeron.driver=embedded`` (the
    fallback of ``auto``) starts this process's own C driver; closed again after the test."""
    connection = ArchiveConnection(archive_dir=None, control_channel=modern_java_archive.control_channel,
                                   control_stream_id=modern_java_archive.control_stream_id, response_channel=None,
                                   response_stream_id=20, aeron_dir=None, timeout_ms=int(TIMEOUT_S * 1000),
                                   driver_mode="embedded")
    try:
        with connect_client(connection) as client:
            yield client
    finally:
        close_process_driver()


def test_our_connectors_c_driver_replays_a_java_recording_over_udp_byte_exactly(
        modern_java_archive: RunningModernJavaArchive, connector_client: ArchiveClient) -> None:
    recorded = modern_java_archive.client.record(udp_channel(free_udp_port()), 5301, MESSAGES, SIZE)
    assert connector_client.archive_id == modern_java_archive.archive_id
    assert cnc_version(connector_client.aeron.aeron_dir) == cnc_version(modern_java_archive.aeron_dir) \
        == CNC_VERSION_0_2_0

    ours = replay_all(connector_client, recorded.recording_id, 0, recorded.stop_position,
                      udp_channel(free_udp_port()), 5302)
    assert len(ours) == MESSAGES and digest_of(ours) == recorded.digest == expected_digest(0, MESSAGES, SIZE)
    middle = MESSAGES // 2 * framed_length(SIZE)
    tail = replay_all(connector_client, recorded.recording_id, middle, recorded.stop_position,
                      udp_channel(free_udp_port()), 5303)
    assert tail[0].position == middle and digest_of(tail) == expected_digest(MESSAGES // 2, MESSAGES // 2, SIZE)


def test_the_java_archive_on_our_c_driver_records_and_replays_byte_exactly(
        modern_peer: ModernPeerInstallation, tmp_path: Path) -> None:
    c_driver_dir = Path(shm_tempdir("aeron-c-driver-for-java-"))
    with running_driver_process(c_driver_dir), \
            running_modern_java_archive(modern_peer, tmp_path, aeron_dir=c_driver_dir, external_driver=True) as archive:
        assert archive.server.ready["externalDriver"] is True
        recorded = archive.client.record("aeron:ipc", 5401, FRAGMENTED_MESSAGES, FRAGMENTED_SIZE, fragmented=True)
        assert recorded.digest == expected_digest(0, FRAGMENTED_MESSAGES, FRAGMENTED_SIZE)
        assert recorded.fields["progressVia"] == "counter"  # the Java archive's rec-pos counter, in our CnC
        java_replay = archive.client.replay(recorded.recording_id, replay_channel="aeron:ipc", replay_stream_id=5402)
        assert (java_replay.messages, java_replay.digest) == (FRAGMENTED_MESSAGES, recorded.digest)
        # Our client on the same C driver: the Java archive's local IPC publications are ours to read.
        with AeronClient(str(c_driver_dir), client_name="mixed-drivers-d") as aeron, \
                ArchiveClient.connect(control_channel=archive.control_channel, aeron=aeron,
                                      timeout=TIMEOUT_S) as client:
            ours = replay_all(client, recorded.recording_id, 0, recorded.stop_position, "aeron:ipc", 5403)
        assert len(ours) == FRAGMENTED_MESSAGES and digest_of(ours) == recorded.digest
