"""The source's sbe.* options and the conversion of its batches of whole messages into typed rows."""

import pyarrow as pa
import pytest

from aeron_spark.connector.options import OptionError
from aeron_spark.connector.source.message_batches import arrow_schema
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.sbe_columns import SbeColumns, parse_sbe_options
from tests.unit.connector.sbe.sbe_fixtures import READER_SCHEMA, book, encode, trade

# Each test runs with the C helper and with the numpy fallback (tests/unit/connector/conftest.py).
pytestmark = pytest.mark.usefixtures("sbe_decoding_path")


def base_batch(payloads: list[bytes]) -> pa.RecordBatch:
    count = len(payloads)
    return pa.RecordBatch.from_arrays([
        pa.array([9] * count, pa.int64()), pa.array(range(32, 32 * (count + 1), 32), pa.int64()),
        pa.array(payloads, pa.binary()), pa.array([1] * count, pa.int32()), pa.array([2] * count, pa.int32()),
        pa.array([0] * count, pa.int64())], schema=arrow_schema(False))


PAYLOADS = [encode(READER_SCHEMA, 1, trade(tradeId=1)), encode(READER_SCHEMA, 4, book([])),
            b"junk", encode(READER_SCHEMA, 1, trade(tradeId=2))]


def test_one_message_gives_its_fields_as_columns_and_skips_the_rest():
    columns = SbeColumns(parse_sbe_options({"sbe.schema": str(READER_SCHEMA), "sbe.messages": "Trade"}), False)
    batch = columns.convert(base_batch(PAYLOADS))
    assert batch.schema.names[:3] == ["recording_id", "position", "tradeId"]  # no template_id: it is constant
    # session_id, stream_id and reserved_value only on request (a user schema): the message and its offset
    assert not {"session_id", "stream_id", "reserved_value"} & set(batch.schema.names)
    assert batch.schema.names[-1] == "orderId"
    assert batch.column("tradeId").to_pylist() == [1, 2] and batch.column("position").to_pylist() == [32, 128]
    # NOT NULL where no value can be NULL: not an enum (unknown values), nor a field newer than version 0
    nullable = {f.name for f in batch.schema if f.nullable}
    assert {"side", "orderId"} <= nullable and not nullable & {"tradeId", "price", "flags", "venue", "quantity"}
    # ... and so are a composite's required members (Spark then never asks them whether they are NULL)
    assert batch.schema.field("price").type == pa.struct([pa.field("mantissa", pa.int64(), nullable=False),
                                                          pa.field("exponent", pa.int8(), nullable=False)])


def test_composite_members_that_can_be_null_stay_nullable():
    settings = parse_sbe_options({"sbe.schema": str(READER_SCHEMA), "sbe.messages": "MarketDataIncrementalRefresh"})
    entry = SbeColumns(settings, False).arrow_schema.field("entries").type.value_type  # DecimalNull: optional members
    assert entry.field("price").type == pa.struct([pa.field("mantissa", pa.int64()), pa.field("exponent", pa.int8())])


def test_several_messages_give_a_struct_column_each_and_raw_keeps_the_rest():
    columns = SbeColumns(parse_sbe_options({"sbe.schema": f"file://{READER_SCHEMA}", "sbe.messages": "1, 4",
                                            "sbe.unselected": "raw"}), True)
    batch = columns.convert(base_batch(PAYLOADS).append_column(
        "timestamp", pa.array([0] * 4, pa.timestamp("us", tz="UTC"))))
    assert batch.column("template_id").to_pylist() == [1, 4, None, 1]
    assert [t and t["tradeId"] for t in batch.column("Trade").to_pylist()] == [1, None, None, 2]
    assert batch.column("BookSnapshot").to_pylist()[1]["levels"] == []
    assert batch.column("payload").to_pylist() == [None, None, b"junk", None]
    assert batch.schema.names[-1] == "timestamp"


@pytest.mark.parametrize("options, expected", [
    ({"sbe.schema": "/no/such/schema.xml"}, r"option sbe.schema='/no/such/schema.xml' cannot be read"),
    ({"sbe.schema": str(READER_SCHEMA), "sbe.messages": "Quote"}, r"option sbe.messages='Quote': .*no message"),
    ({"sbe.schema": str(READER_SCHEMA), "sbe.unselected": "keep"}, r"sbe.unselected='keep'.*skip \| raw"),
    ({"sbe.messages": "Trade"}, r"option sbe.messages needs sbe.schema"),
])
def test_bad_sbe_options_name_the_option(options, expected):
    with pytest.raises(OptionError, match=expected):
        SourceOptions.parse({"recordingIds": "1", "archive.dir": "/tmp", **options}, ReadMode.BATCH)


