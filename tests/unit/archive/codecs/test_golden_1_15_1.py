"""Golden bytes from the real Aeron 1.15.1 jar (aeron-all-1.15.1.jar).

Each hex string was produced once by the jar's generated encoders
(``io.aeron.archive.codecs.<Name>Encoder.wrapAndApplyHeader(...)`` with the values below) and
pasted here, so these tests check our version-0 layouts against the real thing without
starting a JVM.
"""

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import (
    ConnectRequest,
    ControlResponse,
    ControlResponseCode,
    ExtendRecordingRequest,
    FindLastMatchingRecordingRequest,
    ListRecordingsForUriRequest,
    RecordingDescriptorMessage,
    RecordingStarted,
    ReplayRequest,
    SourceLocation,
    StartRecordingRequest,
)

GOLDEN = [
    (
        ConnectRequest(3, 20, 0, "aeron:udp?endpoint=localhost:8020"),
        "0c00020065000000030000000000000014000000210000006165726f6e3a7564703f656e64706f696e743d6c"
        "6f63616c686f73743a38303230",
    ),
    (
        StartRecordingRequest(5, 6, 1001, SourceLocation.REMOTE, "aeron:udp?endpoint=h:1"),
        "150004006500000005000000000000000600000000000000e903000001160000006165726f6e3a7564703f65"
        "6e64706f696e743d683a31",
    ),
    (
        ExtendRecordingRequest(5, 6, 9, 1001, SourceLocation.LOCAL, "aeron:ipc"),
        "1d000b0065000000050000000000000006000000000000000900000000000000e90300000009000000616572"
        "6f6e3a697063",
    ),
    (
        ReplayRequest(1, 2, 3, 0, -1, 1001, -1, -1, "aeron:ipc"),
        "2c000600650000000100000000000000020000000000000003000000000000000000000000000000ffffffff"
        "ffffffffe9030000090000006165726f6e3a697063",
    ),
    (
        ControlResponse(7, 42, 5, ControlResponseCode.ERROR, 0, "no such recording"),
        "1c0001006500000007000000000000002a00000000000000050000000000000001000000110000006e6f2073"
        "756368207265636f7264696e67",
    ),
    (
        RecordingDescriptorMessage(
            1, 2, 3, 1_700_000_000_000, -1, 0, -1, 7, 128 << 20, 64 << 10, 1408, -5, 1001,
            "aeron:ipc", "aeron:ipc?alias=x", "aeron:ipc"),
        "50001600650000000100000000000000020000000000000003000000000000000068e5cf8b010000ffffffff"
        "ffffffff0000000000000000ffffffffffffffff07000000000000080000010080050000fbffffffe9030000"
        "090000006165726f6e3a697063110000006165726f6e3a6970633f616c6961733d78090000006165726f6e3a"
        "697063",
    ),
    (
        FindLastMatchingRecordingRequest(1, 2, 0, -3, 1001, "ipc"),
        "2000100065000000010000000000000002000000000000000000000000000000fdffffffe903000003000000"
        "697063",
    ),
    (
        ListRecordingsForUriRequest(1, 2, 0, 100, 1001, "udp"),
        "200009006500000001000000000000000200000000000000000000000000000064000000e903000003000000"
        "756470",
    ),
    (
        RecordingStarted(4, 0, -9, 1001, "aeron:ipc", "aeron:ipc"),
        "180065006500000004000000000000000000000000000000f7ffffffe9030000090000006165726f6e3a6970"
        "63090000006165726f6e3a697063",
    ),
]


@pytest.mark.parametrize(("message", "hex_bytes"), GOLDEN, ids=lambda v: type(v).__name__)
def test_version_0_encoding_matches_the_1_15_1_jar(message, hex_bytes):
    assert codecs.encode(message, version=0).hex() == hex_bytes


@pytest.mark.parametrize(("message", "hex_bytes"), GOLDEN, ids=lambda v: type(v).__name__)
def test_1_15_1_jar_bytes_decode_to_the_message(message, hex_bytes):
    assert codecs.decode(bytes.fromhex(hex_bytes)) == message
