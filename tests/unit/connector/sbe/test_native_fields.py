"""The SBE decoder's C helper (connector/sbe/fixed_fields.c through native_fields.py): byte-exact
copies and bounds, the decoder's identical results with and without it, and its silent fallback."""

import logging
import sys
import types

import numpy as np
import pyarrow as pa
import pytest

from aeron_spark.connector.sbe import SbeDecodeError, SbeDecoder, native_fields, parse_schema

NOT_BUILT = native_fields.NOT_BUILT

RNG = np.random.default_rng(2026)


def helper() -> native_fields.NativeFields:
    copier = native_fields.copier()
    assert copier is not None, NOT_BUILT
    return copier


def expected(data: np.ndarray, starts: np.ndarray, offset: int, dtype: np.dtype) -> np.ndarray:
    """The field read one record at a time (the reference)."""
    return np.array([np.frombuffer(data[s + offset:s + offset + dtype.itemsize].tobytes(), dtype=dtype)[0]
                     for s in starts], dtype=dtype.newbyteorder("="))


def test_the_package_build_built_the_helper():
    assert native_fields.built(), NOT_BUILT


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("first, stride, count", [(0, 64, 50), (3, 61, 17), (5, 9, 1), (0, 13, 0), (1, 8, 300)])
def test_strided_fields_of_every_width_are_copied_byte_exact(order, first, stride, count):
    # widths 1, 2, 4, 8 at unaligned offsets; the last record ends at the very end of the buffer
    fields = [(0, np.dtype(order + "i8")), (1, np.dtype(order + "u2")), (3, np.dtype(order + "i4")),
              (7, np.dtype("i1")), (0, np.dtype(order + "f8"))]
    fields = [(offset, dtype) for offset, dtype in fields if offset + dtype.itemsize <= stride]
    size = first + stride * count
    data = RNG.integers(0, 256, size, dtype=np.uint8)
    starts = first + stride * np.arange(count, dtype=np.int64)
    copied = helper().copy(data, first, stride, count, fields)
    for (offset, dtype), column in zip(fields, copied):
        assert column.dtype == dtype.newbyteorder("=")
        assert column.tobytes() == expected(data, starts, offset, dtype).tobytes()


@pytest.mark.parametrize("order", ["<", ">"])
def test_fields_at_explicit_record_starts_are_copied_byte_exact(order):
    data = RNG.integers(0, 256, 1000, dtype=np.uint8)
    starts = np.array([990, 0, 3, 500, 501, 77, 990], dtype=np.int64)  # any order, repeats, the end
    fields = [(0, np.dtype(order + "u8")), (8, np.dtype(order + "i2")), (2, np.dtype(order + "u4")),
              (9, np.dtype("u1"))]
    copied = helper().copy(data, 0, 0, starts.size, fields, starts=starts)
    for (offset, dtype), column in zip(fields, copied):
        assert column.tobytes() == expected(data, starts, offset, dtype).tobytes()


def test_a_width_other_than_1_2_4_8_is_copied_as_bytes():
    data = np.arange(40, dtype=np.uint8)
    copied = helper().copy(data, 1, 10, 4, [(2, np.dtype("V3"))])
    assert copied[0].tobytes() == bytes([3, 4, 5, 13, 14, 15, 23, 24, 25, 33, 34, 35])


@pytest.mark.parametrize("first, stride, count, offset, width", [
    (0, 8, 3, 0, 8),   # records 0..23 of a 23-byte buffer: one byte past the end
    (16, 0, 1, 0, 8),  # 16 + 8 > 23
    (0, 8, 2, 16, 8),  # the field lies beyond the buffer
    (-1, 8, 1, 0, 1),  # before the buffer
    (0, 1 << 60, 3, 0, 1),  # a stride whose records overflow
])
def test_a_read_past_the_buffer_is_refused_before_copying(first, stride, count, offset, width):
    data = np.zeros(23, dtype=np.uint8)
    with pytest.raises(ValueError, match="outside|past the end"):
        helper().copy(data, first, stride, count, [(offset, np.dtype(f"u{width}"))])


@pytest.mark.parametrize("starts", [[0, 16], [-1, 0], [0, 24]])
def test_explicit_starts_past_the_buffer_are_refused(starts):
    with pytest.raises(ValueError, match="outside|past the end"):
        helper().copy(np.zeros(23, dtype=np.uint8), 0, 0, len(starts), [(0, np.dtype("<u8"))],
                      starts=np.array(starts, dtype=np.int64))