def test_a_field_named_like_a_standard_column_is_refused(tmp_path):
    clash = READER_SCHEMA.read_text().replace('name="tradeId"', 'name="position"')
    (tmp_path / "clash.xml").write_text(clash)
    with pytest.raises(OptionError, match="field.*position clash"):
        parse_sbe_options({"sbe.schema": str(tmp_path / "clash.xml"), "sbe.messages": "Trade"})
    assert parse_sbe_options({"sbe.schema": str(tmp_path / "clash.xml")}).messages[0] == "Trade"


def test_a_selection_of_columns_decodes_and_builds_only_those_in_its_order():
    settings = parse_sbe_options({"sbe.schema": str(READER_SCHEMA), "sbe.messages": "Trade"})
    whole = SbeColumns(settings, False).convert(base_batch(PAYLOADS))
    pruned = SbeColumns(settings, False, ("side", "position", "price"), frozenset({"position"}))
    assert pruned.input_columns() == ("payload", "position")  # the raw batches need no other column
    assert pruned.decoder.decoded_fields(pruned.messages[0])[0].name == "price"  # schema order inside the decoder
    batch = pruned.convert(base_batch(PAYLOADS).select(["payload", "position"]))
    assert batch.schema.names == ["side", "position", "price"]
    assert batch.schema.field("position").nullable and not batch.schema.field("price").nullable
    for name in batch.schema.names:
        assert batch.column(name).equals(whole.column(name))


def test_a_selection_of_standard_columns_only_decodes_nothing():
    settings = parse_sbe_options({"sbe.schema": str(READER_SCHEMA), "sbe.messages": "Trade,BookSnapshot"})
    pruned = SbeColumns(settings, False, ("template_id", "Trade"))
    assert [m.name for m in pruned.decoded_messages] == ["Trade"]
    batch = pruned.convert(base_batch(PAYLOADS).select(["payload"]))
    assert batch.column("template_id").to_pylist() == [1, 4, 1]
    assert [t and t["tradeId"] for t in batch.column("Trade").to_pylist()] == [1, None, 2]
    with pytest.raises(OptionError, match="not a selection"):
        SbeColumns(settings, False, ("tradeId",))


def test_a_user_schema_with_sbe_selects_decoded_columns_or_is_rejected_with_the_accepted_ones():
    from pyspark.sql.types import ByteType, IntegerType, LongType, StringType, StructField, StructType

    from aeron_spark.connector.data_source import select_columns
    options = SourceOptions.parse({"recordingIds": "1", "archive.dir": "/tmp", "sbe.schema": str(READER_SCHEMA),
                                   "sbe.messages": "Trade"}, ReadMode.BATCH)
    assert select_columns(None, options) is options
    chosen = select_columns(StructType([StructField("side", StringType()),
                                        StructField("tradeId", LongType(), nullable=False)]), options)
    assert chosen.output_columns == ("side", "tradeId") and chosen.nullable_columns == {"side"}
    # columns of the raw rows a user schema may ask for, and nested fields it may declare nullable
    price = StructType([StructField("mantissa", LongType()), StructField("exponent", ByteType())])
    chosen = select_columns(StructType([StructField("stream_id", IntegerType()), StructField("price", price)]), options)
    assert chosen.widened_column_types == (("price", pa.struct([pa.field("mantissa", pa.int64()),
                                                                pa.field("exponent", pa.int8())])),)
    columns = SbeColumns(chosen.sbe, False, chosen.output_columns, chosen.nullable_columns, chosen.widened_column_types)
    assert columns.input_columns() == ("payload", "stream_id")
    batch = columns.convert(base_batch(PAYLOADS).select(["payload", "stream_id"]))
    assert batch.schema == pa.schema([pa.field("stream_id", pa.int32()), pa.field("price", price_arrow := pa.struct(
        [pa.field("mantissa", pa.int64()), pa.field("exponent", pa.int8())]))])
    assert batch.column("price").type == price_arrow and batch.column("stream_id").to_pylist() == [2, 2]
    for schema, what in ((StructType([StructField("side", StringType(), nullable=False)]), "side string NOT NULL"),
                         (StructType([StructField("tradeId", StringType())]), "tradeId string"),
                         (StructType([StructField("payload", LongType())]), "payload bigint")):
        with pytest.raises(OptionError, match=what) as error:
            select_columns(schema, options)
        assert "tradeId:bigint" in str(error.value)
