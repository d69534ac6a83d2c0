"""``from_sbe(col, schema, message)``: decode a binary column of any DataFrame (Kafka, files, ...)
with an SBE schema, like ``from_avro`` / ``from_protobuf``. An Arrow UDF: each Arrow batch of the
column goes through the vectorized decoder at once (docs/sbe.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from aeron_spark.connector.sbe.arrow_types import message_arrow_type
from aeron_spark.connector.sbe.decoder import SbeDecoder
from aeron_spark.connector.sbe.schema_loading import parsed_schema, read_schema_text

if TYPE_CHECKING:  # pyspark is imported when from_sbe runs, on the driver
    from pyspark.sql import Column


def from_sbe(col: Column, schema: str, message: str | int) -> Column:
    """A struct column: each payload of ``col`` decoded as ``message`` (a name or template id) of the
    SBE schema ``schema`` (an XML text, or a path or URI read here, on the driver). Payloads of
    another template, too short or NULL give NULL; a truncated message fails the task naming it."""
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.types import from_arrow_type

    text, source = (schema, "<from_sbe schema>") if schema.lstrip().startswith("<") else (read_schema_text(schema), schema)
    chosen = parsed_schema(text, source).message(message)
    name = chosen.name

    def decode(payloads: pa.Array) -> pa.Array:
        parsed = parsed_schema(text, source)  # once per worker process
        wanted = parsed.message(name)
        return SbeDecoder(parsed, [wanted]).decode_message(payloads, wanted)

    # pyspark's stubs require functionType; the runtime infers it from decode's type hints (Array -> Array)
    udf = arrow_udf(decode, from_arrow_type(message_arrow_type(chosen)))  # type: ignore[call-overload]
    return udf(col)
