"""Executor side: one replay range -> RecordBatches of whole messages.

Ownership rule that makes ranges exact: a range [start, end) yields exactly the messages whose
last frame ends inside it, i.e. ``start < position <= end`` (position = end of the message's last
frame). Batch ends come from rec-pos counters and may cut a fragmented message; then

* the range ending there leaves the message's first fragments unread (they end before the
  message does), and
* the next range starts on a continuation fragment: it first replays the message's head from
  the start of that term (Aeron never lets a message cross a term, so the head is there), then
  its own range, and drops every message that ended at or before ``start``.

At a recording's first position a message may have begun before the recording did; its
fragments are dropped (its head was never recorded), as Aeron's FragmentAssembler would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from aeron_spark.archive.client import RecordingDescriptor

from aeron_spark.connector.source.archive_access import ArchiveAccess
from aeron_spark.connector.source.data_loss import DataLossPolicy
from aeron_spark.connector.source.message_batches import MessageBatchBuilder, OutputColumns, first_frame_continues_a_message
from aeron_spark.connector.source.options import SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.sink_visibility import next_batch_start
from aeron_spark.connector.commit_markers import MARKER_RESERVED_VALUE, is_sink_recording
from aeron_spark.connector.options import ReplaySettings
from aeron_spark.connector.step_timings import StepTimings
from aeron_spark.connector.worker_gc import freeze_long_lived_objects

if TYPE_CHECKING:
    from aeron_spark.connector.source.sbe_columns import SbeColumns, SbeSettings

LOG = logging.getLogger("aeron_spark.connector")


def available_range(replay_range: ReplayRange, descriptor: RecordingDescriptor | None,
                    policy: DataLossPolicy) -> ReplayRange | None:
    """The part of a range still in the archive; reports what is lost (raises or warns)."""
    recording_id, start, end = replay_range.recording_id, replay_range.start, replay_range.end
    if descriptor is None:
        policy.report(f"recording {recording_id} is no longer in the archive; range [{start}, {end}) is lost")
        return None
    if start < descriptor.start_position:
        lost_to = min(end, descriptor.start_position)
        policy.report(f"recording {recording_id}: [{start}, {lost_to}) was purged or detached (the recording "
                      f"now starts at {descriptor.start_position})")
        start = lost_to
    if not descriptor.is_active and end > descriptor.stop_position:
        lost_from = max(start, descriptor.stop_position)
        policy.report(f"recording {recording_id}: [{lost_from}, {end}) was truncated (the recording now stops "
                      f"at {descriptor.stop_position})")
        end = lost_from
    if start >= end:
        return None
    return ReplayRange(recording_id, start, end)


def read_range(replay_range: ReplayRange, options: SourceOptions, access: ArchiveAccess) -> Iterator[pa.RecordBatch]:
    freeze_long_lived_objects()  # Spark's per-task gc.collect() then skips the imports (worker_gc.py)
    policy = DataLossPolicy(options.fail_on_data_loss)
    timings = StepTimings("source.read")
    descriptor = access.describe(replay_range.recording_id)
    timings.mark("describe")
    readable = available_range(replay_range, descriptor, policy)
    if readable is None or descriptor is None:
        return
    sbe_columns = None if options.sbe is None else _sbe_columns(options, options.sbe)
    columns = _builder_columns(options, sbe_columns)
    batches = _read_pumped(readable, descriptor, options, access, columns, timings)
    if sbe_columns is None:
        builder = yield from batches
    else:
        builder = yield from _decoded(batches, sbe_columns)
    recording_id, start, end = readable.recording_id, readable.start, readable.end
    stats = builder.stats
    if stats.dropped_fragments:
        policy.report(f"recording {recording_id}: {stats.dropped_fragments} fragment(s) in [{start}, {end}) "
                      "belong to no complete message")
    if stats.leading_fragments:
        LOG.info("recording %d: dropped %d fragment(s) of a message begun before the recording started",
                 recording_id, stats.leading_fragments)
    timings.finish()


def _decoded(batches: Generator[pa.RecordBatch, None, MessageBatchBuilder],
             columns: SbeColumns) -> Generator[pa.RecordBatch, None, MessageBatchBuilder]:
    """sbe.schema: each batch of whole messages as decoded rows (batches left empty are dropped)."""
    while True:
        try:
            batch = next(batches)
        except StopIteration as done:
            return done.value
        decoded = columns.convert(batch)
        if decoded.num_rows:
            yield decoded


def _sbe_columns(options: SourceOptions, sbe: SbeSettings) -> SbeColumns:
    """The decoded columns of ``sbe.schema``: the SBE decoder is imported only for such a read (every
    executor worker imports this module)."""
    from aeron_spark.connector.source.sbe_columns import SbeColumns
    return SbeColumns(sbe, options.include_timestamp, options.output_columns, options.nullable_columns,
                      options.widened_column_types)


def _builder_columns(options: SourceOptions, sbe_columns: SbeColumns | None) -> OutputColumns | None:
    """The columns of the batches of whole messages: what the user schema selects, or with
    sbe.schema the payload and the standard columns the decoded rows keep (None: the default)."""
    if sbe_columns is not None:
        return OutputColumns(sbe_columns.input_columns())
    if options.output_columns is None:
        return None
    return OutputColumns(options.output_columns, options.nullable_columns)


def _builder(readable: ReplayRange, descriptor: RecordingDescriptor, options: SourceOptions,
             first_block: bytes, columns: OutputColumns | None) -> tuple[MessageBatchBuilder, int]:
    """The batch builder for a range, and where its feed starts (earlier than the range when the
    first block continues a message: its head is replayed from the start of the term)."""
    start = readable.start
    feed_start = start
    if first_frame_continues_a_message(first_block):
        term_start = start // descriptor.term_buffer_length * descriptor.term_buffer_length
        feed_start = max(descriptor.start_position, term_start)
    builder = MessageBatchBuilder(
        recording_id=readable.recording_id,
        session_id=descriptor.session_id,
        stream_id=descriptor.stream_id,
        start_position=feed_start,
        min_end_position=start,
        include_timestamp=options.include_timestamp,
        columns=columns,
        allow_leading_fragments=feed_start == descriptor.start_position,
        drop_reserved_value=MARKER_RESERVED_VALUE if is_sink_recording(descriptor) else None,
    )
    return builder, feed_start


def _next_batch_start_after(end: int, descriptor: RecordingDescriptor, access: ArchiveAccess,
                            replay: ReplaySettings) -> Callable[[], int | None]:
    """For a sink recording whose range ends inside a batch: where the next marker says that
    batch's data starts, so rows held past the range's last marker are told from debris
    (``MessageBatchBuilder.finish`` calls it only when it holds such rows)."""
    def find() -> int | None:
        limit = (access.live_position(descriptor.recording_id) if descriptor.is_active
                 else descriptor.stop_position)
        return None if limit is None else next_batch_start(access, descriptor, end, limit, replay)
    return find


def _copy(view: memoryview, _position: int) -> bytes:
    return bytes(view)


def _read_pumped(readable: ReplayRange, descriptor: RecordingDescriptor, options: SourceOptions,
                 access: ArchiveAccess, columns: OutputColumns | None,
                 timings: StepTimings) -> Generator[pa.RecordBatch, None, MessageBatchBuilder]:
    """Each replayed block is copied once, from the term buffer straight into the builder's
    staging buffer (only the first block, needed before the builder exists, is copied twice)."""
    recording_id, start, end = readable.recording_id, readable.start, readable.end
    with access.replay_pump(recording_id, start, end, options.replay) as pump:
        timings.mark("replay set-up")
        first = pump.next_block(_copy)
        timings.mark("first block")
        if first is None:
            raise RuntimeError(f"recording {recording_id}: the replay of [{start}, {end}) delivered nothing")
        builder, feed_start = _builder(readable, descriptor, options, first[1], columns)
        if feed_start < start:
            with access.replay_pump(recording_id, feed_start, start, options.replay) as head:
                while (batches := head.next_block(builder.add_block)) is not None:
                    yield from batches[1]
        yield from builder.add_block(first[1], first[0])
        while (batches := pump.next_block(builder.add_block)) is not None:
            yield from batches[1]
        if builder.next_position != end:
            raise RuntimeError(f"recording {recording_id}: replay stopped at {builder.next_position}, "
                               f"range end is {end}")
        yield from builder.finish(_next_batch_start_after(end, descriptor, access, options.replay))
        timings.mark("read")
    timings.mark("replay close")
    return builder
