"""The source's SBE mode (``sbe.schema``): its options, its row schema, and the decoding of each
Arrow batch of whole messages into typed columns (docs/sbe.md).

Rows: ``recording_id``, ``position``, ``template_id`` (left out when one message is selected and
the others skipped: it would be constant), then the decoded message (one selected message: its
fields as top-level columns, NOT NULL where no value can be NULL; several: one struct column per
message, named by the message), then ``payload`` (only with ``sbe.unselected=raw``: the bytes of each row not decoded),
then ``timestamp`` with ``includeTimestamp``. ``session_id``, ``stream_id`` and ``reserved_value``
are there on request (a user schema naming them), not by default: decoded rows are the message
and its offset, and Spark converts every column a Python source returns, used or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aeron_spark.connector.options import OptionError, parse_enum
from aeron_spark.connector.sbe import Schema, SbeDecoder, SbeSchemaError, spread
from aeron_spark.connector.sbe.arrow_types import block_fields, message_arrow_type, never_null
from aeron_spark.connector.sbe.schema_loading import parsed_schema, read_schema_text
from aeron_spark.connector.source.message_batches import BASE_FIELDS, TIMESTAMP_FIELD

TIMESTAMP_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
TEMPLATE_ID_FIELD = pa.field("template_id", pa.int32(), nullable=True)
RAW_PAYLOAD_FIELD = pa.field("payload", pa.binary(), nullable=True)
_LEADING = ("recording_id", "position")
_TRAILING = ("session_id", "stream_id", "reserved_value")
_ON_REQUEST = frozenset(_TRAILING)  # not in the default rows (see above)


@dataclass(frozen=True)
class SbeSettings:
    """What ``sbe.*`` say, with the schema's text (shipped to executors, which need not reach the file)."""

    location: str
    xml_text: str
    messages: tuple[str, ...]  # the selected messages' names, in the order asked for
    unselected: str  # skip | raw
    timestamp_field: tuple[str, str] | None = None  # sbe.timestampField: (message, root field)
    timestamp_unit_ns: int = 1  # sbe.timestampUnit: nanoseconds per unit of that field

    def field_time(self) -> Callable[[bytes], int | None] | None:
        """``payload -> epoch ns | None`` from ``sbe.timestampField`` (None when not set)."""
        if self.timestamp_field is None:
            return None
        message, field = self.timestamp_field
        read = SbeDecoder(self.schema).root_field_reader(message, field)
        unit = self.timestamp_unit_ns
        if unit == 1:
            return read
        return lambda payload: None if (value := read(payload)) is None else value * unit

    @property
    def schema(self) -> Schema:
        return parsed_schema(self.xml_text, self.location)


def parse_sbe_options(raw: dict[str, str]) -> SbeSettings | None:
    location = raw.get("sbe.schema")
    if location is None:
        for name in ("sbe.messages", "sbe.unselected", "sbe.timestampField", "sbe.timestampUnit"):
            if name in raw:
                raise OptionError(f"option {name} needs sbe.schema (the path or URI of the SBE schema XML)")
        return None
    if not location:
        raise OptionError("option sbe.schema is empty; accepted: a path or URI (file:, s3:, ...) of an SBE schema XML")
    try:
        text = read_schema_text(location)
    except (OSError, ValueError) as error:
        raise OptionError(f"option sbe.schema={location!r} cannot be read: {error}") from None
    try:
        schema = parsed_schema(text, location)
    except SbeSchemaError as error:
        raise OptionError(f"option sbe.schema: {error}") from None
    if not schema.messages:
        raise OptionError(f"option sbe.schema={location!r}: the schema has no message")
    messages = tuple(m.name for m in schema.messages)
    if raw.get("sbe.messages"):
        wanted = [item.strip() for item in raw["sbe.messages"].split(",") if item.strip()]
        try:
            messages = tuple(dict.fromkeys(schema.message(item).name for item in wanted))
        except SbeSchemaError as error:
            raise OptionError(f"option sbe.messages={raw['sbe.messages']!r}: {error}") from None
        if not messages:
            raise OptionError("option sbe.messages is empty; accepted: a comma list of message names or template ids")
    unselected = parse_enum(raw, "sbe.unselected")
    timestamp_field = _parse_timestamp_field(raw, schema, messages)
    unit = parse_enum(raw, "sbe.timestampUnit")  # its choices: the keys of TIMESTAMP_UNITS_NS
    if "sbe.timestampUnit" in raw and timestamp_field is None:
        raise OptionError("option sbe.timestampUnit needs sbe.timestampField")
    settings = SbeSettings(location, text, messages, unselected, timestamp_field, TIMESTAMP_UNITS_NS[unit])
    SbeColumns(settings, include_timestamp=True)  # raises when a decoded column clashes with a standard one
    return settings


def _parse_timestamp_field(raw: dict[str, str], schema: Schema, messages: tuple[str, ...]) -> tuple[str, str] | None:
    """``sbe.timestampField``: ``<field>`` of the one selected message, or ``<message>.<field>``;
    an integer root-block field (checked now, so a typo fails at option time)."""
    text = raw.get("sbe.timestampField")
    if text is None:
        return None
    message, dot, field = text.strip().rpartition(".")
    if not dot:
        if len(messages) != 1:
            raise OptionError(f"option sbe.timestampField={text!r}: several messages are selected; "
                              f"accepted: <message>.<field>, a message among {', '.join(messages)}")
        message = messages[0]
    try:
        SbeDecoder(schema).root_field_reader(message, field)
    except (KeyError, SbeSchemaError) as error:
        raise OptionError(f"option sbe.timestampField={text!r}: {error.args[0] if error.args else error}; "
                          "accepted: an integer root-block field of a selected message") from None
    return schema.message(message).name, field


