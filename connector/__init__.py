"""PySpark Python Data Source `aeron-archive` (read side).

``register(spark)`` makes ``spark.read.format("aeron-archive")`` and
``spark.readStream.format("aeron-archive")`` available; see docs/options.md.
"""


def register(spark) -> None:
    from aeron_spark.connector.data_source import register as register_data_source
    register_data_source(spark)


__all__ = ["register"]
