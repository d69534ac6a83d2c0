"""The recorder's and replayer's I/O counters (Aeron counter types 105-110) and their accounting.

Type ids and key layout: ``aeron_spark.archive.codecs.archive_io_counters``. Each label ends with
``" - archiveId=<id>"``, as Aeron's ``ArchiveCounters.allocate``:

====  ==========================================
type  label
====  ==========================================
105   archive-recorder max write time in ns
106   archive-recorder total write bytes
107   archive-recorder total write time in ns
108   archive-replayer max read time in ns
109   archive-replayer total read bytes
110   archive-replayer total read time in ns
====  ==========================================

:class:`IoStats` accumulates bytes/time on the agent's thread (plain ints, no locking) and
:meth:`IoCounters.publish` copies them into the shared counters once per duty cycle that did
work, the way Aeron's Recorder/Replayer ``doWork`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from aeron_spark.archive.codecs.archive_io_counters import (
    RECORDER_MAX_WRITE_TIME_TYPE_ID,
    RECORDER_TOTAL_WRITE_BYTES_TYPE_ID,
    RECORDER_TOTAL_WRITE_TIME_TYPE_ID,
    REPLAYER_MAX_READ_TIME_TYPE_ID,
    REPLAYER_TOTAL_READ_BYTES_TYPE_ID,
    REPLAYER_TOTAL_READ_TIME_TYPE_ID,
    archive_id_key,
)
from aeron_spark.archive.codecs.counter_layout import (
    CounterAllocator,
    WritableCounter,
    archive_id_label_suffix,
)

COUNTER_NAMES: dict[int, str] = {
    RECORDER_MAX_WRITE_TIME_TYPE_ID: "archive-recorder max write time in ns",
    RECORDER_TOTAL_WRITE_BYTES_TYPE_ID: "archive-recorder total write bytes",
    RECORDER_TOTAL_WRITE_TIME_TYPE_ID: "archive-recorder total write time in ns",
    REPLAYER_MAX_READ_TIME_TYPE_ID: "archive-replayer max read time in ns",
    REPLAYER_TOTAL_READ_BYTES_TYPE_ID: "archive-replayer total read bytes",
    REPLAYER_TOTAL_READ_TIME_TYPE_ID: "archive-replayer total read time in ns",
}


def archive_counter_label(type_id: int, archive_id: int) -> str:
    try:
        name = COUNTER_NAMES[type_id]
    except KeyError:
        raise ValueError(f"counter type {type_id} is not a recorder/replayer I/O counter: "
                         f"accepted types are {sorted(COUNTER_NAMES)}") from None
    return name + archive_id_label_suffix(archive_id)


def allocate_archive_counter(client: CounterAllocator, type_id: int, archive_id: int) -> WritableCounter:
    return client.add_counter(type_id, archive_id_key(archive_id), archive_counter_label(type_id, archive_id))


@dataclass(slots=True)
class IoStats:
    """Totals kept by one agent thread; only that thread writes them."""

    total_bytes: int = 0
    total_time_ns: int = 0
    max_time_ns: int = 0

    def record(self, length: int, elapsed_ns: int) -> None:
        self.total_bytes += length
        self.total_time_ns += elapsed_ns
        if elapsed_ns > self.max_time_ns:
            self.max_time_ns = elapsed_ns


class IoCounters:
    """Three counters (max time, total bytes, total time) mirroring an :class:`IoStats`."""

    def __init__(self, max_time: WritableCounter, total_bytes: WritableCounter,
                 total_time: WritableCounter) -> None:
        self.max_time = max_time
        self.total_bytes = total_bytes
        self.total_time = total_time

    @classmethod
    def allocate_recorder(cls, client: CounterAllocator, archive_id: int) -> "IoCounters":
        return cls._allocate(client, archive_id, RECORDER_MAX_WRITE_TIME_TYPE_ID,
                             RECORDER_TOTAL_WRITE_BYTES_TYPE_ID, RECORDER_TOTAL_WRITE_TIME_TYPE_ID)

    @classmethod
    def allocate_replayer(cls, client: CounterAllocator, archive_id: int) -> "IoCounters":
        return cls._allocate(client, archive_id, REPLAYER_MAX_READ_TIME_TYPE_ID,
                             REPLAYER_TOTAL_READ_BYTES_TYPE_ID, REPLAYER_TOTAL_READ_TIME_TYPE_ID)

    @classmethod
    def _allocate(cls, client: CounterAllocator, archive_id: int, *type_ids: int) -> "IoCounters":
        allocated: list[WritableCounter] = []
        try:
            for type_id in type_ids:
                allocated.append(allocate_archive_counter(client, type_id, archive_id))
        except BaseException:
            for counter in allocated:
                counter.close()
            raise
        return cls(*allocated)

    def publish(self, stats: IoStats) -> None:
        self.total_bytes.value = stats.total_bytes
        self.total_time.value = stats.total_time_ns
        self.max_time.value = stats.max_time_ns

    def close(self) -> None:
        for counter in (self.max_time, self.total_bytes, self.total_time):
            counter.close()
