"""The `aeron-archive` Python Data Source: schema, validation, readers and writers, registration.

Every Python worker Spark starts for this source imports this module (it unpickles the data source,
its reader or its writer), and a new query's first micro-batch starts five of them one after the
other, so it imports only what parsing the options needs: each role's code (the source's reader,
the sink's writer, the archive client, the Aeron binding, SBE) is imported by the method that
returns it or where it is first used (tests/unit/connector/test_worker_imports.py;
docs/reliability.md, where a first batch's time goes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    SimpleDataSourceStreamReader,
)
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StructField,
    StructType,
    TimestampType,
)

from aeron_spark.connector.option_spec import option_spec, parse_bool
from aeron_spark.connector.options import OptionError
from aeron_spark.connector.source.options import ReadMode, SourceOptions, sbe_settings, validate_common
from aeron_spark.connector.sink.options import reject_sink_options_on_read, without_sink_options

if TYPE_CHECKING:
    from aeron_spark.connector.source.sbe_columns import SbeSettings

FORMAT_NAME = "aeron-archive"


# NOT NULL: no value is ever null, and Spark converts non-nullable columns faster (see
# message_batches.BASE_FIELDS, which must match).
SOURCE_FIELDS = (
    StructField("recording_id", LongType(), nullable=False),
    StructField("position", LongType(), nullable=False),
    StructField("payload", BinaryType(), nullable=False),
    StructField("session_id", IntegerType(), nullable=False),
    StructField("stream_id", IntegerType(), nullable=False),
    StructField("reserved_value", LongType(), nullable=False),
    StructField("timestamp", TimestampType(), nullable=False),
)


def source_schema(include_timestamp: bool) -> StructType:
    return StructType([f for f in SOURCE_FIELDS if include_timestamp or f.name != "timestamp"])


class AeronArchiveDataSource(DataSource):
    """Reads Aeron Archive recordings as rows of whole messages (see docs/options.md)."""

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        validate_common(without_sink_options(self.options))  # sink.* options: checked by the writers

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        include = parse_bool(self.options, option_spec("includeTimestamp", "source"))
        sbe = sbe_settings(without_sink_options(self.options))
        if sbe is not None:
            return sbe_schema(sbe, include)
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader
        reject_sink_options_on_read(self.options)
        options = select_columns(schema, SourceOptions.parse(self.options, ReadMode.BATCH))
        return AeronArchiveBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader
        reject_sink_options_on_read(self.options)
        options = select_columns(schema, SourceOptions.parse(self.options, ReadMode.STREAM))
        if options.read_on_driver:  # pyspark then asks simpleStreamReader
            raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED",
                                             messageParameters={"feature": "streamReader with readOnDriver=true"})
        return AeronArchiveStreamReader(options)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:  # noqa: N802 - pyspark's name
        """readStream with ``readOnDriver=true``: micro-batches read by the driver (driver_read_stream.py)."""
        from aeron_spark.connector.source.driver_read_stream import AeronArchiveDriverStreamReader
        reject_sink_options_on_read(self.options)
        return AeronArchiveDriverStreamReader(select_columns(schema, SourceOptions.parse(self.options, ReadMode.STREAM)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """write.format("aeron-archive"): exactly-once append (docs/exactly-once.md)."""
        from aeron_spark.connector.sink.writer import AeronArchiveBatchWriter, check_append_only, sink_columns
        from aeron_spark.connector.sink.options import SinkOptions
        check_append_only(overwrite)
        return AeronArchiveBatchWriter(SinkOptions.parse(self.options, streaming=False), sink_columns(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """writeStream.format("aeron-archive"): exactly-once append keyed by the micro-batch id."""
        from aeron_spark.connector.sink.writer import AeronArchiveStreamWriter, check_append_only, sink_columns
        from aeron_spark.connector.sink.options import SinkOptions
        check_append_only(overwrite)
        return AeronArchiveStreamWriter(SinkOptions.parse(self.options, streaming=True), sink_columns(schema))


def sbe_schema(sbe: SbeSettings, include_timestamp: bool) -> StructType:
    """The rows of an sbe.schema read: the standard columns around the decoded ones (docs/sbe.md)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from aeron_spark.connector.source.sbe_columns import SbeColumns
    return from_arrow_schema(SbeColumns(sbe, include_timestamp).arrow_schema)


