"""The SBE schema as data: types, messages, groups and var data, with their wire layout resolved.

Built by ``schema_xml.parse_schema``; read by ``arrow_types`` (what each field becomes) and
``decoder`` (where each field is). Offsets are relative to the start of the enclosing block
(the message's root block or one group entry). Sans-IO, no Arrow, no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class SbeSchemaError(ValueError):
    """An SBE schema element is malformed or not supported; the message names the element."""


@dataclass(frozen=True)
class Primitive:
    name: str
    size: int
    numpy_code: str  # numpy kind + size without byte order, e.g. "i4"
    null_value: int | float | None  # the spec's default null value (NaN for floats)
    min_value: int | float | None
    max_value: int | float | None


def _int(name: str, size: int, signed: bool) -> Primitive:
    bits = size * 8
    if signed:
        return Primitive(name, size, f"i{size}", -(1 << (bits - 1)), -(1 << (bits - 1)) + 1, (1 << (bits - 1)) - 1)
    return Primitive(name, size, f"u{size}", (1 << bits) - 1, 0, (1 << bits) - 2)


# The SBE 1.0 primitive types and their default null values (spec section "Encoding of simple types").
PRIMITIVES: dict[str, Primitive] = {
    "char": Primitive("char", 1, "u1", 0, 0x20, 0x7E),
    "int8": _int("int8", 1, True),
    "int16": _int("int16", 2, True),
    "int32": _int("int32", 4, True),
    "int64": _int("int64", 8, True),
    "uint8": _int("uint8", 1, False),
    "uint16": _int("uint16", 2, False),
    "uint32": _int("uint32", 4, False),
    "uint64": _int("uint64", 8, False),
    "float": Primitive("float", 4, "f4", float("nan"), None, None),
    "double": Primitive("double", 8, "f8", float("nan"), None, None),
}


class Presence(Enum):
    REQUIRED = "required"
    OPTIONAL = "optional"
    CONSTANT = "constant"


@dataclass(frozen=True)
class EncodedType:
    """A simple type: one primitive, or a fixed-length array of it (``length`` > 1, or a char string)."""

    name: str
    primitive: Primitive
    length: int = 1
    presence: Presence = Presence.REQUIRED
    null_value: int | float | None = None  # the effective null value (schema's or the spec default)
    constant: str | None = None  # the constant's text when presence is constant
    character_encoding: str | None = None

    @property
    def size(self) -> int:
        return 0 if self.presence is Presence.CONSTANT else self.primitive.size * self.length

    @property
    def is_string(self) -> bool:
        return self.primitive.name == "char"

    @property
    def is_array(self) -> bool:
        return self.length != 1 and not self.is_string


@dataclass(frozen=True)
class EnumType:
    name: str
    encoding: EncodedType  # char or uint8 (or a named type of those)
    values: tuple[tuple[str, int], ...]  # (name, raw value)
    presence: Presence = Presence.REQUIRED
    constant: str | None = None  # valid value name when constant

    @property
    def size(self) -> int:
        return 0 if self.presence is Presence.CONSTANT else self.encoding.size


@dataclass(frozen=True)
class SetType:
    name: str
    encoding: EncodedType  # uint8, uint16, uint32 or uint64
    choices: tuple[tuple[str, int], ...]  # (name, bit index)

    @property
    def size(self) -> int:
        return self.encoding.size


@dataclass(frozen=True)
class CompositeMember:
    name: str
    type: "FieldType"
    offset: int  # inside the composite


@dataclass(frozen=True)
class CompositeType:
    name: str
    members: tuple[CompositeMember, ...]
    size: int
    presence: Presence = Presence.REQUIRED  # optional: a member at its null value is NULL (composites have no null of their own)

    def member(self, name: str) -> CompositeMember | None:
        return next((m for m in self.members if m.name == name), None)

    def required_member(self, name: str) -> CompositeMember:
        """A member the schema parser has checked is there (e.g. a group dimension's numInGroup)."""
        member = self.member(name)
        if member is None:
            raise KeyError(f"composite {self.name} has no member {name!r}")
        return member


FieldType = EncodedType | EnumType | SetType | CompositeType


@dataclass(frozen=True)
class Field:
    name: str
    id: int
    type: FieldType
    offset: int  # inside the block
    since_version: int = 0
    presence: Presence = Presence.REQUIRED  # the field's own presence (it may override the type's)
    constant: str | None = None  # a field-level constant value (valueRef or text)


@dataclass(frozen=True)
class VarData:
    """A `data` element: a length-prefixed byte run; a string when its varData has a characterEncoding."""

    name: str
    id: int
    length_type: Primitive
    length_offset: int
    data_offset: int  # the varData member's offset in the composite (after the length)
    is_string: bool
    since_version: int = 0


@dataclass(frozen=True)
class Group:
    name: str
    id: int
    block_length: int
    dimension: CompositeType  # blockLength + numInGroup (groupSizeEncoding)
    fields: tuple[Field, ...]
    groups: tuple["Group", ...] = ()
    var_data: tuple[VarData, ...] = ()
    since_version: int = 0

    @property
    def has_variable_parts(self) -> bool:
        return bool(self.groups or self.var_data)


@dataclass(frozen=True)
class Message:
    name: str
    template_id: int
    block_length: int
    fields: tuple[Field, ...]
    groups: tuple[Group, ...] = ()
    var_data: tuple[VarData, ...] = ()
    since_version: int = 0

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class HeaderLayout:
    """Where the message header composite keeps blockLength, templateId, schemaId and version."""

    composite: CompositeType
    block_length: CompositeMember
    template_id: CompositeMember
    schema_id: CompositeMember
    version: CompositeMember

    @property
    def size(self) -> int:
        return self.composite.size


@dataclass(frozen=True)
class Schema:
    package: str | None
    id: int
    version: int
    byte_order: str  # "<" (littleEndian, the default) or ">" (bigEndian)
    header: HeaderLayout
    messages: tuple[Message, ...]
    types: dict[str, FieldType] = field(default_factory=dict, compare=False)

    def message(self, name_or_id: str | int) -> Message:
        """A message by name or template id; SbeSchemaError names the known ones when absent."""
        for message in self.messages:
            if message.name == name_or_id or message.template_id == name_or_id or str(message.template_id) == name_or_id:
                return message
        known = ", ".join(f"{m.name} ({m.template_id})" for m in self.messages)
        raise SbeSchemaError(f"the SBE schema has no message {name_or_id!r}; its messages: {known}")
