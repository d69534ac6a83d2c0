"""The ceiling of any Python data source, measured next to ours: a Python source yielding the very
Arrow batches the aeron-archive source yields, from memory.

``materialize`` reads a recording in this process exactly as the source's partitions would (the
source's own planning and ``read_partition``, the same options) and writes each partition's batches
to an Arrow IPC file in ``directory`` (put it on tmpfs or a hot page cache). The ``in-memory-batches``
source then has one partition per file; each Python worker maps a file once and yields its batches
without copying, so a read costs only what Spark's Python Data Source machinery costs: the batches
sent to the JVM over the worker's socket and converted there. Run it in the same session as the
source and Parquet, and the gap between it and Parquet is Spark's, the gap between it and the source
is ours (replay, assembly, decoding, and their CPU taken from Spark on a small machine).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

FORMAT = "in-memory-batches"
_MAPPED: dict[str, pa.ipc.RecordBatchFileReader] = {}  # per Python worker: files mapped once, kept


def materialize(options: dict[str, str], directory: Path, label: str, schema=None) -> tuple[list[str], int]:
    """The source's batches for ``options`` (a batch read; ``schema``: a user schema, a StructType),
    one IPC file per partition; returns the files and the row count."""
    from aeron_spark.connector.source.archive_access import open_archive
    from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader, read_partition
    from aeron_spark.connector.data_source import select_columns
    from aeron_spark.connector.source.options import ReadMode, SourceOptions

    parsed = SourceOptions.parse(options, ReadMode.BATCH)
    if schema is not None:
        parsed = select_columns(schema, parsed)
    partitions = AeronArchiveBatchReader(parsed, driver_opener=open_archive, executor_opener=open_archive,
                                         forget_driver_connection=None).partitions()
    access = open_archive(parsed.connection)
    files, rows = [], 0
    try:
        for index, partition in enumerate(partitions):
            path = directory / f"{label}-{index}.arrow"
            writer = None
            for batch in read_partition(partition, parsed, lambda _connection: access):
                if writer is None:
                    writer = pa.ipc.new_file(str(path), batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
            if writer is not None:
                writer.close()
                files.append(str(path))
    finally:
        access.close()
    return files, rows


def _mapped(path: str) -> pa.ipc.RecordBatchFileReader:
    reader = _MAPPED.get(path)
    if reader is None:
        reader = _MAPPED[path] = pa.ipc.open_file(pa.memory_map(path))
    return reader


class _File(InputPartition):
    def __init__(self, path: str) -> None:
        self.path = path


class _Reader(DataSourceReader):
    def __init__(self, files: list[str]) -> None:
        self.files = files

    def partitions(self):
        return [_File(path) for path in self.files]

    def read(self, partition: _File):
        reader = _mapped(partition.path)
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)


class InMemoryBatches(DataSource):
    """format("in-memory-batches").option("files", <paths joined by os.pathsep>)"""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema
        first = self.options["files"].split(os.pathsep)[0]
        return from_arrow_schema(pa.ipc.open_file(pa.memory_map(first)).schema)

    def reader(self, schema):
        return _Reader(self.options["files"].split(os.pathsep))


def register(spark) -> None:
    from pyspark import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import bench/
    spark.dataSource.register(InMemoryBatches)


def reader(spark, files: list[str]):
    return spark.read.format(FORMAT).option("files", os.pathsep.join(files))
