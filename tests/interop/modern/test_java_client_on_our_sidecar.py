"""The real Java 1.51 AeronArchive on our sidecar for what the differential script cannot reach:
ExtendRecordingRequest2 (auto-stop, the archive stops the extension when its image goes) and a
bounded replay held by a limit counter the Java client allocates on the sidecar's own C driver (a
Java client attaches to our driver: CnC 0.2.0 both ways). Byte-exact against the peer's digests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.peer.modern_peer import (
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    expected_digest,
    framed_length,
)
from tests.support.ports import udp_channel
from tests.support.sidecar import Sidecar, running_sidecar

SIZE = 100
STREAM_ID = 4701


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    with running_sidecar(tmp_path_factory.mktemp("java-client-on-sidecar") / "archive") as running:
        yield running


def test_an_auto_stop_extension_by_the_java_client(modern_peer: ModernPeerInstallation, sidecar: Sidecar) -> None:
    client = ModernPeerClient(modern_peer, ModernArchiveEndpoint(control_channel=sidecar.control_channel))
    channel = udp_channel()
    recorded = client.record(channel, STREAM_ID, 300, SIZE)
    extended = client.extend(recorded.recording_id, udp_channel(), STREAM_ID, 200, SIZE, first_index=300,
                             auto_stop=True)
    assert extended["autoStop"] is True
    assert extended["previousStopPosition"] == recorded.stop_position
    assert extended["stopPosition"] == recorded.stop_position + 200 * framed_length(SIZE)
    replayed = client.replay(recorded.recording_id, replay_channel=udp_channel(), replay_stream_id=4702)
    assert (replayed.messages, replayed.first_index, replayed.last_index) == (500, 0, 499)
    assert replayed.digest == expected_digest(0, 500, SIZE)


def test_a_bounded_replay_on_a_java_limit_counter_in_our_driver(modern_peer: ModernPeerInstallation,
                                                                sidecar: Sidecar) -> None:
    recorder = ModernPeerClient(modern_peer, ModernArchiveEndpoint(control_channel=sidecar.control_channel))
    recorded = recorder.record(udp_channel(), STREAM_ID + 10, 1_000, SIZE)
    on_our_driver = ModernPeerClient(modern_peer, ModernArchiveEndpoint(
        control_channel=sidecar.control_channel, aeron_dir=Path(sidecar.driver_dir)))
    limit = 600 * framed_length(SIZE)
    bounded = on_our_driver.replay(recorded.recording_id, replay_channel="aeron:ipc", replay_stream_id=4703,
                                   position=100 * framed_length(SIZE), limit_position=limit)
    assert (bounded.first_index, bounded.last_index, bounded.messages) == (100, 599, 500)
    assert bounded.digest == expected_digest(100, 500, SIZE)
