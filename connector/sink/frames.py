"""Messages -> Aeron log frames, built with numpy for ``ExclusivePublication.offer_block`` (sans-IO).

The committer appends whole batches; offering row by row from Python costs ~0.2-1 us per
message, so frames are built here in bulk exactly as Aeron's term appender would write them:

* a message longer than ``mtu - 32`` is split into fragments (BEGIN on the first, END on the
  last); every fragment carries the message's reserved value (Aeron calls the reserved value
  supplier per fragment);
* frames are 32-byte aligned; the alignment gap is zeros;
* a message never crosses a term end: when it does not fit in the rest of the term, a PAD frame
  (type 0, flags 0xC0, frame_length = the remainder) fills the term and the message starts the
  next one;
* every header is stamped with the publication's session id, stream id, term id and term offset
  (``offer_block`` checks the first frame and copies the rest verbatim).

The output is a list of ``TermBlock``: frames of one term, each starting at a DATA frame, or a
padding-only block (when not even the first message fits in the rest of a term). The committer
offers data blocks in pieces cut at ``split_offsets`` and padding-only blocks with
``append_padding``.

The messages come in as ``MessageColumns``: the staged Arrow columns seen as numpy arrays without
a copy (``message_columns``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from aeron_spark.driver_integration.frame import (
    BEGIN_FRAG_FLAG,
    END_FRAG_FLAG,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    UNFRAGMENTED,
)
from aeron_spark.driver_integration.position import (
    compute_term_id_from_position,
    position_bits_to_shift,
    validate_term_length,
)

MAX_MESSAGE_LENGTH_CAP = 16 * 1024 * 1024


class FramingError(ValueError):
    """Messages that cannot be appended to this stream as they are."""


@dataclass(frozen=True)
class MessageColumns:
    """Messages as numpy arrays: payload bytes ``values`` with ``offsets`` (one more than there are
    messages; message i is ``values[offsets[i]:offsets[i + 1]]``) and each message's ``reserved`` value."""

    values: np.ndarray
    offsets: np.ndarray
    reserved: np.ndarray


def message_columns(payload: pa.Array, reserved_value: pa.Array) -> MessageColumns:
    """A staged batch's payload (binary) and reserved value (null-free int64) columns, zero-copy."""
    values, offsets = binary_buffers(payload)
    return MessageColumns(values, offsets, int64_values(reserved_value))


def binary_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of an Arrow binary array, zero-copy (offsets index ``values``)."""
    if len(array) == 0:
        return np.empty(0, np.uint8), np.zeros(1, np.int64)
    _, offsets_buffer, values_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[array.offset:array.offset + len(array) + 1]
    values = np.frombuffer(values_buffer, dtype=np.uint8) if values_buffer is not None else np.empty(0, np.uint8)
    return values, offsets.astype(np.int64)


def int64_values(array: pa.Array) -> np.ndarray:
    """The values of a null-free int64 Arrow array, zero-copy. (``Array.to_numpy`` imports pandas,
    ~1 s in a fresh commit worker on a loaded machine.) Nulls are the caller's to refuse first."""
    if array.null_count:
        raise ValueError(f"an int64 column with {array.null_count} nulls has no null-free values")
    data = array.buffers()[1]
    if len(array) == 0 or data is None:
        return np.zeros(len(array), np.int64)
    return np.frombuffer(data, dtype=np.int64)[array.offset:array.offset + len(array)]


