"""prepare_block's fixed-size fast path: byte for byte the same result as the pure-Python
reference walk (``vectorized=False``), for equal-length frames and every way a block can end."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from aeron_spark.archive.service import replay_blocks
from aeron_spark.archive.storage.checksum import CRC32C, ChecksumMismatchError, stamp_checksums
from aeron_spark.archive.service.replay_blocks import PreparedBlock, ReplayFrameError, prepare_block

HEADER = struct.Struct("<iBBHiiiiq")
TERM_ID = 7
SESSION, STREAM = -99, 1001
NEW_SESSION, NEW_STREAM = 4242, 77


def aligned(n: int) -> int:
    return (n + 31) & ~31


def frames(payload_lengths: list[int], term_offset: int = 0, *, seed: int = 1) -> bytearray:
    rng = random.Random(seed)
    out = bytearray()
    for payload_length in payload_lengths:
        length = 32 + payload_length
        out += HEADER.pack(length, 0, 0xC0, 1, term_offset + len(out), SESSION, STREAM, TERM_ID, 0)
        out += rng.randbytes(payload_length) + bytes(aligned(length) - length)
    return out


def pad_frame(frame_length: int, term_offset: int, written: int | None = None) -> bytes:
    body = bytes((written if written is not None else aligned(frame_length)) - 32)
    return HEADER.pack(frame_length, 0, 0xC0, 0, term_offset, SESSION, STREAM, TERM_ID, 0) + body


def both_ways(data: bytes, remaining: int, term_offset: int = 0, length: int | None = None, **kwargs):
    """(fast result, fast bytes, reference result, reference bytes, fast path taken)."""
    length = len(data) if length is None else length
    fast = np.frombuffer(bytearray(data), dtype=np.uint8).copy()
    slow = fast.copy()
    taken = replay_blocks._prepare_fixed_size(
        fast.copy(), length, remaining, NEW_SESSION, NEW_STREAM, kwargs.get("checksum"), 0, term_offset,
        TERM_ID) is not None
    got = prepare_block(fast, length, remaining, NEW_SESSION, NEW_STREAM, term_offset=term_offset,
                        term_id=TERM_ID, **kwargs)
    want = prepare_block(slow, length, remaining, NEW_SESSION, NEW_STREAM, vectorized=False, **kwargs)
    return got, fast.tobytes(), want, slow.tobytes(), taken


@pytest.mark.parametrize("payload", [0, 1, 32, 100, 1024, 4064])
@pytest.mark.parametrize("term_offset", [0, 4096])
def test_equal_frames_take_the_fast_path_and_match_the_reference(payload, term_offset):
    data = frames([payload] * 40, term_offset)
    got, got_bytes, want, want_bytes, taken = both_ways(data, 1 << 40, term_offset)
    assert taken
    assert got == want == PreparedBlock(len(data), 0)
    assert got_bytes == want_bytes
    words = np.frombuffer(got_bytes, dtype="<i4").reshape(40, -1)
    assert (words[:, 3] == NEW_SESSION).all() and (words[:, 4] == NEW_STREAM).all()


@pytest.mark.parametrize("remaining", [1, 32, 1055, 1056, 1057, 5 * 1056, 5 * 1056 + 1, 0])
def test_the_replay_limit_cuts_after_the_frame_it_starts_in(remaining):
    data = frames([1024] * 10)
    got, got_bytes, want, want_bytes, taken = both_ways(data, remaining)
    assert taken
    assert got == want
    assert got_bytes == want_bytes


@pytest.mark.parametrize("pad_written", [32, 64, 2048])
def test_a_trailing_pad_frame_is_reported_whole_or_cut(pad_written):
    """The term's PAD ends the block: reported whole or cut, and past the limit not at all."""
    data = frames([100] * 20) + pad_frame(2048, 20 * 160, pad_written)
    got, got_bytes, want, want_bytes, taken = both_ways(data, 1 << 40)
    assert taken
    assert got == want == PreparedBlock(20 * 160, 2048)
    assert got_bytes == want_bytes
    got, _, want, _, taken = both_ways(data, 20 * 160)
    assert taken and got == want == PreparedBlock(20 * 160, 0)


def test_a_cut_last_frame_is_left_for_the_next_read():
    data = frames([1024] * 8)
    got, got_bytes, want, want_bytes, taken = both_ways(data, 1 << 40, length=len(data) - 100)
    assert taken
    assert got == want == PreparedBlock(7 * 1056, 0)
    assert got_bytes == want_bytes


@pytest.mark.parametrize("case", ["mixed", "wrong_term_id", "wrong_term_offset", "tail_frame", "gap_zeros",
                                  "pad_first"])
def test_anything_else_falls_back_and_still_matches(case):
    data = frames([64] * 12)
    if case == "mixed":
        data = frames([64] * 6 + [65] + [64] * 5)
    elif case == "wrong_term_id":
        struct.pack_into("<i", data, 96 * 5 + 20, TERM_ID + 1)
    elif case == "wrong_term_offset":
        struct.pack_into("<i", data, 96 * 5 + 8, 0)
    elif case == "tail_frame":
        data += frames([10], len(data))
    elif case == "gap_zeros":
        data += bytes(256)
    elif case == "pad_first":
        data = bytearray(pad_frame(96, 0)) + frames([64] * 3, 96)
    try:
        got, got_bytes, want, want_bytes, taken = both_ways(data, 1 << 40)
    except ReplayFrameError:
        with pytest.raises(ReplayFrameError):
            prepare_block(np.frombuffer(bytearray(data), dtype=np.uint8).copy(), len(data), 1 << 40, 1, 2,
                          vectorized=False)
        return
    assert not taken
    assert got == want
    assert got_bytes == want_bytes


def test_zeros_after_the_frames_before_the_limit_are_an_error_either_way():
    data = frames([64] * 4) + bytes(96)
    with pytest.raises(ReplayFrameError):
        prepare_block(np.frombuffer(bytes(data), dtype=np.uint8).copy(), len(data), 1 << 40, 1, 2,
                      term_offset=0, term_id=TERM_ID)


def test_checksums_are_verified_on_the_fast_path():
    checksum = CRC32C
    data = frames([200] * 6)
    stamp_checksums(data, checksum)
    got, got_bytes, want, want_bytes, taken = both_ways(data, 1 << 40, checksum=checksum)
    assert taken and got == want and got_bytes == want_bytes
    struct.pack_into("<B", data, 256 * 3 + 40, data[256 * 3 + 40] ^ 0xFF)
    with pytest.raises(ChecksumMismatchError):
        prepare_block(np.frombuffer(bytes(data), dtype=np.uint8).copy(), len(data), 1 << 40, 1, 2,
                      checksum=checksum, term_offset=0, term_id=TERM_ID)


def test_random_blocks_match_the_reference():
    rng = random.Random(5)
    for _ in range(200):
        payload = rng.choice([0, 8, 32, 96, 1000, 1024])
        count = rng.randrange(1, 30)
        data = frames([payload] * count, seed=rng.randrange(1 << 30))
        if rng.random() < 0.3:
            data += pad_frame(rng.choice([64, 4096]), len(data), 32)
        length = rng.randrange(32, len(data) + 1) & ~31
        remaining = rng.choice([1 << 40, rng.randrange(0, len(data) + 64)])
        try:
            got, got_bytes, want, want_bytes, _ = both_ways(data, remaining, length=length)
        except ReplayFrameError:
            continue
        assert got == want
        assert got_bytes == want_bytes
