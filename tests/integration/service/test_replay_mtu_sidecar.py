"""A UDP replay whose channel asks for a larger mtu than the recording's, and one whose
subscription asks for a larger receive window.

1 KiB messages recorded at mtu 1408 travel one frame per datagram when replayed at the recording's
mtu. Replayed with ``mtu=8192`` on the replay channel, the sidecar's replay publication packs
several whole frames into each datagram: the messages arrive byte-exact at the same positions in
far fewer datagrams. The datagrams are counted (and measured) by a UDP relay between the archive's
replay publication and the subscription: the archive is told the relay's port, the relay forwards
each datagram to the subscription's port and the receiver's status messages back (noting the
receiver window each one advertises: ``replay.receiveWindow`` puts ``rcv-wnd``/``so-rcvbuf`` on the
replay subscription, and the window the archive's sender is granted must be that one).
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from aeron_spark.archive.client.archive_client import ArchiveError
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.archive.codecs import RecordingSignal, SourceLocation

from tests.support.ports import free_udp_port
from tests.support.sidecar_streams import (
    TIMEOUT,
    await_recorded,
    await_recording_of,
    drain_until,
    expected,
    ipc_archive,
    publish,
)

RECORDING_MTU = 1408
RECORDED = f"aeron:ipc?term-length=64k|mtu={RECORDING_MTU}"
RECORDED_STREAM = 1011
REPLAY_STREAM = 1977102
MESSAGES = 600
KIB = 1024
STATUS_MESSAGE_TYPE = 0x03
STATUS_WINDOW_OFFSET = 24  # header 8, session 4, stream 4, consumption term id 4, term offset 4
DRIVER_DEFAULT_WINDOW = 128 * KIB


@dataclass
class DatagramRelay:
    """Forwards UDP datagrams between the archive's replay publication and a subscription's
    endpoint, counting those towards the subscription."""

    target_port: int
    port: int = field(default_factory=free_udp_port)
    datagrams: int = 0
    largest: int = 0
    status_windows: set[int] = field(default_factory=set)  # receiver windows the status messages advertise

    def __post_init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", self.port))
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="datagram-relay", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        target = ("127.0.0.1", self.target_port)
        sender: tuple[str, int] | None = None
        while not self._stop.is_set():
            if not select.select([self._socket], [], [], 0.05)[0]:
                continue
            data, source = self._socket.recvfrom(65536)
            if source == target:  # status messages and NAKs back to the replay publication
                if len(data) >= STATUS_WINDOW_OFFSET + 4 and struct.unpack_from("<H", data, 6)[0] == STATUS_MESSAGE_TYPE:
                    self.status_windows.add(struct.unpack_from("<i", data, STATUS_WINDOW_OFFSET)[0])
                if sender is not None:
                    self._socket.sendto(data, sender)
                continue
            sender = source
            self.datagrams += 1
            self.largest = max(self.largest, len(data))
            self._socket.sendto(data, target)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()


def one_kib_messages(count: int) -> list[bytes]:
    return [(b"%08d:" % index).ljust(KIB, bytes([1 + index % 250])) for index in range(count)]


@pytest.fixture
def recording(sidecar, local_aeron):
    yield from recorded(local_aeron, RECORDED)


@pytest.fixture
def large_term_recording(sidecar, local_aeron):
    """A recording whose term (4 MiB) lets a receiver window of 1 MiB through (the driver caps a
    window at half the term)."""
    yield from recorded(local_aeron, f"aeron:ipc?term-length=4m|mtu={RECORDING_MTU}")


def recorded(local_aeron, channel: str):
    archive = ipc_archive(local_aeron)
    subscription_id = archive.start_recording(channel, RECORDED_STREAM, SourceLocation.LOCAL)
    publication = archive.aeron.add_exclusive_publication(channel, RECORDED_STREAM)
    started = await_recording_of(archive, subscription_id, publication.session_id)
    published = publish(publication, one_kib_messages(MESSAGES))
    await_recorded(archive, started.recording_id, published.end)
    archive.stop_recording(channel, RECORDED_STREAM)
    archive.await_recording_signal(RecordingSignal.STOP, recording_id=started.recording_id)
    publication.close()
    try:
        assert archive.list_recording(started.recording_id).mtu_length == RECORDING_MTU
        yield archive, started.recording_id, published
    finally:
        archive.close()


def replay_through_relay(archive, recording_id: int, published, mtu_param: str,
                         subscription_params: str = "") -> tuple[list, DatagramRelay]:
    """All messages of a replay sent to a relay that forwards to our subscription."""
    port = free_udp_port()
    subscription = archive.aeron.add_subscription(f"aeron:udp?endpoint=127.0.0.1:{port}{subscription_params}",
                                                  REPLAY_STREAM)
    relay = DatagramRelay(port)
    replay_session_id = None
    try:
        replay_session_id = archive.start_replay(
            recording_id, 0, published.end, f"aeron:udp?endpoint=127.0.0.1:{relay.port}{mtu_param}", REPLAY_STREAM)
        deadline = time.monotonic() + TIMEOUT
        session_id = replay_image_session_id(replay_session_id)
        while (image := subscription.image_by_session_id(session_id)) is None:
            assert time.monotonic() < deadline, "the replay image did not appear"
            time.sleep(0.005)
        received: list[tuple[int, bytes]] = []
        drain_until(SimpleNamespace(image=image), received, MESSAGES, f"replay with {mtu_param or 'no mtu'}")
        return received, relay
    finally:
        if replay_session_id is not None:
            archive.stop_replay(replay_session_id)
        relay.close()
        subscription.close()


def test_a_larger_replay_mtu_packs_1kib_frames_into_fewer_datagrams_byte_exact(recording):
    archive, recording_id, published = recording
    at_recording_mtu, plain = replay_through_relay(archive, recording_id, published, "")
    at_8192, packed = replay_through_relay(archive, recording_id, published, "|mtu=8192")
    assert at_recording_mtu == expected(published) == at_8192  # same payloads at the same positions
    assert plain.largest <= RECORDING_MTU < packed.largest <= 8192
    assert plain.datagrams >= MESSAGES  # one 1 KiB frame per datagram (plus setup/heartbeats)
    assert packed.datagrams * 4 < plain.datagrams, (packed.datagrams, plain.datagrams)


def test_a_replay_mtu_below_the_recordings_is_refused_naming_both(recording):
    archive, recording_id, published = recording
    with pytest.raises(ArchiveError, match="mtu 1024 is smaller than the recording's mtu 1408"):
        archive.start_replay(recording_id, 0, published.end,
                             f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}|mtu=1024", REPLAY_STREAM)


def test_the_replay_subscriptions_receive_window_is_what_the_archive_sender_is_granted(large_term_recording):
    """What ``replay.receiveWindow`` puts on a replay subscription (connector/replay_endpoint.py,
    unit-tested in tests/unit/connector/test_replay_receive_window.py) reaches the sender."""
    from aeron_spark.connector.replay_endpoint import with_receive_window

    archive, recording_id, published = large_term_recording
    default, at_default = replay_through_relay(archive, recording_id, published, "")
    params = with_receive_window("aeron:udp?endpoint=x:0", 1 << 20).partition("|")[2]
    widened, at_1m = replay_through_relay(archive, recording_id, published, "", "|" + params)
    assert default == expected(published) == widened
    assert at_default.status_windows == {DRIVER_DEFAULT_WINDOW}, at_default.status_windows
    assert at_1m.status_windows == {1 << 20}, at_1m.status_windows


def test_the_largest_replay_mtu_packs_62_1kib_frames_per_datagram_byte_exact(large_term_recording):
    """``replay.mtu=auto``'s choice towards loopback (connector/options.py DEFAULT_LOOPBACK_REPLAY_MTU)."""
    from aeron_spark.connector.options import DEFAULT_LOOPBACK_REPLAY_MTU

    archive, recording_id, published = large_term_recording
    received, relay = replay_through_relay(archive, recording_id, published, f"|mtu={DEFAULT_LOOPBACK_REPLAY_MTU}",
                                           "|rcv-wnd=1m|so-rcvbuf=1m")
    assert received == expected(published)
    assert 60 * KIB < relay.largest <= DEFAULT_LOOPBACK_REPLAY_MTU == 65504
    assert relay.datagrams * 40 < MESSAGES, relay.datagrams
