"""Automatic registration: PySpark imports top-level `pyspark_*` modules and registers their
`DefaultSource`, so `spark.readStream.format("aeron-archive")` works without calling
`aeron_spark.connector.register(spark)`."""

from aeron_spark.connector.data_source import AeronArchiveDataSource as DefaultSource

__all__ = ["DefaultSource"]
