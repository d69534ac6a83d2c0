"""Constructs the independent encoder cannot write (nested groups, var data, non-char arrays,
optional chars and floats, constants, big-endian), decoded from reference bytes written out by hand
here with ``struct.pack`` from the SBE 1.0 specification's layout rules, not by any encoder of ours:

* a message is the header (blockLength, templateId, schemaId, version: uint16 each), then the root
  block of ``blockLength`` bytes, then each group, then each var data field, in schema order;
* a group is its dimension header (blockLength, numInGroup) then ``numInGroup`` entries, each one
  block of the group's blockLength followed by that entry's own nested groups and var data;
* var data is its length (here uint32) followed by that many bytes;
* multi-byte values are in the schema's byteOrder.
"""

import struct
from decimal import Decimal

import pyarrow as pa
import pytest

from aeron_spark.connector.sbe import SbeDecodeError, SbeDecoder, parse_schema
from tests.unit.connector.sbe.sbe_fixtures import INT64_NULL, decode_rows, reader_decoder

# Each test runs with the C helper and with the numpy fallback (tests/unit/connector/conftest.py).
pytestmark = pytest.mark.usefixtures("sbe_decoding_path")

NAN_BITS = struct.pack("<d", float("nan"))


def header(block_length: int, template_id: int, version: int = 1, order: str = "<") -> bytes:
    return struct.pack(order + "HHHH", block_length, template_id, 42, version)


def refresh(transact_time: int, entries: list[tuple]) -> bytes:
    """MarketDataIncrementalRefresh v1: entries of (mantissa, exponent, size, securityId, action, orders)."""
    body = struct.pack("<QB", transact_time, 0b011) + struct.pack("<HH", 18, len(entries))
    for mantissa, exponent, size, security_id, action, orders in entries:
        body += struct.pack("<qbiic", mantissa, exponent, size, security_id, action)
        body += struct.pack("<HH", 12, len(orders)) + b"".join(struct.pack("<Qi", o, q) for o, q in orders)
    return header(9, 2) + body


def security(security_id: int, ticks, currency: bytes, status: bytes, ratio_bits: bytes, symbol: bytes,
             attachment: bytes | None, version: int = 1) -> bytes:
    block = struct.pack("<i3i3sc", security_id, *ticks, currency, status) + ratio_bits + struct.pack("<H", 7)
    body = block + struct.pack("<I", len(symbol)) + symbol
    if attachment is not None:
        body += struct.pack("<I", len(attachment)) + attachment
    return header(30, 3, version) + body


def test_nested_groups_with_nulls_and_empty_groups():
    payloads = [
        refresh(5, [(10, -1, 3, 9, b"1", [(1, 2), (3, 4)]), (INT64_NULL, -128, -(1 << 31), 10, b"0", [])]),
        refresh(6, []),
        refresh(7, [(20, -2, 1, 11, b"2", [(5, 6)])]),
    ]
    rows = decode_rows(payloads, "MarketDataIncrementalRefresh")
    assert rows[0] == {"transactTime": Decimal(5), "flags": ["Aggressor", "Implied"], "entries": [
        {"price": {"mantissa": 10, "exponent": -1}, "size": 3, "securityId": 9, "action": "Change",
         "orders": [{"orderId": Decimal(1), "quantity": 2}, {"orderId": Decimal(3), "quantity": 4}]},
        {"price": {"mantissa": None, "exponent": None}, "size": None, "securityId": 10, "action": "New",
         "orders": []}]}
    assert rows[1]["entries"] == []
    assert rows[2]["entries"][0]["orders"] == [{"orderId": Decimal(5), "quantity": 6}]
    assert rows[2]["entries"][0]["action"] == "Delete"


def test_var_string_and_var_data_arrays_constants_optional_char_and_float():
    nan_ratio, ratio = NAN_BITS, struct.pack("<d", 0.25)
    payloads = [security(1, (1, 5, 25), b"USD", b"A", ratio, "ÉSZ4".encode(), b"\x00\x01\xff"),
                security(2, (2, 4, 8), b"EU\x00", b"\x00", nan_ratio, b"", b"")]
    rows = decode_rows(payloads, "SecurityDefinition")
    assert rows[0] == {"securityId": 1, "tickSizes": [1, 5, 25], "currency": "USD", "status": "A",
                       "exchange": "XCME", "defaultSide": "Buy", "ratio": 0.25, "lotSize": 7,
                       "symbol": "ÉSZ4", "attachment": b"\x00\x01\xff"}
    assert rows[1] == {"securityId": 2, "tickSizes": [2, 4, 8], "currency": "EU", "status": None,
                       "exchange": "XCME", "defaultSide": "Buy", "ratio": None, "lotSize": 7,
                       "symbol": "", "attachment": b""}


