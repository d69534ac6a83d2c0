"""The whole source inside real Spark (local[2]) over an in-memory fake archive.

Checks the Spark wiring before the sidecar exists: offsets going through Spark's JSON log,
partitions pickled to executor workers, Arrow batches accepted by Spark's schema check,
Trigger.AvailableNow with maxBytesPerTrigger, and a batch read with the timestamp column.
The fake archive is rebuilt from a seed in every Python process (driver-side runner, executors),
and the test code is shipped to workers by value (cloudpickle), as workers cannot import tests.
"""

import os
import random
import sys

import pytest
from pyspark import cloudpickle

from aeron_spark.connector.data_source import AeronArchiveDataSource
from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader
from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader
from tests.support import fake_archive, synthetic_log

for module in (fake_archive, synthetic_log, sys.modules[__name__]):
    cloudpickle.register_pickle_by_value(module)

TERM = 64 * 1024


def build_archive(seed: int):
    """Two recordings of stream 1001 with fragmented messages and padding, the same in every process."""
    rng = random.Random(seed)
    archive = fake_archive.FakeArchive(block_jitter=random.Random(seed))
    for recording_id, session_id in ((3, 31), (4, 41)):
        log = synthetic_log.SyntheticLog(term_length=TERM, mtu=1408, session_id=session_id)
        for index in range(150):
            log.append(rng.randbytes(rng.choice([0, 7, 500, 1376, 1377, 4000, 9000])),
                       reserved_value=1_700_000_000_000_000_000 + index * 1000)
        archive.add(recording_id, log, "aeron:udp?endpoint=localhost:40123", active=False)
    return archive


class FakeOpener:
    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, connection):
        return build_archive(self.seed)


class FakeArchiveSource(AeronArchiveDataSource):
    @classmethod
    def name(cls):
        return "aeron-archive-fake"

    def reader(self, schema):
        options = super().reader(schema).options  # validated and column-selected as the real source does
        opener = FakeOpener(int(self.options["replay.streamId"]))
        return AeronArchiveBatchReader(options, opener, opener)

    def streamReader(self, schema):
        options = super().streamReader(schema).options
        opener = FakeOpener(int(self.options["replay.streamId"]))
        return AeronArchiveStreamReader(options, opener, opener)


def expected_rows(seed):
    archive = build_archive(seed)
    return sorted((rid, m.end_position, m.payload) for rid, rec in archive.recordings.items()
                  for m in rec.log.messages)


@pytest.fixture(scope="module")
def fake_source(spark):
    spark.dataSource.register(FakeArchiveSource)
    return spark


OPTIONS = {"archive.controlChannel": "aeron:ipc", "channel": "aeron:udp", "streamId": "1001",
           "replay.streamId": "11", "startingPositions": "earliest"}


def test_available_now_reads_every_message_once_in_several_batches(fake_source, tmp_path):
    checkpoint = str(tmp_path / "chk")
    query = (fake_source.readStream.format("aeron-archive-fake").options(**OPTIONS)
             .option("maxBytesPerTrigger", str(2 * TERM)).option("checkpointLocation", checkpoint).load()
             .writeStream.format("memory").queryName("fake_stream").trigger(availableNow=True)
             .option("checkpointLocation", checkpoint).start())
    try:
        query.awaitTermination(120)
        assert query.exception() is None
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        rows = fake_source.sql("select recording_id, position, payload, session_id from fake_stream").collect()
    finally:
        query.stop()
    assert len(progress) >= 3
    assert sorted((r.recording_id, r.position, bytes(r.payload)) for r in rows) == expected_rows(11)
    assert {(r.recording_id, r.session_id) for r in rows} == {(3, 31), (4, 41)}
    assert os.listdir(os.path.join(checkpoint, "aeron-archive-source"))[0].startswith("initial-positions-")
    assert progress[-1]["sources"][0]["latestOffset"] is not None


def test_batch_read_with_timestamps_and_small_partitions(fake_source):
    df = (fake_source.read.format("aeron-archive-fake").options(**OPTIONS).option("replay.streamId", "12")
          .option("maxBytesPerPartition", "64k").option("includeTimestamp", "true").load())
    assert df.rdd.getNumPartitions() > 4
    rows = df.collect()
    assert sorted((r.recording_id, r.position, bytes(r.payload)) for r in rows) == expected_rows(12)
    first = min(rows, key=lambda r: r.reserved_value)
    assert first.timestamp.year == 2023


def test_a_schema_selects_columns_and_min_partitions_spreads_a_batch(fake_source):
    """.schema(...) picks columns (any order, NOT NULL allowed); minPartitions splits a small batch."""
    df = (fake_source.read.format("aeron-archive-fake").options(**OPTIONS).option("replay.streamId", "13")
          .option("minPartitions", "4").schema("payload binary not null, position bigint, recording_id bigint")
          .load())
    assert df.columns == ["payload", "position", "recording_id"]
    assert df.rdd.getNumPartitions() >= 4
    rows = df.collect()
    assert sorted((r.recording_id, r.position, bytes(r.payload)) for r in rows) == expected_rows(13)


@pytest.mark.parametrize("schema, complaint", [
    ("payload string", "unknown column or wrong type: payload string"),
    ("offset bigint", "unknown column or wrong type: offset bigint"),
])
def test_a_schema_with_unknown_columns_or_types_is_rejected(fake_source, schema, complaint):
    with pytest.raises(Exception) as error:
        (fake_source.read.format("aeron-archive-fake").options(**OPTIONS).option("replay.streamId", "14")
         .schema(schema).load().collect())
    assert complaint in str(error.value) and "recording_id bigint, position bigint, payload binary" in str(error.value)
