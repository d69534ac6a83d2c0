"""Vectorized SBE decoding: a pyarrow BinaryArray of payloads -> one StructArray per message type.

No Python runs per message. Every payload's header is read at once; then, per message type,

* each root-block field is read for all its messages in one numpy operation: when the messages
  sit at a fixed stride in the payload buffer (fixed-size messages back to back, the common case)
  through a strided view of the buffer at the field's offset, otherwise by gathering the field's
  bytes with ``start + offset + arange(size)``; the byte order is the schema's;
* repeating groups and var data have variable offsets, so they are walked level by level with a
  cursor array (one cursor per message, or per group entry): a group whose entries are fixed-size
  is read in one step for all entries of all messages; a group whose entries hold nested groups or
  var data is walked entry index by entry index, each step vectorized over every message.

When the C helper is built (native_fields.py), the scalar fields of a level whose records all hold
them are copied in one pass over the records instead of one numpy pass each, and enum names and the
one-header check are done in C too; otherwise (or with AERON_SPARK_SBE_NATIVE=0) numpy does it all.

Evolution follows the SBE spec: a field is read only when the message's header version is at least
its ``sinceVersion`` and it lies inside the producer's blockLength (else NULL); the next part
always starts at the producer's blockLength (a newer producer's extra fields are skipped), and a
group's entries advance by the blockLength in that group's own dimension header.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NoReturn
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aeron_spark.connector.sbe import native_fields
from aeron_spark.connector.sbe.arrow_types import (
    block_fields,
    field_arrow_type,
    message_arrow_type,
)
from aeron_spark.connector.sbe.field_reads import (
    Places,
    binary_array,
    bytes_at,
    constant_array,
    constant_value,
    enum_names,
    is_null,
    payload_buffers,
    same_bytes_everywhere,
    scalars_at,
    set_names,
    to_arrow,
    uniform_stride,
)
from aeron_spark.connector.sbe.schema_model import (
    CompositeType,
    EncodedType,
    EnumType,
    Field,
    FieldType,
    Group,
    Message,
    Presence,
    Schema,
    SetType,
    VarData,
)

NO_TEMPLATE = -1  # template id of a null payload or one too short for the message header


class SbeDecodeError(ValueError):
    """A message's bytes contradict its schema (truncated block, group or var data)."""


class _NotOneHeader(Exception):
    """The batch's payloads do not all hold the first one's header (found while copying its fields)."""


@dataclass(frozen=True)
class DecodedMessages:
    """One message type's decoded rows: ``rows`` are the indices of its payloads in the input."""

    message: Message
    rows: np.ndarray
    values: pa.StructArray


@dataclass(frozen=True)
class DecodedPayloads:
    template_ids: np.ndarray  # int32 per payload; NO_TEMPLATE when it has no header
    by_message: dict[str, DecodedMessages]


