"""SBE (Simple Binary Encoding) decoding, sans-IO: the schema XML -> a schema model -> Arrow.

``load_schema`` reads a schema XML from a path or URI; ``parse_schema`` parses its text;
``SbeDecoder`` turns a pyarrow binary array of payloads into one StructArray per message type.
See docs/sbe.md.
"""

from aeron_spark.connector.sbe.decoder import NO_TEMPLATE, DecodedPayloads, SbeDecodeError, SbeDecoder, spread
from aeron_spark.connector.sbe.schema_model import Message, Schema, SbeSchemaError
from aeron_spark.connector.sbe.schema_xml import parse_schema

__all__ = ["NO_TEMPLATE", "DecodedPayloads", "Message", "Schema", "SbeDecodeError", "SbeDecoder", "SbeSchemaError",
           "parse_schema", "spread"]
