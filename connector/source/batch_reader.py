"""spark.read: startingPositions .. endingPositions, resolved once on the driver."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from aeron_spark.connector.archive_connection import ArchiveUnavailable
from aeron_spark.connector.source.archive_access import (
    ArchiveAccess, forget_shared_archive, leased_archive, shared_archive)
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.options import ArchiveConnection
from aeron_spark.connector.source.options import SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayPartition, ReplayRange, plan_ranges
from aeron_spark.connector.source.partition_reader import read_range
from aeron_spark.connector.source.timestamp_resolution import resolve_ending, resolve_starting

LOG = logging.getLogger(__name__)

Opener = Callable[[ArchiveConnection], ArchiveAccess]


class EmptyPartition(InputPartition):
    def __init__(self) -> None:
        super().__init__(None)


def plan_batch(options: SourceOptions, offset_reader: OffsetReader) -> list[ReplayRange]:
    start = resolve_starting(options, offset_reader)
    end = resolve_ending(options, offset_reader)
    # A recording listed only by the second resolution started in between: it is read from its
    # start position, like a newly discovered recording of a stream.
    for recording_id in set(start) & set(end):
        if end[recording_id] < start[recording_id]:
            raise ValueError(f"recording {recording_id}: endingPositions {end[recording_id]} is before "
                             f"startingPositions {start[recording_id]}")
    end_positions = end
    layouts = offset_reader.layouts(end_positions)
    return plan_ranges(start, end_positions, layouts, options.max_bytes_per_partition,
                       options.min_partitions)


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

    def partitions(self) -> Sequence[InputPartition]:
        forget_connection = self._forget_driver_connection
        cached = forget_connection is not None
        for attempt in (1, 2) if cached else (2,):
            offset_reader = OffsetReader(self.options, lambda: self._driver_opener(self.options.connection))
            try:
                ranges = plan_batch(self.options, offset_reader)
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
