"""Spark filters -> replay ranges (connector/source/filter_pushdown.py): which filters bound the
replays, which go back to Spark, and that the narrowed ranges still hold every matching row."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader
from aeron_spark.connector.source.filter_pushdown import (
    TIMESTAMP_COLUMN,
    Bounds,
    PushedFilters,
    TimeColumn,
    narrow_ranges,
    push_filters,
)
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import RecordingLayout
from aeron_spark.connector.source.timestamp_positions import RecordedSpan

TERM = 64 * 1024
RID = ("recording_id",)
POS = ("position",)
TS = ("timestamp",)
UTC = dt.timezone.utc


def at_us(micros: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=micros)


def test_recording_id_filters_are_exact_and_not_returned_to_spark():
    filters = [GreaterThanOrEqual(RID, 2), LessThan(RID, 9), In(RID, (1, 3, 5, 11))]
    pushed, for_spark = push_filters(filters, None)
    assert for_spark == []
    assert [rid for rid in range(15) if pushed.recording_ids.admits(rid)] == [3, 5]
    pushed, _ = push_filters([EqualTo(RID, 4)], None)
    assert [rid for rid in range(10) if pushed.recording_ids.admits(rid)] == [4]
    pushed, _ = push_filters([EqualNullSafe(RID, 4), GreaterThan(RID, 4)], None)
    assert not any(pushed.recording_ids.admits(rid) for rid in range(10))
    pushed, _ = push_filters([LessThanOrEqual(RID, 2)], None)
    assert [rid for rid in range(10) if pushed.recording_ids.admits(rid)] == [0, 1, 2]


def test_position_and_time_filters_bound_the_replays_but_spark_still_applies_them():
    filters = [GreaterThan(POS, 100), LessThanOrEqual(POS, 5000), GreaterThanOrEqual(TS, at_us(7)),
               LessThan(TS, at_us(20))]
    pushed, for_spark = push_filters(filters, TIMESTAMP_COLUMN)
    assert for_spark == filters
    assert pushed.positions == Bounds(101, 5000)
    assert pushed.times == Bounds(7, 19)


@pytest.mark.parametrize("unusable", [
    Not(EqualTo(RID, 1)), StringStartsWith(("payload",), "x"), IsNotNull(RID), EqualTo(RID, "1"),
    EqualTo(RID, True), In(RID, ()), In(RID, (1, None)), GreaterThan(("session_id",), 3),
    GreaterThan(TS, dt.datetime(2026, 1, 1)),  # no time zone: never guessed
])
def test_anything_else_goes_back_to_spark_and_bounds_nothing(unusable):
    pushed, for_spark = push_filters([unusable], TIMESTAMP_COLUMN)
    assert for_spark == [unusable]
    assert not pushed.narrows and pushed.times == Bounds() and pushed.positions == Bounds()


def test_time_filters_are_ignored_when_the_timestamp_column_is_not_the_searchable_time():
    pushed, for_spark = push_filters([GreaterThan(TS, at_us(5))], None)
    assert pushed == PushedFilters() and len(for_spark) == 1


def no_search(recording_id, span, time_ns):
    raise AssertionError("no replay expected")


def narrow(pushed, start, end, first_message_at=no_search, start_position=0):
    layouts = {rid: RecordingLayout(rid, start_position, TERM) for rid in end}
    return narrow_ranges(pushed, start, end, layouts, first_message_at)


def test_recordings_the_filters_exclude_are_planned_empty():
    pushed, _ = push_filters([In(RID, (2,))], None)
    start, end = narrow(pushed, {1: 0, 2: 64}, {1: 10 * TERM, 2: 10 * TERM, 3: 5 * TERM})
    assert start == {1: 10 * TERM, 2: 64, 3: 5 * TERM}
    assert end == {1: 10 * TERM, 2: 10 * TERM, 3: 5 * TERM}


@pytest.mark.parametrize("low,high,expected", [
    # A range [a, b) holds the messages with a < position <= b: a must be below the lowest
    # matching position, b at or above the highest; both term boundaries.
    (5 * TERM + 32, 7 * TERM - 32, (5 * TERM, 7 * TERM)),
    (5 * TERM, 7 * TERM, (4 * TERM, 7 * TERM)),       # position 5*TERM ends the last message of term 4
    (5 * TERM + 1, 7 * TERM + 1, (5 * TERM, 8 * TERM)),
    (None, 3 * TERM, (0, 3 * TERM)),
    (9 * TERM, None, (8 * TERM, 10 * TERM)),
    (0, 20 * TERM, (0, 10 * TERM)),                   # never beyond the read's own range
    (11 * TERM, None, (10 * TERM, 10 * TERM)),        # nothing matches
])
def test_position_bounds_round_out_to_term_boundaries(low, high, expected):
    pushed = PushedFilters(positions=Bounds(low, high))
    start, end = narrow(pushed, {1: 0}, {1: 10 * TERM})
    assert (start[1], end[1]) == expected


def test_position_bounds_never_move_a_start_before_the_read_start():
    pushed = PushedFilters(positions=Bounds(3 * TERM, None))
    start, end = narrow(pushed, {1: 4 * TERM + 96}, {1: 10 * TERM})
    assert (start[1], end[1]) == (4 * TERM + 96, 10 * TERM)


class Messages:
    """A fake recording: message i starts at position i * 1024 and is stamped 1000 * i ns."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.searches: list[tuple[RecordedSpan, int]] = []

    def first_message_at(self, recording_id, span, time_ns):
        self.searches.append((span, time_ns))
        for index in range(self.count):
            position = index * 1024
            if span.start <= position < span.end and index * 1000 >= time_ns:
                return position
        return None


