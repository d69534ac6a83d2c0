"""Aeron log position arithmetic and archive segment-file naming (pure functions, no I/O).

A stream position counts bytes from the start of the initial term:
``position = ((int32)(termId - initialTermId) << bits) + termOffset`` where ``bits =
log2(termLength)``; the term id difference wraps as a 32-bit int before it is widened, exactly
as in Aeron's ``LogBufferDescriptor.computePosition``.

Segment files (Aeron 1.23+) are named ``<recordingId>-<segmentBasePosition>.rec``; the base of
a position is counted in whole segments from the term boundary at or before the recording's
start position.
"""

from __future__ import annotations

import re

MIN_TERM_LENGTH = 64 * 1024
MAX_TERM_LENGTH = 1024 * 1024 * 1024
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
SEGMENT_FILE_SUFFIX = ".rec"

_SEGMENT_FILE_NAME = re.compile(r"^(0|[1-9][0-9]*)-(0|[1-9][0-9]*)\.rec$")


def wrap_int32(value: int) -> int:
    """``value`` reduced to a signed 32-bit int the way Java/C int arithmetic overflows."""
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def validate_term_length(term_length: int) -> int:
    """``term_length`` if it is a power of two in [64 KiB, 1 GiB], else ValueError."""
    if not isinstance(term_length, int) or isinstance(term_length, bool):
        raise TypeError(f"term length must be an int, got {type(term_length).__name__}")
    if not (MIN_TERM_LENGTH <= term_length <= MAX_TERM_LENGTH) or not is_power_of_two(term_length):
        raise ValueError(
            f"term length {term_length} is invalid: must be a power of two between "
            f"{MIN_TERM_LENGTH} (64 KiB) and {MAX_TERM_LENGTH} (1 GiB)")
    return term_length


def validate_segment_length(segment_length: int, term_length: int) -> int:
    """``segment_length`` if it is a power of two and a multiple of ``term_length``."""
    validate_term_length(term_length)
    if (not isinstance(segment_length, int) or not is_power_of_two(segment_length)
            or segment_length < term_length or segment_length > INT32_MAX + 1):
        raise ValueError(
            f"segment length {segment_length} is invalid: must be a power of two, at least the "
            f"term length {term_length} and at most 2^31 (a whole number of terms per segment)")
    return segment_length


def position_bits_to_shift(term_length: int) -> int:
    """log2(term_length) for a valid term length (16..30)."""
    return validate_term_length(term_length).bit_length() - 1


def _check_bits(bits: int) -> None:
    if not 16 <= bits <= 30:
        raise ValueError(f"position bits to shift {bits} is invalid: must be in 16..30 "
                         f"(term lengths 64 KiB..1 GiB)")


def compute_position(term_id: int, term_offset: int, bits: int, initial_term_id: int) -> int:
    """Stream position of ``term_offset`` in term ``term_id`` (term id difference wraps at 32 bits)."""
    _check_bits(bits)
    if not 0 <= term_offset <= (1 << bits):
        raise ValueError(f"term offset {term_offset} is outside the term [0, {1 << bits}]")
    term_count = wrap_int32(term_id - initial_term_id)
    return (term_count << bits) + term_offset


def compute_term_begin_position(term_id: int, bits: int, initial_term_id: int) -> int:
    """Position of offset 0 of term ``term_id``."""
    _check_bits(bits)
    return wrap_int32(term_id - initial_term_id) << bits


def compute_term_id_from_position(position: int, bits: int, initial_term_id: int) -> int:
    """Term id holding ``position`` (as int32; wraps past INT32_MAX like Aeron)."""
    _check_bits(bits)
    return wrap_int32(wrap_int32(position >> bits) + initial_term_id)


def compute_term_offset_from_position(position: int, bits: int) -> int:
    """Offset of ``position`` inside its term."""
    _check_bits(bits)
    return position & ((1 << bits) - 1)


def max_possible_position(term_length: int) -> int:
    """Largest position a stream of this term length can reach (termLength * 2^31)."""
    return validate_term_length(term_length) << 31


def start_term_base_position(start_position: int, term_length: int) -> int:
    """The term boundary at or before ``start_position``: where a recording's first segment begins."""
    validate_term_length(term_length)
    if start_position < 0:
        raise ValueError(f"start position {start_position} is negative")
    return start_position - (start_position & (term_length - 1))


def segment_file_base_position(start_position: int, position: int, term_length: int,
                               segment_length: int) -> int:
    """Base position of the segment file holding ``position`` (Aeron 1.23+ formula).

    ``startTermBase + floor((position - startTermBase) / segmentLength) * segmentLength``.
    """
    validate_segment_length(segment_length, term_length)
    start_term_base = start_term_base_position(start_position, term_length)
    if position < start_term_base:
        raise ValueError(
            f"position {position} is before the recording's first segment base {start_term_base} "
            f"(start position {start_position}, term length {term_length})")
    return start_term_base + ((position - start_term_base) // segment_length) * segment_length


def segment_file_name(recording_id: int, base_position: int) -> str:
    """``<recordingId>-<segmentBasePosition>.rec``."""
    if recording_id < 0 or base_position < 0:
        raise ValueError(f"segment file name needs a non-negative recording id and base position, "
                         f"got recording id {recording_id}, base position {base_position}")
    return f"{recording_id}-{base_position}{SEGMENT_FILE_SUFFIX}"


def parse_segment_file_name(name: str) -> tuple[int, int]:
    """(recording id, base position) from ``<recordingId>-<segmentBasePosition>.rec``."""
    match = _SEGMENT_FILE_NAME.match(name)
    if match is None:
        raise ValueError(f"{name!r} is not a segment file name: expected "
                         f"'<recordingId>-<segmentBasePosition>.rec' with decimal numbers")
    recording_id, base_position = int(match.group(1)), int(match.group(2))
    if recording_id > INT64_MAX or base_position > INT64_MAX:
        raise ValueError(f"{name!r}: recording id or base position does not fit in an int64")
    return recording_id, base_position