class SbeColumns:
    """The row schema of an SBE read, and batches of whole messages -> batches of decoded rows.

    ``columns`` (a user schema's names, in its order; None: the default rows) selects among every
    column (``full_schema``): only the selected fields are decoded and only the selected standard
    columns are built, which is cheaper end to end because Spark converts every column a Python
    source returns. ``widened``: the Arrow type of each selected column the user schema declares
    with nested fields nullable where the decoder's are NOT NULL (the column is cast to it)."""

    def __init__(self, settings: SbeSettings, include_timestamp: bool, columns: tuple[str, ...] | None = None,
                 nullable: frozenset[str] = frozenset(), widened: tuple[tuple[str, pa.DataType], ...] = ()) -> None:
        self.settings = settings
        schema = settings.schema
        self.messages = [schema.message(name) for name in settings.messages]
        self.single = len(self.messages) == 1
        self.raw = settings.unselected == "raw"
        by_name = {f.name: f for f in BASE_FIELDS}
        if self.single:
            message = self.messages[0]
            elements = list(message.fields) + list(message.groups) + list(message.var_data)
            decoded = [f.with_nullable(self.raw or not never_null(element))
                       for f, element in zip(block_fields(message), elements)]
        else:
            decoded = [pa.field(m.name, message_arrow_type(m), nullable=True) for m in self.messages]
        self.with_template_id = self.raw or not self.single
        fields = [by_name[n] for n in _LEADING] + ([TEMPLATE_ID_FIELD] if self.with_template_id else []) + decoded
        fields += [RAW_PAYLOAD_FIELD] if self.raw else []
        fields += [by_name[n] for n in _TRAILING] + ([TIMESTAMP_FIELD] if include_timestamp else [])
        names = [f.name for f in fields]
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:
            what = f"message {self.messages[0].name}'s field(s)" if self.single else "message name(s)"
            raise OptionError(f"option sbe.schema: {what} {', '.join(clashes)} clash with the source's own columns "
                              "of that name; select several messages (sbe.messages) to get one struct column per "
                              "message, or rename the field in the schema")
        self.full_schema = pa.schema(fields)
        self._casts = dict(widened)
        if columns is None:
            self.arrow_schema = pa.schema([f for f in fields if f.name not in _ON_REQUEST])
        else:
            by_column = {f.name: f for f in fields}
            unknown = [name for name in columns if name not in by_column]
            if unknown or not columns or len(set(columns)) != len(columns):
                raise OptionError(f"the schema's columns {', '.join(columns)} are not a selection of the decoded "
                                  f"rows' columns {', '.join(names)} (each at most once)")
            self.arrow_schema = pa.schema([
                pa.field(name, self._casts.get(name, by_column[name].type), by_column[name].nullable or name in nullable)
                for name in columns])
        selected = set(self.arrow_schema.names)
        if self.single:
            wanted = {self.messages[0].name: frozenset(f.name for f in decoded if f.name in selected)}
            self.decoded_messages = self.messages if wanted[self.messages[0].name] else []
        else:
            wanted = {}
            self.decoded_messages = [m for m in self.messages if m.name in selected]
        self.decoder = SbeDecoder(schema, self.decoded_messages, wanted)
        self.standard_columns = tuple(n for n in _LEADING + _TRAILING + ("timestamp",) if n in selected)
        self._template_ids = np.array([m.template_id for m in self.messages], dtype=np.int32)

    def input_columns(self) -> tuple[str, ...]:
        """The columns of the raw batches this needs: the payload and the selected standard columns."""
        return ("payload",) + self.standard_columns

    def convert(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        decoded = self.decoder.decode(batch.column("payload"))
        templates = decoded.template_ids
        selected = templates == self._template_ids[0] if self._template_ids.size == 1 \
            else np.isin(templates, self._template_ids)
        everything = self.raw or bool(selected.all())
        kept = np.arange(batch.num_rows) if everything else np.flatnonzero(selected)
        take = (lambda column: column) if everything else (lambda column: column.take(pa.array(kept)))
        columns: dict[str, pa.Array] = {name: take(batch.column(name)) for name in self.standard_columns}
        if self.with_template_id and "template_id" in self.arrow_schema.names:
            kept_templates = templates[kept]
            columns["template_id"] = pa.array(kept_templates, type=pa.int32(), mask=kept_templates < 0)
        placed = {}
        for message in self.decoded_messages:
            found = decoded.by_message[message.name]
            rows = found.rows if everything else np.searchsorted(kept, found.rows)
            placed[message.name] = spread(found.values, rows, kept.size)
        if self.single:
            if self.decoded_messages:
                message = self.messages[0]
                struct = placed[message.name]
                for field, child in zip(self.decoder.decoded_fields(message), struct.flatten()):
                    columns[field.name] = child
        else:
            columns.update(placed)
        if self.raw and "payload" in self.arrow_schema.names:
            payload = take(batch.column("payload"))
            columns["payload"] = pc.if_else(pa.array(selected[kept]), pa.nulls(kept.size, pa.binary()), payload)
        for name, arrow_type in self._casts.items():
            columns[name] = columns[name].cast(arrow_type)
        return pa.RecordBatch.from_arrays([columns[f.name] for f in self.arrow_schema], schema=self.arrow_schema)
