"""Where a stream's first batch starts, kept in Spark's own offset log instead of a store.

Why: Spark does not log the start of batch 0 and asks ``initialOffset()`` for it again (twice per
run, and after a restart before batch 0 committed), so a start resolved on each call ("latest",
"earliest" after a purge, a time whose message is not recorded yet) could differ between calls.
Spark does log batch 0's END (``offsets/0``) before the batch runs, and after a restart runs batch 0
again with that logged end. So the resolved start travels inside that end:

* ``initialOffset()`` is symbolic, the same on every call and resolving nothing:
  ``{"start": "latest"}`` (the starting option as given: earliest, latest, positions JSON, or
  ``startingTimestamp=...`` / ``startingPositionsByTimestamp=...``);
* ``latestOffset(symbolic)`` resolves the start once (what the store's ``get_or_create`` did) and
  returns batch 0's end carrying it:
  ``{"<recordingId>": <end>, ..., "resolvedStart": {"<recordingId>": <start>, ...}}``;
* ``partitions(symbolic, end)`` takes the start from that end. Later ends are plain positions
  (a later start is the previous end, which Spark logs).

A query stopped before ``offsets/0`` is written has not begun a batch: its next run resolves the
start again (as Kafka with a start it could not log).
"""

from __future__ import annotations

from collections.abc import Mapping

from aeron_spark.connector.source.offsets import OffsetFormatError, RecordingPositions
from aeron_spark.connector.source.options import SourceOptions

START_KEY = "start"
RESOLVED_START_KEY = "resolvedStart"


def symbolic_start(options: SourceOptions) -> dict[str, str]:
    """The initial offset: what the options say the start is, not where it resolves to."""
    if options.starting_time is not None:
        return {START_KEY: options.starting_time.describe()}
    return {START_KEY: options.starting.describe()}


def is_symbolic_start(offset: Mapping[str, object]) -> bool:
    return START_KEY in offset


def end_carrying_start(end: RecordingPositions, start: RecordingPositions) -> dict[str, object]:
    """Batch 0's end offset with the start it was planned from (recording keys first, as usual)."""
    return {**end.to_offset(), RESOLVED_START_KEY: dict(start.to_offset())}


def parse_end(offset: Mapping[str, object], what: str) -> tuple[RecordingPositions, RecordingPositions | None]:
    """An offset's positions, and the start it carries (batch 0's end only, else None)."""
    if is_symbolic_start(offset):
        raise OffsetFormatError(f"{what} {dict(offset)!r} is a symbolic start, not positions")
    if RESOLVED_START_KEY not in offset:
        return RecordingPositions.from_offset(offset, what), None
    carried = offset[RESOLVED_START_KEY]
    if not isinstance(carried, Mapping):
        raise OffsetFormatError(
            f"{what}: {RESOLVED_START_KEY} must be a JSON object {{\"<recordingId>\": <position>}}, got {carried!r}")
    positions = {key: value for key, value in offset.items() if key != RESOLVED_START_KEY}
    return (RecordingPositions.from_offset(positions, what),
            RecordingPositions.from_offset(carried, f"{what} {RESOLVED_START_KEY}"))


def clamped_to_end(start: RecordingPositions, end: RecordingPositions) -> RecordingPositions:
    """A start resolved after its batch's end was fixed, never past that end (a "latest" resolved
    late is the end itself: nothing of that recording in the batch)."""
    return RecordingPositions({recording_id: min(position, end[recording_id]) if recording_id in end else position
                               for recording_id, position in start.items()})
