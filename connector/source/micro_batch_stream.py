"""spark.readStream: the micro-batch stream (Kafka's KafkaMicroBatchStream counterpart).

Runs in Spark's long-lived driver-side Python process for this source (instance state survives
between batches), except ``read`` which runs on executors in a pickled copy: everything that
holds a connection is dropped when pickling.

The driver side keeps one archive connection for the query's life (``OffsetReader``). The archive
may restart under it (same directory and endpoint): a driver-side call whose request times out is
made once more on a fresh connection (as Kafka's offset reader resets its consumer), so a query
outlives an archive restart that ends within ``archive.timeoutMs`` of the request. A second failure
ends the query with the error, which names the archive's control endpoint. (No liveness check
before each call: on a pinging archive that may wait for a ping, a cost on every trigger.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)

from aeron_spark.connector.source.admission_control import Backlog, TriggerDelay, cap_by_bytes, total_available
from aeron_spark.connector.source.data_loss import DataLossPolicy
from aeron_spark.connector.source.first_batch_start import (
    clamped_to_end,
    end_carrying_start,
    is_symbolic_start,
    parse_end,
    symbolic_start,
)
from aeron_spark.connector.source.initial_offset_store import InitialOffsetStore
from aeron_spark.connector.source.offsets import RecordingPositions
from aeron_spark.connector.source.options import SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayPartition, plan_ranges
from aeron_spark.connector.step_timings import StepTimings

if TYPE_CHECKING:
    from aeron_spark.connector.source.archive_access import ArchiveAccess
    from aeron_spark.connector.source.batch_reader import Opener
    from aeron_spark.connector.source.offset_reader import OffsetReader
    from aeron_spark.connector.options import ArchiveConnection

# getDefaultReadLimit when only minBytesPerTrigger is set: a limit that is not ReadAllAvailable
# (which means "ignore the options", e.g. Trigger.Once) yet caps nothing.
UNCAPPED_BYTES = (1 << 63) - 1
# Offsets remembered with their parsed positions: a trigger's start and end, and the previous end.
KNOWN_OFFSETS = 4
LOG = logging.getLogger("aeron_spark.connector")
T = TypeVar("T")


# The archive client, the Aeron binding and the reading code are imported where they are first
# used, not with this module: Spark's planning worker imports it only to pickle the reader
# (data_source's docstring; docs/reliability.md).
def open_archive(connection: ArchiveConnection) -> ArchiveAccess:
    """archive_access.open_archive: the driver side's own connection."""
    from aeron_spark.connector.source.archive_access import open_archive as open_connection
    return open_connection(connection)


def shared_archive(connection: ArchiveConnection) -> ArchiveAccess:
    """archive_access.shared_archive: the executor worker's cached connection."""
    from aeron_spark.connector.source.archive_access import shared_archive as cached_connection
    return cached_connection(connection)


class AeronArchiveStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, driver_opener: Opener = open_archive,
                 executor_opener: Opener = shared_archive,
                 clock_ms: Callable[[], float] | None = None) -> None:
        self.options = options
        self._driver_opener = driver_opener
        self._executor_opener = executor_opener
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)
        self._init_runtime_state()

    def _init_runtime_state(self) -> None:
        self._offset_reader: OffsetReader | None = None
        self._policy = DataLossPolicy(self.options.fail_on_data_loss)
        self._delay = None
        if self.options.min_bytes_per_trigger is not None:
            self._delay = TriggerDelay(self.options.min_bytes_per_trigger, self.options.max_trigger_delay_ms,
                                       self._clock_ms)
        self._available_now_target: dict[int, int] | None = None
        self._latest_seen: dict[int, int] | None = None
        # Offsets this reader returned or parsed lately, with their positions (and the start batch
        # 0's end carries): Spark hands the previous end back as the next start (and both to
        # partitions), parsed from its JSON again.
        self._known_offsets: list[tuple[dict, RecordingPositions, RecordingPositions | None]] = []
        # The symbolic initial offset resolved, once per run (first_batch_start).
        self._resolved_start: RecordingPositions | None = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "_driver_opener": self._driver_opener,
                "_executor_opener": self._executor_opener, "_clock_ms": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._clock_ms = lambda: time.monotonic() * 1000.0
        self._init_runtime_state()

    @property
    def offset_reader(self) -> OffsetReader:
        if self._offset_reader is None:
            from aeron_spark.connector.source.offset_reader import OffsetReader
            self._offset_reader = OffsetReader(
                self.options, lambda: self._driver_opener(self.options.connection), self._clock_ms)
        return self._offset_reader

    # --- offsets ---

    def initialOffset(self) -> dict:
        if self.options.checkpoint_location is None:
            return symbolic_start(self.options)  # resolved by the first latestOffset: first_batch_start
        # Given on the source: the start is kept in a file there, as before the option was optional,
        # so queries whose checkpoints hold that file resume from it unchanged.
        from aeron_spark.connector.source.timestamp_resolution import resolve_starting
        store = InitialOffsetStore(self.options.checkpoint_location, self.options.selection_identity())
        positions = store.get_or_create(
            lambda: resolve_starting(self.options, self.offset_reader))
        return positions.to_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        if self.options.min_bytes_per_trigger is not None:
            return ReadMaxBytes(UNCAPPED_BYTES)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        def target() -> dict[int, int]:
            recordings = self.offset_reader.known_recordings(force_discovery=True)
            return self.offset_reader.latest_positions(recordings)[0]
        self._available_now_target = self._reconnecting("prepareForTriggerAvailableNow", target)

    def _reconnecting(self, call: str, action: Callable[[], T]) -> T:
        """``action`` on the driver's archive connection; when a request times out, once more on a
        fresh connection (the archive may have restarted since the connection was made)."""
        from aeron_spark.archive.client import ArchiveTimeoutError
        try:
            return action()
        except ArchiveTimeoutError as error:
            LOG.warning("aeron-archive source %s: %s; once more on a new archive connection", call, error)
            self.offset_reader.reset_connection()
        return action()

    def _parsed(self, offset: dict, what: str) -> tuple[RecordingPositions, RecordingPositions | None]:
        """``offset``'s positions and carried start (first_batch_start), or those of an equal offset
        returned or parsed lately (a dict comparison in C instead of validating every entry again)."""
        for known, positions, carried_start in self._known_offsets:
            if known is offset or known == offset:
                return positions, carried_start
        positions, carried_start = parse_end(offset, what)
        self._remember(offset, positions, carried_start)
        return positions, carried_start

    def _positions(self, offset: dict, what: str) -> RecordingPositions:
        return self._parsed(offset, what)[0]

    def _remember(self, offset: dict, positions: RecordingPositions,
                  carried_start: RecordingPositions | None = None) -> dict:
        self._known_offsets = [(offset, positions, carried_start)] + [
            known for known in self._known_offsets[:KNOWN_OFFSETS - 1] if known[0] is not offset]
        return offset

    def _start_positions(self, start: dict) -> RecordingPositions:
        """Where a trigger starts: a symbolic initial offset is resolved here, once per run."""
        if not is_symbolic_start(start):
            return self._positions(start, "start offset")
        from aeron_spark.connector.source.timestamp_resolution import resolve_starting
        if self._resolved_start is None:
            self._resolved_start = resolve_starting(self.options, self.offset_reader)
        return self._resolved_start

    def _end_offset(self, start: dict, start_positions: RecordingPositions, end: RecordingPositions) -> dict:
        if is_symbolic_start(start):
            # Batch 0's end, which Spark logs before the batch runs, carries the start it does not log.
            return self._remember(end_carrying_start(end, start_positions), end, start_positions)
        if end is start_positions or end == start_positions:
            return start  # as Spark gave it (a start carrying batch 0's start stays one): no new batch
        return self._remember(end.to_offset(), end)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return self._reconnecting("latestOffset", lambda: self._latest_offset(start, limit))

    def _latest_offset(self, start: dict, limit: ReadLimit) -> dict:
        start_positions = self._start_positions(start)
        backlogs, end, latest = self._backlogs(start_positions)
        latest.update((b.recording_id, b.latest) for b in backlogs)  # as capped by availableNow
        self._latest_seen = latest
        if isinstance(limit, ReadAllAvailable):
            ends = {b.recording_id: b.latest for b in backlogs}
        elif isinstance(limit, ReadMaxBytes):
            if (self._delay is not None and self._available_now_target is None
                    and self._delay.should_delay(total_available(backlogs))):
                return self._end_offset(start, start_positions, start_positions)
            ends = cap_by_bytes(backlogs, limit.max_bytes)
        else:
            raise ValueError(f"aeron-archive source: unsupported read limit {limit!r}; accepted: "
                             "ReadAllAvailable, ReadMaxBytes")
        return self._end_offset(start, start_positions, end.updated(ends))

    def _backlogs(self, start: RecordingPositions) -> tuple[list[Backlog], RecordingPositions, dict[int, int]]:
        """Backlogs of the recordings with something to read or new to the query (the others
        would add nothing to the batch or its caps), the start without vanished recordings, and
        every recording's latest position."""
        reader = self.offset_reader
        if self._available_now_target is not None:
            candidates = set(self._available_now_target)
        else:
            read = start.positions.keys()
            candidates = reader.known_recordings(already_read=read).keys() | read
        latest, vanished = reader.latest_positions(sorted(candidates))
        lost = {recording_id for recording_id in vanished if recording_id in start}
        for recording_id in sorted(lost):
            self._policy.report(f"recording {recording_id} is no longer in the archive (read up to "
                                f"{start[recording_id]})")
        end = start.without(lost)
        backlogs: list[Backlog] = []
        if self._available_now_target is None:
            moved = sorted(latest.items() - start.positions.items())  # set difference in C
        else:
            moved = sorted(latest.items())
        for recording_id, position in moved:
            descriptor = reader.describe(recording_id)
            if descriptor is None:
                continue
            first = start.get(recording_id, descriptor.start_position)
            if self._available_now_target is not None:
                position = min(position, self._available_now_target.get(recording_id, position))
            if position < first:
                self._policy.report(f"recording {recording_id} was truncated to {position}, before the "
                                    f"query's position {first}")
                position = first
            backlogs.append(Backlog(recording_id, first, position, descriptor.term_buffer_length))
        return backlogs, end, latest

    def reportLatestOffset(self) -> dict | None:
        if self._latest_seen is None:
            return None
        return RecordingPositions(self._latest_seen).to_offset()

    # --- planning and reading ---

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self._reconnecting("partitions", lambda: self._partitions(start, end))

    def _partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        all_end_positions, carried_start = self._parsed(end, "end offset")
        if not is_symbolic_start(start):
            start_positions = self._positions(start, "start offset")
        elif carried_start is not None:
            start_positions = carried_start
        else:
            # Batch 0 logged by a version that kept the start under the source's checkpointLocation,
            # which is no longer set: resolved again, within the logged end.
            from aeron_spark.connector.source.timestamp_resolution import resolve_starting
            start_positions = clamped_to_end(resolve_starting(self.options, self.offset_reader), all_end_positions)
        # Only recordings that moved (or are new) can have a range: planning costs what changed.
        end_positions = all_end_positions.changed_since(start_positions)
        layouts = self.offset_reader.layouts(end_positions)
        for recording_id in sorted(set(end_positions) - set(layouts)):
            if end_positions[recording_id] != start_positions.get(recording_id):
                self._policy.report(f"recording {recording_id} is no longer in the archive")
            end_positions = end_positions.without({recording_id})
        ranges = plan_ranges(start_positions, end_positions, layouts, self.options.max_bytes_per_partition,
                             self.options.min_partitions)
        from aeron_spark.connector.source.batch_reader import EmptyPartition
        return [ReplayPartition(r) for r in ranges] or [EmptyPartition()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from aeron_spark.connector.source.batch_reader import read_partition
        timings = StepTimings("source.task")
        first = True
        for batch in read_partition(partition, self.options, self._executor_opener):
            if first:
                timings.mark("to first batch")
                first = False
            yield batch
        timings.mark("rest")
        timings.finish()

    def commit(self, end: dict) -> None:
        """Nothing to acknowledge: the archive keeps recordings whatever the query has read."""

    def stop(self) -> None:
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None