def test_var_data_newer_than_the_producer_is_null():
    row = decode_rows([security(3, (1, 1, 1), b"GBP", b"B", NAN_BITS, b"ZN", None, version=0)],
                      "SecurityDefinition")[0]
    assert row["symbol"] == "ZN" and row["attachment"] is None


def test_an_enum_value_the_schema_does_not_know_is_null():
    payload = bytearray(refresh(5, [(1, 0, 1, 1, b"9", [])]))
    assert decode_rows([bytes(payload)], "MarketDataIncrementalRefresh")[0]["entries"][0]["action"] is None


BIG_ENDIAN_SCHEMA = """<?xml version="1.0"?>
<messageSchema package="be" id="7" version="0" byteOrder="bigEndian">
  <types>
    <composite name="messageHeader">
      <type name="blockLength" primitiveType="uint16"/><type name="templateId" primitiveType="uint16"/>
      <type name="schemaId" primitiveType="uint16"/><type name="version" primitiveType="uint16"/>
    </composite>
    <composite name="groupSizeEncoding">
      <type name="blockLength" primitiveType="uint16"/><type name="numInGroup" primitiveType="uint8"/>
    </composite>
    <composite name="varAsciiEncoding">
      <type name="length" primitiveType="uint16"/>
      <type name="varData" primitiveType="char" length="0" characterEncoding="US-ASCII"/>
    </composite>
    <set name="Bits" encodingType="uint16"><choice name="low">0</choice><choice name="high">15</choice></set>
  </types>
  <message name="Tick" id="9" blockLength="16">
    <field name="a" id="1" type="int32"/>
    <field name="b" id="2" type="uint32"/>
    <field name="bits" id="3" type="Bits"/>
    <field name="f" id="4" type="float" offset="12"/>
    <group name="g" id="5"><field name="x" id="6" type="int16"/></group>
    <data name="note" id="7" type="varAsciiEncoding"/>
  </message>
</messageSchema>"""


def test_big_endian_schema_with_explicit_offsets_a_uint8_group_count_and_a_uint16_set():
    decoder = SbeDecoder(parse_schema(BIG_ENDIAN_SCHEMA))
    payload = (struct.pack(">HHHH", 16, 9, 7, 0) + struct.pack(">iIHxxf", -2, 4_000_000_000, 0x8001, 1.5)
               + struct.pack(">HB", 2, 2) + struct.pack(">hh", -3, 300) + struct.pack(">H", 2) + b"hi")
    assert decode_rows([payload, payload], "Tick", decoder)[1] == {
        "a": -2, "b": 4_000_000_000, "bits": ["low", "high"], "f": 1.5, "g": [{"x": -3}, {"x": 300}], "note": "hi"}


def test_a_truncated_group_fails_naming_the_group_and_the_payload():
    payload = refresh(5, [(10, -1, 3, 9, b"1", [(1, 2)])])
    with pytest.raises(SbeDecodeError, match=r"MarketDataIncrementalRefresh\.entries.*payload 1"):
        reader_decoder().decode(pa.array([payload, payload[:-3]], pa.binary()))


def test_a_block_shorter_than_its_header_says_fails():
    payload = header(43, 1) + b"\x00" * 20
    with pytest.raises(SbeDecodeError, match=r"Trade: the block"):
        reader_decoder().decode(pa.array([payload], pa.binary()))


def test_a_block_length_too_short_for_a_version_0_field_fails_naming_the_field():
    payload = header(20, 1) + b"\x00" * 43
    with pytest.raises(SbeDecodeError, match=r"Trade.quantity: payload 0 has blockLength 20"):
        reader_decoder().decode(pa.array([payload], pa.binary()))


def test_large_binary_payloads_and_null_payloads():
    payload = refresh(5, [(10, -1, 3, 9, b"1", [(1, 2)])])
    decoder = reader_decoder()
    rows = decoder.decode_message(pa.array([payload, None, payload], pa.large_binary()),
                                  decoder.schema.message(2)).to_pylist()
    assert rows[1] is None and rows[0] == rows[2]


def test_a_decoder_told_the_wanted_parts_decodes_only_those_and_walks_what_precedes_them():
    payloads = [security(1, (1, 5, 25), b"USD", b"A", struct.pack("<d", 0.25), b"ES", b"\x07"),
                security(2, (2, 4, 8), b"EU\x00", b"\x00", NAN_BITS, b"NQZ4", b"")]
    whole = decode_rows(payloads, "SecurityDefinition")
    schema = reader_decoder().schema
    message = schema.message("SecurityDefinition")
    pruned = SbeDecoder(schema, [message], {"SecurityDefinition": frozenset({"attachment", "lotSize"})})
    values = pruned.decode(pa.array(payloads, pa.binary())).by_message["SecurityDefinition"].values
    assert [f.name for f in pruned.decoded_fields(message)] == ["lotSize", "attachment"]
    assert values.to_pylist() == [{"lotSize": row["lotSize"], "attachment": row["attachment"]} for row in whole]
