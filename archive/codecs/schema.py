"""Table-driven description of schema-101 messages, and the byte layouts compiled from it.

A :class:`MessageSpec` restates one row of the reference tables (docs/protocol.md): template id,
fixed fields with type, offset and sinceVersion, and var-length fields in wire order. From a spec
the codec compiles one :class:`BlockLayout` per (blockLength, version) it meets: a precompiled
``struct.Struct`` over the fields present in that block, plus what to fill in for the absent ones.

Layout rules (SBE as Aeron applies it):

* a fixed field is present when its ``sinceVersion`` <= the header version and it lies wholly
  inside the received block; otherwise it reads as its ``absent`` value (NULL_VALUE, or 0 for
  ``version_t``);
* enum fields flagged ``narrow_until`` were uint8 up to that schema version (Aeron <= 1.21);
  they are read as one byte when the header version is that old or the block holds only one
  byte of them (1.15.x StartRecording blockLength 21, ExtendRecording 29). Little-endian makes
  the low byte of the int32 form the same value, so this never misreads a modern message;
* var-length fields start at ``8 + blockLength``; one whose ``sinceVersion`` > header version is
  not on the wire and reads as empty.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar, Protocol

from aeron_spark.archive.codecs.constants import NULL_VALUE, NULL_VERSION


class WireMessage(Protocol):
    """A schema-101 message dataclass (`request_messages`, `response_messages`): its template id,
    and the dataclass fields a spec restates."""

    TEMPLATE_ID: ClassVar[int]
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]


EnumClass = type[IntEnum]  # named: inside FixedField, ``type`` is the field's FieldType


@dataclass(frozen=True, slots=True)
class FieldType:
    name: str
    struct_code: str
    size: int


INT64 = FieldType("int64", "q", 8)
INT32 = FieldType("int32", "i", 4)
UINT8 = FieldType("uint8", "B", 1)


def snake_case(wire_name: str) -> str:
    """``controlSessionId`` -> ``control_session_id``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", wire_name).lower()


@dataclass(frozen=True, slots=True)
class FixedField:
    wire_name: str
    type: FieldType
    offset: int
    since_version: int = 0
    absent: int = NULL_VALUE
    enum: EnumClass | None = None
    narrow_until: int | None = None  # schema version up to which this enum was uint8
    attr: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attr", snake_case(self.wire_name))

    def is_narrow(self, block_length: int, version: int) -> bool:
        if self.narrow_until is None:
            return False
        return version <= self.narrow_until or block_length < self.offset + self.type.size

    def width(self, narrow: bool) -> int:
        return UINT8.size if narrow else self.type.size


@dataclass(frozen=True, slots=True)
class VarField:
    wire_name: str
    is_text: bool  # varAsciiEncoding (str) vs varDataEncoding (bytes)
    since_version: int = 0
    attr: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attr", snake_case(self.wire_name))

    @property
    def empty(self) -> str | bytes:
        return "" if self.is_text else b""


@dataclass(frozen=True, slots=True)
class MessageSpec[M: WireMessage]:
    template_id: int
    message_type: type[M]
    fields: tuple[FixedField, ...]
    var_fields: tuple[VarField, ...]
    since_version: int = 0  # first schema version that has the message
    removed_in: int | None = None  # first schema version without it
    name: str = field(init=False)
    block_length: int = field(init=False)  # the modern (newest) block length

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.message_type.__name__)
        object.__setattr__(
            self, "block_length", max(f.offset + f.type.size for f in self.fields))
        self._check_against_dataclass()

    def _check_against_dataclass(self) -> None:
        declared = [f.name for f in dataclasses.fields(self.message_type)]
        specified = [f.attr for f in self.fields] + [v.attr for v in self.var_fields]
        if declared != specified:
            raise TypeError(
                f"{self.name}: dataclass fields {declared} do not match the schema {specified}")

    def field_named(self, wire_name: str) -> FixedField | None:
        for fixed in self.fields:
            if fixed.wire_name == wire_name:
                return fixed
        return None


