"""A streaming query given `checkpointLocation` only on writeStream (as with Kafka) restarts from
its checkpoint with no gap and no duplicate: the REAL sidecar and a local[2] Spark session.

The sink writes each micro-batch to its own directory ``batch=<id>`` (overwritten when Spark runs a
batch again), so what it holds at the end is exactly what the source gave each batch id on its
last run: a batch 0 planned from a different start after a restart would show as a gap or a
duplicate. "Before batch 0 commits" is made as the Spark notes describe: after batch 0 ran,
``commits/0`` is deleted, so the restart runs batch 0 again from ``offsets/0`` and asks the source
for its start again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.spark.source_fixtures import (
    BackgroundPublisher,
    Recorded,
    RecordingArchive,
    numbered_payloads,
    wait_until,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

WAIT_S = 120.0
STARTS = ["earliest", "latest"]


def start_query(spark, archive: RecordingArchive, recorded: Recorded, checkpoint: Path, output: Path,
                starting: str, trigger: dict):
    """readStream WITHOUT checkpointLocation; writeStream with it."""
    source = (spark.readStream.format("aeron-archive")
              .option("archive.dir", archive.archive_dir)
              .option("recordingIds", str(recorded.recording_id))
              .option("startingPositions", starting)
              .load())

    def write_batch(batch, batch_id: int) -> None:
        batch.select("recording_id", "position", "payload").write.mode("overwrite") \
            .parquet(str(output / f"batch={batch_id}"))

    return (source.writeStream.foreachBatch(write_batch)
            .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


def run_to_the_end(spark, archive, recorded, checkpoint, output, starting) -> None:
    query = start_query(spark, archive, recorded, checkpoint, output, starting, {"availableNow": True})
    try:
        assert query.awaitTermination(WAIT_S), "the AvailableNow restart did not finish"
        assert query.exception() is None
    finally:
        if query.isActive:
            query.stop()


def delivered(spark, output: Path) -> list[tuple[int, int, int, bytes]]:
    """(batch id, recording id, position, payload) in the order the sink got them: by batch, then position."""
    rows = spark.read.parquet(str(output)).select("batch", "recording_id", "position", "payload").collect()
    return sorted((row.batch, row.recording_id, row.position, bytes(row.payload)) for row in rows)


def assert_exactly_once_in_order(spark, output: Path, expected: list[tuple[int, int, bytes]]) -> None:
    got = delivered(spark, output)
    assert [row[1:] for row in got] == expected  # every message once, in position order across batches


def committed(checkpoint: Path, batch_id: int) -> bool:
    return (checkpoint / "commits" / str(batch_id)).exists()


def logged_offset(checkpoint: Path, batch_id: int) -> dict:
    """The source's offset in ``offsets/<batch_id>`` (its last line: one source)."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    return json.loads(lines[-1])


def expected_rows(recorded: Recorded, starting: str, before_query: int) -> list[tuple[int, int, bytes]]:
    if starting == "earliest":
        return recorded.rows()
    return recorded.rows(after=recorded.messages[before_query - 1][0])


@pytest.mark.parametrize("starting", STARTS)
def test_stopped_mid_stream_and_restarted_from_the_query_checkpoint(spark_source, archive, tmp_path, starting):
    recorded, publication = archive.record(numbered_payloads(0, 40))
    checkpoint, output = tmp_path / "chk", tmp_path / "out"
    query = start_query(spark_source, archive, recorded, checkpoint, output, starting,
                        {"processingTime": "200 milliseconds"})
    try:
        wait_until(lambda: committed(checkpoint, 0), "batch 0", timeout=WAIT_S, query=query)
        with BackgroundPublisher(archive, publication, recorded, numbered_payloads(40, 200),
                                 per_burst=10, pause_s=0.05) as publisher:
            wait_until(lambda: committed(checkpoint, 2), "batches with data while publishing", timeout=WAIT_S,
                       query=query)
            query.stop()  # mid-stream: the publisher is still going
            publisher.join()
    finally:
        if query.isActive:
            query.stop()
    assert not (checkpoint / "aeron-archive-source").exists()  # no store: nothing told the source a path
    archive.publish(publication, recorded, numbered_payloads(240, 60))  # while the query is down
    archive.await_recorded(recorded.recording_id, recorded.end)
    run_to_the_end(spark_source, archive, recorded, checkpoint, output, starting)
    assert_exactly_once_in_order(spark_source, output, expected_rows(recorded, starting, 40))


@pytest.mark.parametrize("starting", STARTS)
def test_restarted_after_batch_0_was_logged_but_before_it_committed(spark_source, archive, tmp_path, starting):
    recorded, publication = archive.record(numbered_payloads(0, 40))
    checkpoint, output = tmp_path / "chk", tmp_path / "out"
    query = start_query(spark_source, archive, recorded, checkpoint, output, starting,
                        {"processingTime": "200 milliseconds"})
    try:
        wait_until(lambda: committed(checkpoint, 0), "batch 0", timeout=WAIT_S, query=query)
    finally:
        query.stop()
    logged = sorted(name for name in os.listdir(checkpoint / "offsets") if not name.startswith("."))
    assert logged == ["0"], "nothing was published: one batch only"
    start = recorded.recording_id, (0 if starting == "earliest" else recorded.end)
    assert logged_offset(checkpoint, 0) == {str(start[0]): recorded.end, "resolvedStart": {str(start[0]): start[1]}}
    for name in ("0", ".0.crc"):  # as if the query died while batch 0 ran (with Hadoop's checksum file)
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    archive.publish(publication, recorded, numbered_payloads(40, 70))  # after batch 0's end
    archive.await_recorded(recorded.recording_id, recorded.end)
    run_to_the_end(spark_source, archive, recorded, checkpoint, output, starting)
    assert logged_offset(checkpoint, 0)["resolvedStart"] == {str(start[0]): start[1]}  # batch 0 ran again as logged
    assert_exactly_once_in_order(spark_source, output, expected_rows(recorded, starting, 40))
