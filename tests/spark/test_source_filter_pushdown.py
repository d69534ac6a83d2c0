"""Filter pushdown on batch reads end to end: the REAL sidecar records IPC publications (64 KiB
terms) whose messages carry their time in the reserved value (epoch ns, includeTimestamp);
Spark (local[2], spark.sql.python.filterPushdown.enabled=true) reads them with filters on
recording_id, position and timestamp.

For every filter kind the rows equal those of the unfiltered read filtered in Python, and the
replays the reader plans (its partitions) cover only the terms that can hold matching rows;
the time search's own replays are counted too (``pushdown_cost``).
"""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayPartition
from tests.spark.source_fixtures import TERM_LENGTH, numbered_payloads
from tests.unit.connector.sbe.sbe_fixtures import READER_SCHEMA, encoder, trade

pytestmark = pytest.mark.integration

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
STEP_NS = 10_000
MESSAGES = 1200  # ~2.4 MB of mixed sizes: ~37 terms of 64 KiB
LARGE_MESSAGES = 65_536  # 1 KiB each: 64 MiB, 1024 terms
SBE_TRADES = 10_000  # ~100 B each: ~15 terms


class Stamps:
    """reserved_value(i) = base + i * STEP_NS, base = the wall clock at the first message."""

    def __init__(self) -> None:
        self.base = 0

    def __call__(self, index: int) -> int:
        if not self.base:
            self.base = time.time_ns()
        return self.base + index * STEP_NS

    def micros(self, index: int) -> int:
        """Message ``index``'s stamp as its `timestamp` column holds it (µs, truncated)."""
        return self.__call__(index) // 1000

    def at(self, index: int) -> dt.datetime:
        """That time as a UTC datetime (a filter's literal)."""
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=self.micros(index))


@pytest.fixture(scope="module")
def recordings(archive):
    made = []
    for _ in range(2):
        stamps = Stamps()
        recorded, _ = archive.record(numbered_payloads(0, MESSAGES), reserved_value=stamps)
        made.append((recorded, stamps))
    return made


@pytest.fixture
def pushdown(spark_source):
    previous = spark_source.conf.get(PUSHDOWN, "false")
    spark_source.conf.set(PUSHDOWN, "true")
    try:
        yield spark_source
    finally:
        spark_source.conf.set(PUSHDOWN, previous)


def load(spark, archive, recordings):
    ids = ",".join(str(recorded.recording_id) for recorded, _ in recordings)
    return (spark.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
            .option("recordingIds", ids).option("includeTimestamp", "true").load())


def rows(dataframe):
    """(recording_id, position, payload, timestamp in epoch µs) of each row, sorted."""
    return sorted((row.recording_id, row.position, bytes(row.payload), row.micros) for row in dataframe.select(
        "recording_id", "position", "payload", F.unix_micros("timestamp").alias("micros")).collect())


def planned(archive, recordings, filters, **options_given):
    """The reader's own plan for these filters: (its ranges, the time search's cost)."""
    ids = ",".join(str(recorded.recording_id) for recorded, _ in recordings)
    options = SourceOptions.parse({"archive.dir": archive.archive_dir, "recordingIds": ids,
                                   **(options_given or {"includeTimestamp": "true"})}, ReadMode.BATCH)
    reader = AeronArchiveBatchReader(options, forget_driver_connection=None)
    for_spark = list(reader.pushFilters(filters))
    partitions = reader.partitions()
    ranges = [p.replay_range for p in partitions if isinstance(p, ReplayPartition)]
    return ranges, reader.pushdown_cost, for_spark


@pytest.fixture(scope="module")
def everything(spark_source, archive, recordings):
    return rows(load(spark_source, archive, recordings))


def test_recording_id_filters_read_only_the_matching_recordings(pushdown, archive, recordings, everything):
    (first, _), (second, _) = recordings
    df = load(pushdown, archive, recordings)
    for condition, wanted in [
        (F.col("recording_id") == second.recording_id, {second.recording_id}),
        (F.col("recording_id").isin(first.recording_id, 10_000), {first.recording_id}),
        (F.col("recording_id") < second.recording_id, {first.recording_id}),
        (F.col("recording_id") >= first.recording_id, {first.recording_id, second.recording_id}),
    ]:
        assert rows(df.filter(condition)) == [row for row in everything if row[0] in wanted]
        assert "+- Filter" not in executed_plan(df.filter(condition))  # pushed, and exact: Spark drops it
    ranges, _, for_spark = planned(archive, recordings, [In(("recording_id",), (second.recording_id, 10_000))])
    assert for_spark == [] and {r.recording_id for r in ranges} == {second.recording_id}
    assert sum(r.length for r in ranges) == second.end  # all of it (it starts at 0), nothing of the other


def executed_plan(dataframe) -> str:
    return dataframe._jdf.queryExecution().executedPlan().toString()


