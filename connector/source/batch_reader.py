"""spark.read: startingPositions .. endingPositions, resolved once on the driver, narrowed by the
filters Spark pushes (filter_pushdown; only with spark.sql.python.filterPushdown.enabled=true)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import overload

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from aeron_spark.connector.archive_connection import ArchiveUnavailable
from aeron_spark.connector.source.filter_pushdown import (
    FirstMessageAt, PushedFilters, narrow_ranges, push_filters, time_column_for)
from aeron_spark.connector.source.message_time import message_time_for, reserved_value_time
from aeron_spark.connector.source.archive_access import (
    ArchiveAccess, forget_shared_archive, leased_archive, shared_archive)
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.options import ArchiveConnection
from aeron_spark.connector.source.options import SourceOptions
from aeron_spark.connector.source.offsets import RecordingPositions
from aeron_spark.connector.source.partition_planner import ReplayPartition, ReplayRange, plan_ranges
from aeron_spark.connector.source.partition_reader import read_range
from aeron_spark.connector.source.timestamp_positions import RecordedSpan, TermBisection
from aeron_spark.connector.source.timestamp_resolution import resolve_ending, resolve_starting

LOG = logging.getLogger(__name__)

Opener = Callable[[ArchiveConnection], ArchiveAccess]


class EmptyPartition(InputPartition):
    def __init__(self) -> None:
        super().__init__(None)


@dataclass
class PushdownCost:
    """What planning replayed to place time bounds (bytes of the bisection replays), for figures."""

    probe_replays: int = 0
    probe_bytes: int = 0


def plan_batch(options: SourceOptions, offset_reader: OffsetReader, pushed: PushedFilters = PushedFilters(),
               cost: PushdownCost | None = None) -> list[ReplayRange]:
    start = resolve_starting(options, offset_reader)
    end = resolve_ending(options, offset_reader)
    # A recording listed only by the second resolution started in between: it is read from its
    # start position, like a newly discovered recording of a stream.
    for recording_id in set(start) & set(end):
        if end[recording_id] < start[recording_id]:
            raise ValueError(f"recording {recording_id}: endingPositions {end[recording_id]} is before "
                             f"startingPositions {start[recording_id]}")
    layouts = offset_reader.layouts(end)
    if pushed.narrows:
        first_message_at = _first_message_finder(options, offset_reader, cost or PushdownCost())
        narrowed_start, narrowed_end = narrow_ranges(pushed, start, end, layouts, first_message_at)
        start, end = RecordingPositions(narrowed_start), RecordingPositions(narrowed_end)
    return plan_ranges(start, end, layouts, options.max_bytes_per_partition, options.min_partitions)


def _first_message_finder(options: SourceOptions, offset_reader: OffsetReader, cost: PushdownCost) -> FirstMessageAt:
    """filter_pushdown.FirstMessageAt over bounded replays of the archive (counted in ``cost``)."""
    message_time = message_time_for(options) or reserved_value_time  # only asked when times are pushable
    searches: dict[tuple[int, RecordedSpan], TermBisection] = {}  # one per span: its probes serve both bounds

    def first_message_at(recording_id: int, span: RecordedSpan, time_ns: int) -> int | None:
        @contextmanager
        def read_frames(start: int, end: int) -> Iterator[Iterator[tuple[int, bytes]]]:
            cost.probe_replays += 1
            with offset_reader.access.replay(recording_id, start, end, options.replay) as blocks:
                yield _counted(blocks, cost)

        search = searches.get((recording_id, span))
        if search is None:
            search = searches[(recording_id, span)] = TermBisection(span, read_frames, message_time)
        found = search.first_at_or_after(time_ns)
        return None if found is None else found.position

    return first_message_at


def _counted(blocks: Iterator[tuple[int, bytes]], cost: PushdownCost) -> Iterator[tuple[int, bytes]]:
    for position, block in blocks:
        cost.probe_bytes += len(block)
        yield position, block


class _PushFiltersSparkTolerates:
    """``pushFilters`` as Spark sees it when filter pushdown is off.

    pyspark 4.3 refuses a reader whose ``pushFilters`` is not DataSourceReader's own unless
    spark.sql.python.filterPushdown.enabled=true (DATA_SOURCE_PUSHDOWN_DISABLED), to stop sources
    that depend on pushdown from silently returning too many rows. This source never depends on
    it: without pushdown Spark applies every filter itself and the rows are the same, only more
    is replayed. So the bound method shows Spark's default as its ``__func__`` (the one thing the
    check compares) and reads still work with the flag off; with it on, Spark calls it.
    """

    @overload
    def __get__(self, reader: None, owner: type
                ) -> Callable[["AeronArchiveBatchReader", list[Filter]], Iterable[Filter]]: ...

    @overload
    def __get__(self, reader: "AeronArchiveBatchReader", owner: type) -> Callable[[list[Filter]], Iterable[Filter]]: ...

    def __get__(self, reader: "AeronArchiveBatchReader | None", owner: type
                ) -> Callable[..., Iterable[Filter]]:
        if reader is None:  # on the class: the plain function
            return AeronArchiveBatchReader.push_filters
        return _BoundPushFilters(reader)


class _BoundPushFilters:
    def __init__(self, reader: "AeronArchiveBatchReader") -> None:
        self.__self__ = reader
        self.__func__ = DataSourceReader.pushFilters  # what Spark's check compares (see above)

    def __call__(self, filters: list[Filter]) -> Iterator[Filter]:
        return self.__self__.push_filters(filters)


class AeronArchiveBatchReader(DataSourceReader):
    """``driver_opener`` gives the planning connection. By default it is the planning worker's
    cached one (Spark reuses that worker; a fresh connection cost ~30-100 ms per query), which is
    kept open; ``forget_driver_connection`` drops it after a failure, and the plan is retried once
    on a new one (it may have gone stale between queries). With ``forget_driver_connection=None``
    the opener's connections are the reader's own and closed after planning."""

    def __init__(self, options: SourceOptions, driver_opener: Opener = shared_archive,
                 executor_opener: Opener = shared_archive,
                 forget_driver_connection: Callable[[ArchiveConnection], None] | None = forget_shared_archive) -> None:
        self.options = options
        self._driver_opener = driver_opener
        self._executor_opener = executor_opener
        self._forget_driver_connection = forget_driver_connection
        self.pushed_filters = PushedFilters()
        self.pushdown_cost = PushdownCost()  # of the last partitions(): for tests and bench figures

    # mypy compares a descriptor's instance type with the base's unbound def and cannot match them
    pushFilters = _PushFiltersSparkTolerates()  # type: ignore[assignment]

    def push_filters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Spark's pushFilters: keeps what bounds the replays, yields what Spark must still apply."""
        self.pushed_filters, for_spark = push_filters(filters, time_column_for(self.options))
        return iter(for_spark)

    def partitions(self) -> Sequence[InputPartition]:
        forget_connection = self._forget_driver_connection
        cached = forget_connection is not None
        for attempt in (1, 2) if cached else (2,):
            offset_reader = OffsetReader(self.options, lambda: self._driver_opener(self.options.connection))
            try:
                self.pushdown_cost = PushdownCost()
                ranges = plan_batch(self.options, offset_reader, self.pushed_filters, self.pushdown_cost)
                break
            except (ArchiveUnavailable, ValueError, LookupError):
                raise  # the archive is gone, or the request itself is wrong: a new connection won't help
            except Exception:
                if forget_connection is None or attempt == 2:
                    raise
                forget_connection(self.options.connection)
            finally:
                if not cached:
                    offset_reader.close()
        return [ReplayPartition(r) for r in ranges] or [EmptyPartition()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.options, self._executor_opener)


def read_partition(partition: InputPartition, options: SourceOptions, opener: Opener) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, ReplayPartition):
        return iter(())
    return _read_with_reconnect(partition.replay_range, options, opener)


def _read_with_reconnect(replay_range: ReplayRange, options: SourceOptions, opener: Opener) -> Iterator[pa.RecordBatch]:
    if opener is not shared_archive:
        yield from read_range(replay_range, options, opener(options.connection))
        return
    with leased_archive(options.connection) as (access, reused):  # kept alive between this worker's tasks
        yielded = False
        try:
            for batch in read_range(replay_range, options, access):
                yielded = True
                yield batch
            return
        except Exception as error:
            forget_shared_archive(options.connection)  # the cached connection may be what failed
            if not reused or yielded or isinstance(error, (ValueError, LookupError)):
                raise
            LOG.warning("reading %s failed on a reused archive connection (%s); once more on a new one",
                        replay_range, error)
    with leased_archive(options.connection) as (access, _):  # e.g. the archive restarted since the last task
        try:
            yield from read_range(replay_range, options, access)
        except Exception:
            forget_shared_archive(options.connection)
            raise
