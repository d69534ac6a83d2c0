"""Position arithmetic and segment naming, checked against Aeron's formulas (reference §4.5, §5.2)."""

import pytest
from hypothesis import given, strategies as st

from aeron_spark.driver_integration.position import (
    INT32_MAX, INT32_MIN, compute_position, compute_term_begin_position,
    compute_term_id_from_position, compute_term_offset_from_position, max_possible_position,
    parse_segment_file_name, position_bits_to_shift, segment_file_base_position,
    segment_file_name, start_term_base_position, validate_segment_length, wrap_int32)

int32s = st.integers(INT32_MIN, INT32_MAX)
bits_st = st.integers(16, 30)


def test_bits_to_shift_for_every_valid_term_length():
    for bits in range(16, 31):
        assert position_bits_to_shift(1 << bits) == bits


@pytest.mark.parametrize("bad", [0, 1, 32 * 1024, 64 * 1024 + 32, 3 * 64 * 1024, 2 << 30, -65536])
def test_bits_to_shift_rejects_invalid_term_lengths(bad):
    with pytest.raises(ValueError, match=r"term length .* power of two between 65536"):
        position_bits_to_shift(bad)


def test_compute_position_examples():
    assert compute_position(7, 0, 16, 7) == 0
    assert compute_position(8, 96, 16, 7) == 65536 + 96
    # term id wrapped past INT32_MAX: the difference is still 1 term
    assert compute_position(INT32_MIN, 32, 16, INT32_MAX) == 65536 + 32
    # term id before the initial one: negative, as in Aeron
    assert compute_position(6, 0, 16, 7) == -65536


def test_term_id_wraps_like_int32():
    bits = 16
    position = 3 << bits
    assert compute_term_id_from_position(position, bits, INT32_MAX - 1) == INT32_MIN + 1
    assert compute_term_begin_position(INT32_MIN + 1, bits, INT32_MAX - 1) == position


def test_max_possible_position():
    assert max_possible_position(64 * 1024) == 64 * 1024 * 2 ** 31
    assert max_possible_position(1 << 30) == 1 << 61


@given(initial_term_id=int32s, bits=bits_st, term_count=st.integers(0, INT32_MAX),
       offset_fraction=st.floats(0, 1, exclude_max=True))
def test_position_round_trip(initial_term_id, bits, term_count, offset_fraction):
    term_offset = int(offset_fraction * (1 << bits)) & ~31
    term_id = wrap_int32(initial_term_id + term_count)
    position = compute_position(term_id, term_offset, bits, initial_term_id)
    assert position == (term_count << bits) + term_offset
    assert compute_term_id_from_position(position, bits, initial_term_id) == term_id
    assert compute_term_offset_from_position(position, bits) == term_offset
    assert compute_term_begin_position(term_id, bits, initial_term_id) == position - term_offset
    assert 0 <= position < max_possible_position(1 << bits)


@given(initial_term_id=st.integers(INT32_MAX - 5, INT32_MAX), steps=st.integers(0, 10))
def test_term_ids_near_int32_limit_round_trip(initial_term_id, steps):
    bits = 16
    position = steps << bits
    term_id = compute_term_id_from_position(position, bits, initial_term_id)
    assert INT32_MIN <= term_id <= INT32_MAX
    assert compute_position(term_id, 0, bits, initial_term_id) == position


def test_segment_base_examples():
    term, seg = 64 * 1024, 256 * 1024
    # start mid-term: first segment begins at that term's start
    assert start_term_base_position(70000, term) == 65536
    assert segment_file_base_position(70000, 70000, term, seg) == 65536
    assert segment_file_base_position(70000, 65536 + seg - 1, term, seg) == 65536
    assert segment_file_base_position(70000, 65536 + seg, term, seg) == 65536 + seg
    assert segment_file_base_position(0, 5 * seg + 8, term, seg) == 5 * seg
    with pytest.raises(ValueError, match="before the recording's first segment base 65536"):
        segment_file_base_position(70000, 1000, term, seg)


@pytest.mark.parametrize("seg", [32 * 1024, 3 * 65536, 0])
def test_segment_length_validation(seg):
    with pytest.raises(ValueError, match="segment length"):
        validate_segment_length(seg, 64 * 1024)


@given(bits=st.integers(16, 24), seg_shift=st.integers(0, 6), start=st.integers(0, 1 << 40),
       delta=st.integers(0, 1 << 40))
def test_segment_base_invariants(bits, seg_shift, start, delta):
    term = 1 << bits
    seg = term << seg_shift
    position = start + delta
    base = segment_file_base_position(start, position, term, seg)
    start_base = start_term_base_position(start, term)
    assert base <= position < base + seg
    assert (base - start_base) % seg == 0
    assert base % term == 0  # a segment always begins on a term boundary
    # every position in the same term maps to the same segment: blocks never split across files
    term_begin = position - (position & (term - 1))
    assert segment_file_base_position(start, term_begin, term, seg) == base
    assert segment_file_base_position(start, term_begin + term - 1, term, seg) == base


@given(recording_id=st.integers(0, 2 ** 63 - 1), base=st.integers(0, 2 ** 63 - 1))
def test_segment_file_name_round_trip(recording_id, base):
    name = segment_file_name(recording_id, base)
    assert name == f"{recording_id}-{base}.rec"
    assert parse_segment_file_name(name) == (recording_id, base)


@pytest.mark.parametrize("bad", ["1-2.rec.del", "1-2", "-1-2.rec", "a-0.rec", "1-02.rec", "1_2.rec",
                                 "1-2.REC", f"1-{2 ** 63}.rec"])
def test_parse_rejects_non_segment_names(bad):
    with pytest.raises(ValueError):
        parse_segment_file_name(bad)
