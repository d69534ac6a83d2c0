"""Frame checksums in the session-id field: values, which frames, stamping, verification."""

import struct
import zlib

import pytest

from aeron_spark.archive.storage.checksum import (
    CRC32, CRC32C, ChecksumError, ChecksumMismatchError, checksum_from_name,
    frame_checksum_matches, stamp_checksums, stamp_checksums_copy, verify_and_restore)
from aeron_spark.driver_integration.frame import DataFrameHeader, HDR_TYPE_PAD, write_padding_frame


def _block():
    """DATA 40 (aligned 64), DATA 100 (aligned 128), PAD 96, DATA 32: 320 bytes."""
    block = bytearray(320)
    DataFrameHeader(40, session_id=55, term_offset=0).pack_into(block, 0)
    block[32:40] = b"abcdefgh"
    DataFrameHeader(100, session_id=55, term_offset=64).pack_into(block, 64)
    block[96:164] = bytes(range(68))
    write_padding_frame(block, 192, 192, 96, 55, 1, 0)
    block[224:288] = b"\x11" * 64
    DataFrameHeader(32, session_id=55, term_offset=288).pack_into(block, 288)
    return block


def _session(block, offset):
    return struct.unpack_from("<i", block, offset + 12)[0]


def test_known_values_as_signed_int32():
    assert CRC32C.compute(b"123456789") == 0xE3069283 - (1 << 32)
    assert CRC32.compute(b"123456789") == zlib.crc32(b"123456789") - (1 << 32)
    assert CRC32C.compute(b"") == 0


def test_names_and_aliases():
    for name in ("CRC-32C", "io.aeron.archive.checksum.Crc32c", "org.agrona.checksum.Crc32c"):
        assert checksum_from_name(name) is CRC32C
    for name in ("CRC-32", "io.aeron.archive.checksum.Crc32", "org.agrona.checksum.Crc32"):
        assert checksum_from_name(name) is CRC32
    with pytest.raises(ValueError, match=r"unknown checksum 'md5': accepted values are CRC-32, CRC-32C"):
        checksum_from_name("md5")


def test_stamp_covers_aligned_length_minus_header_of_data_frames_only():
    block = _block()
    original = bytes(block)
    stamp_checksums(block)
    assert _session(block, 0) == CRC32C.compute(original[32:64])  # payload + alignment bytes
    assert _session(block, 64) == CRC32C.compute(original[96:192])
    assert _session(block, 192) == 55  # PAD untouched
    assert _session(block, 288) == CRC32C.compute(b"")  # empty payload
    changed = [i for i in range(len(block)) if block[i] != original[i]]
    assert all(offset + 12 <= i < offset + 16 for i in changed for offset in [i - (i % 32)])


def test_stamp_refuses_read_only_and_copy_leaves_source_alone():
    source = bytes(_block())
    with pytest.raises(ChecksumError, match="writable buffer"):
        stamp_checksums(source)
    out = bytearray(1024)
    stamped = stamp_checksums_copy(memoryview(source), CRC32C, out)
    assert len(stamped) == len(source) and bytes(source) == bytes(_block())
    expected = _block()
    stamp_checksums(expected)
    assert bytes(stamped) == bytes(expected)


def test_verify_and_restore_round_trip_and_mismatch_position():
    block = _block()
    stamp_checksums(block)
    restored = bytearray(block)
    verify_and_restore(restored, 55, block_position=1 << 20)
    assert restored == _block()

    block[100] ^= 0xFF  # damage the second frame's payload
    with pytest.raises(ChecksumMismatchError, match=f"CRC-32C checksum mismatch at position={(1 << 20) + 64}: "
                                                    r"recorded checksum=-?\d+, computed checksum=-?\d+"):
        verify_and_restore(block, 55, block_position=1 << 20)
    assert _session(block, 0) == 55  # frames before the bad one were restored


def test_malformed_blocks_are_refused():
    block = _block()
    struct.pack_into("<i", block, 64, 0)
    with pytest.raises(ChecksumError, match=r"not whole frames: the chain stops at offset 64 \(frame_length is 0"):
        stamp_checksums(block)
    with pytest.raises(ChecksumError, match="stops at offset 288"):
        verify_and_restore(_block()[:300], 1)


def test_frame_checksum_matches():
    block = _block()
    stamp_checksums(block, CRC32)
    assert frame_checksum_matches(block[64:192], CRC32)
    assert not frame_checksum_matches(block[64:192], CRC32C)
    assert not frame_checksum_matches(block[64:100], CRC32)  # shorter than its aligned length
    assert not frame_checksum_matches(b"", CRC32)
    pad = bytearray(64)
    write_padding_frame(pad, 0, 0, 64, 0, 0, 0)
    assert DataFrameHeader.unpack(pad).frame_type == HDR_TYPE_PAD


@pytest.mark.parametrize("algorithm", [CRC32C, CRC32], ids=lambda c: c.name)
def test_vectorised_small_frames_equal_per_frame_checksums(algorithm):
    """Many equal small frames take the vectorised table path; mixed ones the per-frame path."""
    import random
    rng = random.Random(5)
    lengths = [32 + rng.choice([0, 1, 8, 31, 32, 33, 64, 90, 500, 1400]) for _ in range(600)]
    block = bytearray(sum((n + 31) & -32 for n in lengths))
    offset = 0
    for n in lengths:
        DataFrameHeader(n, session_id=3, term_offset=offset).pack_into(block, offset)
        block[offset + 32:offset + n] = bytes(rng.getrandbits(8) for _ in range(n - 32))
        offset += (n + 31) & -32
    original = bytes(block)
    stamp_checksums(block, algorithm)
    offset = 0
    for n in lengths:
        aligned = (n + 31) & -32
        assert _session(block, offset) == algorithm.compute(original[offset + 32:offset + aligned])
        offset += aligned
    verify_and_restore(block, 3, algorithm)
    assert bytes(block) == original
