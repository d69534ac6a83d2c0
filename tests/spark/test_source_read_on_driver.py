"""``readOnDriver=true`` end to end (connector/source/driver_read_stream.py): the REAL sidecar and
media driver, micro-batches read by the driver's Python source process.

A live tail gets every message once and in order, batch after batch, with the same rows the
default reader gives; a batch whose commit was lost (its offsets logged, its rows gone with the
query) is read again on an executor (``readBetweenOffsets``) with the same rows, by the same
batch id."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.spark.source_fixtures import (
    BackgroundPublisher,
    input_rows,
    numbered_payloads,
    rows_of,
    start_stream,
    stream_reader,
    wait_until,
)

pytestmark = pytest.mark.integration


def test_a_live_tail_read_on_the_driver_delivers_every_message_once_in_order(spark_source, archive, tmp_path):
    recorded, publication = archive.record(numbered_payloads(0, 10))
    query = start_stream(spark_source, archive, tmp_path / "chk", query_name="on_driver",
                         trigger={"processingTime": "200 milliseconds"}, readOnDriver="true",
                         recordingIds=recorded.recording_id, startingPositions="earliest")
    try:
        wait_until(lambda: spark_source.table("on_driver").count() == 10, "the first rows", query=query)
        with BackgroundPublisher(archive, publication, recorded, numbered_payloads(10, 900), per_burst=40,
                                 pause_s=0.05) as publisher:
            publisher.join()
        wait_until(lambda: spark_source.table("on_driver").count() >= len(recorded.messages),
                   f"{len(recorded.messages)} rows", query=query)
        batches_with_data = [p for p in query.recentProgress if input_rows(p) > 0]
    finally:
        query.stop()
    assert rows_of(spark_source.table("on_driver")) == recorded.rows()  # all, in position order, none twice
    assert len(batches_with_data) >= 3, "the query should have read the recording while it grew"


def test_a_batch_whose_commit_was_lost_is_read_again_with_the_same_rows(spark_source, archive, tmp_path):
    recorded, publication = archive.record(numbered_payloads(0, 120))
    checkpoint, output = tmp_path / "chk", tmp_path / "out"
    calls = tmp_path / "calls.jsonl"

    def write_batch(frame, batch_id: int) -> None:
        rows = rows_of(frame)
        frame.write.mode("overwrite").parquet(str(output / f"batch={batch_id}"))
        with calls.open("a") as log:
            log.write(json.dumps([batch_id, len(rows)]) + "\n")

    def run_once() -> None:
        query = (stream_reader(spark_source, archive, checkpoint, readOnDriver="true",
                               recordingIds=recorded.recording_id, startingPositions="earliest")
                 .writeStream.option("checkpointLocation", str(checkpoint)).foreachBatch(write_batch)
                 .trigger(processingTime="200 milliseconds").start())
        try:
            wait_until(lambda: calls.exists() and sum(count for _, count in logged(calls)) >= 120 + published(),
                       "the published rows", query=query)
        finally:
            query.stop()

    extra: list[int] = []

    def published() -> int:
        return sum(extra)

    run_once()
    archive.publish(publication, recorded, numbered_payloads(120, 60))
    extra.append(60)
    archive.await_recorded(recorded.recording_id, recorded.end)
    run_once()
    last = max(batch_id for batch_id, _ in logged(calls))
    for commit_file in (str(last), f".{last}.crc"):  # as if the query died between its sink and its commit
        (checkpoint / "commits" / commit_file).unlink(missing_ok=True)
    shutil.rmtree(output / f"batch={last}")
    first_read = dict(logged(calls))[last]
    calls.write_text("")

    query = (stream_reader(spark_source, archive, checkpoint, readOnDriver="true",
                           recordingIds=recorded.recording_id, startingPositions="earliest")
             .writeStream.option("checkpointLocation", str(checkpoint)).foreachBatch(write_batch)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the AvailableNow run did not finish"
    finally:
        if query.isActive:
            query.stop()
    assert logged(calls)[0] == [last, first_read]  # the lost batch again, by its id, with as many rows
    batches = sorted(Path(output).iterdir())
    rows = sorted(row for batch in batches for row in rows_of(spark_source.read.parquet(str(batch))))
    assert rows == recorded.rows()  # every message once over all batches


def logged(calls: Path) -> list[list[int]]:
    return [json.loads(line) for line in calls.read_text().splitlines() if line.strip()]
