"""Schemas and the independent encoder shared by the SBE tests.

The independent encoder is the PyPI package ``sbe`` (sbe-python 0.4.3), a third-party SBE codec:
it writes the message header, root blocks, composites, enums, sets, char arrays and one level of
repeating groups from a schema XML. It cannot write nested groups, var data, non-char arrays or
big-endian schemas, and it ignores sinceVersion (it writes every field of the schema it is given),
so an older or newer producer is that same encoder given the v0 or v2 schema file. The constructs
it cannot write are covered by reference bytes in test_reference_layouts.py.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import sbe

from aeron_spark.connector.sbe import SbeDecoder, parse_schema

HERE = Path(__file__).parent
READER_SCHEMA = HERE / "market_data_v1.xml"
V0_SCHEMA = HERE / "market_data_v0.xml"
V2_SCHEMA = HERE / "market_data_v2.xml"

INT32_NULL = -(1 << 31)
INT64_NULL = -(1 << 63)


def encoder(path: Path) -> sbe.Schema:
    with open(path) as xml:
        return sbe.Schema.parse(xml)


def encode(path: Path, template_id: int, values: dict) -> bytes:
    library = encoder(path)
    return library.encode(library.messages[template_id], values)


def reader_decoder() -> SbeDecoder:
    return SbeDecoder(parse_schema(READER_SCHEMA.read_text(), str(READER_SCHEMA)))


def decode_rows(payloads: list[bytes], message: str, decoder: SbeDecoder | None = None) -> list[dict | None]:
    decoder = decoder or reader_decoder()
    return decoder.decode_message(pa.array(payloads, pa.binary()), decoder.schema.message(message)).to_pylist()


def trade(**overrides) -> dict:
    values = {"tradeId": 7, "price": {"mantissa": 12345, "exponent": -2}, "quantity": 100, "side": "Sell",
              "flags": ["Aggressor", "Block"], "transactTime": 1_700_000_000_000_000_000, "venue": "XNYS",
              "orderId": 99}
    values.update(overrides)
    return values


def book(levels: list[dict], **overrides) -> dict:
    values = {"securityId": 5, "transactTime": 6, "levels": levels}
    values.update(overrides)
    return values
