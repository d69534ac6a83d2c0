"""A flood of bad ConnectRequests starves no client (issue 33, point 2; docs/reliability.md,
"Connect floods").

5,000 ConnectRequests whose response channels nobody can use (garbage URIs, UDP ports nobody
listens on, IPC streams nobody reads, 4 KiB aliases: tests/support/connect_flood.py) arrive over
ten request publications (UDP and IPC control channels). Right after them a valid client connects
and is answered within its connect timeout: the conductor never waits for the media driver on a
connect (the response publication and the session counter are added asynchronously), and the
sessions still connecting are capped per request Image and in all (archive/service/
connecting_sessions.py). The sidecar's open files, memory mappings and RSS are sampled before the
flood and after its sessions expired (the connect timeout, plus the C client's driver timeout for
adds it had to discard): back near where they started.
"""

from __future__ import annotations

import random
import time

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.driver_integration.client import AeronClient

from aeron_spark.driver_integration.host_lookup import LOOKUP_THREADS
from tests.support.connect_flood import Footprint, flood_connects, request_publications
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.timeout(300)

FLOOD_CONNECTS = 5_000
VALID_CLIENT_TIMEOUT_S = 10.0  # the valid client's connect timeout (the archive client's timeout)
EXPIRY_S = 5.0 + 10.0 + 5.0  # connect timeout + the C client's driver timeout + slack
OPEN_FILES_MARGIN = 8
#: Plus what the sidecar's host-lookup threads take once, started by the flood's first named hosts
#: (driver_integration/host_lookup.py): per thread its stack, guard page and a malloc arena (~4).
MAPPINGS_MARGIN = 16 + 4 * LOOKUP_THREADS
RSS_MARGIN_KB = 24 * 1024


def test_a_valid_client_is_answered_right_after_a_flood_of_unusable_connects(sidecar: Sidecar) -> None:
    aeron = AeronClient(sidecar.driver_dir, client_name="connect-flood")
    try:
        with ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11, response_channel="aeron:ipc",
                                   aeron=aeron, timeout=VALID_CLIENT_TIMEOUT_S) as warm_up:
            warm_up.list_recordings(0, 10)  # the first connect's one-off costs are not the flood's
        time.sleep(1.0)
        before = Footprint.of(sidecar.pid)
        targets = [(sidecar.control_channel, 10)] * 6 + [("aeron:ipc", 11)] * 4
        with request_publications(aeron, targets) as publications:
            flood = flood_connects(publications, FLOOD_CONNECTS, random.Random(33))
            started = time.monotonic()
            with ArchiveClient.connect(control_channel=sidecar.control_channel, control_stream_id=10,
                                       aeron=aeron, timeout=VALID_CLIENT_TIMEOUT_S) as client:
                connected = time.monotonic() - started
                assert client.list_recordings(0, 10) == []
                answered = time.monotonic() - started
            during = Footprint.of(sidecar.pid)
            print(f"flood: {flood.sent} in {flood.seconds:.1f} s; the valid client connected after "
                  f"{connected:.2f} s, answered after {answered:.2f} s; sidecar before: {before}, "
                  f"right after the flood: {during}")
            assert answered < VALID_CLIENT_TIMEOUT_S
            assert sidecar.process.poll() is None, sidecar.log_tail()

        # the flood's request Images go with their publications; its sessions expire
        deadline = time.monotonic() + EXPIRY_S
        while True:
            after = Footprint.of(sidecar.pid)
            settled = (after.open_files <= before.open_files + OPEN_FILES_MARGIN
                       and after.mappings <= before.mappings + MAPPINGS_MARGIN)
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        print(f"after the flood's sessions expired: {after}")
        assert after.open_files <= before.open_files + OPEN_FILES_MARGIN, (before, during, after)
        assert after.mappings <= before.mappings + MAPPINGS_MARGIN, (before, during, after)
        assert after.rss_kb <= before.rss_kb + RSS_MARGIN_KB, (before, during, after)
        dropped = [line for line in sidecar.stderr_lines if "dropped:" in line and "connecting" in line]
        assert dropped, "connects beyond the caps are dropped, and logged"
        assert sum("Traceback" in line for line in sidecar.stderr_lines) == 0, sidecar.log_tail()
        # a client connecting now is served as before the flood
        with ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11, response_channel="aeron:ipc",
                                   aeron=aeron, timeout=VALID_CLIENT_TIMEOUT_S) as client:
            assert client.list_recordings(0, 10) == []
    finally:
        aeron.close()
