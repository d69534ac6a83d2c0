"""`spark.readStream.format("aeron-archive")` end to end: the REAL sidecar and media driver.

One `aeron-archive serve` subprocess for the module (stopped by PID at teardown, even on failure)
records IPC publications of 64 KiB terms made by the test; Spark's driver-side source and its
executor workers find the archive through its mark file (``archive.dir``) and replay through the
sidecar's embedded driver. Every test records on its own stream id so recordings never mix.
Expected rows are the positions Aeron's ``offer`` returned and the payloads offered.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.spark.source_fixtures import (
    TERM_LENGTH,
    BackgroundPublisher,
    Recorded,
    input_rows,
    numbered_payloads,
    progress_offsets,
    rows_of,
    run_available_now,
    start_stream,
    wait_until,
)

pytestmark = pytest.mark.integration


def memory_rows(spark, query_name: str) -> list[tuple[int, int, bytes]]:
    return rows_of(spark.table(query_name))


def memory_count(spark, query_name: str) -> int:
    return spark.table(query_name).count()


# --- AvailableNow over recorded data ------------------------------------------------------------


def test_available_now_reads_exactly_what_was_recorded(spark_source, archive, tmp_path):
    recorded, _ = archive.record(numbered_payloads(0, 300), reserved_value=lambda i: 1_000 + i)
    run_available_now(spark_source, archive, tmp_path / "chk", query_name="recorded_now",
                      recordingIds=recorded.recording_id, startingPositions="earliest")
    rows = spark_source.table("recorded_now").collect()
    assert sorted((r.recording_id, r.position, bytes(r.payload)) for r in rows) == recorded.rows()
    descriptor = archive.client.list_recording(recorded.recording_id)
    assert {(r.session_id, r.stream_id) for r in rows} == {(descriptor.session_id, descriptor.stream_id)}
    assert sorted(r.reserved_value for r in rows) == [1_000 + i for i in range(300)]


# --- tailing a live recording -------------------------------------------------------------------


def test_tailing_a_recording_while_a_publisher_keeps_writing(spark_source, archive, tmp_path):
    recorded, publication = archive.record(numbered_payloads(0, 10))
    more = numbered_payloads(10, 1400)
    query = start_stream(spark_source, archive, tmp_path / "chk", query_name="tailing",
                         trigger={"processingTime": "200 milliseconds"},
                         recordingIds=recorded.recording_id, startingPositions="earliest")
    try:
        # The first batch of a query is slow (worker start-up): publish once the query is running.
        wait_until(lambda: memory_count(spark_source, "tailing") == 10, "the first rows", query=query)
        with BackgroundPublisher(archive, publication, recorded, more, per_burst=40, pause_s=0.05) as publisher:
            publisher.join()
        wait_until(lambda: memory_count(spark_source, "tailing") >= len(recorded.messages),
                   f"{len(recorded.messages)} rows", query=query)
        batches_with_data = [p for p in query.recentProgress if input_rows(p) > 0]
    finally:
        query.stop()
    rows = memory_rows(spark_source, "tailing")
    assert rows == recorded.rows()  # all, in position order, none twice
    assert len(batches_with_data) >= 3, "the query should have read the recording while it grew"


# --- a new recording of the subscribed channel ----------------------------------------------------


def test_a_new_recording_of_the_channel_is_picked_up_mid_query(spark_source, archive, tmp_path):
    stream_id = archive.new_stream_id()
    first, _ = archive.record(numbered_payloads(0, 50), stream_id=stream_id)
    query = start_stream(spark_source, archive, tmp_path / "chk", query_name="discovered",
                         trigger={"processingTime": "200 milliseconds"},
                         channel="aeron:ipc", streamId=stream_id, startingPositions="earliest",
                         discoveryIntervalMs=100)
    try:
        wait_until(lambda: memory_count(spark_source, "discovered") == 50, "the first recording", query=query)
        second_publication = archive.publication(stream_id)  # a new session: a new recording
        second = Recorded(archive.recording_of(second_publication))
        archive.publish(second_publication, second, numbered_payloads(1000, 70))
        wait_until(lambda: memory_count(spark_source, "discovered") == 120, "the second recording", query=query)
    finally:
        query.stop()
    assert second.recording_id != first.recording_id
    assert memory_rows(spark_source, "discovered") == sorted(first.rows() + second.rows())


# --- restart from the checkpoint --------------------------------------------------------------


def test_restart_from_checkpoint_with_latest_start_has_no_gap_and_no_duplicate(spark_source, archive, tmp_path):
    recorded, publication = archive.record(numbered_payloads(0, 40))  # before the query: not read
    checkpoint, output = tmp_path / "chk", tmp_path / "out"
    options = dict(recordingIds=recorded.recording_id, startingPositions="latest")
    query = start_stream(spark_source, archive, checkpoint, sink="parquet", output=output,
                         trigger={"processingTime": "200 milliseconds"}, **options)
    try:
        store = checkpoint / "aeron-archive-source"
        wait_until(lambda: store.is_dir() and any(store.iterdir()), "the resolved starting positions", query=query)
        archive.publish(publication, recorded, numbered_payloads(40, 60))
        wait_until(lambda: sum(input_rows(p) for p in query.recentProgress) >= 60, "60 rows", query=query)
    finally:
        query.stop()
    archive.publish(publication, recorded, numbered_payloads(100, 80))  # while the query is down
    archive.await_recorded(recorded.recording_id, recorded.end)
    run_available_now(spark_source, archive, checkpoint, sink="parquet", output=output, **options)
    rows = rows_of(spark_source.read.parquet(str(output)))
    start = recorded.messages[39][0]
    assert rows == recorded.rows(after=start)
    saved = json.loads(next(store.iterdir()).read_text())
    assert saved["positions"] == {str(recorded.recording_id): start}


# --- partitions and admission control --------------------------------------------------------------


def test_a_large_range_is_split_into_several_partitions_with_the_same_rows(spark_source, archive):
    recorded, _ = archive.record(numbered_payloads(0, 700, sizes=(700, 1500, 2200)), stop=True)
    assert recorded.end > 12 * TERM_LENGTH
    reader = spark_source.read.format("aeron-archive").option("archive.dir", archive.archive_dir) \
        .option("recordingIds", str(recorded.recording_id))
    whole = reader.load()
    split = reader.option("maxBytesPerPartition", "64k").load()
    assert whole.rdd.getNumPartitions() == 1
    assert split.rdd.getNumPartitions() >= 12
    assert rows_of(split) == rows_of(whole) == recorded.rows()


def test_max_bytes_per_trigger_caps_every_batch(spark_source, archive, tmp_path):
    recorded, _ = archive.record(numbered_payloads(0, 400, sizes=(500, 1500, 2900)))
    cap = 2 * TERM_LENGTH
    query = run_available_now(spark_source, archive, tmp_path / "chk", query_name="capped",
                              recordingIds=recorded.recording_id, startingPositions="earliest",
                              maxBytesPerTrigger="128k")
    batches = [p for p in query.recentProgress if input_rows(p) > 0]
    rid = recorded.recording_id
    sizes = []
    for progress in batches:
        start, end = progress_offsets(progress)
        begin = 0 if start is None else start[rid]
        sizes.append(end[rid] - begin)
    assert len(batches) >= recorded.end // cap
    assert all(0 < size <= cap for size in sizes), sizes
    assert sum(sizes) == recorded.end
    assert memory_rows(spark_source, "capped") == recorded.rows()


# --- data loss ----------------------------------------------------------------------------------


def test_purged_segments_fail_the_query_or_are_skipped(spark_source, archive, tmp_path):
    recorded, publication = archive.record(numbered_payloads(0, 40))
    checkpoint, output = tmp_path / "chk", tmp_path / "out"
    options = dict(recordingIds=recorded.recording_id, startingPositions="earliest")
    run_available_now(spark_source, archive, checkpoint, sink="parquet", output=output, **options)
    read_to = recorded.end
    archive.publish(publication, recorded, numbered_payloads(40, 200))
    archive.await_recorded(recorded.recording_id, recorded.end)
    new_start = (read_to // TERM_LENGTH + 2) * TERM_LENGTH  # a segment base past what was read
    assert new_start < recorded.end
    archive.client.purge_segments(recorded.recording_id, new_start)

    with pytest.raises(Exception) as failure:
        run_available_now(spark_source, archive, checkpoint, sink="parquet", output=output,
                          failOnDataLoss="true", **options)
    assert f"recording {recorded.recording_id}: [{read_to}, {new_start}) was purged or detached" \
        in str(failure.value)

    run_available_now(spark_source, archive, checkpoint, sink="parquet", output=output,
                      failOnDataLoss="false", **options)
    rows = rows_of(spark_source.read.parquet(str(output)))
    assert rows == recorded.rows(up_to=read_to) + recorded.rows(after=new_start)


def test_truncated_below_the_query_position_fails_or_continues(spark_source, archive, tmp_path):
    recorded, _ = archive.record(numbered_payloads(0, 60), stop=True)
    checkpoint, output = tmp_path / "chk", tmp_path / "out"
    options = dict(recordingIds=recorded.recording_id, startingPositions="earliest")
    run_available_now(spark_source, archive, checkpoint, sink="parquet", output=output, **options)
    cut = recorded.messages[29][0]
    archive.client.truncate_recording(recorded.recording_id, cut)

    with pytest.raises(Exception) as failure:
        run_available_now(spark_source, archive, checkpoint, sink="parquet", output=output,
                          failOnDataLoss="true", **options)
    assert f"recording {recorded.recording_id} was truncated to {cut}, before the query's position " \
        f"{recorded.end}" in str(failure.value)

    query = run_available_now(spark_source, archive, checkpoint, sink="parquet", output=output,
                              failOnDataLoss="false", **options)
    assert query.exception() is None
    assert rows_of(spark_source.read.parquet(str(output))) == recorded.rows()  # nothing new, nothing twice


# --- batch reads and bad options ----------------------------------------------------------------


def test_batch_read_between_starting_and_ending_positions(spark_source, archive):
    recorded, _ = archive.record(numbered_payloads(0, 120))
    rid = recorded.recording_id
    after, up_to = recorded.messages[19][0], recorded.messages[99][0]
    df = (spark_source.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
          .option("recordingIds", str(rid))
          .option("startingPositions", json.dumps({str(rid): after}))
          .option("endingPositions", json.dumps({str(rid): up_to})).load())
    assert rows_of(df) == recorded.rows(after=after, up_to=up_to)
    # load(path) is archive.dir; endingPositions defaults to latest and startingPositions to earliest.
    whole = spark_source.read.format("aeron-archive").option("recordingIds", str(rid)).load(archive.archive_dir)
    assert rows_of(whole) == recorded.rows()


def test_bad_options_against_a_real_archive_are_rejected_clearly(spark_source, archive, tmp_path):
    recorded, _ = archive.record(numbered_payloads(0, 10))
    rid = recorded.recording_id
    reader = spark_source.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
    with pytest.raises(Exception, match="recordingIds: recording 987654 is not in the archive"):
        reader.option("recordingIds", "987654").load().collect()
    with pytest.raises(Exception, match="is beyond what is recorded"):
        reader.option("recordingIds", str(rid)) \
            .option("endingPositions", json.dumps({str(rid): recorded.end + 4096})).load().collect()
    with pytest.raises(Exception, match="is not a frame boundary"):
        reader.option("recordingIds", str(rid)).option("startingPositions", json.dumps({str(rid): 100})) \
            .load().collect()
    missing = tmp_path / "no-archive"
    missing.mkdir()
    with pytest.raises(Exception, match="option archive.dir"):
        spark_source.read.format("aeron-archive").option("recordingIds", str(rid)).load(str(missing)).collect()
    assert os.listdir(missing) == []
