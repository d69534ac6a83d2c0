"""Clients of one sidecar are isolated from each other on IPC (issue 13, item 2).

Every IPC client subscribes to the same response stream (20). Before each client's response
channel carried its own ``session-id``, every client held an image of every session's responses and
IPC flow control waited for the slowest: a client that connected and then never polled capped
the others (~340 small requests, then "failed to send response for more than connectTimeoutMs").
Here a connected client never polls while another makes thousands of requests; each answer must
come quickly. Real sidecar process (tests/support/sidecar.py), clients found through its mark file.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.driver_integration.channel_uri import ChannelUri

from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.timeout(180)

BUSY_REQUESTS = 2_000
#: Far above a normal answer (~1 ms), far below the 10 s request timeout a blocked client hit.
SLOW_ANSWER_S = 2.0


def _archive_dir(sidecar: Sidecar) -> Path:
    return sidecar.archive_dir


def test_ipc_clients_get_response_channels_of_their_own_session(sidecar: Sidecar):
    with ArchiveClient.from_mark_file(_archive_dir(sidecar), timeout=10.0) as first, \
            ArchiveClient.from_mark_file(_archive_dir(sidecar), timeout=10.0) as second:
        channels = [ChannelUri.parse(c.response_channel) for c in (first, second)]
        assert all(c.is_ipc for c in channels)
        session_ids = {c.get("session-id") for c in channels}
        assert None not in session_ids and len(session_ids) == 2


def test_an_idle_ipc_client_does_not_slow_a_busy_one(sidecar: Sidecar):
    idle = ArchiveClient.from_mark_file(_archive_dir(sidecar), timeout=10.0)
    try:
        with ArchiveClient.from_mark_file(_archive_dir(sidecar), timeout=10.0) as busy:
            slowest = 0.0
            started = time.monotonic()
            for index in range(BUSY_REQUESTS):
                before = time.monotonic()
                assert busy.list_recording(10_000 + index) is None  # one small answer each
                slowest = max(slowest, time.monotonic() - before)
            elapsed = time.monotonic() - started
        assert slowest < SLOW_ANSWER_S, f"one answer took {slowest:.2f} s ({BUSY_REQUESTS} in {elapsed:.1f} s)"
        blocked = [line for line in sidecar.stderr_lines
                   if "failed to send response" in line and f"session {busy.control_session_id} " in line]
        assert not blocked, blocked
        assert not idle.is_closed  # untouched: it simply never read
    finally:
        idle.close()
