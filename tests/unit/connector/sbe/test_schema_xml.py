"""Schema XML errors name the element, its name and its line."""

import pytest

from aeron_spark.connector.sbe import SbeSchemaError, parse_schema
from tests.unit.connector.sbe.sbe_fixtures import READER_SCHEMA

HEADER = """<sbe:messageSchema xmlns:sbe="http://fixprotocol.io/2016/sbe" id="1" version="0">
  <types>
    <composite name="messageHeader">
      <type name="blockLength" primitiveType="uint16"/><type name="templateId" primitiveType="uint16"/>
      <type name="schemaId" primitiveType="uint16"/><type name="version" primitiveType="uint16"/>
    </composite>
    {types}
  </types>
  {messages}
</sbe:messageSchema>"""


def schema(types: str = "", messages: str = "") -> str:
    return HEADER.format(types=types, messages=messages)


def test_the_market_data_schema_parses_with_its_layout():
    parsed = parse_schema(READER_SCHEMA.read_text())
    assert (parsed.id, parsed.version, parsed.byte_order, parsed.header.size) == (42, 1, "<", 8)
    trade = parsed.message("Trade")
    assert trade.block_length == 43 and trade.field("orderId").offset == 35 and trade.field("orderId").since_version == 1
    assert parsed.message(4).groups[0].block_length == 14


@pytest.mark.parametrize("types, messages, expected", [
    ("", '<message name="M" id="1"><field name="a" id="1" type="Missing"/></message>',
     r"<field name='a'> \(line 9\): type 'Missing' is not defined"),
    ('<type name="T" primitiveType="int128"/>', "", r"<type name='T'> \(line 7\): primitiveType='int128'"),
    ('<type name="T" primitiveType="int8" presence="sometimes"/>', "", r"<type name='T'>.*presence='sometimes'"),
    ('<enum name="E" encodingType="uint8"><validValue name="A">1</validValue><oops/></enum>', "",
     r"<oops> \(line 7\): unsupported element inside <enum>"),
    ("", '<message name="M" id="1"><group name="g" id="2"><field name="a" id="3" type="int8"/></group></message>',
     r"<group name='g'>.*type 'groupSizeEncoding' is not defined"),
    ("", '<message name="M" id="1"><data name="d" id="2" type="int8"/></message>',
     r"<data name='d'>.*must be a composite with an unsigned integer member 'length'"),
    ("", '<message name="M" id="1" blockLength="1"><field name="a" id="1" type="int32"/></message>',
     r"<message name='M'>.*blockLength=1 is less than its fields need \(4\)"),
    ("", '<message name="M" id="1"><data name="d" id="2" type="x"/><field name="a" id="1" type="int8"/></message>',
     r"<data name='d'>|<field name='a'>"),
    ("", '<message name="M" id="1"/><message name="M" id="2"/>', r"two messages share 'M'"),
    ('<type name="T" primitiveType="int8" nullValue="300"/>', "", r"value '300' does not fit int8"),
])
def test_malformed_or_unsupported_elements_are_named(types, messages, expected):
    with pytest.raises(SbeSchemaError, match=expected):
        parse_schema(schema(types, messages), "market.xml")


def test_not_xml_and_not_a_message_schema():
    with pytest.raises(SbeSchemaError, match="market.xml: not well-formed XML"):
        parse_schema("<messageSchema", "market.xml")
    with pytest.raises(SbeSchemaError, match="root element must be messageSchema, found types"):
        parse_schema("<types/>", "market.xml")


def test_an_unknown_message_lists_the_known_ones():
    with pytest.raises(SbeSchemaError, match=r"no message 'Quote'; its messages: Trade \(1\)"):
        parse_schema(READER_SCHEMA.read_text()).message("Quote")