def test_raw_calls_check_their_arguments():
    module = native_fields._MODULE
    data = np.zeros(64, dtype=np.uint8)
    with pytest.raises(ValueError, match="out holds"):
        module.copy_fields(data, 0, 8, 8, None, [(0, 8, np.zeros(63, np.uint8))], False)
    with pytest.raises(ValueError, match="swap needs"):
        module.copy_fields(data, 0, 8, 1, None, [(0, 3, np.zeros(3, np.uint8))], True)
    with pytest.raises(ValueError, match="starts holds"):
        module.copy_fields(data, 0, 0, 2, np.zeros(1, np.int64), [(0, 1, np.zeros(2, np.uint8))], False)
    with pytest.raises(ValueError, match="outside"):
        module.same_bytes(data, 60, 1, 2, 4)
    with pytest.raises(ValueError, match="names no name"):
        module.take_names(np.array([2], np.int32), np.array([1, 1], np.int32), b"a" * 16, 8,
                          np.zeros(2, np.int32), np.zeros(16, np.uint8))


def test_same_bytes_finds_a_difference_anywhere():
    data = np.tile(np.array([1, 2, 3, 4, 9, 9], dtype=np.uint8), 100)
    assert helper().same_bytes(data, 0, 6, 100, 4)
    assert helper().same_bytes(data, 0, 6, 0, 4)
    data[6 * 99 + 3] = 0
    assert not helper().same_bytes(data, 0, 6, 100, 4)
    assert helper().same_bytes(data, 0, 6, 99, 4)


def test_take_names_builds_an_arrow_string_column():
    names = [b"Buy", b"Sell", b"", b"AVeryLongNameOfSeventeen"]
    slots = np.array([0, 1, -1, 3, 2, 1, 0], dtype=np.int32)
    offsets, characters = helper().take_names(slots, names)
    column = pa.Array.from_buffers(pa.string(), slots.size, [None, pa.py_buffer(offsets), pa.py_buffer(characters)])
    assert column.to_pylist() == ["Buy", "Sell", "", "AVeryLongNameOfSeventeen", "", "Sell", "Buy"]
    offsets, characters = helper().take_names(np.zeros(0, np.int32), names)
    assert offsets.tolist() == [0] and characters.size == 0


# --- the decoder gives the same results on both paths ---------------------------------------------

TICK_SCHEMA = """<?xml version="1.0" encoding="UTF-8"?>
<sbe:messageSchema xmlns:sbe="http://fixprotocol.io/2016/sbe" package="t" id="77" version="0" byteOrder="{order}">
    <types>
        <composite name="messageHeader">
            <type name="blockLength" primitiveType="uint16"/>
            <type name="templateId" primitiveType="uint16"/>
            <type name="schemaId" primitiveType="uint16"/>
            <type name="version" primitiveType="uint16"/>
        </composite>
        <composite name="Decimal">
            <type name="mantissa" primitiveType="int64"/>
            <type name="exponent" primitiveType="int8"/>
        </composite>
        <enum name="Side" encodingType="uint8">
            <validValue name="Buy">1</validValue>
            <validValue name="Sell">2</validValue>
        </enum>
        <enum name="Venue" encodingType="uint16">
            <validValue name="XNYS">7</validValue>
            <validValue name="XLON">300</validValue>
        </enum>
        <set name="Flags" encodingType="uint8">
            <choice name="Aggressor">0</choice>
            <choice name="Block">3</choice>
        </set>
    </types>
    <message name="Tick" id="1" blockLength="50">
        <field name="tradeId" id="1" type="int64"/>
        <field name="price" id="3" type="Decimal"/>
        <field name="quantity" id="4" type="int32"/>
        <field name="side" id="6" type="Side"/>
        <field name="orderId" id="7" type="int64" presence="optional"/>
        <field name="venue" id="9" type="Venue"/>
        <field name="rate" id="10" type="double"/>
        <field name="flags" id="11" type="Flags"/>
        <field name="count" id="12" type="uint32" presence="optional"/>
        <field name="small" id="13" type="uint16"/>
    </message>
    <message name="Other" id="2" blockLength="8">
        <field name="value" id="1" type="uint64"/>
    </message>
</sbe:messageSchema>
"""
TICK_BLOCK = 50