class _Level:
    """The records of one level (messages, or entries of one group) being decoded."""

    def __init__(self, starts: np.ndarray | Callable[[], np.ndarray], block_lengths: np.ndarray, versions: np.ndarray,
                 ends: np.ndarray | Callable[[], np.ndarray], rows: np.ndarray, count: int | None = None,
                 first_start: int | None = None) -> None:
        """``starts`` and ``ends`` may be functions building the array when first used (a batch of
        one header at a fixed stride needs neither for its root fields); ``count`` and
        ``first_start`` are then given."""
        self._starts = starts  # int64 offset of each record's block in the buffer
        self.block_lengths = block_lengths  # int64 acting block length of each record
        self.versions = versions  # int64 producer's schema version (from the message header)
        self._ends = ends  # int64 end of the enclosing payload (bounds)
        self.rows = rows  # int64 payload index of each record (for error messages)
        if count is None:
            assert not callable(starts)  # a lazy starts comes with its count (see above)
            count = int(starts.size)
        self.count = count
        self._first_start = first_start
        self.blocks_checked = False  # every record's block is known to lie inside its payload
        # (offset from each record, bytes) every record must hold, checked with the first copy: the
        # one message header assumed for the whole batch (SbeDecoder.decode)
        self.expect_header: tuple[int, bytes] | None = None

    @property
    def starts(self) -> np.ndarray:
        if callable(self._starts):
            self._starts = self._starts()
        return self._starts

    @property
    def ends(self) -> np.ndarray:
        if callable(self._ends):
            self._ends = self._ends()
        return self._ends

    @property
    def first_start(self) -> int:
        return int(self.starts[0]) if self._first_start is None else self._first_start

    @property
    def stride(self) -> int | None:
        """The fixed distance between consecutive records, if any (computed once per level)."""
        if not hasattr(self, "_stride"):
            self._stride = uniform_stride(self.starts)
        return self._stride

    @property
    def uniform(self) -> bool:
        """Every record has the same block length and version (the common case, computed once):
        then whether a field is present is one answer for all records."""
        if not hasattr(self, "_uniform"):
            count = self.count
            self._uniform = count > 0 and bool((self.block_lengths == self.block_lengths[0]).all()) \
                and bool((self.versions == self.versions[0]).all())
        return self._uniform

    @property
    def nothing_absent(self) -> np.ndarray:
        if not hasattr(self, "_nothing_absent"):
            self._nothing_absent = np.zeros(self.count, dtype=bool)
        return self._nothing_absent

    def present(self, since_version: int, end: int) -> np.ndarray | bool:
        """Which records hold a field that needs ``since_version`` and ends at ``end`` in the
        block; a bool when the level is uniform."""
        if self.uniform:
            return bool(self.versions[0] >= since_version and self.block_lengths[0] >= end)
        return (self.versions >= since_version) & (self.block_lengths >= end)

    def places(self, offset: int) -> "Places":
        """Where the field at ``offset`` in the block sits in each record."""
        if self.stride is not None and self.count:
            return Places(self.count, self.first_start + offset, self.stride)
        return Places(self.count, explicit=self.starts + offset, origin=(id(self.starts), offset))

    def take(self, index: np.ndarray, starts: np.ndarray | None = None) -> "_Level":
        return _Level(self.starts[index] if starts is None else starts, self.block_lengths[index],
                      self.versions[index], self.ends[index], self.rows[index])