def select_columns(schema: StructType | None, options: SourceOptions) -> SourceOptions:
    """The options with the columns a user schema (``.schema(...)``) asks for: any of the source's
    columns, in any order, each with its own type, nullable or not (no value is ever null).
    Reading fewer columns is the only column pruning a Python source gets, and it is cheaper."""
    if options.sbe is not None:
        return _select_decoded_columns(schema, options)
    if schema is None or schema == source_schema(options.include_timestamp):
        return options
    known = {f.name: f.dataType for f in SOURCE_FIELDS}
    accepted = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in SOURCE_FIELDS)
    names = [f.name for f in schema.fields]
    problems = [f"{f.name} {f.dataType.simpleString()}" for f in schema.fields
                if known.get(f.name) != f.dataType]
    if problems or not names or len(set(names)) != len(names):
        what = (f"unknown column or wrong type: {', '.join(problems)}" if problems
                else "no columns" if not names else "a column is named twice")
        raise OptionError(
            f"format {FORMAT_NAME}: the schema {schema.simpleString()} is not accepted ({what}); a schema may "
            f"select any of these columns, in any order, each at most once: {accepted}")
    return dataclasses.replace(options, output_columns=tuple(names),
                               nullable_columns=frozenset(f.name for f in schema.fields if f.nullable))


def _select_decoded_columns(schema: StructType | None, options: SourceOptions) -> SourceOptions:
    """With sbe.schema a user schema may select any of the decoded rows' columns (also
    ``session_id``, ``stream_id`` and ``reserved_value``, not in the default rows), in any order,
    with their types; a column or nested field that can be NULL must be declared nullable, one
    that cannot may be. Only those are decoded and built (column pruning a Python source otherwise
    never gets)."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type
    from aeron_spark.connector.source.sbe_columns import SbeColumns
    assert options.sbe is not None  # select_columns calls this only with sbe.schema
    columns = SbeColumns(options.sbe, options.include_timestamp)
    if schema is None or schema == from_arrow_schema(columns.arrow_schema):  # the default rows (sbe_schema)
        return options
    selectable = from_arrow_schema(columns.full_schema)
    known = {f.name: f for f in selectable.fields}
    names = [f.name for f in schema.fields]
    problems = [f"{f.name} {f.dataType.simpleString()}" + (" NOT NULL" if not f.nullable else "")
                for f in schema.fields
                if f.name not in known or not _same_or_more_nullable(known[f.name].dataType, f.dataType)
                or (known[f.name].nullable and not f.nullable)]
    if problems or not names or len(set(names)) != len(names):
        what = (f"unknown column, wrong type or NOT NULL where values can be NULL: {', '.join(problems)}" if problems
                else "no columns" if not names else "a column is named twice")
        raise OptionError(f"format {FORMAT_NAME}: with sbe.schema the schema {schema.simpleString()} is not accepted "
                          f"({what}); a schema may select any of the decoded rows' columns, in any order, each at "
                          f"most once: {selectable.simpleString()}")
    widened = tuple((f.name, to_arrow_type(f.dataType)) for f in schema.fields if f.dataType != known[f.name].dataType)
    return dataclasses.replace(options, output_columns=tuple(names),
                               nullable_columns=frozenset(f.name for f in schema.fields if f.nullable),
                               widened_column_types=widened)


def _same_or_more_nullable(ours: DataType, theirs: DataType) -> bool:
    """``theirs`` is ``ours``, except that nested fields or elements may be nullable where ours are not."""
    if isinstance(ours, StructType) and isinstance(theirs, StructType):
        return len(ours.fields) == len(theirs.fields) and all(
            a.name == b.name and (b.nullable or not a.nullable) and _same_or_more_nullable(a.dataType, b.dataType)
            for a, b in zip(ours.fields, theirs.fields))
    if isinstance(ours, ArrayType) and isinstance(theirs, ArrayType):
        return ((theirs.containsNull or not ours.containsNull)
                and _same_or_more_nullable(ours.elementType, theirs.elementType))
    return ours == theirs


def register(spark: SparkSession) -> None:
    """Make format("aeron-archive") available in this SparkSession."""
    spark.dataSource.register(AeronArchiveDataSource)
