"""The `aeron-archive` Python Data Source: schema, validation, readers, registration."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StructField,
    StructType,
    TimestampType,
)

from .options import OptionError, ReadMode, SourceOptions, validate_common
from .sink_options import reject_sink_options_on_read, without_sink_options

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
        validate_common(without_sink_options(self.options))  # sink.* options: checked by the writers

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        include = str(self.options.get("includeTimestamp", "false")).lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        from .batch_reader import AeronArchiveBatchReader
        reject_sink_options_on_read(self.options)
        options = SourceOptions.parse(self.options, ReadMode.BATCH)
        _check_schema(schema, options)
        return AeronArchiveBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .micro_batch_stream import AeronArchiveStreamReader
        reject_sink_options_on_read(self.options)
        options = SourceOptions.parse(self.options, ReadMode.STREAM)
        _check_schema(schema, options)
        return AeronArchiveStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """write.format("aeron-archive"): exactly-once append (docs/exactly-once.md)."""
        from .writer import AeronArchiveBatchWriter, check_append_only, sink_columns
        from .sink_options import SinkOptions
        check_append_only(overwrite)
        return AeronArchiveBatchWriter(SinkOptions.parse(self.options, streaming=False), sink_columns(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """writeStream.format("aeron-archive"): exactly-once append keyed by the micro-batch id."""
        from .writer import AeronArchiveStreamWriter, check_append_only, sink_columns
        from .sink_options import SinkOptions
        check_append_only(overwrite)
        return AeronArchiveStreamWriter(SinkOptions.parse(self.options, streaming=True), sink_columns(schema))


def _check_schema(schema: StructType, options: SourceOptions) -> None:
    expected = source_schema(options.include_timestamp)
    if schema is not None and schema != expected:
        raise OptionError(
            f"format {FORMAT_NAME} has a fixed schema {expected.simpleString()}; got {schema.simpleString()} "
            "(do not call .schema(...), or pass exactly this one; includeTimestamp=true adds timestamp)")


def register(spark) -> None:
    """Make format("aeron-archive") available in this SparkSession."""
    spark.dataSource.register(AeronArchiveDataSource)
