"""Timeouts of the real sidecar: a replay whose subscriber never connects ends with an error after
the (default 5 s) connect timeout; idle and vanished control sessions are closed. Uses the
``sidecar`` and ``local_aeron`` fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import time

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.client.archive_client import ArchiveError
from aeron_spark.archive.codecs import ControlResponseCode
from aeron_spark.driver_integration import AeronClient

from tests.support.raw_archive_client import RawArchiveClient
from tests.support.ports import udp_channel
from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import TIMEOUT, as_pairs, expected, ipc_archive, payloads, record_ipc
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def test_replay_whose_subscriber_never_connects_ends_with_an_error_after_5_s(sidecar: Sidecar,
                                                                            local_aeron: AeronClient):
    """The default connect timeout (5 s): OK first (the replay is set up), then ERROR naming the
    replay channel once nobody has subscribed for 5 s; the archive carries on."""
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(20, seed=12))
        nobody = udp_channel()
        started = time.monotonic()
        replay_session_id = archive.start_replay(recording_id, 0, published.end, nobody, 2001)
        deadline = started + 20
        while True:
            try:
                archive.check_replay_error(replay_session_id)
            except ArchiveError as error:
                failed = error
                break
            assert time.monotonic() < deadline, "no error for a replay nobody subscribed to"
            time.sleep(0.01)
        elapsed = time.monotonic() - started
        assert 4.5 <= elapsed < 15, elapsed
        assert f"no connection established for replayChannel={nobody}" in failed.archive_message
        assert "replayStreamId=2001" in failed.archive_message
        with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2002) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)


@pytest.mark.parametrize("sidecar", [["--session-idle-timeout-ms", "1000"]], indirect=True, ids=["idle-1s"])
def test_idle_and_vanished_control_sessions_time_out(sidecar: Sidecar, local_aeron: AeronClient):
    idle = RawArchiveClient(local_aeron, sidecar.control_channel, 10)
    kept_alive = RawArchiveClient(local_aeron, sidecar.control_channel, 10)
    vanished = RawArchiveClient(local_aeron, "aeron:ipc", 11, response_stream_id=21)
    for client in (idle, kept_alive, vanished):
        assert client.connect().code == ControlResponseCode.OK
        assert client.call(lambda s, c: codecs.ArchiveIdRequest(s, c)).code == ControlResponseCode.OK
    vanished.responses.close()  # the client goes away without CloseSession
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:  # only kept_alive talks for 2.5 s (> the 1 s idle timeout)
        kept_alive.send(codecs.KeepAliveRequest(kept_alive.control_session_id, kept_alive.next_correlation_id()))
        time.sleep(0.2)

    def closed(client: RawArchiveClient, reason: str) -> bool:
        return any(f"control session {client.control_session_id} closed: {reason}" in line
                   for line in sidecar.stderr_lines)
    wait_until(lambda: closed(idle, "no request for more than idleTimeoutMs=1000"), "the idle session to close")
    wait_until(lambda: closed(vanished, "control response publication is not connected"),
               "the vanished client's session to close")
    assert not any(f"control session {kept_alive.control_session_id} closed" in line for line in sidecar.stderr_lines)
    assert kept_alive.call(lambda s, c: codecs.ArchiveIdRequest(s, c)).code == ControlResponseCode.OK
    # the idle session is gone: a request naming it is refused (no session on that image to answer)
    idle.send(codecs.ArchiveIdRequest(idle.control_session_id, idle.next_correlation_id()))
    wait_until(lambda: any(f"unknown controlSessionId={idle.control_session_id}" in line
                           for line in sidecar.stderr_lines), "the idle session's request to be refused")
    for client in (idle, kept_alive, vanished):
        client.close()