@dataclass(frozen=True, slots=True)
class BlockLayout:
    """How the root block and var fields of one message look at one (blockLength, version)."""

    block_length: int
    version: int
    block: struct.Struct  # the present fixed fields, with pad bytes for the gaps
    present: tuple[FixedField, ...]
    present_positions: tuple[int, ...]  # index of each present field in the dataclass
    all_present: bool  # present_positions is 0, 1, ... over every fixed field
    enum_slots: tuple[tuple[int, type[IntEnum]], ...]  # (index in unpacked tuple, enum)
    absent: tuple[FixedField, ...]
    var_fields: tuple[VarField, ...]  # on the wire at this version
    absent_var_fields: tuple[VarField, ...]
    defaults: tuple  # every dataclass field at its absent/empty value


def compile_layout(
    spec: MessageSpec, block_length: int, version: int, *, pad_to_block: bool
) -> BlockLayout:
    """Layout of ``spec`` for a block of ``block_length`` bytes at schema ``version``.

    ``pad_to_block`` extends the struct with zero padding to the whole block (for encoding).
    """
    present: list[FixedField] = []
    narrow_flags: list[bool] = []
    for fixed in spec.fields:
        narrow = fixed.is_narrow(block_length, version)
        if fixed.since_version <= version and fixed.offset + fixed.width(narrow) <= block_length:
            present.append(fixed)
            narrow_flags.append(narrow)

    codes = ["<"]
    cursor = 0
    for fixed, narrow in sorted(zip(present, narrow_flags), key=lambda pair: pair[0].offset):
        if fixed.offset > cursor:
            codes.append(f"{fixed.offset - cursor}x")
        codes.append(UINT8.struct_code if narrow else fixed.type.struct_code)
        cursor = fixed.offset + fixed.width(narrow)
    if pad_to_block and block_length > cursor:
        codes.append(f"{block_length - cursor}x")
    present.sort(key=lambda fixed: fixed.offset)

    positions = {fixed.attr: index for index, fixed in enumerate(spec.fields)}
    present_positions = tuple(positions[fixed.attr] for fixed in present)
    var_present = tuple(v for v in spec.var_fields if v.since_version <= version)
    return BlockLayout(
        block_length=block_length,
        version=version,
        block=struct.Struct("".join(codes)),
        present=tuple(present),
        present_positions=present_positions,
        all_present=present_positions == tuple(range(len(spec.fields))),
        enum_slots=tuple(
            (index, fixed.enum) for index, fixed in enumerate(present) if fixed.enum is not None),
        absent=tuple(fixed for fixed in spec.fields if fixed not in present),
        var_fields=var_present,
        absent_var_fields=tuple(v for v in spec.var_fields if v not in var_present),
        defaults=tuple(fixed.absent for fixed in spec.fields)
        + tuple(v.empty for v in spec.var_fields),
    )


def encoding_block_length(spec: MessageSpec, version: int) -> int:
    """The block length a sender of schema ``version`` writes for this message."""
    ends = [
        fixed.offset + fixed.width(fixed.narrow_until is not None and version <= fixed.narrow_until)
        for fixed in spec.fields
        if fixed.since_version <= version
    ]
    return max(ends)


# Field constructors, named after the schema's types, to keep the message table readable.

def int64(wire_name: str, offset: int, since: int = 0) -> FixedField:
    return FixedField(wire_name, INT64, offset, since)


def int32(wire_name: str, offset: int, since: int = 0) -> FixedField:
    return FixedField(wire_name, INT32, offset, since)


def version_t(wire_name: str, offset: int, since: int = 0) -> FixedField:
    return FixedField(wire_name, INT32, offset, since, absent=NULL_VERSION)


def enum32(
    wire_name: str, offset: int, enum: type[IntEnum], *, narrow_until: int | None = None
) -> FixedField:
    return FixedField(wire_name, INT32, offset, 0, enum=enum, narrow_until=narrow_until)


def ascii_text(wire_name: str, since: int = 0) -> VarField:
    return VarField(wire_name, True, since)


def raw_bytes(wire_name: str, since: int = 0) -> VarField:
    return VarField(wire_name, False, since)
