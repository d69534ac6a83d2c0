"""Automatic registration: PySpark imports top-level `pyspark_*` modules and registers their
`DefaultSource`, so `format("aeron-archive")` works for reads and writes without calling
`aeron_spark.connector.register(spark)`."""

from aeron_spark.connector.data_source import AeronArchiveDataSource as DefaultSource

__all__ = ["DefaultSource"]
