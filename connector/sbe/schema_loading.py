"""Reading a schema XML from where ``sbe.schema`` / ``from_sbe`` say it is: a local path, a
``file:`` URI, or any URI ``pyarrow.fs`` opens (s3:, gs:, abfs:, hdfs:, ...)."""

from __future__ import annotations

import functools
from urllib.parse import unquote, urlparse

from aeron_spark.connector.sbe.schema_model import Schema
from aeron_spark.connector.sbe.schema_xml import parse_schema


def read_schema_text(location: str) -> str:
    """The XML text at ``location``; OSError (from the file system) when it cannot be read."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and location[1:3] in (":\\", ":/")):
        path = unquote(parsed.path) if parsed.scheme == "file" else location
        with open(path, encoding="utf-8") as xml:
            return xml.read()
    import pyarrow.fs as pafs
    filesystem, path = pafs.FileSystem.from_uri(location)
    with filesystem.open_input_stream(path) as stream:
        return stream.read().decode("utf-8")


@functools.lru_cache(maxsize=16)
def parsed_schema(xml_text: str, source: str) -> Schema:
    """The parsed schema of a text, once per process (executors decode many batches with one schema)."""
    return parse_schema(xml_text, source)
