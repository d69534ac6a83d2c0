"""Byte-exact checks: expected bytes are assembled here with struct.pack from the spec tables."""

import struct

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import (
    AuthConnectRequest,
    BooleanType,
    BoundedReplayRequest,
    Challenge,
    ConnectRequest,
    ControlResponse,
    ControlResponseCode,
    ExtendRecordingRequest,
    ListRecordingSubscriptionsRequest,
    Ping,
    RecordingDescriptorMessage,
    RecordingSignal,
    RecordingSignalEvent,
    RecordingStarted,
    RecordingSubscriptionDescriptor,
    ReplayRequest,
    ReplicateRequest2,
    SourceLocation,
    StartRecordingRequest,
    StartRecordingRequest2,
    StopReplayRequest,
)


def header(block_length: int, template_id: int, version: int, schema_id: int = 101) -> bytes:
    return struct.pack("<HHHH", block_length, template_id, schema_id, version)


def var(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


# --- modern layouts (schema v13) ---------------------------------------------------------------

def test_control_response_modern_is_32_bytes_with_version():
    message = ControlResponse(7, 42, 5, ControlResponseCode.ERROR, 68608, "no such recording")
    expected = (header(32, 1, 13) + struct.pack("<qqqii", 7, 42, 5, 1, 68608)
                + var(b"no such recording"))
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_auth_connect_request_v13_has_credentials_and_client_info():
    message = AuthConnectRequest(
        99, 20, 68608, "aeron:udp?endpoint=localhost:8020", b"\x00\xffsecret", "name=x")
    expected = (header(16, 58, 13) + struct.pack("<qii", 99, 20, 68608)
                + var(b"aeron:udp?endpoint=localhost:8020") + var(b"\x00\xffsecret")
                + var(b"name=x"))
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_connect_request_modern_has_version_at_12():
    message = ConnectRequest(3, 20, 68608, "aeron:ipc")
    expected = header(16, 2, 13) + struct.pack("<qii", 3, 20, 68608) + var(b"aeron:ipc")
    assert codecs.encode(message) == expected


def test_replay_request_modern_layout():
    message = ReplayRequest(1, 2, 3, 4096, -1, 1001, 1 << 20, 77, "aeron:udp?endpoint=h:1")
    expected = (header(56, 6, 13)
                + struct.pack("<qqqqqiiq", 1, 2, 3, 4096, -1, 1001, 1 << 20, 77)
                + var(b"aeron:udp?endpoint=h:1"))
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_bounded_replay_request_modern_layout():
    message = BoundedReplayRequest(1, 2, 3, 0, -2, 17, 1001, -1, -1, "aeron:ipc")
    expected = (header(60, 18, 13)
                + struct.pack("<qqqqqiiiq", 1, 2, 3, 0, -2, 17, 1001, -1, -1) + var(b"aeron:ipc"))
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_start_recording_request2_layout():
    message = StartRecordingRequest2(5, 6, 1001, SourceLocation.REMOTE, BooleanType.TRUE, "aeron:ipc")
    expected = header(28, 63, 13) + struct.pack("<qqiii", 5, 6, 1001, 1, 1) + var(b"aeron:ipc")
    assert codecs.encode(message) == expected
    decoded = codecs.decode(expected)
    assert decoded == message
    assert decoded.source_location is SourceLocation.REMOTE
    assert decoded.auto_stop is BooleanType.TRUE


def test_start_recording_request_modern_has_int32_source_location():
    message = StartRecordingRequest(5, 6, 1001, SourceLocation.LOCAL, "aeron:ipc")
    expected = header(24, 4, 13) + struct.pack("<qqii", 5, 6, 1001, 0) + var(b"aeron:ipc")
    assert codecs.encode(message) == expected


def test_list_recording_subscriptions_modern_has_int32_boolean():
    message = ListRecordingSubscriptionsRequest(1, 2, 0, 10, BooleanType.TRUE, 1001, "udp")
    expected = header(32, 17, 13) + struct.pack("<qqiiii", 1, 2, 0, 10, 1, 1001) + var(b"udp")
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_replicate_request2_v13_layout_and_var_fields():
    message = ReplicateRequest2(
        1, 2, 3, -1, -1, -1, -1, 10, 4096, 55, "aeron:udp?endpoint=src:8010", "",
        "aeron:udp?endpoint=localhost:0", b"creds", "aeron:udp?endpoint=localhost:8021")
    expected = (header(68, 66, 13)
                + struct.pack("<qqqqqqqiii", 1, 2, 3, -1, -1, -1, -1, 10, 4096, 55)
                + var(b"aeron:udp?endpoint=src:8010") + var(b"")
                + var(b"aeron:udp?endpoint=localhost:0") + var(b"creds")
                + var(b"aeron:udp?endpoint=localhost:8021"))
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_challenge_is_20_bytes():
    message = Challenge(7, 8, 0, b"\x01\x02")
    expected = header(20, 59, 13) + struct.pack("<qqi", 7, 8, 0) + var(b"\x01\x02")
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_recording_descriptor_is_80_bytes_and_three_strings():
    message = RecordingDescriptorMessage(
        1, 2, 3, 1_700_000_000_000, -1, 0, -1, 7, 128 << 20, 64 << 10, 1408, -5, 1001,
        "aeron:udp?endpoint=localhost:40123", "aeron:udp?endpoint=localhost:40123|alias=x",
        "127.0.0.1:55000")
    expected = (header(80, 22, 13)
                + struct.pack("<qqqqqqqiiiiii", 1, 2, 3, 1_700_000_000_000, -1, 0, -1, 7,
                              128 << 20, 64 << 10, 1408, -5, 1001)
                + var(b"aeron:udp?endpoint=localhost:40123")
                + var(b"aeron:udp?endpoint=localhost:40123|alias=x") + var(b"127.0.0.1:55000"))
    assert codecs.encode(message) == expected
    assert codecs.decode(expected) == message


def test_recording_descriptor_with_trailing_catalog_padding_decodes():
    message = RecordingDescriptorMessage(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "a", "b", "c")
    assert codecs.decode(codecs.encode(message) + bytes(40)) == message


def test_recording_subscription_descriptor_is_28_bytes():
    message = RecordingSubscriptionDescriptor(1, 2, 3, 1001, "aeron:ipc")
    expected = header(28, 23, 13) + struct.pack("<qqqi", 1, 2, 3, 1001) + var(b"aeron:ipc")
    assert codecs.encode(message) == expected


def test_recording_signal_event_is_44_bytes():
    message = RecordingSignalEvent(1, 2, 3, 4, 4096, RecordingSignal.STOP)
    expected = header(44, 24, 13) + struct.pack("<qqqqqi", 1, 2, 3, 4, 4096, 1)
    assert codecs.encode(message) == expected
    assert codecs.decode(expected).signal is RecordingSignal.STOP


def test_ping_is_8_bytes():
    assert codecs.encode(Ping(12)) == header(8, 106, 13) + struct.pack("<q", 12)


def test_recording_started_event_layout():
    message = RecordingStarted(4, 0, -9, 1001, "aeron:ipc", "aeron:ipc")
    expected = (header(24, 101, 13) + struct.pack("<qqii", 4, 0, -9, 1001)
                + var(b"aeron:ipc") + var(b"aeron:ipc"))
    assert codecs.encode(message) == expected


def test_stop_replay_is_identical_in_every_version():
    message = StopReplayRequest(1, 2, (3 << 32) | 0xFFFFFFF0)
    body = struct.pack("<qqq", 1, 2, (3 << 32) | 0xFFFFFFF0)
    assert codecs.encode(message, version=0) == header(24, 7, 0) + body
    assert codecs.encode(message) == header(24, 7, 13) + body


# --- legacy layouts: what a 1.15.1 client sends and a 1.15.1 archive answers --------------------

def test_legacy_connect_request_is_12_bytes_without_version():
    message = ConnectRequest(3, 20, 0, "aeron:udp?endpoint=localhost:8020")
    expected = (header(12, 2, 0) + struct.pack("<qi", 3, 20)
                + var(b"aeron:udp?endpoint=localhost:8020"))
    assert codecs.encode(message, version=0) == expected
    assert codecs.decode(expected) == message


def test_legacy_start_recording_is_21_bytes_with_uint8_source_location():
    message = StartRecordingRequest(5, 6, 1001, SourceLocation.REMOTE, "aeron:udp?endpoint=h:1")
    expected = (header(21, 4, 0) + struct.pack("<qqiB", 5, 6, 1001, 1)
                + var(b"aeron:udp?endpoint=h:1"))
    assert codecs.encode(message, version=0) == expected
    decoded = codecs.decode(expected)
    assert decoded == message
    assert decoded.source_location is SourceLocation.REMOTE


def test_legacy_extend_recording_is_29_bytes_with_uint8_source_location():
    message = ExtendRecordingRequest(5, 6, 9, 1001, SourceLocation.LOCAL, "aeron:ipc")
    expected = header(29, 11, 0) + struct.pack("<qqqiB", 5, 6, 9, 1001, 0) + var(b"aeron:ipc")
    assert codecs.encode(message, version=0) == expected
    assert codecs.decode(expected) == message


def test_legacy_replay_request_is_44_bytes():
    message = ReplayRequest(1, 2, 3, 0, -1, 1001, -1, -1, "aeron:ipc")
    expected = header(44, 6, 0) + struct.pack("<qqqqqi", 1, 2, 3, 0, -1, 1001) + var(b"aeron:ipc")
    assert codecs.encode(message, version=0) == expected
    assert codecs.decode(expected) == message


def test_replay_request_at_v7_is_48_bytes():
    message = ReplayRequest(1, 2, 3, 0, -1, 1001, 65536, -1, "aeron:ipc")
    expected = (header(48, 6, 7) + struct.pack("<qqqqqii", 1, 2, 3, 0, -1, 1001, 65536)
                + var(b"aeron:ipc"))
    assert codecs.encode(message, version=7) == expected
    assert codecs.decode(expected) == message


def test_legacy_control_response_is_28_bytes():
    message = ControlResponse(7, 42, 7, ControlResponseCode.OK, 0, "")
    expected = header(28, 1, 0) + struct.pack("<qqqi", 7, 42, 7, 0) + var(b"")
    assert codecs.encode(message, version=0) == expected
    assert codecs.decode(expected) == message


def test_schema_v2_list_recording_subscriptions_has_uint8_boolean_and_padding():
    message = ListRecordingSubscriptionsRequest(1, 2, 0, 10, BooleanType.TRUE, 1001, "udp")
    expected = (header(32, 17, 2) + struct.pack("<qqiiB3xi", 1, 2, 0, 10, 1, 1001)
                + var(b"udp"))
    assert codecs.encode(message, version=2) == expected
    assert codecs.decode(expected) == message


@pytest.mark.parametrize(
    ("version", "block_length"), [(0, 44), (6, 44), (7, 48), (9, 48), (10, 56), (13, 56)])
def test_replay_request_block_length_by_version(version, block_length):
    assert codecs.block_length_for(6, version) == block_length


@pytest.mark.parametrize(("version", "block_length"), [(2, 48), (7, 52), (10, 60), (13, 60)])
def test_bounded_replay_block_length_by_version(version, block_length):
    assert codecs.block_length_for(18, version) == block_length


@pytest.mark.parametrize(("version", "block_length"), [(6, 60), (7, 64), (8, 68), (13, 68)])
def test_replicate_request2_block_length_by_version(version, block_length):
    assert codecs.block_length_for(66, version) == block_length


def test_modern_response_block_lengths_match_what_the_c_client_compiles():
    assert {tid: codecs.block_length_for(tid) for tid in (1, 59, 22, 23, 24)} == {
        1: 32, 59: 20, 22: 80, 23: 28, 24: 44}


def test_encode_into_writes_at_offset_and_returns_length():
    message = Ping(5)
    buffer = bytearray(b"\xaa" * 32)
    written = codecs.encode_into(buffer, 4, message)
    assert written == 16 == codecs.encoded_length(message)
    assert bytes(buffer[4:20]) == codecs.encode(message)
    assert buffer[:4] == b"\xaa" * 4 and buffer[20:] == b"\xaa" * 12


def test_encode_into_zeroes_padding_inside_the_block():
    message = ListRecordingSubscriptionsRequest(1, 2, 0, 10, 1, 1001, "")
    buffer = bytearray(b"\xff" * codecs.encoded_length(message, version=2))
    codecs.encode_into(buffer, 0, message, version=2)
    assert buffer[8 + 25:8 + 28] == b"\x00\x00\x00"


def test_decode_reads_from_offset_within_a_larger_buffer():
    frame = b"\x01" * 32 + codecs.encode(Ping(9)) + b"\x02" * 5
    assert codecs.decode(memoryview(frame), 32, 16) == Ping(9)


def test_an_encoded_message_is_handed_on_in_the_current_layout_only():
    from aeron_spark.archive.codecs import EncodedMessage, EncodeError, SCHEMA_VERSION

    assert codecs.encode(EncodedMessage(b"\x01\x02")) == b"\x01\x02"
    with pytest.raises(EncodeError, match=f"schema version {SCHEMA_VERSION} layout, not 0"):
        codecs.encode(EncodedMessage(b"\x01\x02"), version=0)