def test_a_position_range_reads_its_terms_only_and_exactly_its_rows(pushdown, archive, recordings, everything):
    recorded, _ = recordings[0]
    low = recorded.messages[400][0]  # a message end: the boundary case of > versus >=
    high = recorded.messages[700][0] + 32  # not a message end
    df = load(pushdown, archive, recordings).filter(
        (F.col("recording_id") == recorded.recording_id) & (F.col("position") >= low) & (F.col("position") <= high))
    assert rows(df) == [row for row in everything if row[0] == recorded.recording_id and low <= row[1] <= high]
    strictly = load(pushdown, archive, recordings).filter(F.col("position") > low)
    assert rows(strictly) == [row for row in everything if row[1] > low]

    ranges, cost, for_spark = planned(archive, recordings, [
        EqualTo(("recording_id",), recorded.recording_id), GreaterThanOrEqual(("position",), low),
        LessThanOrEqual(("position",), high)])
    assert len(for_spark) == 2 and cost.probe_replays == 0  # positions: no search, Spark trims the terms
    # whole terms around the range: from the boundary below the first row to the one at/after the last
    assert [(r.recording_id, r.start, r.end) for r in ranges] == [
        (recorded.recording_id, (low - 1) // TERM_LENGTH * TERM_LENGTH, -(-high // TERM_LENGTH) * TERM_LENGTH)]


def test_a_time_range_reads_a_few_terms_and_exactly_its_rows(pushdown, archive, recordings, everything):
    recorded, stamps = recordings[1]
    start, end = stamps.at(500), stamps.at(560)
    df = load(pushdown, archive, recordings).filter((F.col("timestamp") >= start) & (F.col("timestamp") < end))
    expected = [row for row in everything if stamps.micros(500) <= row[3] < stamps.micros(560)]
    assert rows(df) == expected and {row[0] for row in expected} == {recorded.recording_id}
    assert [row[1] for row in expected] == [position for position, _ in recorded.messages[500:560]]

    ranges, cost, for_spark = planned(archive, recordings, [GreaterThanOrEqual(("timestamp",), start),
                                                            LessThan(("timestamp",), end)])
    assert len(for_spark) == 2  # Spark still applies time filters
    matching_bytes = recorded.messages[559][0] - recorded.messages[499][0]
    assert [r.recording_id for r in ranges] == [recorded.recording_id]
    assert sum(r.length for r in ranges) <= matching_bytes + 2 * 8192  # from the first row's frame to after the last
    terms = -(-recorded.end // TERM_LENGTH)
    # two bisections (first row, first row after) of about log2(terms) + 2 replays of at most a term
    assert cost.probe_replays <= 2 * (terms.bit_length() + 4)
    assert cost.probe_bytes <= cost.probe_replays * TERM_LENGTH


def test_reads_work_with_pushdown_off_and_give_the_same_rows(spark_source, archive, recordings, everything):
    assert spark_source.conf.get(PUSHDOWN, "false") == "false"
    recorded, stamps = recordings[0]
    df = load(spark_source, archive, recordings).filter(
        (F.col("recording_id") == recorded.recording_id) & (F.col("timestamp") > stamps.at(100)))
    assert rows(df) == [row for row in everything if row[0] == recorded.recording_id and row[3] > stamps.micros(100)]
    assert "+- *(1) Filter" in executed_plan(df)  # nothing pushed: Spark applies it all


def test_a_one_minute_like_range_of_a_64_mib_recording_replays_a_few_terms(archive):
    stamps = Stamps()
    recorded, _ = archive.record(numbered_payloads(0, LARGE_MESSAGES, sizes=(1000,)), reserved_value=stamps)
    assert recorded.end >= 64 * 1024 * 1024
    first, last = 30_000, 30_064  # 1/1000 of the recording
    ranges, cost, _ = planned(archive, [(recorded, stamps)], [
        GreaterThanOrEqual(("timestamp",), stamps.at(first)), LessThan(("timestamp",), stamps.at(last))])
    returned = recorded.messages[last - 1][0] - recorded.messages[first - 1][0]
    replayed = sum(r.length for r in ranges)
    assert returned <= replayed <= returned + 2 * 1056
    terms = -(-recorded.end // TERM_LENGTH)
    assert cost.probe_replays <= 2 * (terms.bit_length() + 4), cost
    assert cost.probe_bytes <= cost.probe_replays * TERM_LENGTH < recorded.end / 20, cost


def test_an_sbe_time_field_range_reads_its_terms_only_and_exactly_its_rows(pushdown, archive):
    """Trades stamped in their transactTime (uint64 ns: decimal(20,0) in Spark), the publisher's clock."""
    library = encoder(READER_SCHEMA)
    base = time.time_ns()
    payloads = [library.encode(library.messages[1], trade(tradeId=index, transactTime=base + index * STEP_NS))
                for index in range(SBE_TRADES)]
    recorded, _ = archive.record(payloads)
    assert recorded.end > 8 * TERM_LENGTH
    sbe = {"sbe.schema": str(READER_SCHEMA), "sbe.messages": "Trade", "sbe.timestampField": "transactTime"}
    frame = (pushdown.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
             .option("recordingIds", str(recorded.recording_id)).options(**sbe).load())
    low, high = Decimal(base + 4000 * STEP_NS), Decimal(base + 4100 * STEP_NS)
    ranged = frame.filter((F.col("transactTime") >= low) & (F.col("transactTime") <= high))
    assert sorted(row.tradeId for row in ranged.select("tradeId").collect()) == list(range(4000, 4101))
    ranges, cost, for_spark = planned(archive, [(recorded, None)], [
        GreaterThanOrEqual(("transactTime",), low), LessThanOrEqual(("transactTime",), high)], **sbe)
    assert len(for_spark) == 2
    assert sum(r.length for r in ranges) == recorded.messages[4100][0] - recorded.messages[3999][0]
    terms = -(-recorded.end // TERM_LENGTH)
    assert cost.probe_replays <= 2 * (terms.bit_length() + 4), cost
