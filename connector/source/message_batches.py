"""Replayed frames -> whole messages -> pyarrow RecordBatches (sans-IO, numpy only).

The bulk path of the source: no Python code runs per frame or per row.

* ``walk_frames`` reads the headers of every frame of a block of consecutive frames; the frame
  starts come from driver_integration.frame.scan_frames (equal-length runs / pointer doubling,
  no per-frame Python).
* ``assemble_messages`` groups DATA frames into messages by their BEGIN/END flags exactly like
  Aeron's FragmentAssembler (fragments of an unfinished message are dropped when a new BEGIN
  arrives; PAD frames carry nothing) and gathers the payload bytes with one boolean mask.
* ``MessageBatchBuilder`` stages copied blocks, assembles them in large chunks and carries a
  message cut by the chunk end into the next chunk; for a sink recording it passes the messages
  through ``sink_debris.SinkDebrisFilter`` (commit markers and a dead commit's debris are not rows).

Row meaning (see docs/options.md): ``position`` is the stream position just after the message's
last frame (Aeron's ``Header.position()`` for a reassembled message), so a range [start, end)
holds exactly the messages with ``start < position <= end``; ``reserved_value`` is that of the
message's first frame; session and stream id come from the recording descriptor because a replay
rewrites them in every frame.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from aeron_spark.driver_integration.frame import (
    BEGIN_FRAG_FLAG as FLAG_BEGIN,
    END_FRAG_FLAG as FLAG_END,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA as TYPE_DATA,
    HDR_TYPE_PAD as TYPE_PAD,
    HEADER_LENGTH,
    StopReason,
    scan_frames,
)

from aeron_spark.connector.source.assembled_messages import AssembledMessages, BuilderStats, gather_ranges
from aeron_spark.connector.source.sink_debris import SinkDebrisFilter

DEFAULT_TARGET_BATCH_BYTES = 8 << 20
UNFRAGMENTED = FLAG_BEGIN | FLAG_END
# Aeron's smallest term length; every term length is a power-of-two multiple, so a term's PAD
# frame ends on a multiple of it.
MIN_TERM_LENGTH = 64 * 1024
# Arrow `binary` has int32 offsets: one batch must hold < 2 GiB of payload.
MAX_BATCH_PAYLOAD_BYTES = (1 << 31) - 1

# Declared NOT NULL (no value is ever null): Spark's conversion of each row from Arrow is ~18%
# cheaper for non-nullable columns (10 M x 32 B rows, measured: docs/performance.md).
BASE_FIELDS = (
    pa.field("recording_id", pa.int64(), nullable=False),
    pa.field("position", pa.int64(), nullable=False),
    pa.field("payload", pa.binary(), nullable=False),
    pa.field("session_id", pa.int32(), nullable=False),
    pa.field("stream_id", pa.int32(), nullable=False),
    pa.field("reserved_value", pa.int64(), nullable=False),
)
TIMESTAMP_FIELD = pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False)
ALL_FIELDS = BASE_FIELDS + (TIMESTAMP_FIELD,)
_FIELDS_BY_NAME = {f.name: f for f in ALL_FIELDS}


def arrow_schema(include_timestamp: bool) -> pa.Schema:
    return pa.schema(BASE_FIELDS + ((TIMESTAMP_FIELD,) if include_timestamp else ()))


@dataclass(frozen=True)
class OutputColumns:
    """Which columns a batch carries, in order, and which a user's schema declared nullable (no
    value is ever null; nullability only has to match what Spark expects). A narrower selection
    is cheaper end to end: Spark converts every column of every row from Arrow, and a Python
    source gets no column pruning."""

    names: tuple[str, ...]
    nullable: frozenset[str] = frozenset()

    @classmethod
    def default(cls, include_timestamp: bool) -> "OutputColumns":
        return cls(tuple(f.name for f in arrow_schema(include_timestamp)))

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([_FIELDS_BY_NAME[name].with_nullable(name in self.nullable) for name in self.names])


class FrameStreamError(ValueError):
    """Replayed bytes are not a well-formed, gap-free sequence of Aeron frames."""


@dataclass(frozen=True)
class FrameTable:
    """Header fields of every frame of a buffer, in order (numpy arrays of equal length)."""

    offsets: np.ndarray   # int64 byte offset of the frame in the buffer
    lengths: np.ndarray   # int64 frame_length (header + payload, unaligned)
    flags: np.ndarray     # uint8
    types: np.ndarray     # uint16
    reserved: np.ndarray  # int64 reserved_value

    @property
    def count(self) -> int:
        return int(self.offsets.size)


#: Frames as the replays hand them over: a view into a term buffer, a copy, or a numpy array.
FrameBuffer = bytes | bytearray | memoryview | np.ndarray


def _as_bytes_array(buffer: FrameBuffer) -> np.ndarray:
    array = np.frombuffer(buffer, dtype=np.uint8) if not isinstance(buffer, np.ndarray) else buffer
    if array.dtype != np.uint8 or array.ndim != 1:
        raise TypeError("frames must be a 1-d uint8 buffer")
    return array


def walk_frames(buffer: FrameBuffer) -> FrameTable:
    """Every frame of a buffer that holds whole, consecutive frames from its first byte."""
    data = _as_bytes_array(buffer)
    size = data.size
    if size % FRAME_ALIGNMENT:
        raise FrameStreamError(f"a block of frames must be a multiple of {FRAME_ALIGNMENT} bytes, got {size}")
    slot_count = size // FRAME_ALIGNMENT
    if slot_count == 0:
        empty = np.empty(0, np.int64)
        return FrameTable(empty, empty, np.empty(0, np.uint8), np.empty(0, np.uint16), empty)
    contiguous = np.ascontiguousarray(data)
    scan = scan_frames(contiguous)
    if scan.stop_reason is not StopReason.END:
        raise FrameStreamError(
            f"malformed frame at byte {scan.end} of a {size}-byte block: {scan.stop_reason.value} "
            f"(frame_length {scan.stop_frame_length})")
    offsets = scan.offsets
    lengths = contiguous.view("<i4")[offsets // 4].astype(np.int64)
    flags = contiguous[offsets + 5]
    types = contiguous.view("<u2")[offsets // 2 + 3]  # offsets are 32-aligned: one gather, no shifts
    reserved = contiguous.view("<i8")[offsets // 8 + 3]  # fancy indexing copies already
    unknown = (types != TYPE_DATA) & (types != TYPE_PAD)
    if unknown.any():
        at = int(offsets[np.argmax(unknown)])
        raise FrameStreamError(f"frame at byte {at} has type {int(types[np.argmax(unknown)])}; "
                               "a recording holds only DATA (1) and PAD (0) frames")
    return FrameTable(offsets, lengths, flags, types, reserved)


def aligned(length: np.ndarray | int) -> np.ndarray | int:
    return (length + FRAME_ALIGNMENT - 1) // FRAME_ALIGNMENT * FRAME_ALIGNMENT


def assemble_messages(buffer: FrameBuffer, base_position: int, min_end_position: int | None = None) -> AssembledMessages:
    """Whole messages of a buffer of frames that starts at stream position ``base_position``.

    Only messages ending after ``min_end_position`` are returned (those ending at or before it
    belong to an earlier range).
    """
    data = _as_bytes_array(buffer)
    uniform = _uniform_whole_messages(data, base_position, min_end_position)
    if uniform is not None:
        return uniform
    frames = walk_frames(data)
    is_data = frames.types == TYPE_DATA
    data_index = np.flatnonzero(is_data)
    flags = frames.flags[data_index]
    if data_index.size and np.all((flags & UNFRAGMENTED) == UNFRAGMENTED):
        return _unfragmented_messages(data, frames, data_index, base_position, min_end_position)
    begins = (flags & FLAG_BEGIN) != 0
    ends = (flags & FLAG_END) != 0
    message_of = np.cumsum(begins, dtype=np.int64) - 1   # -1: before the first BEGIN
    begin_at = np.flatnonzero(begins)                     # index (among DATA frames) of each BEGIN
    ends_before = np.cumsum(ends, dtype=np.int64) - ends  # END frames strictly before each frame
    leading = int(begin_at[0]) if begin_at.size else int(data_index.size)

    if begin_at.size == 0:
        return _no_messages(data.size, leading)

    message_ends_before = ends_before[begin_at]
    safe_message = np.maximum(message_of, 0)
    # A frame belongs to its message if no END of that message came before it.
    in_message = (message_of >= 0) & (ends_before - message_ends_before[safe_message] == 0)
    ends_in_message = np.add.reduceat(ends.astype(np.int64), begin_at)
    complete = ends_in_message > 0

    frame_offsets = frames.offsets[data_index]
    frame_lengths = frames.lengths[data_index]
    end_frame = in_message & ends
    message_end_positions = np.full(begin_at.size, -1, dtype=np.int64)
    message_end_positions[message_of[end_frame]] = (
        base_position + frame_offsets[end_frame] + aligned(frame_lengths[end_frame]))
    keep = complete.copy()
    if min_end_position is not None:
        keep &= message_end_positions > min_end_position

    carry_offset = data.size
    if not complete[-1]:
        carry_offset = int(frame_offsets[begin_at[-1]])
    selected = in_message & keep[safe_message]
    carried_frames = 0 if complete[-1] else int(data_index.size - begin_at[-1])
    in_complete = in_message & complete[safe_message]
    in_complete_message = int(np.count_nonzero(in_complete))
    dropped = int(data_index.size) - leading - in_complete_message - carried_frames
    dropped_positions = None
    if dropped:  # rare (a torn message): where, so a sink reader can tell a dead commit's from a loss
        accounted = in_complete.copy()
        accounted[:leading] = True
        if carried_frames:
            accounted[-carried_frames:] = True
        dropped_positions = base_position + frame_offsets[~accounted]

    payload_starts = frame_offsets[selected] + HEADER_LENGTH
    payload_ends = frame_offsets[selected] + frame_lengths[selected]
    payload = gather_ranges(data, payload_starts, payload_ends)
    kept_messages = np.flatnonzero(keep)
    selected_message = message_of[selected]
    lengths = payload_ends - payload_starts
    if kept_messages.size:
        first_of_each = np.flatnonzero(np.r_[True, selected_message[1:] != selected_message[:-1]])
        message_lengths = np.add.reduceat(lengths, first_of_each)
    else:
        message_lengths = np.empty(0, np.int64)
    if int(message_lengths.sum()) > MAX_BATCH_PAYLOAD_BYTES:
        raise FrameStreamError("more than 2 GiB of payload in one batch; lower the staging size")
    value_offsets = np.zeros(kept_messages.size + 1, dtype=np.int32)
    np.cumsum(message_lengths, out=value_offsets[1:])
    reserved = frames.reserved[data_index[begin_at[kept_messages]]]
    return AssembledMessages(
        end_positions=message_end_positions[kept_messages],
        reserved=reserved,
        value_offsets=value_offsets,
        payload=payload,
        carry_offset=carry_offset,
        leading_fragments=leading,
        dropped_fragments=dropped,
        dropped_positions=dropped_positions,
    )


def _uniform_whole_messages(data: np.ndarray, base_position: int,
                            min_end_position: int | None) -> AssembledMessages | None:
    """assemble_messages for runs of equal, unfragmented DATA frames separated by PAD frames (a
    term end), or None. Each run goes through :func:`_uniform_run`; a PAD only ends a run."""
    if data.size < HEADER_LENGTH or data.size % FRAME_ALIGNMENT:
        return None
    runs: list[AssembledMessages] = []
    offset = 0
    while offset < data.size:
        run_length, pad_length = _uniform_run_length(data[offset:])
        if run_length == 0 and pad_length == 0:
            return None
        if pad_length and (base_position + offset + run_length + pad_length) % MIN_TERM_LENGTH:
            return None  # a PAD not ending a term (appended padding): the general path handles it
        if run_length:
            run = _uniform_run(data[offset:offset + run_length], base_position + offset, min_end_position)
            if run is None:
                return None
            runs.append(run)
        offset += run_length + pad_length
        if len(runs) > 64:
            return None  # many short runs: the general path is as fast
    if len(runs) == 1:
        return dataclasses.replace(runs[0], carry_offset=int(data.size))
    if not runs:
        return _no_messages(int(data.size), 0)
    payload_sizes = [int(run.payload.size) for run in runs]
    if sum(payload_sizes) > MAX_BATCH_PAYLOAD_BYTES:
        raise FrameStreamError("more than 2 GiB of payload in one batch; lower the staging size")
    value_offsets = np.concatenate([runs[0].value_offsets] + [
        run.value_offsets[1:] + np.int32(shift)
        for run, shift in zip(runs[1:], np.cumsum(payload_sizes)[:-1])])
    return AssembledMessages(
        end_positions=np.concatenate([run.end_positions for run in runs]),
        reserved=np.concatenate([run.reserved for run in runs]),
        value_offsets=value_offsets.astype(np.int32, copy=False),
        payload=np.concatenate([run.payload for run in runs]),
        carry_offset=int(data.size),
        leading_fragments=0,
        dropped_fragments=0,
    )


def _uniform_run_length(data: np.ndarray) -> tuple[int, int]:
    """(bytes of equal frames from offset 0, aligned length of the PAD frame right after them, 0
    if none); (0, 0) when the buffer is not equal frames up to its end or a PAD."""
    length = int(data[:4].view("<i4")[0])
    frame_type = int(data[6:8].view("<u2")[0])
    if frame_type == TYPE_PAD:
        pad = int(aligned(length))
        return (0, pad) if HEADER_LENGTH <= pad <= data.size else (0, 0)
    if length <= HEADER_LENGTH:
        return 0, 0
    stride = int(aligned(length))
    count = data.size // stride
    if count == 0:
        return 0, 0
    lengths = data[: count * stride].reshape(count, stride)[:, :4].view("<i4")[:, 0]
    differs = np.flatnonzero(lengths != length)
    run = int(differs[0]) if differs.size else count
    run_bytes = run * stride
    if run_bytes == data.size:
        return run_bytes, 0
    if data.size - run_bytes < HEADER_LENGTH:
        return 0, 0
    pad_length = int(data[run_bytes:run_bytes + 4].view("<i4")[0])
    pad_type = int(data[run_bytes + 6:run_bytes + 8].view("<u2")[0])
    pad = int(aligned(pad_length))
    if pad_type != TYPE_PAD or pad < HEADER_LENGTH or run_bytes + pad > data.size:
        return 0, 0
    return run_bytes, pad


def _uniform_run(data: np.ndarray, base_position: int,
                 min_end_position: int | None) -> AssembledMessages | None:
    """assemble_messages for a buffer of equal, unfragmented DATA frames (fixed-size messages, no
    PAD), or None. The buffer is viewed as a (frames, stride) matrix: headers are checked and
    fields read through strided column views, with no frame walk and no index gathers."""
    if data.size < HEADER_LENGTH or data.size % FRAME_ALIGNMENT:
        return None
    length = int(data[:4].view("<i4")[0])
    if length <= HEADER_LENGTH:
        return None
    stride = int(aligned(length))
    if data.size % stride:
        return None
    count = data.size // stride
    rows = data.reshape(count, stride)
    words = rows[:, :8].view("<u4")  # frame_length; version | flags << 8 | type << 16
    if not (np.all(words[:, 0] == length)
            and np.all((words[:, 1] & (UNFRAGMENTED << 8 | 0xFFFF << 16)) == (UNFRAGMENTED << 8 | TYPE_DATA << 16))):
        return None
    first = 0
    if min_end_position is not None and min_end_position >= base_position:
        first = min(count, (min_end_position - base_position) // stride)  # message i ends at base + (i+1)*stride
    kept = count - first
    payload_length = length - HEADER_LENGTH
    if kept * payload_length > MAX_BATCH_PAYLOAD_BYTES:
        raise FrameStreamError("more than 2 GiB of payload in one batch; lower the staging size")
    return AssembledMessages(
        end_positions=base_position + np.arange(first + 1, count + 1, dtype=np.int64) * stride,
        reserved=rows[first:, 24:32].view("<i8")[:, 0].copy(),
        value_offsets=np.arange(kept + 1, dtype=np.int32) * np.int32(payload_length),
        payload=rows[first:, HEADER_LENGTH:length].copy().reshape(-1),
        carry_offset=int(data.size),
        leading_fragments=0,
        dropped_fragments=0,
    )


def _unfragmented_messages(data: np.ndarray, frames: FrameTable, data_index: np.ndarray, base_position: int,
                           min_end_position: int | None) -> AssembledMessages:
    """assemble_messages when every DATA frame is a whole message (BEGIN and END): the common case,
    about 4x faster than grouping fragments (no cumsum/reduceat over frames)."""
    if data_index.size == frames.count:
        offsets, lengths, reserved = frames.offsets, frames.lengths, frames.reserved
    else:
        offsets, lengths, reserved = (frames.offsets[data_index], frames.lengths[data_index],
                                      frames.reserved[data_index])
    end_positions = base_position + offsets + aligned(lengths)
    if min_end_position is not None:
        first = int(np.searchsorted(end_positions, min_end_position, side="right"))  # positions ascend
        if first:
            offsets, lengths, reserved, end_positions = (
                offsets[first:], lengths[first:], reserved[first:], end_positions[first:])
    count = int(offsets.size)
    payload_lengths = lengths - HEADER_LENGTH
    total = int(payload_lengths.sum())
    if total > MAX_BATCH_PAYLOAD_BYTES:
        raise FrameStreamError("more than 2 GiB of payload in one batch; lower the staging size")
    if count and int(lengths[0]) > HEADER_LENGTH and np.all(lengths == lengths[0]) \
            and int(offsets[-1] - offsets[0]) == (count - 1) * int(aligned(int(lengths[0]))):
        # Equal frames back to back (fixed-size messages): one strided copy.
        stride, start = int(aligned(int(lengths[0]))), int(offsets[0])
        rows = data[start:start + count * stride].reshape(count, stride)
        payload = rows[:, HEADER_LENGTH:int(lengths[0])].copy().reshape(-1)
    else:
        payload = gather_ranges(data, offsets + HEADER_LENGTH, offsets + lengths)
    value_offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(payload_lengths, out=value_offsets[1:])
    return AssembledMessages(
        end_positions=end_positions,
        reserved=reserved,
        value_offsets=value_offsets,
        payload=payload,
        carry_offset=int(data.size),
        leading_fragments=0,
        dropped_fragments=0,
    )


def _no_messages(size: int, leading: int) -> AssembledMessages:
    empty = np.empty(0, np.int64)
    return AssembledMessages(empty, empty, np.zeros(1, np.int32), np.empty(0, np.uint8), size, leading, 0)


class ConstantColumns:
    """Columns whose every value is the same (recording, session and stream id): one array per
    column, grown when a batch is longer, and sliced for each batch (Arrow arrays are immutable,
    so batches may share it) instead of a new filled array per batch."""

    def __init__(self) -> None:
        self._arrays: dict[tuple[int, str], pa.Array] = {}

    def get(self, value: int, dtype: str, count: int) -> pa.Array:
        array = self._arrays.get((value, dtype))
        if array is None or len(array) < count:
            array = self._arrays[(value, dtype)] = pa.array(np.full(count, value, dtype=dtype))
        return array.slice(0, count) if len(array) != count else array


def to_record_batch(messages: AssembledMessages, *, recording_id: int, session_id: int, stream_id: int,
                    include_timestamp: bool = False, columns: OutputColumns | None = None,
                    constants: ConstantColumns | None = None) -> pa.RecordBatch:
    """The batch of ``columns`` (default: the source schema, with timestamp if asked for); only
    the selected columns are built. ``constants``: a builder's cache of the constant columns."""
    selected = columns or OutputColumns.default(include_timestamp)
    count = messages.count
    constant = (constants or ConstantColumns()).get
    builders = {
        "recording_id": lambda: constant(recording_id, "int64", count),
        "position": lambda: pa.array(messages.end_positions),
        "payload": lambda: pa.Array.from_buffers(
            pa.binary(), count, [None, pa.py_buffer(messages.value_offsets), pa.py_buffer(messages.payload)]),
        "session_id": lambda: constant(session_id, "int32", count),
        "stream_id": lambda: constant(stream_id, "int32", count),
        "reserved_value": lambda: pa.array(messages.reserved),
        "timestamp": lambda: pa.Array.from_buffers(
            TIMESTAMP_FIELD.type, count, [None, pa.py_buffer(messages.reserved // 1000)]),
    }
    return pa.RecordBatch.from_arrays([builders[name]() for name in selected.names], schema=selected.schema)


@dataclass
class MessageBatchBuilder:
    """Stages replayed blocks of one recording and turns them into RecordBatches of whole messages.

    Blocks must be contiguous (each starts where the previous ended), so nothing can be skipped
    silently. ``allow_leading_fragments`` says whether frames of a message begun before the
    first block may be dropped (true only at the recording's first position, where the head of
    that message was never recorded).
    """

    recording_id: int
    session_id: int
    stream_id: int
    start_position: int
    min_end_position: int
    include_timestamp: bool = False
    allow_leading_fragments: bool = False
    columns: OutputColumns | None = None  # None: the default source schema
    target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES
    # Messages with this reserved value are not rows (the sink's commit markers; sink recordings only).
    # Set, the builder also skips a dead commit's debris: see ``SinkDebrisFilter``.
    drop_reserved_value: int | None = None
    stats: BuilderStats = field(default_factory=BuilderStats)

    def __post_init__(self) -> None:
        self._staging = np.empty(max(self.target_batch_bytes * 2, 1 << 16), dtype=np.uint8)
        self._staged = 0
        self._staging_position = self.start_position
        self._first_chunk = True
        self._constants = ConstantColumns()
        self._debris = None if self.drop_reserved_value is None else SinkDebrisFilter(
            self.drop_reserved_value, self.stats)

    @property
    def next_position(self) -> int:
        return self._staging_position + self._staged

    def add_block(self, block: FrameBuffer, position: int) -> list[pa.RecordBatch]:
        if position != self.next_position:
            raise FrameStreamError(
                f"recording {self.recording_id}: replay block at position {position}, expected "
                f"{self.next_position} (a gap or overlap would lose or duplicate messages)")
        incoming = _as_bytes_array(block)
        self._append(incoming)
        if self._staged >= self.target_batch_bytes:
            return self._assemble(final=False)
        return []

    def finish(self, next_batch_start: Callable[[], int | None] | None = None) -> list[pa.RecordBatch]:
        """Assemble what is staged; an unfinished last message is left for the next range.

        Sink recordings: ``next_batch_start``, called only when messages after the range's last
        marker are still held, returns the ``data_start`` of the first marker at or after the range
        end (None: unknown); held messages ending at or before it are debris. Without it they are
        released as rows (``SinkDebrisFilter``)."""
        batches = self._assemble(final=True)
        self.stats.unfinished_bytes = self._staged
        if self._debris is not None:
            following = next_batch_start() if next_batch_start is not None and self._debris.holding else None
            batches += self._record_batches(self._debris.finish(following))
        return batches

    def _append(self, incoming: np.ndarray) -> None:
        needed = self._staged + incoming.size
        if needed > self._staging.size:
            grown = np.empty(max(needed, self._staging.size * 2), dtype=np.uint8)
            grown[: self._staged] = self._staging[: self._staged]
            self._staging = grown
        self._staging[self._staged:needed] = incoming
        self._staged = needed

    def _assemble(self, final: bool) -> list[pa.RecordBatch]:
        if self._staged == 0:
            return []
        view = self._staging[: self._staged]
        messages = assemble_messages(view, self._staging_position, self.min_end_position)
        if messages.leading_fragments:
            if not (self._first_chunk and self.allow_leading_fragments):
                raise FrameStreamError(
                    f"recording {self.recording_id}: {messages.leading_fragments} fragment(s) at position "
                    f"{self._staging_position} continue a message whose first fragment was not replayed")
            self.stats.leading_fragments += messages.leading_fragments
        self._first_chunk = False
        if self._debris is None:
            self.stats.dropped_fragments += messages.dropped_fragments
        self.stats.messages += messages.count
        self.stats.payload_bytes += int(messages.payload.size)
        carry = messages.carry_offset
        remaining = self._staged - carry
        if remaining:
            self._staging[:remaining] = view[carry:].copy()
        self._staging_position += carry
        self._staged = remaining
        if self._debris is not None:
            return self._record_batches(self._debris.add(messages))
        if messages.count == 0:
            return []
        return self._record_batches([messages])

    def _record_batches(self, pieces: list[AssembledMessages]) -> list[pa.RecordBatch]:
        return [to_record_batch(messages, recording_id=self.recording_id, session_id=self.session_id,
                                stream_id=self.stream_id, include_timestamp=self.include_timestamp,
                                columns=self.columns, constants=self._constants)
                for messages in pieces if messages.count]


def first_frame_continues_a_message(block: FrameBuffer) -> bool:
    """True when a block starts with a DATA fragment that is not the first of its message."""
    data = _as_bytes_array(block)
    if data.size < HEADER_LENGTH:
        return False
    frame_type = int(data[6]) | (int(data[7]) << 8)
    return frame_type == TYPE_DATA and not (int(data[5]) & FLAG_BEGIN)