class SbeDecoder:
    """Decodes the messages of a schema (optionally only some of them)."""

    def __init__(self, schema: Schema, messages: list[Message] | None = None,
                 wanted: dict[str, frozenset[str]] | None = None) -> None:
        """``wanted``: per message name, the names of the fields, groups and var data to decode
        (column pruning); a message not named there is decoded whole."""
        self.schema = schema
        self.messages = list(schema.messages if messages is None else messages)
        self._order = schema.byte_order
        self._wanted = dict(wanted or {})
        self._copied: dict[tuple, np.ndarray] = {}  # the current level's fields the C helper copied, by place

    def decoded_fields(self, message: Message) -> list[pa.Field]:
        """The Arrow fields of ``message``'s decoded struct: all of block_fields, or the wanted ones."""
        wanted = self._wanted.get(message.name)
        return [f for f in block_fields(message) if wanted is None or f.name in wanted]

    def arrow_type(self, message: Message) -> pa.StructType:
        return message_arrow_type(message)

    # --- the whole batch -----------------------------------------------------------------------

    def decode(self, payloads: pa.Array) -> DecodedPayloads:
        try:
            return self._decode(payloads, assume_one_header=True)
        except _NotOneHeader:  # a batch of several headers: decoded again, headers read per payload
            return self._decode(payloads, assume_one_header=False)

    def _decode(self, payloads: pa.Array, assume_one_header: bool) -> DecodedPayloads:
        """``assume_one_header``: with the C helper and payloads at a fixed stride, take the first
        payload's header as every payload's and check that while copying the root fields (one pass
        over the batch, not two); raises _NotOneHeader when a payload differs."""
        data, offsets, valid = payload_buffers(payloads)
        count = offsets.size - 1
        built: list[np.ndarray] = []

        def starts_and_ends() -> list[np.ndarray]:
            """int64 start and end of each payload, built when first needed."""
            if not built:
                built.extend((offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)))
            return built

        header = self.schema.header
        native = native_fields.copier()
        if native is not None and valid is None:  # no nulls: lengths and stride in one pass
            shortest, stride = native.offsets_layout(offsets)
            every_header = shortest >= header.size
        else:
            starts, ends = starts_and_ends()
            lengths = ends - starts
            shortest = int(lengths.min()) if lengths.size else 0
            stride = uniform_stride(starts)
            every_header = bool(((lengths >= header.size) if valid is None else valid & (lengths >= header.size)).all())
        if data.size < header.size:
            data = np.zeros(header.size, dtype=np.uint8)
        if every_header:
            places = Places(count, int(offsets[0]), stride) if stride is not None \
                else Places(count, explicit=starts_and_ends()[0])
        else:
            starts, ends = starts_and_ends()
            has_header = ends - starts >= header.size
            places = Places.of(np.where(has_header if valid is None else valid & has_header, starts, 0))
        assumed = assume_one_header and native is not None and every_header and places.explicit is None \
            and count > 1
        one_header = assumed or (every_header and same_bytes_everywhere(data, places, header.size))
        verified = not assumed
        if one_header:
            # One header repeated (one message type and version, the common case): read it once;
            # block lengths and versions are that one value broadcast (no per-row arrays).
            first = Places(1, places.first if count else 0, 0)
            template_id, block_length, version = (int(self._read_int(data, first.shifted(member.offset), member.type)[0])
                                                  for member in (header.template_id, header.block_length, header.version))
            template_ids = np.full(count, template_id, dtype=np.int32)
            block_lengths = np.broadcast_to(np.int64(block_length), (count,))
            versions = np.broadcast_to(np.int64(version), (count,))
        else:
            template_ids = self._read_int(data, places.shifted(header.template_id.offset), header.template_id.type)
            if not every_header:
                starts, ends = starts_and_ends()
                has_header = ends - starts >= header.size
                template_ids = np.where(has_header if valid is None else valid & has_header, template_ids, NO_TEMPLATE)
            template_ids = template_ids.astype(np.int32)
            block_lengths = self._read_int(data, places.shifted(header.block_length.offset), header.block_length.type)
            versions = self._read_int(data, places.shifted(header.version.offset), header.version.type)
        by_message = {}
        for message in self.messages:
            matches = None if one_header else template_ids == message.template_id
            if template_id == message.template_id if matches is None else matches.all():
                # One message type in the batch (the common case): no gathers
                rows = np.arange(count, dtype=np.int64)
                level = _Level(lambda: starts_and_ends()[0] + header.size, block_lengths, versions,
                               lambda: starts_and_ends()[1], rows, count, int(offsets[0]) + header.size if count else None)
                level._stride = places.stride  # the blocks sit where the payloads do
                if one_header:
                    level._uniform = count > 0
                    # every block fits its payload when the shortest payload holds header and block
                    level.blocks_checked = count > 0 and shortest >= header.size + block_length
                    if not verified and not level.blocks_checked:
                        # a short payload: the bounds check would run on the assumption, so check it first
                        if not same_bytes_everywhere(data, places, header.size):
                            raise _NotOneHeader()
                        verified = True
                    if not verified:
                        level.expect_header = (-header.size, data[places.first:places.first + header.size].tobytes())
                        verified = True  # by _copy_fixed_fields, the first thing _decode_level reads
            else:
                rows = np.flatnonzero(template_ids == message.template_id if matches is None else matches)
                starts, ends = starts_and_ends()
                level = _Level((starts[rows] + header.size).astype(np.int64), block_lengths[rows].astype(np.int64),
                               versions[rows].astype(np.int64), ends[rows], rows.astype(np.int64))
            columns, _ = self._decode_level(message, data, level, message.name, self._wanted.get(message.name),
                                            need_end=False)
            values = pa.StructArray.from_arrays(columns, fields=self.decoded_fields(message)) if columns \
                else pa.array([{}] * level.count, type=pa.struct([]))
            by_message[message.name] = DecodedMessages(message, rows, values)
        if not verified and not same_bytes_everywhere(data, places, header.size):
            raise _NotOneHeader()  # no message of the batch's first template was decoded: checked here
        return DecodedPayloads(template_ids, by_message)

    def decode_message(self, payloads: pa.Array, message: Message) -> pa.StructArray:
        """Every payload as ``message``: NULL where a payload holds another template (or none)."""
        decoded = SbeDecoder(self.schema, [message]).decode(payloads)
        found = decoded.by_message[message.name]
        return spread(found.values, found.rows, len(payloads))

    # --- one level: fields, then groups, then var data -----------------------------------------

    def _decode_level(self, node: Message | Group, data: np.ndarray, level: _Level, path: str,
                      wanted: frozenset[str] | None = None,
                      need_end: bool = True) -> tuple[list[pa.Array], np.ndarray | None]:
        """The columns of a level (only the ``wanted`` ones when given) and the cursor after its
        last walked part: groups and var data before a wanted one are walked, not kept. Without
        ``need_end`` and with nothing to walk the cursor is None (no per-record starts are built)."""
        if not level.blocks_checked:
            _check_bounds(level.starts + level.block_lengths, level, f"{path}: the block (blockLength)")
        fields = [field for field in node.fields if wanted is None or field.name in wanted]
        self._copied = self._copy_fixed_fields(fields, data, level)
        try:
            columns = [self._field(field, data, level, f"{path}.{field.name}") for field in fields]
        finally:
            self._copied = {}
        parts = list(node.groups) + list(node.var_data)
        walked = parts if wanted is None else parts[:max((i + 1 for i, part in enumerate(parts) if part.name in wanted),
                                                          default=0)]
        if not walked and not need_end:
            return columns, None
        cursor = level.starts + level.block_lengths
        for part in walked:
            if isinstance(part, Group):
                column, cursor = self._group(part, data, level, cursor, f"{path}.{part.name}")
            else:
                column, cursor = self._var_data(part, data, level, cursor, f"{path}.{part.name}")
            if wanted is None or part.name in wanted:
                columns.append(column)
        return columns, cursor

    def _group(self, group: Group, data: np.ndarray, level: _Level, cursor: np.ndarray,
               path: str) -> tuple[pa.Array, np.ndarray]:
        present = level.versions >= group.since_version
        dimension = group.dimension
        _check_bounds(np.where(present, cursor + dimension.size, 0), level, f"{path}: the group header")
        at = np.where(present, cursor, 0)
        entry_length, entry_count = dimension.required_member("blockLength"), dimension.required_member("numInGroup")
        entry_lengths = np.where(present, self._read_int(data, at + entry_length.offset, entry_length.type), 0)
        counts = np.where(present, self._read_int(data, at + entry_count.offset, entry_count.type), 0).astype(np.int64)
        first = cursor + np.where(present, dimension.size, 0)
        total = int(counts.sum())
        if not group.has_variable_parts:
            parents = np.repeat(np.arange(level.count), counts)
            list_offsets = np.zeros(level.count + 1, dtype=np.int64)
            np.cumsum(counts, out=list_offsets[1:])
            index_in_group = np.arange(total, dtype=np.int64) - list_offsets[:-1][parents]
            entry_starts = first[parents] + index_in_group * entry_lengths[parents]
            entries = _Level(entry_starts, entry_lengths[parents], level.versions[parents], level.ends[parents],
                             level.rows[parents])
            columns, _ = self._decode_level(group, data, entries, path, need_end=False)
            end = first + counts * entry_lengths
        else:
            columns, end = self._nested_group(group, data, level, first, entry_lengths, counts, path)
        _check_bounds(end, level, f"{path}: the group's entries")
        list_offsets = np.zeros(level.count + 1, dtype=np.int32)
        np.cumsum(counts, out=list_offsets[1:])
        struct_type = pa.struct(block_fields(group))
        values = pa.StructArray.from_arrays(columns, fields=list(struct_type)) if columns \
            else pa.array([{}] * total, type=struct_type)
        column = pa.ListArray.from_arrays(pa.array(list_offsets), values, type=type_arrow_type_of_group(struct_type),
                                          mask=pa.array(~present) if not present.all() else None)
        return column, end

    def _nested_group(self, group: Group, data: np.ndarray, level: _Level, first: np.ndarray,
                      entry_lengths: np.ndarray, counts: np.ndarray, path: str) -> tuple[list[pa.Array], np.ndarray]:
        """Entries holding groups or var data: one step per entry index, vectorized over messages."""
        cursor = first.copy()
        pieces: list[list[pa.Array]] = []
        keys: list[np.ndarray] = []
        most = int(counts.max()) if counts.size else 0
        for index in range(most):
            active = np.flatnonzero(counts > index)
            entries = _Level(cursor[active], entry_lengths[active], level.versions[active], level.ends[active],
                             level.rows[active])
            columns, end = self._decode_level(group, data, entries, f"{path}[{index}]")
            cursor[active] = end
            pieces.append(columns)
            keys.append(active * max(most, 1) + index)
        fields = block_fields(group)
        if not pieces:
            return [pa.array([], type=f.type) for f in fields], cursor
        order = pa.array(np.argsort(np.concatenate(keys), kind="stable"))
        columns = [pc.take(pa.concat_arrays([piece[i] for piece in pieces]), order) for i in range(len(fields))]
        return columns, cursor

    def _var_data(self, var_data: VarData, data: np.ndarray, level: _Level, cursor: np.ndarray,
                  path: str) -> tuple[pa.Array, np.ndarray]:
        present = level.versions >= var_data.since_version
        _check_bounds(np.where(present, cursor + var_data.data_offset, 0), level, f"{path}: the length")
        at = np.where(present, cursor, 0)
        lengths = np.where(present, self._read_int(data, at + var_data.length_offset,
                                                   EncodedType("length", var_data.length_type)), 0).astype(np.int64)
        starts = cursor + var_data.data_offset
        end = np.where(present, starts + lengths, cursor)
        _check_bounds(end, level, f"{path}: the data")
        values = binary_array(data, starts, lengths, ~present)
        if var_data.is_string:
            try:
                values = values.cast(pa.string())
            except pa.ArrowInvalid as error:
                raise SbeDecodeError(f"{path}: not valid UTF-8 ({error})") from None
        return values, end

    # --- one field for every record of a level -------------------------------------------------

    def _field(self, field: Field, data: np.ndarray, level: _Level, path: str) -> pa.Array:
        arrow_type = field_arrow_type(field)
        if field.presence is Presence.CONSTANT:
            return constant_array(field, arrow_type, level.count)
        present = level.present(field.since_version, field.offset + field.type.size)
        if present is True:
            absent, places = level.nothing_absent, level.places(field.offset)
        elif present is False or not present.any():
            if field.since_version == 0 and level.count:
                row = 0 if present is False else int(np.flatnonzero(~present)[0])
                self._too_short(field, level, row, path)
            return pa.nulls(level.count, type=arrow_type)
        elif present.all():
            absent, places = level.nothing_absent, level.places(field.offset)
        else:
            if field.since_version == 0:
                self._too_short(field, level, int(np.flatnonzero(~present)[0]), path)
            absent = ~present
            places = Places(level.count, explicit=np.where(present, level.starts + field.offset,
                                                            level.starts[present][0] + field.offset))
        optional = field.presence is Presence.OPTIONAL
        return self._value(field.type, data, places, absent, optional, arrow_type)

    @staticmethod
    def _too_short(field: Field, level: _Level, row: int, path: str) -> NoReturn:
        raise SbeDecodeError(f"{path}: payload {int(level.rows[row])} has blockLength {int(level.block_lengths[row])}, "
                             f"too short for this field of every version (it ends at {field.offset + field.type.size}): "
                             "the message is truncated or not of this schema")

    def _value(self, field_type: FieldType, data: np.ndarray, places: Places, absent: np.ndarray, optional: bool,
               arrow_type: pa.DataType) -> pa.Array:
        """One field's values at ``places`` (one per record)."""
        if isinstance(field_type, EncodedType):
            if field_type.presence is Presence.CONSTANT:
                return pa.array([constant_value(field_type)] * places.count, type=arrow_type)
            optional = optional or field_type.presence is Presence.OPTIONAL
            if field_type.is_string:
                return _char_string(bytes_at(data, places, field_type.length), absent, optional)
            if field_type.is_array:
                raw = bytes_at(data, places, field_type.size).view(self._order + field_type.primitive.numpy_code)
                flat = to_arrow(raw.reshape(-1), field_type.primitive, None)
                offsets = pa.array(np.arange(places.count + 1, dtype=np.int32) * field_type.length)
                return pa.ListArray.from_arrays(offsets, flat, type=arrow_type,
                                                mask=pa.array(absent) if absent.any() else None)
            values = self._read(data, places, field_type)
            nulls = absent
            if optional:
                nulls = absent | is_null(values, field_type.null_value)
            return to_arrow(values, field_type.primitive, nulls)
        if isinstance(field_type, EnumType):
            raw = self._read(data, places, field_type.encoding)
            return enum_names(raw, field_type, absent)
        if isinstance(field_type, SetType):
            raw = self._read(data, places, field_type.encoding)
            return set_names(raw, field_type, absent)
        if isinstance(field_type, CompositeType):
            members, fields = [], []
            for member in field_type.members:
                if isinstance(member.type, EncodedType) and member.type.length == 0:
                    continue
                member_field = arrow_type.field(member.name)  # its nullability: arrow_types.type_arrow_type
                members.append(self._value(member.type, data, places.shifted(member.offset), absent, optional,
                                           member_field.type))
                fields.append(member_field)
            return pa.StructArray.from_arrays(members, fields=fields, mask=pa.array(absent) if absent.any() else None)
        raise TypeError(f"not an SBE field type: {field_type!r}")

    def _read(self, data: np.ndarray, places: "Places | np.ndarray", field_type: EncodedType) -> np.ndarray:
        dtype = np.dtype(self._order + field_type.primitive.numpy_code)
        places = Places.of(places)
        key = places.key(dtype)
        if self._copied and key is not None:
            copied = self._copied.get(key)
            if copied is not None:
                return copied
        return scalars_at(data, places, dtype)

    def _copy_fixed_fields(self, fields: list[Field], data: np.ndarray, level: _Level) -> dict[tuple, np.ndarray]:
        """Every scalar (integer, float, enum, set, composite member) of ``fields`` that all records
        hold, copied by the C helper in one pass over the records: {place key: values}. Empty when
        the helper is not there (then ``_read`` reads each field with numpy) or nothing qualifies."""
        copier = native_fields.copier()
        if copier is None or level.count == 0 or not level.uniform:
            if level.expect_header is not None:
                raise AssertionError("a header is assumed only where the C helper copies")
            return {}
        wanted: list[tuple[int, np.dtype]] = []
        for field in fields:
            if field.presence is not Presence.CONSTANT \
                    and level.present(field.since_version, field.offset + field.type.size) is True:
                wanted.extend(self._scalars_of(field.type, field.offset))
        wanted = list(dict.fromkeys(wanted))
        stride = level.stride  # None: the records are not at a fixed stride (then no header is assumed)
        if level.expect_header is not None and not wanted:
            header_at, header_bytes = level.expect_header
            if stride is None or not copier.same_bytes(data, level.first_start + header_at, stride, level.count,
                                                        len(header_bytes)):
                raise _NotOneHeader()
        if not wanted:
            return {}
        if stride is not None:
            first = level.first_start
            values = copier.copy(data, first, stride, level.count, wanted, expect=level.expect_header)
            if values is None:
                raise _NotOneHeader()
            return {Places(level.count, first + offset, stride).array_key(dtype): column
                    for (offset, dtype), column in zip(wanted, values)}
        values = copier.copy(data, 0, 0, level.count, wanted, starts=level.starts)
        if values is None:  # not without ``expect``: only that check makes a copy give up
            return {}
        origin = id(level.starts)
        return {Places(level.count, explicit=level.starts, origin=(origin, offset)).array_key(dtype): column
                for (offset, dtype), column in zip(wanted, values)}

    def _scalars_of(self, field_type: FieldType, offset: int) -> list[tuple[int, np.dtype]]:
        """(offset, dtype) of each value ``_read`` reads for a field of ``field_type`` at ``offset``."""
        if isinstance(field_type, EncodedType):
            if field_type.presence is Presence.CONSTANT or field_type.is_string or field_type.is_array:
                return []
            return [(offset, np.dtype(self._order + field_type.primitive.numpy_code))]
        if isinstance(field_type, (EnumType, SetType)):
            return self._scalars_of(field_type.encoding, offset)
        if isinstance(field_type, CompositeType):
            return [scalar for member in field_type.members if not (isinstance(member.type, EncodedType)
                                                                    and member.type.length == 0)
                    for scalar in self._scalars_of(member.type, offset + member.offset)]
        return []

    def _read_int(self, data: np.ndarray, places: "Places | np.ndarray", field_type: FieldType) -> np.ndarray:
        """An integer member of a message header or group dimension."""
        return self._read(data, places, _integer_type(field_type)).astype(np.int64, copy=False)

    # --- one field of one payload, for callers that need a single value cheaply ----------------

    def root_field_reader(self, message: Message | str, name: str) -> Callable[[bytes], int | None]:
        """A function payload -> the integer value of one root-block field of ``message`` (an int or
        uint, e.g. a time in nanoseconds), or None when the payload is another template, too short,
        older than the field, or holds the field's null value. One ``struct.unpack_from`` call each."""
        message = self.schema.message(message) if isinstance(message, (str, int)) else message
        field = message.field(name)
        if field is None or not isinstance(field.type, EncodedType) or field.type.is_string \
                or field.type.is_array or field.type.primitive.numpy_code[0] not in "iu" \
                or field.presence is Presence.CONSTANT:
            known = ", ".join(f.name for f in message.fields)
            raise KeyError(f"message {message.name} has no integer root field {name!r}; its fields: {known}")
        header = self.schema.header
        header_offsets = (header.block_length.offset, header.template_id.offset, header.version.offset)
        codes = [_struct_code(_integer_type(m.type).primitive.numpy_code)
                 for m in (header.block_length, header.template_id, header.version)]
        header_structs = [struct.Struct(self._order + code) for code in codes]
        value_struct = struct.Struct(self._order + _struct_code(field.type.primitive.numpy_code))
        value_offset = header.size + field.offset
        end = field.offset + field.type.size
        null = field.type.null_value if field.presence is Presence.OPTIONAL or field.type.presence is Presence.OPTIONAL \
            else None

        def read(payload: bytes) -> int | None:
            if len(payload) < header.size:
                return None
            block_length, template_id, version = (s.unpack_from(payload, o)[0]
                                                  for s, o in zip(header_structs, header_offsets))
            if template_id != message.template_id or version < field.since_version or block_length < end \
                    or len(payload) < value_offset + value_struct.size:
                return None
            value = value_struct.unpack_from(payload, value_offset)[0]
            return None if value == null else value

        return read