def test_a_time_range_becomes_the_messages_from_its_first_to_after_its_last():
    messages = Messages(640)  # 10 terms
    pushed, _ = push_filters([GreaterThanOrEqual(TS, at_us(100)), LessThanOrEqual(TS, at_us(200))], TIMESTAMP_COLUMN)
    start, end = narrow(pushed, {}, {1: 640 * 1024}, messages.first_message_at)
    # message 100 starts at 100 * 1024; the first past 200 us is message 201
    assert (start[1], end[1]) == (100 * 1024, 201 * 1024)
    assert [time_ns for _, time_ns in messages.searches] == [100_000, 201_000]
    assert messages.searches[0][0].start == 0  # searched from a term boundary
    assert messages.searches[0][0] == messages.searches[1][0]  # one span: its probes can serve both


def test_the_time_search_starts_on_the_term_boundary_before_a_mid_message_start():
    messages = Messages(640)
    pushed, _ = push_filters([GreaterThan(TS, at_us(10))], TIMESTAMP_COLUMN)
    start, end = narrow(pushed, {1: TERM + 96}, {1: 640 * 1024}, messages.first_message_at)
    assert messages.searches[0][0].start == TERM
    assert (start[1], end[1]) == (TERM + 96, 640 * 1024)  # the matching messages begin before the start


def test_no_message_at_or_after_the_lower_time_leaves_the_recording_empty():
    messages = Messages(64)
    pushed, _ = push_filters([GreaterThan(TS, at_us(10_000))], TIMESTAMP_COLUMN)
    start, end = narrow(pushed, {}, {1: 64 * 1024}, messages.first_message_at)
    assert start[1] == end[1]


def test_an_upper_time_bound_alone_is_not_used_since_untimed_messages_would_match_it():
    pushed, _ = push_filters([LessThan(TS, at_us(10))], TIMESTAMP_COLUMN)
    assert not pushed.narrows
    start, end = narrow(pushed, {}, {1: 64 * 1024})
    assert (start[1], end[1]) == (0, 64 * 1024)
    pushed, _ = push_filters([LessThan(TS, at_us(10)), GreaterThan(TS, at_us(-5))], TIMESTAMP_COLUMN)
    assert not pushed.time_bounds_usable


def reader(**extra):
    raw = {"recordingIds": "1,2", "archive.controlChannel": "aeron:ipc", **extra}
    return AeronArchiveBatchReader(SourceOptions.parse(raw, ReadMode.BATCH))


def test_the_reader_passes_sparks_pushdown_disabled_check_and_pushes_when_called():
    # pyspark 4.3 plan_data_source_read: DATA_SOURCE_PUSHDOWN_DISABLED unless this holds
    plain = reader(includeTimestamp="true")
    assert getattr(plain.pushFilters, "__func__", None) is DataSourceReader.pushFilters
    filters = [EqualTo(RID, 2), GreaterThan(TS, at_us(5)), GreaterThan(POS, 64)]
    assert list(plain.pushFilters(filters)) == filters[1:]
    assert plain.pushed_filters.times == Bounds(6, None)
    assert plain.pushed_filters.positions == Bounds(65, None)


def test_without_include_timestamp_the_reader_pushes_no_time_bound():
    plain = reader()
    list(plain.pushFilters([GreaterThan(TS, at_us(5))]))
    assert not plain.pushed_filters.narrows and plain.pushed_filters.time_column is None


SBE_TIME = TimeColumn(("transactTime",), 1_000, lambda value: value if isinstance(value, int) else None,
                      untimed_rows_at_epoch=False)


def test_an_sbe_time_field_bounds_the_range_in_its_unit_and_alone_as_an_upper_bound():
    messages = Messages(640)  # message i at i * 1024, stamped i * 1000 ns = i us
    pushed, for_spark = push_filters([GreaterThan(("transactTime",), 99), LessThan(("transactTime",), 201),
                                      GreaterThan(TS, at_us(5))], SBE_TIME)
    assert len(for_spark) == 3 and pushed.times == Bounds(100, 200)
    start, end = narrow(pushed, {}, {1: 640 * 1024}, messages.first_message_at)
    assert (start[1], end[1]) == (100 * 1024, 201 * 1024)
    # a message without the field has it NULL, which no comparison matches: an upper bound alone is safe
    pushed, _ = push_filters([LessThanOrEqual(("transactTime",), 300)], SBE_TIME)
    assert pushed.time_bounds_usable
    start, end = narrow(pushed, {}, {1: 640 * 1024}, messages.first_message_at)
    assert (start[1], end[1]) == (0, 301 * 1024)


def test_the_time_column_follows_the_options():
    from aeron_spark.connector.source.filter_pushdown import time_column_for
    assert time_column_for(reader(includeTimestamp="true").options) is TIMESTAMP_COLUMN
    assert time_column_for(reader().options) is None
    schema = str(Path(__file__).parents[1] / "sbe" / "market_data_v1.xml")
    one = time_column_for(reader(**{"sbe.schema": schema, "sbe.messages": "Trade",
                                    "sbe.timestampField": "transactTime", "sbe.timestampUnit": "us"}).options)
    assert one is not None and (one.path, one.ns_per_unit) == (("transactTime",), 1_000)
    assert [one.value_of(v) for v in (Decimal(17), Decimal("17.5"), 17, True, "17")] == [17, None, 17, None, None]
    several = time_column_for(reader(**{"sbe.schema": schema, "sbe.timestampField": "Trade.transactTime"}).options)
    assert several is not None and several.path[1] == "transactTime" and len(several.path) == 2
