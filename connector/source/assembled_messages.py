"""Whole messages as numpy arrays (``AssembledMessages``), what ``message_batches`` assembles from
frames and turns into RecordBatches, and the few operations on them that the assembler and the
sink-debris filter (``sink_debris``) share: gathering payload ranges, selecting and slicing
messages (sans-IO, numpy and Arrow compute only).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class AssembledMessages:
    """Complete messages found in a buffer, plus where an unfinished trailing message begins."""

    end_positions: np.ndarray  # int64, position after each message's last frame
    reserved: np.ndarray       # int64, reserved_value of each message's first frame
    value_offsets: np.ndarray  # int32, len = messages + 1, into `payload`
    payload: np.ndarray        # uint8, the payloads back to back
    carry_offset: int          # byte offset of an unfinished message's BEGIN frame, or buffer size
    leading_fragments: int     # DATA frames before the first BEGIN (a message begun earlier)
    dropped_fragments: int     # other DATA frames that belong to no complete message
    dropped_positions: np.ndarray | None = None  # int64, where each dropped frame begins (None: none)

    @property
    def count(self) -> int:
        return int(self.end_positions.size)


@dataclass
class BuilderStats:
    """What a ``MessageBatchBuilder`` assembled and dropped (its ``SinkDebrisFilter`` counts here too)."""

    messages: int = 0
    payload_bytes: int = 0
    leading_fragments: int = 0
    dropped_fragments: int = 0
    unfinished_bytes: int = 0
    debris_messages: int = 0   # sink recordings: messages of a dead commit, skipped
    debris_fragments: int = 0  # sink recordings: a dead commit's unfinished message, skipped


def gather_ranges(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """data[starts[0]:stops[0]] + data[starts[1]:stops[1]] + ... for disjoint, ordered ranges."""
    if starts.size == 0:
        return np.empty(0, np.uint8)
    lengths = stops - starts
    width = int(lengths[0])
    if starts.size > 1 and width > 0 and np.all(lengths == width):
        strides = np.diff(starts)
        stride = int(strides[0])
        if np.all(strides == stride):
            # Equal payloads at a fixed stride (fixed-size messages): copy through a 2-d view.
            base = data[int(starts[0]):]
            rows = np.lib.stride_tricks.as_strided(base, shape=(starts.size, width), strides=(stride, 1))
            return rows.copy().reshape(-1)  # a copy: the staging buffer is reused
    # Mask = (gap before range, range) pairs expanded by np.repeat, packed to an Arrow bitmap,
    # and applied by Arrow's filter kernel (a numpy cumsum or boolean index is 2-4x slower).
    gaps = starts - np.r_[0, stops[:-1]]
    counts = np.empty(2 * starts.size + 1, dtype=np.int64)
    counts[0:-1:2], counts[1:-1:2], counts[-1] = gaps, lengths, data.size - int(stops[-1])
    pattern = np.zeros(counts.size, dtype=np.bool_)
    pattern[1:-1:2] = True
    bits = np.packbits(np.repeat(pattern, counts), bitorder="little")
    arrow_mask = pa.Array.from_buffers(pa.bool_(), data.size, [None, pa.py_buffer(bits)])
    arrow_data = pa.Array.from_buffers(pa.uint8(), data.size, [None, pa.py_buffer(data)])
    kept = pc.filter(arrow_data, arrow_mask)
    # np.frombuffer, not Array.to_numpy: that imports pandas (~1 s in every fresh Spark worker).
    return np.frombuffer(kept.buffers()[1], dtype=np.uint8, count=len(kept), offset=kept.offset)


def slice_messages(messages: AssembledMessages, first: int, stop: int) -> AssembledMessages:
    """Messages [first, stop) (views, no copy of the payload)."""
    offsets = messages.value_offsets
    low, high = int(offsets[first]), int(offsets[stop])
    return dataclasses.replace(messages, end_positions=messages.end_positions[first:stop],
                               reserved=messages.reserved[first:stop],
                               value_offsets=(offsets[first:stop + 1] - np.int32(low)).astype(np.int32, copy=False),
                               payload=messages.payload[low:high], dropped_fragments=0, dropped_positions=None)


def select_messages(messages: AssembledMessages, keep: np.ndarray) -> AssembledMessages:
    """The messages where ``keep`` is true."""
    starts, stops = messages.value_offsets[:-1][keep], messages.value_offsets[1:][keep]
    lengths = (stops - starts).astype(np.int64)
    value_offsets = np.zeros(lengths.size + 1, dtype=np.int32)
    np.cumsum(lengths, out=value_offsets[1:])
    return dataclasses.replace(messages, end_positions=messages.end_positions[keep],
                               reserved=messages.reserved[keep], value_offsets=value_offsets,
                               payload=gather_ranges(messages.payload, starts.astype(np.int64), stops.astype(np.int64)))
