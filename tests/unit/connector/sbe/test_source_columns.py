"""The source's sbe.* options and the conversion of its batches of whole messages into typed rows."""

import pyarrow as pa
import pytest

from aeron_spark.connector.options import OptionError
from aeron_spark.connector.source.message_batches import arrow_schema
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.sbe_columns import SbeColumns, parse_sbe_options
from tests.unit.connector.sbe.sbe_fixtures import READER_SCHEMA, book, encode, trade


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
    assert batch.schema.names[-3:] == ["session_id", "stream_id", "reserved_value"]
    assert batch.column("tradeId").to_pylist() == [1, 2] and batch.column("position").to_pylist() == [32, 128]
    # NOT NULL where no value can be NULL: not an enum (unknown values), nor a field newer than version 0
    nullable = {f.name for f in batch.schema if f.nullable}
    assert {"side", "orderId"} <= nullable and not nullable & {"tradeId", "price", "flags", "venue", "quantity"}


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
