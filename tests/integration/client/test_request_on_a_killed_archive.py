"""A request awaited while the archive is SIGKILLed fails within seconds, not after the client's whole
timeout (issue 33: under repeated kills each driver-side call, read and commit on a dead session paid
``archive.timeoutMs`` before its retry on a fresh connection). The archive pings every second; a
client awaiting a response from an archive that has pinged and then fallen silent for
``REQUEST_SILENCE_S`` gives up then, naming the silence.

The client runs on a media driver of its own (the sidecar's embedded one dies with it), as a Spark
host does. Every process is stopped by PID, also on failure.
"""

from __future__ import annotations

import time

import pytest

from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.client.client_session import REQUEST_SILENCE_S
from aeron_spark.archive.client.response_routing import ArchiveTimeoutError
from tests.support.driver_process import running_driver_process
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.timeout(120)]

CLIENT_TIMEOUT_S = 30.0


def test_a_request_to_an_archive_killed_while_it_waits_fails_in_seconds(tmp_path):
    driver_dir = tmp_path / "client-aeron"
    sidecar = Sidecar(tmp_path / "archive")
    with running_driver_process(driver_dir):
        try:
            sidecar.start()
            client = ArchiveClient.connect(control_channel=sidecar.control_channel, aeron_dir=str(driver_dir),
                                           response_channel="aeron:udp?endpoint=localhost:0",
                                           timeout=CLIENT_TIMEOUT_S)
            try:
                deadline = time.monotonic() + 10
                while client._router.pings_received == 0:  # noqa: SLF001 - the precondition: it has pinged
                    assert client.is_connected and time.monotonic() < deadline, "the archive never pinged"
                    time.sleep(0.1)
                sidecar.kill()
                asked = time.monotonic()
                with pytest.raises(ArchiveTimeoutError) as failure:
                    client.list_recordings()
                waited = time.monotonic() - asked
                assert "restarted or gone" in str(failure.value), failure.value
                assert waited < REQUEST_SILENCE_S + 3.0 < CLIENT_TIMEOUT_S, waited
                print(f"the request failed {waited:.1f} s after the kill: {failure.value}")
            finally:
                client.close()
        finally:
            sidecar.terminate()
            sidecar.kill()
