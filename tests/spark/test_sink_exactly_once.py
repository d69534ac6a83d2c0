"""writeStream / write format("aeron-archive") against a real `aeron-archive serve` sidecar.

Checks by reading the sink recording back with the source: every row exactly once, in order, after
several micro-batches, after a replayed batch (the checkpoint's last commits/N deleted and the query
restarted) and after an aborted batch; and batch writes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


from aeron_spark.connector import register

from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.integration

STREAM_ID = 4001


@pytest.fixture(scope="module")
def archive(tmp_path_factory, spark):
    register(spark)
    directory = tmp_path_factory.mktemp("sink-archive") / "archive"
    with running_sidecar(directory) as sidecar:
        yield directory, sidecar


def sink_rows(spark, archive_dir: Path, sink_id: str, stream_id: int = STREAM_ID) -> list[str]:
    rows = (spark.read.format("aeron-archive").option("archive.dir", str(archive_dir))
            .option("channel", f"alias=aeron-spark-sink:{sink_id}").option("streamId", str(stream_id))
            .load().orderBy("recording_id", "position").select("payload").collect())
    return [bytes(row.payload).decode() for row in rows]


def write_input(directory: Path, index: int, lines: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".part-{index:03d}.txt"
    temporary.write_text("\n".join(lines) + "\n")
    # Spark's file source orders files by modification time: make it follow the index.
    os.utime(temporary, (1_700_000_000 + index, 1_700_000_000 + index))
    temporary.rename(directory / f"part-{index:03d}.txt")


def lines_of(index: int, count: int = 200) -> list[str]:
    return [f"file{index}-line{j}" for j in range(count)]


def run_available_now(spark, source_dir: Path, archive_dir: Path, checkpoint: Path, **options):
    stream = (spark.readStream.format("text").option("maxFilesPerTrigger", "1").load(str(source_dir))
              .selectExpr("value AS payload"))
    writer = (stream.writeStream.format("aeron-archive").option("archive.dir", str(archive_dir))
              .option("channel", "aeron:ipc").option("streamId", str(STREAM_ID))
              .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.start()
    try:
        query.awaitTermination(180)
    finally:
        query.stop()
    return query


def test_micro_batches_and_a_replayed_batch_give_every_row_exactly_once(spark, archive, tmp_path):
    archive_dir, _ = archive
    source_dir, checkpoint = tmp_path / "in", tmp_path / "chk"
    for index in range(3):
        write_input(source_dir, index, lines_of(index))
    query = run_available_now(spark, source_dir, archive_dir, checkpoint)
    assert query.exception() is None
    expected = [line for index in range(3) for line in lines_of(index)]
    assert sink_rows(spark, archive_dir, query.id) == expected

    # Forget that batch 2 was committed: Spark replays it and calls commit(…, 2) again.
    commits = sorted(int(name) for name in os.listdir(checkpoint / "commits") if name.isdigit())
    assert commits == [0, 1, 2]
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)  # Hadoop's checksum of it
    write_input(source_dir, 3, lines_of(3))
    restarted = run_available_now(spark, source_dir, archive_dir, checkpoint)
    assert restarted.exception() is None and restarted.id == query.id
    assert sink_rows(spark, archive_dir, query.id) == expected + lines_of(3)
    # Staged under the checkpoint by default (Spark passes checkpointLocation to the sink), not archive.dir.
    staging = checkpoint / "aeron-sink-staging" / query.id
    assert sorted(os.listdir(staging)) == ["_committed.json"]
    assert not (archive_dir / "spark-sink-staging" / query.id).exists()


def test_an_aborted_batch_leaves_nothing_visible(spark, archive, tmp_path):
    from pyspark.sql.functions import udf

    archive_dir, _ = archive
    source_dir, checkpoint = tmp_path / "in", tmp_path / "chk"
    write_input(source_dir, 0, lines_of(0, 50))
    write_input(source_dir, 1, lines_of(1, 50) + ["boom"])

    @udf("string")
    def explode_on_boom(value: str) -> str:
        if value == "boom":
            raise ValueError("injected task failure")
        return value

    stream = (spark.readStream.format("text").option("maxFilesPerTrigger", "1").load(str(source_dir))
              .select(explode_on_boom("value").alias("payload")))
    query = (stream.writeStream.format("aeron-archive").option("archive.dir", str(archive_dir))
             .option("channel", "aeron:ipc").option("streamId", str(STREAM_ID)).option("sink.id", "aborting")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        with pytest.raises(Exception, match="injected task failure"):
            query.awaitTermination(180)
    finally:
        query.stop()
    assert sink_rows(spark, archive_dir, "aborting") == lines_of(0, 50)
    staging = checkpoint / "aeron-sink-staging" / "aborting"
    assert not [name for name in os.listdir(staging) if name.endswith(".arrow")]


def test_batch_writes_append_one_committed_batch_each(spark, archive):
    archive_dir, _ = archive
    first = spark.createDataFrame([(f"row{i}".encode(), i) for i in range(300)], "payload binary, reserved_value bigint")
    second = spark.createDataFrame([(f"more{i}",) for i in range(100)], "payload string")
    for frame in (first.repartition(3), second):
        (frame.write.format("aeron-archive").mode("append").option("archive.dir", str(archive_dir))
         .option("channel", "aeron:ipc").option("streamId", str(STREAM_ID)).option("sink.id", "nightly").save())
    rows = sink_rows(spark, archive_dir, "nightly")
    assert sorted(rows[:300]) == sorted(f"row{i}" for i in range(300)) and len(rows) == 400
    assert rows[300:] == [f"more{i}" for i in range(100)]


def test_wrong_columns_are_rejected_before_anything_runs(spark, archive):
    archive_dir, _ = archive
    frame = spark.createDataFrame([(1, "x")], "id int, text string")
    with pytest.raises(Exception, match="accepts the columns payload"):
        (frame.write.format("aeron-archive").mode("append").option("archive.dir", str(archive_dir))
         .option("channel", "aeron:ipc").option("streamId", str(STREAM_ID)).option("sink.id", "bad").save())
