"""PySpark Python Data Source `aeron-archive` (read side).

``register(spark)`` makes ``spark.read.format("aeron-archive")`` and
``spark.readStream.format("aeron-archive")`` available; see docs/options.md. ``from_sbe`` decodes
an SBE-encoded binary column of any DataFrame (docs/sbe.md).
"""


def register(spark) -> None:
    from aeron_spark.connector.data_source import register as register_data_source
    register_data_source(spark)


def from_sbe(col, schema: str, message: str | int):
    """Decode a binary column with an SBE schema into a struct column (docs/sbe.md)."""
    from aeron_spark.connector.sbe_functions import from_sbe as decode_column
    return decode_column(col, schema, message)


__all__ = ["from_sbe", "register"]
