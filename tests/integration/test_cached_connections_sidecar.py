"""A cached archive connection whose session the archive closed meanwhile (here: the sidecar's
``--session-idle-timeout-ms``) is replaced on its next use instead of failing the task (issue 13,
item 2). Real sidecar process; the connector's per-worker caches of the source and the sink."""

from __future__ import annotations

import time

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient

from aeron_spark.connector.options import parse_connection
from aeron_spark.connector.sink.archive_access import forget_shared_sink_archive, shared_sink_archive
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.source.archive_access import forget_shared_archive, shared_archive
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

IDLE_TIMEOUT = ["--session-idle-timeout-ms", "1000"]


@pytest.mark.parametrize("sidecar", [IDLE_TIMEOUT], indirect=True, ids=["idle-1s"])
def test_a_client_sees_that_the_archive_closed_its_idle_session(sidecar: Sidecar):
    with ArchiveClient.from_mark_file(sidecar.archive_dir) as client:
        client.list_recording(0)
        assert client.is_connected
        time.sleep(2.5)
        assert not client.is_connected


@pytest.mark.parametrize("sidecar", [IDLE_TIMEOUT], indirect=True, ids=["idle-1s"])
def test_keep_alives_hold_an_idle_session(sidecar: Sidecar):
    with ArchiveClient.from_mark_file(sidecar.archive_dir) as client:
        client.list_recording(0)
        for _ in range(10):  # 2.5 s, more than the idle timeout
            time.sleep(0.25)
            client.keep_alive()
        assert client.is_connected
        assert client.list_recording(0) is None


@pytest.mark.parametrize("sidecar", [IDLE_TIMEOUT], indirect=True, ids=["idle-1s"])
def test_the_source_cache_reopens_a_session_the_archive_closed(sidecar: Sidecar):
    connection = parse_connection({"archive.dir": str(sidecar.archive_dir)})
    try:
        first = shared_archive(connection)
        assert first.describe(0) is None
        assert shared_archive(connection) is first  # still open: reused
        time.sleep(2.5)  # the archive closes the idle session
        second = shared_archive(connection)
        assert second is not first
        started = time.monotonic()
        assert second.describe(0) is None  # answered at once, no request timeout
        assert time.monotonic() - started < 2.0
    finally:
        forget_shared_archive(connection)


@pytest.mark.parametrize("sidecar", [IDLE_TIMEOUT], indirect=True, ids=["idle-1s"])
def test_the_sink_cache_reopens_a_session_the_archive_closed(sidecar: Sidecar):
    options = SinkOptions.parse({"archive.dir": str(sidecar.archive_dir), "channel": "aeron:ipc",
                                 "streamId": "7", "sink.id": "cached"}, streaming=True)
    try:
        first, reused = shared_sink_archive(options)
        assert not reused and first.describe(0) is None
        time.sleep(2.5)
        second, reused = shared_sink_archive(options)
        assert not reused and second is not first
        assert second.describe(0) is None
    finally:
        forget_shared_sink_archive(options)
