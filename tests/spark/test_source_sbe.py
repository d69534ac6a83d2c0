"""SBE decoding in Spark: a recording of SBE messages (written by the third-party sbe-python encoder,
recorded through the REAL sidecar) read into typed columns in a batch and in a stream, and
``from_sbe`` on a binary column of an ordinary DataFrame."""

from __future__ import annotations

from decimal import Decimal

import pytest

from aeron_spark.connector import from_sbe, register
from tests.spark.source_fixtures import RecordingArchive, run_available_now
from tests.support.sidecar import running_sidecar
from tests.unit.connector.sbe.sbe_fixtures import INT64_NULL, READER_SCHEMA, V0_SCHEMA, book, encode, trade

pytestmark = pytest.mark.integration

LEVELS = [{"price": {"mantissa": 10, "exponent": -1}, "size": 3, "side": "Buy"},
          {"price": {"mantissa": 11, "exponent": -1}, "size": 4, "side": "Sell"}]


def market_data(count: int) -> list[bytes]:
    """Trades (every 5th from a version-0 producer, every 7th with a NULL orderId) between book snapshots."""
    payloads = []
    for index in range(count):
        if index % 4 == 3:
            payloads.append(encode(READER_SCHEMA, 4, book(LEVELS[: index % 3], securityId=index)))
        elif index % 5 == 0:
            payloads.append(encode(V0_SCHEMA, 1, {k: v for k, v in trade(tradeId=index).items() if k != "orderId"}))
        else:
            payloads.append(encode(READER_SCHEMA, 1, trade(tradeId=index, orderId=INT64_NULL if index % 7 == 0 else index)))
    return payloads


def expected_trade(index: int) -> tuple:
    order_id = None if index % 5 == 0 or index % 7 == 0 else index
    return index, order_id, "Sell", ["Aggressor", "Block"], "XNYS", Decimal(1_700_000_000_000_000_000)


@pytest.fixture(scope="module")
def recorded(spark, tmp_path_factory):
    register(spark)
    with running_sidecar(tmp_path_factory.mktemp("sidecar") / "archive") as sidecar:
        archive = RecordingArchive(sidecar)
        try:
            recording, _ = archive.record(market_data(400), stop=True)
            yield archive, recording
        finally:
            archive.close()


def test_a_batch_read_of_one_message_gives_its_fields_as_typed_columns(spark, recorded):
    archive, recording = recorded
    frame = (spark.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
             .option("recordingIds", recording.recording_id).option("sbe.schema", str(READER_SCHEMA))
             .option("sbe.messages", "Trade").load())
    assert frame.schema["tradeId"].dataType.simpleString() == "bigint"
    assert frame.schema["price"].dataType.simpleString() == "struct<mantissa:bigint,exponent:tinyint>"
    assert not frame.schema["price"].dataType["mantissa"].nullable  # a required member: NOT NULL
    assert "stream_id" not in frame.columns  # the raw rows' session_id/stream_id/reserved_value: on request
    rows = frame.select("tradeId", "orderId", "side", "flags", "venue", "transactTime", "position").collect()
    assert sorted(r[:6] for r in rows) == [expected_trade(i) for i in range(400) if i % 4 != 3]
    positions = {position for position, _ in recording.messages}
    assert {r.position for r in rows} <= positions


def test_a_user_schema_with_a_subset_of_the_decoded_columns_reads_only_those(spark, recorded):
    archive, recording = recorded
    frame = (spark.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
             .option("recordingIds", recording.recording_id).option("sbe.schema", str(READER_SCHEMA))
             .option("sbe.messages", "Trade").schema("orderId bigint, tradeId bigint not null").load())
    assert frame.columns == ["orderId", "tradeId"]
    rows = sorted((r.tradeId, r.orderId) for r in frame.collect())
    assert rows == [(i, expected_trade(i)[1]) for i in range(400) if i % 4 != 3]


def test_a_user_schema_may_ask_for_the_stream_id_and_declare_nested_fields_nullable(spark, recorded):
    archive, recording = recorded
    frame = (spark.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
             .option("recordingIds", recording.recording_id).option("sbe.schema", str(READER_SCHEMA))
             .option("sbe.messages", "Trade")
             .schema("tradeId bigint, stream_id int, price struct<mantissa:bigint,exponent:tinyint>").load())
    assert frame.schema["price"].dataType["mantissa"].nullable
    raw = (spark.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
           .option("recordingIds", recording.recording_id).load())
    rows = frame.collect()
    assert len(rows) == 300 and {r.stream_id for r in rows} == {r.stream_id for r in raw.select("stream_id").collect()}
    assert all(r.price is not None and r.price.exponent is not None for r in rows)


def test_a_stream_of_several_messages_gives_a_struct_column_each(spark, recorded, tmp_path):
    archive, recording = recorded
    run_available_now(spark, archive, tmp_path / "chk", query_name="sbe_stream",
                      recordingIds=recording.recording_id, startingPositions="earliest",
                      sbe_schema=str(READER_SCHEMA), sbe_messages="Trade,BookSnapshot")
    rows = spark.table("sbe_stream").select("template_id", "Trade.tradeId", "BookSnapshot").collect()
    assert len(rows) == 400
    books = sorted((r.BookSnapshot.securityId, len(r.BookSnapshot.levels)) for r in rows if r.template_id == 4)
    assert books == [(i, (i % 3)) for i in range(400) if i % 4 == 3]
    assert sorted(r.tradeId for r in rows if r.template_id == 1) == [i for i in range(400) if i % 4 != 3]


def test_from_sbe_decodes_a_binary_column_of_any_dataframe(spark):
    payloads = market_data(12) + [b"not sbe"]
    frame = spark.createDataFrame([(i, p) for i, p in enumerate(payloads)], "id int, value binary")
    decoded = frame.select("id", from_sbe(frame.value, str(READER_SCHEMA), "BookSnapshot").alias("book"))
    rows = {r.id: r.book for r in decoded.collect()}
    assert [i for i, b in sorted(rows.items()) if b is not None] == [3, 7, 11]
    assert rows[7].levels[0].price.mantissa == 10 and rows[7].levels[0].side == "Buy"
    text = READER_SCHEMA.read_text()
    trades = frame.select(from_sbe("value", text, 1).alias("t")).where("t is not null").collect()
    assert sorted(r.t.tradeId for r in trades) == [i for i in range(12) if i % 4 != 3]