def type_arrow_type_of_group(struct_type: pa.StructType) -> pa.DataType:
    return pa.list_(pa.field("element", struct_type, nullable=True))


def spread(values: pa.Array, rows: np.ndarray, count: int) -> pa.Array:
    """``values`` placed at ``rows`` of an array of ``count`` (NULL elsewhere)."""
    if rows.size == count:
        return values
    index = np.zeros(count, dtype=np.int64)
    index[rows] = np.arange(rows.size)
    taken = np.zeros(count, dtype=bool)
    taken[rows] = True
    return pc.take(values, pa.array(index, mask=~taken)) if rows.size else pa.nulls(count, type=values.type)


def _char_string(raw: np.ndarray, absent: np.ndarray, optional: bool) -> pa.Array:
    """Fixed-length char arrays: the characters up to the first NUL; NULL when optional and empty."""
    count, width = raw.shape
    is_nul = raw == 0
    lengths = np.where(is_nul.any(axis=1), is_nul.argmax(axis=1), width).astype(np.int64)
    nulls = absent | (lengths == 0) if optional else absent
    keep = np.arange(width) < lengths[:, None]
    values = raw[keep]
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls.any() else None
    binary = pa.Array.from_buffers(pa.binary(), count, [validity, pa.py_buffer(offsets), pa.py_buffer(values)])
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid as error:
        raise SbeDecodeError(f"a char field holds bytes that are not text: {error}") from None


def _check_bounds(ends: np.ndarray, level: _Level, what: str) -> None:
    beyond = ends > level.ends
    if beyond.any():
        row = int(np.flatnonzero(beyond)[0])
        raise SbeDecodeError(f"{what} of payload {int(level.rows[row])} needs {int(ends[row] - level.ends[row])} "
                             f"byte(s) more than the payload holds ({int(beyond.sum())} payload(s) affected): the "
                             "message is truncated or not of this schema")


def _integer_type(field_type: FieldType) -> EncodedType:
    """The type of a header or dimension member, which the schema parser checked is an integer."""
    if not isinstance(field_type, EncodedType):
        raise TypeError(f"{field_type!r} is not an integer type")
    return field_type


def _struct_code(numpy_code: str) -> str:
    return {"i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I", "i8": "q", "u8": "Q"}[numpy_code]


__all__ = ["SbeDecoder", "SbeDecodeError", "DecodedPayloads", "DecodedMessages", "NO_TEMPLATE", "spread",
           "message_arrow_type"]
