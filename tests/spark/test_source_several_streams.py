"""Several streams in one query (Kafka's subscribe / subscribePattern) against the REAL sidecar:
``streamId`` with two stream ids, and ``channelPattern``; each query discovers a recording that
starts while it runs, reads it from its start, never reads a recording it did not select, and
delivers every message exactly once.
"""

from __future__ import annotations

import pytest

from aeron_spark.connector import register
from tests.support.sidecar import running_sidecar
from tests.spark.source_fixtures import (
    IPC_CHANNEL,
    Recorded,
    RecordingArchive,
    numbered_payloads,
    rows_of,
    start_stream,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def archive(tmp_path_factory, spark):
    register(spark)
    with running_sidecar(tmp_path_factory.mktemp("streams") / "archive") as sidecar:
        recording_archive = RecordingArchive(sidecar)
        try:
            yield recording_archive
        finally:
            recording_archive.close()


def count(spark, query_name: str) -> int:
    return spark.table(query_name).count()


def record_mid_query(archive: RecordingArchive, stream_id: int, first: int, messages: int,
                     channel: str | None = IPC_CHANNEL) -> Recorded:
    """A new recording that starts now (the query is running); channel None: the stream is
    recorded already, a new publication (session) is a new recording."""
    if channel is not None:
        archive.start_recording(stream_id, channel)
    publication = archive.publication(stream_id)
    recorded = Recorded(archive.recording_of(publication))
    archive.publish(publication, recorded, numbered_payloads(first, messages))
    archive.await_recorded(recorded.recording_id, recorded.end)
    return recorded


def test_two_stream_ids_discover_a_recording_of_the_second_mid_query(spark, archive, tmp_path):
    first_stream, second_stream, other_stream = (archive.new_stream_id() for _ in range(3))
    first, _ = archive.record(numbered_payloads(0, 40), stream_id=first_stream)
    query = start_stream(spark, archive, tmp_path / "chk", query_name="two_streams",
                         trigger={"processingTime": "200 milliseconds"}, channel="aeron:ipc",
                         streamId=f"{first_stream},{second_stream}", startingPositions="earliest",
                         discoveryIntervalMs=100)
    try:
        wait_until(lambda: count(spark, "two_streams") == 40, "the first stream's recording", query=query)
        record_mid_query(archive, other_stream, 500, 10)  # not selected: never read
        second = record_mid_query(archive, second_stream, 1000, 60)
        wait_until(lambda: count(spark, "two_streams") == 100, "the second stream's new recording", query=query)
        more = record_mid_query(archive, second_stream, 2000, 5, channel=None)  # a later one, same stream
        wait_until(lambda: count(spark, "two_streams") == 105, "another new recording", query=query)
    finally:
        query.stop()
    assert rows_of(spark.table("two_streams")) == sorted(first.rows() + second.rows() + more.rows())


def test_a_channel_pattern_discovers_a_matching_recording_mid_query(spark, archive, tmp_path):
    ticks_a, ticks_b, quotes = (archive.new_stream_id() for _ in range(3))
    ticks = f"{IPC_CHANNEL}|alias=pattern-ticks-"
    archive.start_recording(ticks_a, ticks + "a")
    publication = archive.publication(ticks_a)
    first = Recorded(archive.recording_of(publication))
    archive.publish(publication, first, numbered_payloads(0, 30))
    archive.await_recorded(first.recording_id, first.end)
    query = start_stream(spark, archive, tmp_path / "chk", query_name="ticks_pattern",
                         trigger={"processingTime": "200 milliseconds"},
                         channelPattern=r"\|alias=pattern-ticks-[a-z]$", startingPositions="earliest",
                         discoveryIntervalMs=100)
    try:
        wait_until(lambda: count(spark, "ticks_pattern") == 30, "the first matching recording", query=query)
        record_mid_query(archive, quotes, 500, 10, f"{IPC_CHANNEL}|alias=pattern-quotes-c")  # no match
        second = record_mid_query(archive, ticks_b, 1000, 45, ticks + "b")
        wait_until(lambda: count(spark, "ticks_pattern") == 75, "the matching recording started mid-query",
                   query=query)
    finally:
        query.stop()
    assert rows_of(spark.table("ticks_pattern")) == sorted(first.rows() + second.rows())
