"""startingTimestamp / startingPositionsByTimestamp / endingTimestamp / endingPositionsByTimestamp
-> positions, on the Spark driver (initialOffset, batch planning). Like Kafka's offsetsForTimes,
resolved once: a stream's result travels as positions in batch 0's logged end (first_batch_start;
or in the source's own checkpointLocation file when it has one: initial_offset_store), so a restart
resumes by position and never resolves the time again.

Per recording, with ``T`` its time (docs/positions.md, Starting at a time):

1. the descriptor decides when it can (the archive's own clock, no replay):
   started at or after ``T`` -> its start position; stopped before ``T`` -> its recorded end
   (a start there reads nothing of it, an end there reads all of it);
2. otherwise ``T`` falls inside the recording, and the message times decide: the first message
   whose time is at or after ``T`` (timestamp_positions.TermBisection over bounded replays). Its
   first frame is the start (so it is the first row), or the end (so it is the first row not read);
3. no such message: an end is the recorded end (Kafka: latest); a start follows
   ``startingPositionsByTimestampStrategy``: ``error`` fails naming the recording, ``latest``
   starts at the recorded end.

Message times come from ``message_time.message_time_for(options)``; without a time source step 2
is an error naming the options that give one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ContextManager

from aeron_spark.archive.client import RecordingDescriptor

from aeron_spark.connector.source.message_time import MessageTime, message_time_for
from aeron_spark.connector.source.offset_reader import OffsetReader, RecordingNotFound
from aeron_spark.connector.source.offsets import RecordingPositions
from aeron_spark.connector.source.options import SourceOptions, TimeSpec
from aeron_spark.connector.source.timestamp_positions import RecordedSpan, TermBisection

NANOS_PER_MILLI = 1_000_000


class NoMessageAtTime(ValueError):
    """startingPositionsByTimestampStrategy=error and a recording has no message at or after the time."""


class MessageTimesUnavailable(ValueError):
    """A time falls inside a recording but the options give no message time to find it with."""


def resolve_starting(options: SourceOptions, offset_reader: OffsetReader) -> RecordingPositions:
    if options.starting_time is None:
        return offset_reader.resolve(options.starting, "startingPositions")
    return _resolve(options, offset_reader, options.starting_time, is_start=True)


def resolve_ending(options: SourceOptions, offset_reader: OffsetReader) -> RecordingPositions:
    if options.ending_time is None:
        return offset_reader.resolve(options.ending, "endingPositions")
    return _resolve(options, offset_reader, options.ending_time, is_start=False)


def _resolve(options: SourceOptions, offset_reader: OffsetReader, spec: TimeSpec, *,
             is_start: bool) -> RecordingPositions:
    recordings = offset_reader.known_recordings(force_discovery=True)
    unknown = sorted({rid for rid, _ in spec.by_recording} - set(recordings))
    if unknown:
        raise RecordingNotFound(
            f"option {spec.option_name} names recording(s) {unknown}, which "
            + ("are not in the archive" if options.recording_ids is not None
               else f"do not match {options.selection.describe()}"))
    latest, vanished = offset_reader.latest_positions(sorted(recordings))
    message_time = message_time_for(options)
    positions: dict[int, int] = {}
    for recording_id, descriptor in sorted(recordings.items()):
        if recording_id in vanished:
            continue
        time_ms = spec.time_ms_for(recording_id)
        if time_ms is None:  # not named: earliest for a start, latest for an end (as with positions)
            positions[recording_id] = descriptor.start_position if is_start else latest[recording_id]
            continue
        positions[recording_id] = _position_at(
            options, offset_reader, spec, descriptor, latest[recording_id], time_ms, message_time, is_start)
    return RecordingPositions(positions)


def _position_at(options: SourceOptions, offset_reader: OffsetReader, spec: TimeSpec,
                 descriptor: RecordingDescriptor, recorded_end: int, time_ms: int,
                 message_time: MessageTime | None, is_start: bool) -> int:
    recording_id = descriptor.recording_id
    if descriptor.start_timestamp >= time_ms:
        return descriptor.start_position
    if not descriptor.is_active and descriptor.stop_timestamp < time_ms:
        return recorded_end
    if message_time is None:
        raise MessageTimesUnavailable(
            f"option {spec.option_name}: the time {time_ms} falls inside recording {recording_id} (recorded "
            f"from {descriptor.start_timestamp} to "
            f"{'now' if descriptor.is_active else descriptor.stop_timestamp} ms since the epoch), and the "
            "source knows no time of its messages to find the first one at or after it: set "
            "includeTimestamp=true when the publisher's reserved value is the time in nanoseconds since "
            "the epoch (or sbe.timestampField for a time field of SBE messages)")
    span = RecordedSpan(descriptor.start_position, recorded_end, descriptor.term_buffer_length)

    def read_frames(start: int, end: int) -> ContextManager[Iterator[tuple[int, bytes]]]:
        return offset_reader.access.replay(recording_id, start, end, options.replay)

    found = TermBisection(span, read_frames, message_time).first_at_or_after(time_ms * NANOS_PER_MILLI)
    if found is not None:
        return found.position
    if not is_start or options.starting_time_strategy == "latest":
        return recorded_end
    raise NoMessageAtTime(
        f"option {spec.option_name}: recording {recording_id} has no message at or after {time_ms} ms since "
        f"the epoch (read up to position {recorded_end}); set startingPositionsByTimestampStrategy=latest to "
        "start such a recording at its latest position instead")
