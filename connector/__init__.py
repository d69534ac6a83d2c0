"""PySpark Python Data Source `aeron-archive`: reads recordings and writes them exactly once.

``register(spark)`` makes ``format("aeron-archive")`` available to ``spark.read`` and
``spark.readStream`` (the source, ``source/``; docs/options.md) and to ``DataFrame.write`` and
``writeStream`` (the sink, ``sink/``; docs/exactly-once.md). ``from_sbe`` decodes an SBE-encoded
binary column of any DataFrame (docs/sbe.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the package (as every worker does) must not import pyspark
    from pyspark.sql import Column, SparkSession


def register(spark: SparkSession) -> None:
    from aeron_spark.connector.data_source import register as register_data_source
    register_data_source(spark)


def from_sbe(col: Column, schema: str, message: str | int) -> Column:
    """Decode a binary column with an SBE schema into a struct column (docs/sbe.md)."""
    from aeron_spark.connector.sbe_functions import from_sbe as decode_column
    return decode_column(col, schema, message)


__all__ = ["from_sbe", "register"]
