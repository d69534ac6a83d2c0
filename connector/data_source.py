"""The `aeron-archive` Python Data Source: schema, validation, readers, registration."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StructField,
    StructType,
    TimestampType,
)

from .options import OptionError, ReadMode, SourceOptions, validate_common

FORMAT_NAME = "aeron-archive"


def source_schema(include_timestamp: bool) -> StructType:
    fields = [
        StructField("recording_id", LongType()),
        StructField("position", LongType()),
        StructField("payload", BinaryType()),
        StructField("session_id", IntegerType()),
        StructField("stream_id", IntegerType()),
        StructField("reserved_value", LongType()),
    ]
    if include_timestamp:
        fields.append(StructField("timestamp", TimestampType()))
    return StructType(fields)


class AeronArchiveDataSource(DataSource):
    """Reads Aeron Archive recordings as rows of whole messages (see docs/options.md)."""

    def __init__(self, options) -> None:
        super().__init__(options)
        validate_common(self.options)

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        include = str(self.options.get("includeTimestamp", "false")).lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        from .batch_reader import AeronArchiveBatchReader
        options = SourceOptions.parse(self.options, ReadMode.BATCH)
        _check_schema(schema, options)
        return AeronArchiveBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .micro_batch_stream import AeronArchiveStreamReader
        options = SourceOptions.parse(self.options, ReadMode.STREAM)
        _check_schema(schema, options)
        return AeronArchiveStreamReader(options)


def _check_schema(schema: StructType, options: SourceOptions) -> None:
    expected = source_schema(options.include_timestamp)
    if schema is not None and schema != expected:
        raise OptionError(
            f"format {FORMAT_NAME} has a fixed schema {expected.simpleString()}; got {schema.simpleString()} "
            "(do not call .schema(...), or pass exactly this one; includeTimestamp=true adds timestamp)")


def register(spark) -> None:
    """Make format("aeron-archive") available in this SparkSession."""
    spark.dataSource.register(AeronArchiveDataSource)
