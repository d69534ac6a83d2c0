"""The aeron-archive source inside a real local[2] Spark session; no archive is needed."""

import pytest
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType, TimestampType

from aeron_spark.connector import register

EXPECTED = StructType([  # NOT NULL: no value is ever null (and Spark converts such columns faster)
    StructField("recording_id", LongType(), nullable=False),
    StructField("position", LongType(), nullable=False),
    StructField("payload", BinaryType(), nullable=False),
    StructField("session_id", IntegerType(), nullable=False),
    StructField("stream_id", IntegerType(), nullable=False),
    StructField("reserved_value", LongType(), nullable=False),
])


@pytest.fixture(scope="module")
def registered(spark):
    register(spark)
    return spark


def test_schema_of_batch_and_stream_reads(registered):
    options = {"archive.controlChannel": "aeron:ipc", "recordingIds": "1"}
    batch = registered.read.format("aeron-archive").options(**options).load()
    assert batch.schema == EXPECTED
    stream = registered.readStream.format("aeron-archive").options(**options, checkpointLocation="/tmp/unused") \
        .option("includeTimestamp", "true").load()
    assert stream.isStreaming
    assert stream.schema == StructType(EXPECTED.fields + [StructField("timestamp", TimestampType(), nullable=False)])


def test_unknown_option_is_rejected_with_a_suggestion(registered):
    with pytest.raises(Exception) as raised:
        registered.read.format("aeron-archive").option("archive.controlChannel", "aeron:ipc") \
            .option("recordingIds", "1").option("startingOffsets", "earliest").load()
    message = str(raised.value)
    assert "unknown option" in message and "startingPositions" in message


def test_mode_specific_checks_run_when_the_reader_is_built(registered):
    with pytest.raises(Exception) as raised:
        registered.read.format("aeron-archive").options(**{
            "archive.controlChannel": "aeron:ipc", "recordingIds": "1", "maxBytesPerTrigger": "1m"}).load().collect()
    assert "maxBytesPerTrigger only applies to spark.readStream" in str(raised.value)
    with pytest.raises(Exception) as raised:
        registered.readStream.format("aeron-archive").options(**{
            "archive.controlChannel": "aeron:ipc", "recordingIds": "1", "endingPositions": "latest"}).load() \
            .writeStream.format("noop").start().awaitTermination(30)
    assert "endingPositions only applies to spark.read (batch)" in str(raised.value)
