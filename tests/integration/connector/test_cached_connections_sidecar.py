"""A cached archive connection whose session the archive closed meanwhile (here: the sidecar's
``--session-idle-timeout-ms``) is replaced on its next use instead of failing the task (issue 13,
item 2). Real sidecar process; the connector's per-worker caches of the source and the sink."""

from __future__ import annotations

import time

import pytest
from aeron_spark.archive.client.archive_client import PING_SILENCE_S, ArchiveClient

from aeron_spark.connector.options import parse_connection
from aeron_spark.connector.sink.archive_access import forget_shared_sink_archive, shared_sink_archive
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.source.archive_access import _connections as source_connections
from aeron_spark.connector.source.archive_access import forget_shared_archive, leased_archive, shared_archive
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.timeout(120)

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


@pytest.mark.parametrize("sidecar", [IDLE_TIMEOUT], indirect=True, ids=["idle-1s"])
def test_a_leased_connection_is_kept_alive_between_leases(sidecar: Sidecar, monkeypatch):
    monkeypatch.setattr(source_connections, "_keep_alive_interval_s", 0.25)
    connection = parse_connection({"archive.dir": str(sidecar.archive_dir)})
    try:
        with leased_archive(connection) as (first, _):
            assert first.describe(0) is None
        kept_before = source_connections.keep_alives
        time.sleep(2.5)  # idle for longer than the archive's idle timeout: the keeper holds the session
        assert source_connections.keep_alives > kept_before
        with leased_archive(connection) as (second, _):
            assert second is first and second.describe(0) is None
    finally:
        forget_shared_archive(connection)


def test_an_archive_restart_between_two_tasks_costs_the_second_task_nothing(tmp_path):
    """The archive restarts (same directory, same control endpoint) while a worker's cached
    connection sits idle: the next task gets a fresh connection, not a failure or a timeout."""
    first_sidecar = Sidecar(tmp_path / "archive")
    second_sidecar = Sidecar(tmp_path / "archive", control_port=first_sidecar.control_port)
    connection = parse_connection({"archive.controlChannel": first_sidecar.control_channel,
                                   "archive.timeoutMs": "5000"})
    try:
        first_sidecar.start()
        with leased_archive(connection) as (first, _):
            assert first.describe(0) is None
            time.sleep(2.5)  # a worker that has been up a while: it has heard the archive's 1 s pings
        first_sidecar.terminate()
        second_sidecar.start()
        time.sleep(PING_SILENCE_S + 0.5)  # a task a few seconds later (the old image may still be there)
        started = time.monotonic()
        with leased_archive(connection) as (second, _):
            assert second is not first and second.describe(0) is None
        assert time.monotonic() - started < 5.0
    finally:
        forget_shared_archive(connection)
        for sidecar in (first_sidecar, second_sidecar):
            sidecar.terminate()
            sidecar.kill()
