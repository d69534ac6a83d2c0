"""A Spark streaming query on IPC (``archive.dir``) keeps running beside an idle archive client
(issue 13, item 2): before each client's IPC response channel carried its own session id, one
connected client that never polled blocked every other IPC client's responses, and such a query
died after ~30 s ("no response to BoundedReplayRequest ... within 10.0 s").

Real sidecar process and media driver; the idle client connects through the mark file (IPC, like
the query) and never reads. The query tails a recording a publisher keeps writing for
``AERON_SPARK_IDLE_CLIENT_SECONDS`` seconds (default 60; the issue's acceptance run is 300:
``AERON_SPARK_IDLE_CLIENT_SECONDS=300 .venv/bin/python -m pytest tests/spark/test_source_beside_idle_client.py``)
and must read every message, without failing.
"""

from __future__ import annotations

import os
import time

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient

from aeron_spark.connector import register
from tests.support.sidecar import running_sidecar
from tests.spark.source_fixtures import (
    BackgroundPublisher,
    RecordingArchive,
    numbered_payloads,
    rows_of,
    start_stream,
    wait_until,
)

DURATION_S = float(os.environ.get("AERON_SPARK_IDLE_CLIENT_SECONDS", "60"))
MESSAGES_PER_SECOND = 100  # bursts of 10 every 0.1 s

pytestmark = [pytest.mark.integration, pytest.mark.timeout(int(DURATION_S) + 240)]


@pytest.fixture
def archive(tmp_path):
    with running_sidecar(tmp_path / "archive") as sidecar:
        recording_archive = RecordingArchive(sidecar)
        try:
            yield recording_archive
        finally:
            recording_archive.close()


def test_a_streaming_query_on_ipc_keeps_running_beside_an_idle_client(spark, archive, tmp_path):
    register(spark)
    idle = ArchiveClient.from_mark_file(archive.archive_dir)  # connected, never polls
    try:
        assert idle.response_channel.startswith("aeron:ipc")
        recorded, publication = archive.record(numbered_payloads(0, 10))
        more = numbered_payloads(10, int(DURATION_S * MESSAGES_PER_SECOND))
        query = start_stream(spark, archive, tmp_path / "chk", query_name="beside_idle",
                             trigger={"processingTime": "200 milliseconds"},
                             recordingIds=recorded.recording_id, startingPositions="earliest")
        try:
            wait_until(lambda: spark.table("beside_idle").count() == 10, "the first rows", query=query)
            started = time.monotonic()
            with BackgroundPublisher(archive, publication, recorded, more, per_burst=10, pause_s=0.1) as publisher:
                while publisher._thread.is_alive():
                    assert query.exception() is None, f"the query failed after {time.monotonic() - started:.0f} s"
                    time.sleep(1.0)
                publisher.join()
            wait_until(lambda: spark.table("beside_idle").count() >= len(recorded.messages),
                       f"{len(recorded.messages)} rows", query=query)
            assert query.exception() is None
        finally:
            query.stop()
        assert rows_of(spark.table("beside_idle")) == recorded.rows()
        assert time.monotonic() - started >= DURATION_S * 0.9
    finally:
        idle.close()