def tick_payloads(count: int, order: str, scattered: bool) -> pa.BinaryArray:
    """``count`` Ticks of random bytes (nulls, unknown enum values and NaNs among them), back to back
    or, when ``scattered``, with Other messages and a short Tick-sized padding between them."""
    header = np.array([TICK_BLOCK, 1, 77, 0], dtype=order + "u2").tobytes()
    blocks = RNG.integers(0, 256, (count, TICK_BLOCK), dtype=np.uint8)
    blocks[::7, 22:30] = np.frombuffer(np.array([-(1 << 63)], dtype=order + "i8").tobytes(), np.uint8)  # orderId null
    blocks[:, 21] = RNG.integers(0, 4, count)  # side: Buy, Sell, unknown or 0
    blocks[:, 32:40] = RNG.normal(size=count).astype(order + "f8").view(np.uint8).reshape(count, 8)  # no NaN rate
    payloads = []
    for index, block in enumerate(blocks):
        payloads.append(header + block.tobytes())
        if scattered and index % 3 == 0:
            payloads.append(np.array([8, 2, 77, 0], dtype=order + "u2").tobytes() + bytes(8))
    return pa.array(payloads, pa.binary())


@pytest.mark.parametrize("order", ["littleEndian", "bigEndian"])
@pytest.mark.parametrize("scattered", [False, True], ids=["back-to-back", "scattered"])
def test_both_paths_decode_random_ticks_alike(order, scattered, monkeypatch):
    decoder = SbeDecoder(parse_schema(TICK_SCHEMA.format(order=order)))
    payloads = tick_payloads(2000, "<" if order == "littleEndian" else ">", scattered)
    results = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(native_fields.SWITCH, switch)
        decoded = decoder.decode(payloads)
        results[switch] = [(name, found.rows.tolist(), found.values) for name, found in decoded.by_message.items()]
    for (name, rows, native), (_, fallback_rows, fallback) in zip(results["1"], results["0"]):
        assert rows == fallback_rows
        assert native.equals(fallback), name
    tick = dict((name, values) for name, _, values in results["1"])["Tick"]
    assert tick.field("orderId").null_count >= 2000 // 7
    assert set(tick.field("side").to_pylist()) == {"Buy", "Sell", None}


# --- the fallback ---------------------------------------------------------------------------------


def test_a_helper_that_cannot_be_loaded_falls_back_with_one_debug_line(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "aeron_spark.connector.sbe._fixed_fields", None)  # import fails
    monkeypatch.delattr(sys.modules["aeron_spark.connector.sbe"], "_fixed_fields", raising=False)
    with caplog.at_level(logging.DEBUG, logger=native_fields.__name__):
        assert native_fields._load() is None
    assert len(caplog.records) == 1 and "numpy" in caplog.records[0].getMessage()


def test_a_stale_build_of_another_interface_is_not_used(monkeypatch, caplog):
    stale = types.ModuleType("_fixed_fields")
    stale.INTERFACE_VERSION = native_fields.INTERFACE_VERSION - 1
    monkeypatch.setitem(sys.modules, "aeron_spark.connector.sbe._fixed_fields", stale)
    monkeypatch.setattr(sys.modules["aeron_spark.connector.sbe"], "_fixed_fields", stale, raising=False)
    with caplog.at_level(logging.DEBUG, logger=native_fields.__name__):
        assert native_fields._load() is None
    assert "stale" in caplog.text


def test_the_switch_forces_the_numpy_path_and_it_decodes(monkeypatch):
    monkeypatch.setenv(native_fields.SWITCH, "0")
    assert native_fields.copier() is None
    monkeypatch.setattr(native_fields, "_MODULE", None)
    monkeypatch.setenv(native_fields.SWITCH, "1")
    assert native_fields.copier() is None  # not built: the numpy path
    decoded = SbeDecoder(parse_schema(TICK_SCHEMA.format(order="littleEndian"))).decode(tick_payloads(10, "<", False))
    assert len(decoded.by_message["Tick"].values) == 10


