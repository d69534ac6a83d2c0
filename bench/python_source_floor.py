"""The latency floor of any Python streaming data source, measured beside ours and Kafka's.

``python-source-floor`` is a Python Data Source whose messages are a clock's ticks: message ``k`` is
"published" at ``originNs + k * intervalNs`` and becomes available at that instant (``latestOffset``
counts the ticks that have passed), and its 32-byte payload is laid out as the live publishers'
(bytes 0-8 the publish time in epoch ns, 8-16 the sequence: bench/live_tail_latency.py), so the
same ``foreach`` latency code measures it. A partition read does no I/O: it builds one Arrow batch
of its ticks in memory. What such a query's latency costs is therefore only what Spark charges a
Python streaming source per micro-batch: ``latestOffset``, ``partitions`` and ``commit`` through the
driver's Python source process, the partition pickled to an executor's Python worker, the batch sent
back to the JVM as Arrow. Ours minus this floor is our archive's share; this floor minus Kafka's is
the Python Data Source path's, which a JVM source such as Kafka's does not take.
"""

from __future__ import annotations

import struct
import time

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

FORMAT = "python-source-floor"
PAYLOAD_TAIL = bytes(16)  # bytes 16-32 of the publishers' payload


class TickRange(InputPartition):
    def __init__(self, first: int, end: int) -> None:
        super().__init__(None)
        self.first = first
        self.end = end


class TickStreamReader(DataSourceStreamReader):
    def __init__(self, origin_ns: int, interval_ns: int) -> None:
        self.origin_ns = origin_ns
        self.interval_ns = interval_ns

    def _passed(self) -> dict[str, int]:
        return {"tick": max(0, (time.time_ns() - self.origin_ns) // self.interval_ns + 1)}

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - pyspark's name
        return self._passed()  # "latest", as the measured sources start

    def latestOffset(self) -> dict[str, int]:  # noqa: N802 - pyspark's name
        return self._passed()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [TickRange(start["tick"], end["tick"])] if end["tick"] > start["tick"] else []

    def read(self, partition: InputPartition):  # type: ignore[override]
        assert isinstance(partition, TickRange)
        payloads = [struct.pack("<qq", self.origin_ns + tick * self.interval_ns, tick) + PAYLOAD_TAIL
                    for tick in range(partition.first, partition.end)]
        yield pa.record_batch([pa.array(payloads, pa.binary())], names=["payload"])

    def commit(self, end: dict[str, int]) -> None:
        pass


class PythonSourceFloor(DataSource):
    """Options: ``originNs`` (epoch ns of tick 0), ``intervalMs`` (between ticks)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return "payload binary"

    def streamReader(self, schema) -> DataSourceStreamReader:  # noqa: N802 - pyspark's name
        return TickStreamReader(int(self.options["originNs"]), int(float(self.options["intervalMs"]) * 1_000_000))


def floor_stream(spark, interval_ms: float):
    """A fresh clock (tick 0 now) on ``spark`` as ``payload`` rows (the source registered first)."""
    return (spark.readStream.format(FORMAT).option("originNs", str(time.time_ns()))
            .option("intervalMs", str(interval_ms)).load())
