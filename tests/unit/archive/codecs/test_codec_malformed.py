"""Malformed input raises CodecError (and only CodecError), with whatever ids could be read."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import (
    AuthConnectRequest,
    CodecError,
    ConnectRequest,
    ControlResponse,
    ListRecordingSubscriptionsRequest,
    MESSAGE_SPECS,
    RecordingDescriptorMessage,
    ReplayRequest,
    ReplicateRequest2,
    SchemaIdMismatchError,
    StartRecordingRequest,
    UnknownTemplateError,
)

SAMPLES = [  # (message, schema version to encode it at)
    (ConnectRequest(3, 20, 0, "aeron:udp?endpoint=localhost:8020"), 0),
    (ConnectRequest(3, 20, 68608, "aeron:udp?endpoint=localhost:8020"), 13),
    (AuthConnectRequest(1, 20, 68608, "aeron:ipc", b"\x00cred", "name=test"), 13),
    (StartRecordingRequest(5, 6, 1001, 1, "aeron:ipc"), 0),
    (StartRecordingRequest(5, 6, 1001, 1, "aeron:ipc"), 13),
    (ReplayRequest(1, 2, 3, 0, -1, 1001, -1, -1, "aeron:udp?endpoint=localhost:0"), 0),
    (ReplayRequest(1, 2, 3, 0, -1, 1001, 4096, 9, "aeron:udp?endpoint=localhost:0"), 13),
    (ReplicateRequest2(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "a", "", "c", b"d", "e"), 13),
    (ListRecordingSubscriptionsRequest(1, 2, 0, 3, 1, 1001, ""), 2),
    (ControlResponse(7, 8, 9, 1, 0, "oops"), 0),
    (ControlResponse(7, 8, 9, 1, 68608, "oops"), 13),
    (RecordingDescriptorMessage(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "a", "bb", ""), 13),
    (codecs.Ping(3), 13),
]


def header(block_length: int, template_id: int, version: int = 13, schema_id: int = 101) -> bytes:
    return struct.pack("<HHHH", block_length, template_id, schema_id, version)


@pytest.mark.parametrize(
    ("message", "version"), SAMPLES, ids=[f"{type(m).__name__}-v{v}" for m, v in SAMPLES])
def test_every_truncation_raises_codec_error(message, version):
    encoded = codecs.encode(message, version=version)
    for cut in range(len(encoded)):
        with pytest.raises(CodecError):
            codecs.decode(encoded[:cut])
        with pytest.raises(CodecError):
            codecs.decode(encoded, 0, cut)  # same bytes, but the length says where it stops


def test_short_header():
    with pytest.raises(CodecError, match="shorter than the 8-byte SBE header") as raised:
        codecs.decode(b"\x10\x00\x06")
    assert raised.value.template_id is None


def test_block_longer_than_the_message_names_the_template_and_readable_ids():
    encoded = codecs.encode(ReplayRequest(11, 22, 3, 0, -1, 1001, -1, -1, "x"))
    with pytest.raises(CodecError) as raised:
        codecs.decode(encoded[:8 + 12])
    error = raised.value
    assert error.template_id == 6
    assert error.control_session_id == 11
    assert error.correlation_id is None  # only 4 of its 8 bytes arrived
    assert "ReplayRequest needs 64 bytes" in str(error)


@pytest.mark.parametrize(("offset", "length"), [(0, 17), (-1, 8), (4, 13), (0, -1)])
def test_offset_and_length_outside_the_buffer(offset, length):
    with pytest.raises(CodecError, match="do not lie inside the 16-byte buffer"):
        codecs.decode(codecs.encode(codecs.Ping(1)), offset, length)


def test_wrong_schema_id_is_a_distinct_codec_error():
    raw = header(8, 106, schema_id=100) + struct.pack("<q", 1)
    with pytest.raises(SchemaIdMismatchError, match="expected schemaId=101, actual=100") as raised:
        codecs.decode(raw)
    assert isinstance(raised.value, CodecError)
    assert raised.value.schema_id == 100


def test_unknown_template_is_distinguishable_and_carries_the_common_prefix_ids():
    raw = header(24, 200) + struct.pack("<qqq", 77, 88, 99)
    with pytest.raises(UnknownTemplateError, match="unknown templateId=200") as raised:
        codecs.decode(raw)
    error = raised.value
    assert isinstance(error, CodecError)
    assert (error.template_id, error.control_session_id, error.correlation_id) == (200, 77, 88)


@pytest.mark.parametrize("template_id", [0, 20, 21, 108, 65535])
def test_catalog_and_unassigned_templates_are_unknown(template_id):
    with pytest.raises(UnknownTemplateError):
        codecs.decode(header(0, template_id))


def test_non_ascii_text_names_the_field_and_keeps_the_ids():
    raw = header(24, 107) + struct.pack("<qqq", 5, 6, 7) + struct.pack("<I", 3) + b"a\xe9b"
    with pytest.raises(CodecError, match=r"UpdateChannelRequest.channel is not US-ASCII") as raised:
        codecs.decode(raw)
    assert (raised.value.control_session_id, raised.value.correlation_id) == (5, 6)


def test_var_field_length_running_past_the_end():
    raw = header(24, 107) + struct.pack("<qqq", 5, 6, 7) + struct.pack("<I", 1000) + b"abc"
    with pytest.raises(CodecError, match="channel of 1000 bytes .* runs past the end"):
        codecs.decode(raw)


def test_huge_var_field_length_is_rejected_without_allocating():
    raw = header(24, 107) + struct.pack("<qqq", 5, 6, 7) + struct.pack("<I", 0xFFFFFFFF)
    with pytest.raises(CodecError, match="runs past the end"):
        codecs.decode(raw)


def test_codec_error_is_a_value_error_with_a_readable_message():
    with pytest.raises(ValueError, match=r"templateId=107.*controlSessionId=5.*correlationId=6"):
        codecs.decode(header(24, 107) + struct.pack("<qqq", 5, 6, 7))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_garbage_never_raises_anything_but_codec_error(raw):
    try:
        codecs.decode(raw)
    except CodecError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    template_id=st.sampled_from(sorted(MESSAGE_SPECS)),
    block_length=st.integers(0, 100),
    version=st.integers(0, 65535),
    body=st.binary(max_size=160),
)
def test_garbage_behind_a_valid_header_never_raises_anything_but_codec_error(
    template_id, block_length, version, body
):
    try:
        message = codecs.decode(header(block_length, template_id, version) + body)
    except CodecError:
        return
    assert type(message) is codecs.MESSAGE_TYPES[template_id]


def test_decode_of_a_message_with_an_unusual_block_caches_a_bounded_number_of_layouts():
    from aeron_spark.archive.codecs import codec as codec_module

    for block_length in range(2000):
        raw = header(block_length, 106, version=block_length % 50) + bytes(block_length)
        codecs.decode(raw)
    assert len(codec_module._DECODE_LAYOUTS) <= codec_module._DECODE_LAYOUT_CACHE_LIMIT
