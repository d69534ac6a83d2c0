"""What each SBE schema element becomes in Arrow (and so in Spark): the type mapping of docs/sbe.md.

An optional field at its null value, a field newer than the producer's version (``sinceVersion``)
or past its block, and an enum value the schema does not know all decode to NULL. A composite's
member that none of these can make NULL is declared NOT NULL inside its struct (NULL only where
the whole struct is): Spark reads a NOT NULL value without asking whether it is NULL. Spark has
no unsigned integers, so each unsigned type widens to the next signed one, and uint64 to
decimal(20,0).
"""

from __future__ import annotations

import pyarrow as pa

from aeron_spark.connector.sbe.schema_model import (
    CompositeType,
    EncodedType,
    EnumType,
    Field,
    FieldType,
    Group,
    Message,
    Presence,
    Primitive,
    SetType,
    VarData,
)

UINT64_TYPE = pa.decimal128(20, 0)

_PRIMITIVE_ARROW: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.int16(),
    "uint16": pa.int32(),
    "uint32": pa.int64(),
    "uint64": UINT64_TYPE,
    "float": pa.float32(),
    "double": pa.float64(),
    "char": pa.string(),
}


def primitive_arrow_type(primitive: Primitive) -> pa.DataType:
    return _PRIMITIVE_ARROW[primitive.name]


def list_of(value_type: pa.DataType) -> pa.DataType:
    # Spark's ArrayType(containsNull=True) round-trips to this exact Arrow type.
    return pa.list_(pa.field("element", value_type, nullable=True))


def type_arrow_type(field_type: FieldType, optional: bool = False) -> pa.DataType:
    """``optional``: the field holding this type is optional, so each composite member can be NULL."""
    if isinstance(field_type, EncodedType):
        if field_type.is_string:
            return pa.string()
        element = primitive_arrow_type(field_type.primitive)
        return list_of(element) if field_type.is_array else element
    if isinstance(field_type, EnumType):
        return pa.string()
    if isinstance(field_type, SetType):
        return list_of(pa.string())
    if isinstance(field_type, CompositeType):
        return pa.struct([pa.field(m.name, type_arrow_type(m.type, optional),
                                   nullable=optional or not _type_never_null(m.type))
                          for m in field_type.members if not _is_var_member(m.type)])
    raise TypeError(f"not an SBE field type: {field_type!r}")


def _is_var_member(member_type: FieldType) -> bool:
    return isinstance(member_type, EncodedType) and member_type.length == 0


def field_arrow_type(field: Field) -> pa.DataType:
    return type_arrow_type(field.type, field.presence is Presence.OPTIONAL)


def never_null(node: Field | Group | VarData) -> bool:
    """True when the decoder never gives NULL for this root element of a decoded message: it is in
    every version (sinceVersion 0; the decoder refuses a block too short for it) and no value of it
    means NULL. Spark converts non-nullable columns faster, so such columns are declared NOT NULL."""
    if node.since_version != 0:
        return False
    if isinstance(node, (Group, VarData)):
        return True
    return node.presence is Presence.CONSTANT or (node.presence is Presence.REQUIRED and _type_never_null(node.type))


def _type_never_null(field_type: FieldType) -> bool:
    if isinstance(field_type, EncodedType):
        return field_type.presence is not Presence.OPTIONAL
    if isinstance(field_type, SetType):
        return True
    if isinstance(field_type, CompositeType):
        return all(_type_never_null(m.type) for m in field_type.members)
    return False  # an enum: a value the schema does not know is NULL


def var_data_arrow_type(var_data: VarData) -> pa.DataType:
    return pa.string() if var_data.is_string else pa.binary()


def block_fields(node: Message | Group) -> list[pa.Field]:
    """The Arrow fields of a message or group entry: its fields, groups, then var data, in schema order."""
    fields = [pa.field(f.name, field_arrow_type(f)) for f in node.fields]
    fields += [pa.field(g.name, group_arrow_type(g)) for g in node.groups]
    fields += [pa.field(v.name, var_data_arrow_type(v)) for v in node.var_data]
    return fields


def group_arrow_type(group: Group) -> pa.DataType:
    return list_of(pa.struct(block_fields(group)))


def message_arrow_type(message: Message) -> pa.StructType:
    return pa.struct(block_fields(message))
