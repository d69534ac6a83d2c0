"""Decoding honours the received header's blockLength and version (legacy and future senders)."""

import struct

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import (
    AuthConnectRequest,
    BooleanType,
    BoundedReplayRequest,
    ConnectRequest,
    ControlResponse,
    EncodeError,
    ListRecordingSubscriptionsRequest,
    RecordingSignalEvent,
    ReplayRequest,
    ReplicateRequest2,
    SourceLocation,
    StartRecordingRequest,
    UpdateChannelRequest,
)


def header(block_length: int, template_id: int, version: int) -> bytes:
    return struct.pack("<HHHH", block_length, template_id, 101, version)


def var(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


def test_connect_request_from_a_1_16_client_carries_its_version():
    version_0_2_1 = codecs.semantic_version(0, 2, 1)
    raw = header(16, 2, 2) + struct.pack("<qii", 3, 20, version_0_2_1) + var(b"aeron:ipc")
    assert codecs.decode(raw) == ConnectRequest(3, 20, version_0_2_1, "aeron:ipc")


def test_connect_request_block_12_with_a_modern_header_version_reads_version_as_null():
    raw = header(12, 2, 13) + struct.pack("<qi", 3, 20) + var(b"aeron:ipc")
    assert codecs.decode(raw).version == codecs.NULL_VERSION == 0


def test_auth_connect_before_v12_ignores_trailing_bytes_instead_of_reading_client_info():
    raw = (header(16, 58, 10) + struct.pack("<qii", 1, 20, 68352) + var(b"aeron:ipc") + var(b"")
           + var(b"name=not-on-the-wire-at-v10"))
    assert codecs.decode(raw) == AuthConnectRequest(1, 20, 68352, "aeron:ipc", b"", "")


def test_auth_connect_at_v12_reads_client_info():
    raw = (header(16, 58, 12) + struct.pack("<qii", 1, 20, 68608) + var(b"aeron:ipc")
           + var(b"\x01") + var(b"name=c"))
    assert codecs.decode(raw).client_info == "name=c"


def test_start_recording_block_21_reads_one_byte_source_location_even_with_modern_version():
    raw = header(21, 4, 13) + struct.pack("<qqiB", 1, 2, 1001, 1) + var(b"aeron:ipc")
    decoded = codecs.decode(raw)
    assert decoded == StartRecordingRequest(1, 2, 1001, SourceLocation.REMOTE, "aeron:ipc")


def test_schema_v2_list_recording_subscriptions_reads_only_the_low_byte_of_apply_stream_id():
    # A 1.16-1.21 encoder leaves the three padding bytes as whatever was in its buffer.
    raw = (header(32, 17, 2) + struct.pack("<qqiiB3si", 1, 2, 0, 5, 1, b"\xde\xad\xbe", 1001)
           + var(b""))
    assert codecs.decode(raw) == ListRecordingSubscriptionsRequest(
        1, 2, 0, 5, BooleanType.TRUE, 1001, "")


@pytest.mark.parametrize(
    ("block_length", "version", "file_io_max_length", "replay_token"),
    [(44, 0, -1, -1), (48, 7, 4096, -1), (56, 10, 4096, 99), (56, 6, -1, -1), (44, 13, -1, -1)],
)
def test_replay_request_fields_follow_block_length_and_version(
    block_length, version, file_io_max_length, replay_token
):
    block = struct.pack("<qqqqqiiq", 1, 2, 3, 64, 1024, 1001, 4096, 99)[:block_length]
    raw = header(block_length, 6, version) + block + var(b"aeron:ipc")
    assert codecs.decode(raw) == ReplayRequest(
        1, 2, 3, 64, 1024, 1001, file_io_max_length, replay_token, "aeron:ipc")


@pytest.mark.parametrize(
    ("block_length", "version", "file_io_max_length", "replay_token"),
    [(48, 2, -1, -1), (52, 7, 8192, -1), (60, 10, 8192, 7)],
)
def test_bounded_replay_request_versions(block_length, version, file_io_max_length, replay_token):
    block = struct.pack("<qqqqqiiiq", 1, 2, 3, 0, -1, 12, 1001, 8192, 7)[:block_length]
    raw = header(block_length, 18, version) + block + var(b"aeron:ipc")
    assert codecs.decode(raw) == BoundedReplayRequest(
        1, 2, 3, 0, -1, 12, 1001, file_io_max_length, replay_token, "aeron:ipc")


def test_replicate_request2_v6_has_three_strings_and_no_credentials():
    raw = (header(60, 66, 6) + struct.pack("<qqqqqqqi", 1, 2, 3, 4, 5, 6, 7, 10)
           + var(b"src") + var(b"live") + var(b"repl") + var(b"ignored-trailing"))
    assert codecs.decode(raw) == ReplicateRequest2(
        1, 2, 3, 4, 5, 6, 7, 10, -1, -1, "src", "live", "repl", b"", "")


def test_replicate_request2_v8_adds_session_id_and_credentials_but_no_response_channel():
    raw = (header(68, 66, 8) + struct.pack("<qqqqqqqiii", 1, 2, 3, 4, 5, 6, 7, 10, 4096, 33)
           + var(b"src") + var(b"") + var(b"repl") + var(b"cred") + var(b"ignored"))
    assert codecs.decode(raw) == ReplicateRequest2(
        1, 2, 3, 4, 5, 6, 7, 10, 4096, 33, "src", "", "repl", b"cred", "")


def test_control_response_from_a_1_15_archive_has_null_version():
    raw = header(28, 1, 0) + struct.pack("<qqqi", 1, 2, 3, 0) + var(b"")
    decoded = codecs.decode(raw)
    assert decoded == ControlResponse(1, 2, 3, codecs.ControlResponseCode.OK, 0, "")


def test_a_longer_block_from_a_future_version_is_skipped_before_the_var_fields():
    raw = header(40, 107, 20) + struct.pack("<qqq", 1, 2, 3) + b"\x55" * 16 + var(b"aeron:ipc")
    assert codecs.decode(raw) == UpdateChannelRequest(1, 2, 3, "aeron:ipc")


def test_unknown_enum_values_decode_to_plain_ints():
    raw = header(44, 24, 13) + struct.pack("<qqqqqi", 1, 2, 3, 4, 5, 99)
    decoded = codecs.decode(raw)
    assert decoded == RecordingSignalEvent(1, 2, 3, 4, 5, 99)
    assert type(decoded.signal) is int


# --- what encoding refuses -------------------------------------------------------------------

def test_encoding_a_template_older_versions_lack_is_refused():
    with pytest.raises(EncodeError, match="AuthConnectRequest .* does not exist before schema version 4"):
        codecs.encode(AuthConnectRequest(1, 20, 0, "aeron:ipc", b"", ""), version=0)


def test_connect_request_cannot_be_encoded_at_v14():
    with pytest.raises(EncodeError, match="removed in schema version 14"):
        codecs.encode(ConnectRequest(1, 20, 0, "aeron:ipc"), version=14)


def test_a_value_the_version_cannot_carry_is_not_dropped_silently():
    with pytest.raises(EncodeError, match=r"ReplayRequest.replay_token=5 .* version 10\+"):
        codecs.encode(ReplayRequest(1, 2, 3, 0, -1, 1001, -1, 5, "aeron:ipc"), version=7)
    with pytest.raises(EncodeError, match=r"AuthConnectRequest.client_info"):
        codecs.encode(AuthConnectRequest(1, 20, 0, "aeron:ipc", b"", "name=x"), version=11)


def test_narrow_enum_out_of_uint8_range_is_refused_at_v0():
    with pytest.raises(EncodeError, match="source_location=256 does not fit uint8"):
        codecs.encode(StartRecordingRequest(1, 2, 3, 256, "aeron:ipc"), version=0)


@pytest.mark.parametrize(
    ("message", "pattern"),
    [
        (ReplayRequest(1, 2, 3, 0, 1 << 63, 1001, -1, -1, ""), "length=.* does not fit int64"),
        (ReplayRequest(1, 2, 3, 0, -1, 1 << 31, -1, -1, ""), "replay_stream_id=.* does not fit int32"),
        (ReplayRequest(1, 2, 3, 0, -1, "x", -1, -1, ""), "replay_stream_id must be an int"),
        (ReplayRequest(1, 2, 3, 0, -1, 1001, -1, -1, "caf\u00e9"), "must be US-ASCII"),
        (ReplayRequest(1, 2, 3, 0, -1, 1001, -1, -1, b"aeron"), "must be str"),
        (AuthConnectRequest(1, 2, 0, "", "text", ""), "encoded_credentials must be bytes"),
    ],
)
def test_bad_field_values_raise_encode_error_naming_the_field(message, pattern):
    with pytest.raises(EncodeError, match=pattern):
        codecs.encode(message)


def test_unknown_schema_version_and_foreign_objects_are_refused():
    with pytest.raises(EncodeError, match="schema version 99"):
        codecs.encode(codecs.Ping(1), version=99)
    with pytest.raises(EncodeError, match="not a schema-101 message"):
        codecs.encode(object())