@dataclass(frozen=True)
class PublicationLayout:
    """The log parameters frames are stamped with (those of the sink recording)."""

    initial_term_id: int
    term_length: int
    mtu: int
    session_id: int
    stream_id: int

    def __post_init__(self) -> None:
        validate_term_length(self.term_length)
        if self.mtu % FRAME_ALIGNMENT or not 128 <= self.mtu <= 65504 + 32 or self.mtu > self.term_length // 8:
            raise FramingError(f"mtu {self.mtu} is invalid: a multiple of 32 in [128, 65536] and at most "
                               f"term length / 8 ({self.term_length // 8})")

    @property
    def max_payload(self) -> int:
        return self.mtu - HEADER_LENGTH

    @property
    def max_message_length(self) -> int:
        return min(self.term_length // 8, MAX_MESSAGE_LENGTH_CAP)

    @property
    def bits(self) -> int:
        return position_bits_to_shift(self.term_length)


@dataclass(frozen=True)
class TermBlock:
    position: int             # stream position of data[0]
    data: np.ndarray          # uint8, whole frames inside one term
    split_offsets: np.ndarray  # int64 offsets of the DATA frames (where the block may be cut); empty = padding only

    @property
    def end(self) -> int:
        return self.position + int(self.data.size)

    @property
    def is_padding_only(self) -> bool:
        return self.split_offsets.size == 0


def _aligned(values: np.ndarray) -> np.ndarray:
    return (values + (FRAME_ALIGNMENT - 1)) // FRAME_ALIGNMENT * FRAME_ALIGNMENT


def framed_lengths(lengths: np.ndarray, max_payload: int) -> tuple[np.ndarray, np.ndarray]:
    """(fragments per message, term bytes per message) for payload ``lengths`` (int64)."""
    fragments = np.maximum(1, -(-lengths // max_payload))
    last = lengths - (fragments - 1) * max_payload
    return fragments, (fragments - 1) * (max_payload + HEADER_LENGTH) + _aligned(last + HEADER_LENGTH)


def frame_messages(values: np.ndarray, value_offsets: np.ndarray, reserved: np.ndarray, position: int,
                   layout: PublicationLayout) -> list[TermBlock]:
    """Frame messages ``values[value_offsets[i]:value_offsets[i+1]]`` appended at ``position``."""
    values = np.ascontiguousarray(values, dtype=np.uint8)
    offsets = np.asarray(value_offsets, dtype=np.int64)
    reserved = np.asarray(reserved, dtype=np.int64)
    count = offsets.size - 1
    if count < 0 or reserved.size != count:
        raise FramingError(f"{count} messages need {count} reserved values, got {reserved.size}")
    if position % FRAME_ALIGNMENT:
        raise FramingError(f"append position {position} is not a multiple of {FRAME_ALIGNMENT}")
    if count == 0:
        return []
    lengths = np.diff(offsets)
    too_long = lengths > layout.max_message_length
    if too_long.any():
        index = int(np.argmax(too_long))
        raise FramingError(f"message {index} is {int(lengths[index])} bytes; the sink stream's maximum message "
                           f"length is {layout.max_message_length} (term length / 8, at most 16 MiB)")
    fragments, framed = framed_lengths(lengths, layout.max_payload)
    ends = np.cumsum(framed)  # term bytes up to and including each message
    term_length = layout.term_length
    blocks: list[TermBlock] = []
    first = 0
    while first < count:
        term_offset = position & (term_length - 1)
        remaining = term_length - term_offset
        base = int(ends[first - 1]) if first else 0
        last = int(np.searchsorted(ends, base + remaining, side="right"))  # messages [first, last) fit
        if last == first:
            blocks.append(_padding_block(position, remaining, layout))
            position += remaining
            continue
        used = int(ends[last - 1]) - base
        pad = remaining - used if last < count else 0
        blocks.append(_data_block(values, offsets, reserved, lengths, fragments, first, last, position, used,
                                  pad, layout))
        position += used + pad
        first = last
    return blocks


def _header_words(position: int, layout: PublicationLayout) -> tuple[int, int]:
    term_offset = position & (layout.term_length - 1)
    term_id = compute_term_id_from_position(position, layout.bits, layout.initial_term_id)
    return term_offset, term_id


def _padding_block(position: int, length: int, layout: PublicationLayout) -> TermBlock:
    data = np.zeros(length, dtype=np.uint8)
    _write_pad_header(data, 0, length, position, layout)
    return TermBlock(position, data, np.empty(0, np.int64))


def _write_pad_header(data: np.ndarray, offset: int, length: int, position: int, layout: PublicationLayout) -> None:
    term_offset, term_id = _header_words(position, layout)
    words = data.view("<i4")
    at = offset // 4
    words[at] = length
    words[at + 1] = (UNFRAGMENTED << 8) | (HDR_TYPE_PAD << 16)
    words[at + 2] = term_offset
    words[at + 3] = layout.session_id
    words[at + 4] = layout.stream_id
    words[at + 5] = term_id


def _data_block(values: np.ndarray, offsets: np.ndarray, reserved: np.ndarray, lengths: np.ndarray,
                fragments: np.ndarray, first: int, last: int, position: int, used: int, pad: int,
                layout: PublicationLayout) -> TermBlock:
    max_payload = layout.max_payload
    kk = fragments[first:last]
    if bool((kk == 1).all()):
        frame_message = np.arange(first, last, dtype=np.int64)
        payload = lengths[first:last]
        source = offsets[first:last]
        flags: np.ndarray = np.full(payload.size, UNFRAGMENTED, dtype=np.int64)
    else:
        frame_message = np.repeat(np.arange(first, last, dtype=np.int64), kk)
        frame_starts = np.cumsum(kk) - kk
        fragment = np.arange(frame_message.size, dtype=np.int64) - np.repeat(frame_starts, kk)
        last_fragment = fragments[frame_message] - 1
        payload = np.where(fragment < last_fragment, max_payload,
                           lengths[frame_message] - last_fragment * max_payload)
        source = offsets[frame_message] + fragment * max_payload
        flags = np.where(fragment == 0, BEGIN_FRAG_FLAG, 0) | np.where(fragment == last_fragment, END_FRAG_FLAG, 0)
    frame_bytes = _aligned(payload + HEADER_LENGTH)
    frame_offsets = np.cumsum(frame_bytes) - frame_bytes
    data = np.zeros(used + pad, dtype=np.uint8)

    term_offset, term_id = _header_words(position, layout)
    stride = int(frame_bytes[0])
    if bool((frame_bytes == stride).all()):
        # Equal-size frames: write each header field as one strided column (no fancy indexing).
        count = frame_bytes.size
        words = data[: stride * count].view("<i4").reshape(count, stride // 4)
        longs = data[: stride * count].view("<i8").reshape(count, stride // 8)
    else:
        words = data.view("<i4")[frame_offsets[:, None] // 4 + np.arange(6)]  # a copy, written back below
        longs = None
    words[:, 0] = payload + HEADER_LENGTH
    words[:, 1] = (flags << 8) | (HDR_TYPE_DATA << 16)
    words[:, 2] = term_offset + frame_offsets
    words[:, 3] = layout.session_id
    words[:, 4] = layout.stream_id
    words[:, 5] = term_id
    if longs is None:
        data.view("<i4")[frame_offsets[:, None] // 4 + np.arange(6)] = words
        data.view("<i8")[frame_offsets // 8 + 3] = reserved[frame_message]
    else:
        longs[:, 3] = reserved[frame_message]

    _scatter_payloads(data, values, int(source[0]), int(source[-1] + payload[-1]), frame_offsets, payload,
                      frame_bytes)
    if pad:
        _write_pad_header(data, used, pad, position + used, layout)
    return TermBlock(position, data, frame_offsets)


def _scatter_payloads(data: np.ndarray, values: np.ndarray, source_start: int, source_end: int,
                      frame_offsets: np.ndarray, payload: np.ndarray, frame_bytes: np.ndarray) -> None:
    """Copy the payloads (contiguous in ``values``, in frame order) behind each frame header."""
    source = values[source_start:source_end]
    if source.size == 0:
        return
    width = int(payload[0])
    stride = int(frame_bytes[0])
    if width > 0 and bool((payload == width).all()) and bool((frame_bytes == stride).all()):
        # Equal-size frames: one strided 2-d copy.
        rows = data[: stride * payload.size].reshape(payload.size, stride)
        rows[:, HEADER_LENGTH:HEADER_LENGTH + width] = source.reshape(payload.size, width)
        return
    # Variable sizes: the payload bytes of ``data``, in order, are exactly ``source``; mark them
    # with a mask built by repeating (header+gap = False, payload = True) runs.
    gaps = np.empty(payload.size * 2, dtype=np.int64)
    gaps[0::2] = HEADER_LENGTH
    gaps[1::2] = payload
    gaps[2::2] += frame_bytes[:-1] - HEADER_LENGTH - payload[:-1]  # alignment gap of the previous frame
    pattern = np.zeros(gaps.size, dtype=np.bool_)
    pattern[1::2] = True
    mask = np.repeat(pattern, gaps)
    end = mask.size
    data[:end][mask] = source
