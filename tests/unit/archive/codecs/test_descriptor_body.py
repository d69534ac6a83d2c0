"""The recording descriptor body (template 22 without its header): one codec for the catalog's
slots and the ListRecordings answers."""

import struct

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import CodecError, EncodeError, RecordingDescriptorMessage
from aeron_spark.archive.codecs import descriptor_body
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

DESCRIPTOR = RecordingDescriptor(
    recording_id=3, start_timestamp=11, stop_timestamp=-1, start_position=64, stop_position=-1,
    initial_term_id=-5, segment_file_length=128 * 1024, term_buffer_length=64 * 1024, mtu_length=1408,
    session_id=99, stream_id=10, stripped_channel="aeron:ipc", original_channel="aeron:ipc?alias=x",
    source_identity="aeron:ipc", control_session_id=4, correlation_id=5)


def test_body_is_the_wire_message_without_its_header():
    body = descriptor_body.encode_descriptor_body(DESCRIPTOR)
    wire = codecs.encode(RecordingDescriptorMessage.from_descriptor(DESCRIPTOR))
    assert body == wire[codecs.HEADER_LENGTH:]
    assert struct.unpack_from("<qqqqqqqiiiiii", body) == (
        4, 5, 3, 11, -1, 64, -1, -5, 128 * 1024, 64 * 1024, 1408, 99, 10)
    assert len(body) == descriptor_body.MIN_BODY_LENGTH + 9 + 17 + 9 == 127


def test_round_trip_reports_bytes_used():
    body = descriptor_body.encode_descriptor_body(DESCRIPTOR)
    assert descriptor_body.decode_descriptor_body(b"\x01" * 5 + body + bytes(40), 5) == (DESCRIPTOR, len(body))


def test_field_offsets_are_the_root_block_layout():
    assert (descriptor_body.CONTROL_SESSION_ID_OFFSET, descriptor_body.CORRELATION_ID_OFFSET,
            descriptor_body.STOP_TIMESTAMP_OFFSET, descriptor_body.START_POSITION_OFFSET,
            descriptor_body.STOP_POSITION_OFFSET, descriptor_body.SESSION_ID_OFFSET) == (0, 8, 32, 40, 48, 72)
    assert descriptor_body.ROOT_BLOCK_LENGTH == 80 and descriptor_body.MIN_BODY_LENGTH == 92


@pytest.mark.parametrize("cut", [0, 10, 80, 83, 90, 126])
def test_truncated_body_is_a_codec_error(cut):
    body = descriptor_body.encode_descriptor_body(DESCRIPTOR)
    with pytest.raises(CodecError):
        descriptor_body.decode_descriptor_body(body[:cut])


def test_non_ascii_is_an_encode_error():
    with pytest.raises(EncodeError, match="original_channel must be US-ASCII"):
        descriptor_body.encode_descriptor_body(DESCRIPTOR.with_changes(original_channel="caf\u00e9"))
