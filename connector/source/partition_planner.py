"""Turns (start offset, end offset) into replay ranges, one Spark partition each (pure logic).

A range [start, end) of one recording is read by one bounded replay. Ranges longer than
``maxBytesPerPartition`` are split at *term boundaries* only: a term always begins with a frame
and Aeron never lets a message cross a term (a message that does not fit is preceded by a PAD
frame and starts the next term), so a term boundary is both a valid replay position and a
message boundary, known without reading any data. Splits are therefore exact: the concatenation
of the splits is the original range, and partition_reader's rule "a range holds the messages
that end inside it" gives each message to exactly one split.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from aeron_spark.connector.source.offsets import RecordingPositions


@dataclass(frozen=True)
class RecordingLayout:
    """What planning needs to know about a recording (from its descriptor)."""

    recording_id: int
    start_position: int
    term_length: int


@dataclass(frozen=True)
class ReplayRange:
    recording_id: int
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


class ReplayPartition(InputPartition):
    """A picklable Spark partition holding one replay range."""

    def __init__(self, replay_range: ReplayRange) -> None:
        super().__init__(replay_range)
        self.replay_range = replay_range

    def __repr__(self) -> str:
        r = self.replay_range
        return f"ReplayPartition(recording={r.recording_id}, [{r.start}, {r.end}))"


class PlanningError(ValueError):
    pass


def range_starts(start: RecordingPositions, end: RecordingPositions,
                 layouts: Mapping[int, RecordingLayout]) -> dict[int, int]:
    """Where each recording of ``end`` is read from: its start offset, or its first position if new."""
    starts: dict[int, int] = {}
    for recording_id in end:
        if recording_id in start:
            starts[recording_id] = start[recording_id]
        elif recording_id in layouts:
            starts[recording_id] = layouts[recording_id].start_position
        else:
            raise PlanningError(f"recording {recording_id} is new in this batch but its descriptor is unknown")
    return starts


def plan_ranges(start: RecordingPositions, end: RecordingPositions,
                layouts: Mapping[int, RecordingLayout], max_bytes_per_partition: int,
                min_partitions: int = 1) -> list[ReplayRange]:
    """One range per recording with data, split into pieces of about equal size: as many as
    ``max_bytes_per_partition`` requires, at least ``min_partitions``, and a multiple of it (so
    that with min_partitions = cores no core waits alone for a last piece). Pieces are rounded up
    to whole terms: splits fall on term boundaries only."""
    if max_bytes_per_partition <= 0:
        raise PlanningError(f"maxBytesPerPartition must be > 0, got {max_bytes_per_partition}")
    if min_partitions < 1:
        raise PlanningError(f"minPartitions must be >= 1, got {min_partitions}")
    spans: list[tuple[int, int, int, int]] = []
    for recording_id, first in range_starts(start, end, layouts).items():
        last = end[recording_id]
        if last < first:
            raise PlanningError(
                f"recording {recording_id}: end position {last} is before start position {first}")
        if last > first:
            term_length = layouts[recording_id].term_length if recording_id in layouts else 0
            spans.append((recording_id, first, last, term_length))
    total = sum(last - first for _, first, last, _ in spans)
    pieces = max(min_partitions, -(-total // max_bytes_per_partition))
    pieces = -(-pieces // min_partitions) * min_partitions
    share = max(1, -(-total // pieces))
    ranges: list[ReplayRange] = []
    for recording_id, first, last, term_length in spans:
        whole_terms = -(-share // term_length) * term_length if term_length > 0 else share
        cuts = split_points(first, last, term_length, min(max_bytes_per_partition, whole_terms))
        ranges.extend(ReplayRange(recording_id, a, b) for a, b in zip(cuts, cuts[1:]))
    return ranges


def split_points(first: int, last: int, term_length: int, max_bytes: int) -> list[int]:
    """[first, cut1, ..., last] with every inner cut a term boundary and pieces near max_bytes.

    Each piece is at most max_bytes long unless a single term (from a boundary) is longer, in which
    case the piece is that term (a term cannot be split without reading it).
    """
    if last - first <= max_bytes or term_length <= 0:
        return [first, last]
    if term_length & (term_length - 1):
        raise PlanningError(f"term length {term_length} is not a power of two")
    cuts = [first]
    while last - cuts[-1] > max_bytes:
        previous = cuts[-1]
        cut = (previous + max_bytes) // term_length * term_length  # last boundary within budget
        if cut <= previous:
            cut = (previous // term_length + 1) * term_length        # budget < one term: take a term
        if cut >= last:
            break
        cuts.append(cut)
    cuts.append(last)
    return cuts