@pytest.mark.parametrize("offset_type", [np.int32, np.int64])
@pytest.mark.parametrize("offsets, expected", [
    ([0], (0, None)),              # no values
    ([5, 69], (64, 0)),            # one value: stride 0
    ([0, 64, 128, 130], (2, 64)),  # the last may be shorter: still at a fixed stride
    ([0, 64, 127, 191], (63, None)),
    ([0, 0, 0], (0, None)),        # empty values: no positive stride
])
def test_offsets_layout_gives_the_shortest_value_and_the_stride(offset_type, offsets, expected):
    assert helper().offsets_layout(np.array(offsets, dtype=offset_type)) == expected


@pytest.mark.parametrize("odd_row", [1, 255, 256, 599])
@pytest.mark.parametrize("odd_header", [(TICK_BLOCK, 2, 77, 0), (TICK_BLOCK, 1, 77, 1), (TICK_BLOCK + 2, 1, 77, 0)],
                         ids=["other-template", "newer-version", "longer-block"])
@pytest.mark.parametrize("wanted", [None, frozenset()], ids=["all-fields", "no-fields"])
def test_equal_size_payloads_whose_headers_differ_late_decode_alike(odd_row, odd_header, wanted, monkeypatch):
    # The native path assumes the first header for a batch at a fixed stride and checks it while
    # copying; a differing header anywhere must give the same result as the numpy path.
    schema = parse_schema(TICK_SCHEMA.format(order="littleEndian"))
    payload_size = 8 + TICK_BLOCK + 2
    blocks = RNG.integers(0, 256, (600, payload_size - 8), dtype=np.uint8)
    blocks[:, 32:40] = RNG.normal(size=600).astype("<f8").view(np.uint8).reshape(600, 8)  # no NaN rate
    headers = np.tile(np.array([TICK_BLOCK, 1, 77, 0], dtype="<u2"), (600, 1))
    headers[odd_row] = odd_header
    payloads = pa.array([h.tobytes() + b.tobytes() for h, b in zip(headers, blocks)], pa.binary())
    decoder = SbeDecoder(schema, None, None if wanted is None else {"Tick": wanted, "Other": wanted})
    results = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(native_fields.SWITCH, switch)
        decoded = decoder.decode(payloads)
        results[switch] = (decoded.template_ids.tolist(),
                           {name: (found.rows.tolist(), found.values) for name, found in decoded.by_message.items()})
    assert results["1"][0] == results["0"][0]
    for name, (rows, values) in results["1"][1].items():
        assert rows == results["0"][1][name][0]
        assert values.equals(results["0"][1][name][1]), name
    tick_rows = results["1"][1]["Tick"][0]
    assert (odd_row in tick_rows) == (odd_header[1] == 1)


def test_a_batch_of_one_header_not_decoded_by_this_decoder_is_still_checked(monkeypatch):
    schema = parse_schema(TICK_SCHEMA.format(order="littleEndian"))
    decoder = SbeDecoder(schema, [schema.message("Tick")])
    other = np.array([8, 2, 77, 0], dtype="<u2").tobytes() + bytes(TICK_BLOCK)  # padded to a Tick's size
    tick = np.array([TICK_BLOCK, 1, 77, 0], dtype="<u2").tobytes() + bytes(TICK_BLOCK)
    decoded = decoder.decode(pa.array([other, other, tick, other], pa.binary()))
    assert decoded.template_ids.tolist() == [2, 2, 1, 2]
    assert decoded.by_message["Tick"].rows.tolist() == [2]


@pytest.mark.parametrize("last", ["other-template", "truncated-tick"])
def test_a_shorter_last_payload_of_another_header_is_not_judged_by_the_first_header(last, sbe_decoding_path):
    # Payloads at a fixed stride but for the last, shorter one: the first header must not be taken
    # for its header before every header was checked (else its block would look truncated).
    schema = parse_schema(TICK_SCHEMA.format(order="littleEndian"))
    tick = np.array([TICK_BLOCK, 1, 77, 0], dtype="<u2").tobytes() + bytes(TICK_BLOCK)
    short = np.array([8, 2, 77, 0], dtype="<u2").tobytes() + bytes(8) if last == "other-template" else tick[:-1]
    payloads = pa.array([tick, tick, tick, short], pa.binary())
    if last == "truncated-tick":
        with pytest.raises(SbeDecodeError, match="payload 3 needs 1 byte"):
            SbeDecoder(schema).decode(payloads)
    else:
        decoded = SbeDecoder(schema).decode(payloads)
        assert decoded.template_ids.tolist() == [1, 1, 1, 2]
        assert decoded.by_message["Other"].values.to_pylist() == [{"value": 0}]
