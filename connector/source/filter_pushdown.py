"""Spark filters of a batch read -> narrower replays (``DataSourceReader.pushFilters``; sans-IO).

Three columns can bound what is replayed, because the log is ordered by them:

* ``recording_id`` (=, IN, <, <=, >, >=): only the matching recordings are planned. Exact, so
  Spark is told the filter is handled;
* ``position`` (the end of a message's last frame): a replay can start only on a frame, and the
  only frames known without reading are term boundaries (a message never crosses a term), so
  the range is rounded out to whole terms and the filter is returned to Spark, which drops the
  few rows outside it;
* the column holding the message time the source can search for (``TimeColumn``): ``timestamp``
  with ``includeTimestamp=true`` (the reserved value as epoch ns, truncated to microseconds), or
  the ``sbe.timestampField`` column (``<field>`` with one selected message, ``<message>.<field>``
  with several; integers in ``sbe.timestampUnit``): the first message at or after each bound is
  found by bisecting terms (timestamp_positions.TermBisection, a few short replays) and its first
  frame is where the range starts or ends. Assumes message times do not decrease along a
  recording, as startingTimestamp does. The filter is returned to Spark too.

A message without a time: its SBE field is NULL, which no comparison matches; but with
``includeTimestamp`` (reserved value <= 0) it shows as a timestamp at or before the epoch, so
there a time bound is used only together with a lower bound after the epoch, which such rows
never match (otherwise an upper bound could cut off untimed rows that match it).

Anything else (other columns, NOT, values of another type) is returned to Spark untouched, so a
pushed read's rows always equal the unfiltered read's rows filtered by Spark.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from aeron_spark.connector.source.message_time import message_time_for, reserved_value_time
from aeron_spark.connector.source.options import SourceOptions
from aeron_spark.connector.source.partition_planner import RecordingLayout
from aeron_spark.connector.source.timestamp_positions import RecordedSpan

RECORDING_ID = ("recording_id",)
POSITION = ("position",)
TIMESTAMP = ("timestamp",)

NANOS_PER_MICRO = 1_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

#: (recording id, span to search, epoch ns) -> first frame of the first message at or after that
#: time in the span, None if there is none (TermBisection over replays of the recording).
FirstMessageAt = Callable[[int, RecordedSpan, int], "int | None"]


@dataclass(frozen=True)
class Bounds:
    """Inclusive bounds on an integer column; None: unbounded on that side."""

    low: int | None = None
    high: int | None = None
    values: frozenset[int] | None = None  # IN / = : the value is one of these

    def narrowed(self, low: int | None = None, high: int | None = None,
                 values: frozenset[int] | None = None) -> "Bounds":
        return Bounds(_tighter(self.low, low, max), _tighter(self.high, high, min),
                      values if self.values is None else (self.values if values is None else self.values & values))

    def admits(self, value: int) -> bool:
        return ((self.low is None or value >= self.low) and (self.high is None or value <= self.high)
                and (self.values is None or value in self.values))

    @property
    def is_bounded(self) -> bool:
        return self.low is not None or self.high is not None or self.values is not None


def _tighter(current: int | None, new: int | None, pick: Callable[[int, int], int]) -> int | None:
    if current is None:
        return new
    return current if new is None else pick(current, new)


@dataclass(frozen=True)
class TimeColumn:
    """The column that holds the message time the source searches (module docstring)."""

    path: tuple[str, ...]
    ns_per_unit: int
    value_of: Callable[[object], int | None]  # a filter's literal in the column's units
    untimed_rows_at_epoch: bool  # messages without a time show as <= the epoch (includeTimestamp)


def time_column_for(options: SourceOptions) -> TimeColumn | None:
    """The searchable time column of these options; None: no column holds the searched time."""
    message_time = message_time_for(options)
    if message_time is None:
        return None
    if message_time is reserved_value_time:
        return TIMESTAMP_COLUMN
    sbe = options.sbe
    if sbe is None or sbe.timestamp_field is None:
        return None
    message, field = sbe.timestamp_field
    path = (field,) if len(sbe.messages) == 1 else (message, field)
    return TimeColumn(path, sbe.timestamp_unit_ns, _as_whole_number, untimed_rows_at_epoch=False)


@dataclass(frozen=True)
class PushedFilters:
    """What the accepted filters say about recording ids, positions and times (``time_column``'s units)."""

    recording_ids: Bounds = Bounds()
    positions: Bounds = Bounds()
    times: Bounds = Bounds()
    time_column: TimeColumn | None = None

    @property
    def time_bounds_usable(self) -> bool:
        """With includeTimestamp only together with a lower bound after the epoch (module docstring)."""
        column = self.time_column
        if column is None or not (self.times.low is not None or self.times.high is not None):
            return False
        return not column.untimed_rows_at_epoch or (self.times.low is not None and self.times.low > 0)

    @property
    def narrows(self) -> bool:
        return self.recording_ids.is_bounded or self.positions.is_bounded or self.time_bounds_usable


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _as_whole_number(value: object) -> int | None:
    """An int, or a whole Decimal (an SBE uint64 column is decimal(20,0) in Spark)."""
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    return _as_int(value)


def _as_micros(value: object) -> int | None:
    """Epoch microseconds of a timestamp literal; None for anything without a time zone (never guessed)."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


#: includeTimestamp's column: the reserved value as epoch ns, shown truncated to microseconds.
TIMESTAMP_COLUMN = TimeColumn(TIMESTAMP, NANOS_PER_MICRO, _as_micros, untimed_rows_at_epoch=True)


def push_filters(filters: Iterable[Filter], time_column: TimeColumn | None) -> tuple[PushedFilters, list[Filter]]:
    """(what bounds the replays, the filters Spark must still apply)."""
    pushed = PushedFilters(time_column=time_column)
    for_spark: list[Filter] = []
    for candidate in filters:
        attribute = getattr(candidate, "attribute", None)
        if attribute == RECORDING_ID:
            bounds = _bounds_of(candidate, _as_int)
            if bounds is None:
                for_spark.append(candidate)
            else:  # exact: whole recordings are kept or left out
                pushed = replace(pushed, recording_ids=pushed.recording_ids.narrowed(*bounds))
            continue
        for_spark.append(candidate)
        if attribute == POSITION and (bounds := _bounds_of(candidate, _as_int)) is not None:
            pushed = replace(pushed, positions=pushed.positions.narrowed(*bounds))
        elif (time_column is not None and attribute == time_column.path
              and (bounds := _bounds_of(candidate, time_column.value_of)) is not None):
            pushed = replace(pushed, times=pushed.times.narrowed(*bounds))
    return pushed, for_spark


def _bounds_of(candidate: Filter, convert: Callable[[object], int | None]
               ) -> tuple[int | None, int | None, frozenset[int] | None] | None:
    """(low, high, values) of a comparison with a usable value; None: not one this module reads."""
    if isinstance(candidate, In):
        values = [convert(value) for value in candidate.value]
        if not values or any(value is None for value in values):
            return None
        known = frozenset(value for value in values if value is not None)
        return min(known), max(known), known
    value = convert(getattr(candidate, "value", None))
    if value is None:
        return None
    if isinstance(candidate, (EqualTo, EqualNullSafe)):  # the columns are NOT NULL: <=> is =
        return value, value, frozenset({value})
    if isinstance(candidate, GreaterThan):
        return value + 1, None, None
    if isinstance(candidate, GreaterThanOrEqual):
        return value, None, None
    if isinstance(candidate, LessThan):
        return None, value - 1, None
    if isinstance(candidate, LessThanOrEqual):
        return None, value, None
    return None


def narrow_ranges(pushed: PushedFilters, start: Mapping[int, int], end: Mapping[int, int],
                  layouts: Mapping[int, RecordingLayout], first_message_at: FirstMessageAt
                  ) -> tuple[dict[int, int], dict[int, int]]:
    """(start, end) per recording, narrowed to what the filters can match. A recording that
    cannot match gets start == end (it is planned as empty, as a recording with no new data)."""
    new_start: dict[int, int] = {}
    new_end: dict[int, int] = {}
    for recording_id, last in end.items():
        layout = layouts.get(recording_id)
        first = start.get(recording_id, layout.start_position if layout is not None else last)
        if not pushed.recording_ids.admits(recording_id):
            first = last
        elif layout is not None and layout.term_length > 0 and first < last:
            first, last = _narrowed(pushed, recording_id, first, last, layout, first_message_at)
        new_start[recording_id] = first
        new_end[recording_id] = max(first, last)
    return new_start, new_end


def _narrowed(pushed: PushedFilters, recording_id: int, first: int, last: int, layout: RecordingLayout,
              first_message_at: FirstMessageAt) -> tuple[int, int]:
    term = layout.term_length
    positions = pushed.positions
    # A range [a, b) yields the messages with a < position <= b (partition_reader).
    if positions.low is not None and positions.low > 0:
        first = max(first, (positions.low - 1) // term * term)  # last term boundary below the bound
    if positions.high is not None:
        last = min(last, max(0, -(-positions.high // term) * term))  # first term boundary at/after it
    if first >= last or not pushed.time_bounds_usable:
        return first, last
    # Bisect from a term boundary (a message start) so a message begun before ``first`` is seen;
    # both bounds search the same span, so a finder may share the probes of the two searches.
    span = RecordedSpan(max(layout.start_position, first // term * term), last, term)
    low, high = pushed.times.low, pushed.times.high
    assert pushed.time_column is not None  # time_bounds_usable
    unit = pushed.time_column.ns_per_unit
    if low is not None:
        found = first_message_at(recording_id, span, low * unit)
        if found is None:
            return last, last
        first = max(first, found)
    if high is not None and first < last:
        beyond = first_message_at(recording_id, span, (high + 1) * unit)
        if beyond is not None:
            last = min(last, beyond)
    return first, last
