"""Messages written by a third-party SBE encoder (sbe-python, see sbe_fixtures) decode to the values
it was given: root fields, composites, enums, sets, char arrays, optional nulls, groups, and a
version-1 reader decoding version-0 and version-2 producers."""

from decimal import Decimal

import pyarrow as pa
import pytest

from tests.unit.connector.sbe.sbe_fixtures import (
    INT32_NULL,
    INT64_NULL,
    READER_SCHEMA,
    V0_SCHEMA,
    V2_SCHEMA,
    book,
    decode_rows,
    encode,
    reader_decoder,
    trade,
)

# Each test runs with the C helper and with the numpy fallback (tests/unit/connector/conftest.py).
pytestmark = pytest.mark.usefixtures("sbe_decoding_path")


def test_root_block_fields_of_every_kind():
    payload = encode(READER_SCHEMA, 1, trade(transactTime=(1 << 63) + 5))
    assert decode_rows([payload], "Trade") == [{
        "tradeId": 7, "price": {"mantissa": 12345, "exponent": -2}, "quantity": 100, "side": "Sell",
        "flags": ["Aggressor", "Block"], "transactTime": Decimal((1 << 63) + 5), "venue": "XNYS", "orderId": 99}]


def test_optional_null_values_are_null_and_short_char_strings_stop_at_nul():
    payload = encode(READER_SCHEMA, 1, trade(orderId=INT64_NULL, venue="XL", flags=[]))
    row = decode_rows([payload], "Trade")[0]
    assert row["orderId"] is None and row["venue"] == "XL" and row["flags"] == []


def test_a_group_of_entries_with_a_null_inside():
    levels = [{"price": {"mantissa": 10, "exponent": -1}, "size": 3, "side": "Buy"},
              {"price": {"mantissa": 11, "exponent": -1}, "size": INT32_NULL, "side": "Sell"}]
    payloads = [encode(READER_SCHEMA, 4, book(levels)), encode(READER_SCHEMA, 4, book([], securityId=6))]
    rows = decode_rows(payloads, "BookSnapshot")
    assert rows[0]["levels"] == [{"price": {"mantissa": 10, "exponent": -1}, "size": 3, "side": "Buy"},
                                 {"price": {"mantissa": 11, "exponent": -1}, "size": None, "side": "Sell"}]
    assert rows[1] == {"securityId": 6, "transactTime": Decimal(6), "levels": []}


def test_several_templates_in_one_batch_are_split_by_template_id():
    payloads = [encode(READER_SCHEMA, 1, trade(tradeId=1)), encode(READER_SCHEMA, 4, book([])),
                encode(READER_SCHEMA, 1, trade(tradeId=2)), b"\x01"]
    decoded = reader_decoder().decode(pa.array(payloads, pa.binary()))
    assert decoded.template_ids.tolist() == [1, 4, 1, -1]
    trades = decoded.by_message["Trade"]
    assert trades.rows.tolist() == [0, 2] and [r["tradeId"] for r in trades.values.to_pylist()] == [1, 2]
    assert decoded.by_message["BookSnapshot"].rows.tolist() == [1]


def test_a_version_1_reader_decodes_a_version_0_producer():
    """The v0 Trade lacks orderId (sinceVersion 1): its block is 8 bytes shorter and the field is NULL."""
    levels = [{"price": {"mantissa": 1, "exponent": 0}, "size": 2, "side": "Buy"}]
    payloads = [encode(V0_SCHEMA, 1, {k: v for k, v in trade().items() if k != "orderId"}),
                encode(V0_SCHEMA, 4, book(levels)), encode(READER_SCHEMA, 1, trade(tradeId=8))]
    decoder = reader_decoder()
    trades = decode_rows(payloads, "Trade", decoder)
    assert trades[0]["orderId"] is None and trades[0]["venue"] == "XNYS" and trades[0]["tradeId"] == 7
    assert trades[2]["orderId"] == 99 and trades[2]["tradeId"] == 8
    assert decode_rows(payloads, "BookSnapshot", decoder)[1]["levels"] == [
        {"price": {"mantissa": 1, "exponent": 0}, "size": 2, "side": "Buy"}]


def test_a_version_1_reader_skips_what_a_version_2_producer_added():
    """v2 appends a field to Trade and to BookSnapshot and one to each level: the larger blockLengths
    (message and group) are skipped, so the following group entries are still found."""
    levels = [{"price": {"mantissa": 10, "exponent": -1}, "size": 3, "side": "Buy", "orderCount": 4},
              {"price": {"mantissa": 12, "exponent": -1}, "size": 5, "side": "Sell", "orderCount": 6}]
    payloads = [encode(V2_SCHEMA, 1, trade(settlementCurrency="EUR")),
                encode(V2_SCHEMA, 4, book(levels, bookFlags=3))]
    assert decode_rows(payloads, "Trade")[0] == decode_rows([encode(READER_SCHEMA, 1, trade())], "Trade")[0]
    snapshot = decode_rows(payloads, "BookSnapshot")[1]
    assert snapshot["transactTime"] == Decimal(6)
    assert snapshot["levels"] == [{"price": {"mantissa": 10, "exponent": -1}, "size": 3, "side": "Buy"},
                                  {"price": {"mantissa": 12, "exponent": -1}, "size": 5, "side": "Sell"}]


def test_fixed_size_messages_back_to_back_and_scattered_decode_alike():
    """The strided fast path (equal-sized messages) and the gather path give the same rows."""
    uniform = [encode(READER_SCHEMA, 1, trade(tradeId=i, quantity=i * 3)) for i in range(50)]
    mixed = [p for i, t in enumerate(uniform) for p in ([t, b"\x00" * (i % 3)] if i % 2 else [t])]
    fast = decode_rows(uniform, "Trade")
    slow = [row for row in decode_rows(mixed, "Trade") if row is not None]
    assert fast == slow and [r["quantity"] for r in fast] == [i * 3 for i in range(50)]


def test_root_field_reader_reads_one_time_field():
    decoder = reader_decoder()
    read_order_id = decoder.root_field_reader("Trade", "orderId")
    assert read_order_id(encode(READER_SCHEMA, 1, trade(orderId=5))) == 5
    assert read_order_id(encode(READER_SCHEMA, 1, trade(orderId=INT64_NULL))) is None
    assert read_order_id(encode(V0_SCHEMA, 1, {k: v for k, v in trade().items() if k != "orderId"})) is None
    assert read_order_id(encode(READER_SCHEMA, 4, book([]))) is None
    assert decoder.root_field_reader("Trade", "transactTime")(encode(READER_SCHEMA, 1, trade())) == 1_700_000_000_000_000_000
