"""After a control-protocol fuzz of our sidecar, the real Java 1.15.1 client records and replays
byte-exactly against it (issue 13).

The fuzz is tests/integration/service/test_control_protocol_fuzz.py's (``tests/support/control_fuzz.py``,
seeded; ``AERON_FUZZ_MESSAGES`` sets how many, 100,000 by default): sessions over UDP and IPC that
connect, send random bytes, bad headers, huge lengths, bad channels, foreign session ids and
out-of-range ids in bulk, and close. Then the Java client (its own 1.15.1 driver, over UDP, as in
test_java_client_vs_our_sidecar.py) records 500 messages and replays them; the digests are
recomputed here.
"""

from __future__ import annotations

import os
import random

import pytest
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.interop_peer import (
    ArchiveEndpoint,
    PeerClient,
    PeerError,
    PeerInstallation,
    expected_digest,
    framed_length,
)
from tests.support.control_fuzz import FuzzMix, fuzz_session
from tests.support.ports import free_udp_port, udp_channel
from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.timeout(600)

MESSAGES = int(os.environ.get("AERON_FUZZ_MESSAGES", "100000"))
SESSIONS = 8
RECORDED, SIZE, STREAM_ID, REPLAY_STREAM_ID = 500, 200, 1001, 2002


def test_the_java_client_records_and_replays_exactly_after_a_fuzz(peer_installation: PeerInstallation, tmp_path) -> None:
    with running_sidecar(tmp_path / "archive") as sidecar:
        rng, mix, other_sessions = random.Random(29), FuzzMix(), []
        with AeronClient(sidecar.driver_dir, client_name="fuzz-before-java") as aeron:
            for index in range(SESSIONS):
                on_ipc = index % 2 == 1
                fuzz_session(aeron, "aeron:ipc" if on_ipc else sidecar.control_channel, 11 if on_ipc else 10, rng,
                             MESSAGES // SESSIONS, other_sessions, mix, response_stream_id=40 + index)
                assert sidecar.process.poll() is None, sidecar.log_tail()
        client = PeerClient(peer_installation, ArchiveEndpoint(control_channel=sidecar.control_channel,
                                                               response_channel=None, aeron_dir=None), timeout=60)
        try:
            recorded = client.record(udp_channel(free_udp_port()), STREAM_ID, RECORDED, SIZE, timeout_ms=20_000)
            assert recorded.messages == RECORDED and recorded.stop_position == RECORDED * framed_length(SIZE)
            assert recorded.digest == expected_digest(0, RECORDED, SIZE)
            replayed = client.replay(recorded.recording_id, replay_channel=udp_channel(free_udp_port()),
                                     replay_stream_id=REPLAY_STREAM_ID, timeout_ms=20_000)
        except PeerError as error:  # what the sidecar logged meanwhile says which side failed
            raise AssertionError(f"{error}\npeer stderr:\n{error.stderr[-3000:]}\nsidecar log:\n"
                                 f"{sidecar.log_tail(80)}") from error
        assert (replayed.messages, replayed.first_position, replayed.last_position) == (
            RECORDED, 0, recorded.stop_position)
        assert replayed.digest == expected_digest(0, RECORDED, SIZE)
        assert sidecar.process.poll() is None
