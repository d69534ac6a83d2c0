"""Protocol constants, enums, and the wire <-> shared RecordingDescriptor conversion."""

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    ControlResponseCode,
    RecordingDescriptorMessage,
    RecordingSignal,
    SourceLocation,
)
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

DESCRIPTOR = RecordingDescriptor(
    recording_id=12, start_timestamp=1_700_000_000_000, stop_timestamp=-1, start_position=0,
    stop_position=-1, initial_term_id=-77, segment_file_length=128 << 20,
    term_buffer_length=64 << 10, mtu_length=1408, session_id=-1234, stream_id=1001,
    stripped_channel="aeron:udp?endpoint=localhost:40123",
    original_channel="aeron:udp?endpoint=localhost:40123|alias=in",
    source_identity="127.0.0.1:51234", control_session_id=5, correlation_id=6)


def test_protocol_semantic_version_is_1_12_0():
    assert codecs.PROTOCOL_SEMANTIC_VERSION == 68608 == 0x010C00
    assert codecs.semantic_version(1, 11, 0) == 68352
    assert codecs.semantic_version_parts(68608) == (1, 12, 0)
    assert codecs.format_semantic_version(68608) == "1.12.0"
    with pytest.raises(ValueError, match="minor=256"):
        codecs.semantic_version(1, 256, 0)


def test_null_values_and_replay_lengths():
    assert (codecs.NULL_VALUE, codecs.NULL_POSITION, codecs.NULL_LENGTH, codecs.NULL_TIMESTAMP) == (
        -1, -1, -1, -1)
    assert codecs.NULL_VERSION == 0
    assert (codecs.REPLAY_ALL_AND_FOLLOW, codecs.REPLAY_ALL_AND_STOP) == (-1, -2)


def test_schema_identity():
    assert codecs.SCHEMA_ID == 101
    assert codecs.SCHEMA_VERSION == 13
    assert codecs.LEGACY_SCHEMA_VERSION == 0


def test_enum_values():
    assert [c.value for c in ControlResponseCode] == [0, 1, 2, 3]
    assert (SourceLocation.LOCAL, SourceLocation.REMOTE) == (0, 1)
    assert RecordingSignal.REPLICATE_END == 7 and RecordingSignal.DELETE == 6
    assert [c.value for c in ArchiveErrorCode] == list(range(17))
    assert ArchiveErrorCode.INVALID_POSITION.name == "INVALID_POSITION"


def test_template_id_enum_covers_every_wire_message():
    assert {t.value for t in codecs.TemplateId} == set(codecs.MESSAGE_SPECS)


def test_descriptor_to_wire_and_back():
    message = RecordingDescriptorMessage.from_descriptor(
        DESCRIPTOR, control_session_id=99, correlation_id=100)
    assert (message.control_session_id, message.correlation_id) == (99, 100)
    decoded = codecs.decode(codecs.encode(message))
    assert decoded.to_descriptor() == DESCRIPTOR.with_changes(
        control_session_id=99, correlation_id=100)


def test_descriptor_conversion_keeps_its_own_ids_by_default():
    message = RecordingDescriptorMessage.from_descriptor(DESCRIPTOR)
    assert message.to_descriptor() == DESCRIPTOR
