"""``readOnDriver=true``: a micro-batch read by the Spark driver's Python source process.

pyspark gives a Python streaming source two shapes. The default (``AeronArchiveStreamReader``)
plans partitions on the driver and reads each in a Python worker on an executor: per batch, the
partition and the reader are pickled to a worker, the worker replays its range and sends Arrow
batches to its executor. A ``SimpleDataSourceStreamReader`` instead reads while Spark asks for the
latest offset, in the driver's source process, and Spark hands those batches to the plan itself: no
Python task runs on the executors. For a live tail of modest rate that per-batch round trip is most of
a batch's time (docs/performance.md, "Beside Kafka: live latency"), so this shape trades it for all
rows passing through the driver.

The offsets, ranges and rows are the default reader's: this wraps one, asks it for the latest
offset (its admission control included, so ``maxBytesPerTrigger`` bounds what the driver holds) and
reads its partitions with its own ``read``, in this process, on a connection kept between batches.
A batch Spark replays after a restart (its offsets logged, its data gone with the process) is read
by ``readBetweenOffsets`` in an executor's worker, the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader
from aeron_spark.connector.source.options import SourceOptions


class AeronArchiveDriverStreamReader(SimpleDataSourceStreamReader):
    def __init__(self, options: SourceOptions, stream: AeronArchiveStreamReader | None = None) -> None:
        self.stream = stream if stream is not None else AeronArchiveStreamReader(options)

    def initialOffset(self) -> dict:  # noqa: N802 - pyspark's name
        return self.stream.initialOffset()

    def read(self, start: dict) -> tuple[Iterator[pa.RecordBatch], dict]:
        """The rows from ``start`` to the latest offset (as capped by ``maxBytesPerTrigger``) and
        that offset; nothing and ``start`` itself when nothing new was recorded."""
        end = self.stream.latestOffset(start, self.stream.getDefaultReadLimit())
        if end is start or end == start:
            return iter(()), start
        # A list, not a generator: pyspark keeps the batch and copies its iterator to send it.
        return iter(self._batches(start, end)), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[pa.RecordBatch]:  # noqa: N802 - pyspark's name
        return iter(self._batches(start, end))

    def _batches(self, start: dict, end: dict) -> list[pa.RecordBatch]:
        return [batch for partition in self.stream.partitions(start, end) for batch in self.stream.read(partition)]

    def commit(self, end: dict) -> None:
        self.stream.commit(end)

    def stop(self) -> None:
        self.stream.stop()
