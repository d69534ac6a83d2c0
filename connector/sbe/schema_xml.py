"""The standard SBE schema XML (``sbe:messageSchema``) -> ``schema_model.Schema``.

Element names are matched without their namespace (schemas use ``sbe:`` or a default namespace).
Every error names the element, its ``name`` attribute and its line in the XML, and the source
(a file name or URI) when the caller passes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field as dataclass_field
from xml.parsers import expat

from aeron_spark.connector.sbe.schema_model import (
    PRIMITIVES,
    CompositeMember,
    CompositeType,
    EncodedType,
    EnumType,
    Field,
    FieldType,
    Group,
    HeaderLayout,
    Message,
    Presence,
    Primitive,
    Schema,
    SbeSchemaError,
    SetType,
    VarData,
)


@dataclass
class _Element:
    tag: str
    attrs: dict[str, str]
    line: int
    children: list["_Element"] = dataclass_field(default_factory=list)
    text: str = ""

    def describe(self) -> str:
        name = self.attrs.get("name")
        return f"<{self.tag}{f' name={name!r}' if name else ''}> (line {self.line})"


def _read_tree(xml_text: str | bytes, source: str) -> _Element:
    """A small element tree that keeps line numbers (ElementTree's C parser drops them)."""
    parser = expat.ParserCreate(namespace_separator="}")
    stack: list[_Element] = []
    root: list[_Element] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        local = tag.rsplit("}", 1)[-1]
        element = _Element(local, {k.rsplit("}", 1)[-1]: v for k, v in attrs.items()}, parser.CurrentLineNumber)
        (stack[-1].children if stack else root).append(element)
        stack.append(element)

    def end(_tag: str) -> None:
        stack.pop()

    def text(data: str) -> None:
        if stack:
            stack[-1].text += data

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, text
    try:
        parser.Parse(xml_text, True)
    except expat.ExpatError as error:
        raise SbeSchemaError(f"SBE schema {source}: not well-formed XML: {error}") from None
    if not root or root[0].tag != "messageSchema":
        found = root[0].tag if root else "nothing"
        raise SbeSchemaError(f"SBE schema {source}: the root element must be messageSchema, found {found}")
    return root[0]


def parse_schema(xml_text: str | bytes, source: str = "<string>") -> Schema:
    """Parse a schema; SbeSchemaError names the unsupported or malformed element."""
    return _SchemaReader(_read_tree(xml_text, source), source).read()


class _SchemaReader:
    def __init__(self, root: _Element, source: str) -> None:
        self.root = root
        self.source = source
        self.byte_order = "<"
        self.raw_types: dict[str, _Element] = {}
        self.resolved: dict[str, FieldType] = {}
        self.resolving: set[str] = set()

    def fail(self, element: _Element, problem: str) -> SbeSchemaError:
        return SbeSchemaError(f"SBE schema {self.source}: {element.describe()}: {problem}")

    def read(self) -> Schema:
        root = self.root
        order = root.attrs.get("byteOrder", "littleEndian")
        if order not in ("littleEndian", "bigEndian"):
            raise self.fail(root, f"byteOrder={order!r} is not littleEndian or bigEndian")
        self.byte_order = "<" if order == "littleEndian" else ">"
        schema_id = self._int(root, "id", None)
        version = self._int(root, "version", 0)
        for types in (c for c in root.children if c.tag == "types"):
            for element in types.children:
                if element.tag not in ("type", "composite", "enum", "set"):
                    raise self.fail(element, "unsupported element inside <types> (expected type, composite, enum or set)")
                name = self._required(element, "name")
                if name in self.raw_types:
                    raise self.fail(element, f"type {name!r} is defined twice (first at line {self.raw_types[name].line})")
                self.raw_types[name] = element
        for name in self.raw_types:
            self._type(name, root)
        header = self._header(root.attrs.get("headerType", "messageHeader"))
        messages = []
        for element in root.children:
            if element.tag == "message":
                messages.append(self._message(element, version))
            elif element.tag not in ("types", "include"):
                raise self.fail(element, "unsupported element inside <messageSchema> (expected types or message)")
            elif element.tag == "include":
                raise self.fail(element, "xi:include is not supported; inline the included types")
        self._no_duplicates(messages)
        return Schema(root.attrs.get("package"), schema_id, version, self.byte_order, header, tuple(messages),
                      dict(self.resolved))

    def _no_duplicates(self, messages: list[Message]) -> None:
        seen: dict[object, str] = {}
        for message in messages:
            for key in (message.name, message.template_id):
                if key in seen:
                    raise SbeSchemaError(f"SBE schema {self.source}: two messages share {key!r}")
                seen[key] = message.name

    # --- attributes ----------------------------------------------------------------------------

    def _required(self, element: _Element, attribute: str) -> str:
        value = element.attrs.get(attribute)
        if value is None or not value.strip():
            raise self.fail(element, f"attribute {attribute!r} is required")
        return value.strip()

    def _int(self, element: _Element, attribute: str, default: int | None) -> int:
        value = element.attrs.get(attribute)
        if value is None:
            if default is None:
                raise self.fail(element, f"attribute {attribute!r} is required")
            return default
        try:
            number = int(value.strip())
        except ValueError:
            raise self.fail(element, f"attribute {attribute}={value!r} is not an integer") from None
        if number < 0:
            raise self.fail(element, f"attribute {attribute}={value!r} is negative")
        return number

    def _presence(self, element: _Element, default: Presence = Presence.REQUIRED) -> Presence:
        value = element.attrs.get("presence")
        if value is None:
            return default
        try:
            return Presence(value.strip())
        except ValueError:
            raise self.fail(element, f"presence={value!r} is not required, optional or constant") from None

    # --- types ---------------------------------------------------------------------------------

    def _type(self, name: str, referrer: _Element) -> FieldType:
        if name in self.resolved:
            return self.resolved[name]
        if name in PRIMITIVES:
            return EncodedType(name, PRIMITIVES[name], null_value=PRIMITIVES[name].null_value)
        element = self.raw_types.get(name)
        if element is None:
            raise self.fail(referrer, f"type {name!r} is not defined in <types> and is not a primitive type")
        if name in self.resolving:
            raise self.fail(element, "the type refers to itself")
        self.resolving.add(name)
        resolved = self._defined_type(element)
        self.resolving.discard(name)
        self.resolved[name] = resolved
        return resolved

    def _defined_type(self, element: _Element) -> FieldType:
        """The type a <type>, <composite>, <enum> or <set> element defines (callers check the tag)."""
        if element.tag == "type":
            return self._encoded(element)
        if element.tag == "composite":
            return self._composite(element)
        if element.tag == "enum":
            return self._enum(element)
        return self._set(element)

    def _encoded(self, element: _Element) -> EncodedType:
        primitive_name = self._required(element, "primitiveType")
        primitive = PRIMITIVES.get(primitive_name)
        if primitive is None:
            raise self.fail(element, f"primitiveType={primitive_name!r} is not an SBE primitive type "
                                     f"({', '.join(PRIMITIVES)})")
        length = self._int(element, "length", 1)
        presence = self._presence(element)
        constant = element.text.strip() if presence is Presence.CONSTANT else None
        if presence is Presence.CONSTANT and not constant:
            raise self.fail(element, "a constant type needs its value as the element's text")
        null_value = primitive.null_value
        if "nullValue" in element.attrs:
            null_value = self._literal(element, primitive, element.attrs["nullValue"])
        encoding = element.attrs.get("characterEncoding")
        if primitive.name != "char" and encoding is not None and primitive.name != "uint8":
            raise self.fail(element, "characterEncoding only applies to char or uint8 types")
        return EncodedType(element.attrs["name"], primitive, length, presence, null_value, constant,
                           encoding or ("US-ASCII" if primitive.name == "char" else None))

    def _literal(self, element: _Element, primitive: Primitive, text: str) -> int | float:
        text = text.strip()
        try:
            if primitive.name in ("float", "double"):
                return float(text)
            if primitive.name == "char" and len(text) == 1 and not text.isdigit():
                return ord(text)
            value = int(text, 0)
        except ValueError:
            raise self.fail(element, f"value {text!r} is not a valid {primitive.name}") from None
        low, high = (-(1 << (primitive.size * 8 - 1)), (1 << (primitive.size * 8 - 1)) - 1) \
            if primitive.numpy_code.startswith("i") else (0, (1 << (primitive.size * 8)) - 1)
        if not low <= value <= high:
            raise self.fail(element, f"value {text!r} does not fit {primitive.name}")
        return value

    def _composite(self, element: _Element) -> CompositeType:
        members: list[CompositeMember] = []
        offset = 0
        for child in element.children:
            if child.tag in ("type", "enum", "set", "composite"):
                name = self._required(child, "name")
                member_type = self._defined_type(child)
            elif child.tag == "ref":
                name = self._required(child, "name")
                member_type = self._type(self._required(child, "type"), child)
            else:
                raise self.fail(child, f"unsupported element inside composite {element.attrs.get('name')!r} "
                                       "(expected type, enum, set, composite or ref)")
            if "offset" in child.attrs:
                explicit = self._int(child, "offset", 0)
                if explicit < offset:
                    raise self.fail(child, f"offset {explicit} overlaps the previous member (which ends at {offset})")
                offset = explicit
            members.append(CompositeMember(name, member_type, offset))
            offset += member_type.size
        if not members:
            raise self.fail(element, "a composite needs at least one member")
        return CompositeType(element.attrs["name"], tuple(members), offset)

    def _simple_encoding(self, element: _Element, allowed: tuple[str, ...]) -> EncodedType:
        name = self._required(element, "encodingType")
        encoding = self._type(name, element)
        if not isinstance(encoding, EncodedType) or encoding.primitive.name not in allowed or encoding.length != 1:
            raise self.fail(element, f"encodingType={name!r} must be one of {', '.join(allowed)} (or a type of one)")
        return encoding

    def _enum(self, element: _Element) -> EnumType:
        encoding = self._simple_encoding(element, ("char", "uint8", "int8", "uint16", "int16"))
        values = []
        for child in element.children:
            if child.tag != "validValue":
                raise self.fail(child, "unsupported element inside <enum> (expected validValue)")
            text = child.text.strip()
            if encoding.primitive.name == "char" and len(text) == 1:
                value = ord(text)  # a char enum's valid values are characters, "0" included
            else:
                value = int(self._literal(child, encoding.primitive, text))
            values.append((self._required(child, "name"), value))
        if not values:
            raise self.fail(element, "an enum needs at least one validValue")
        presence = self._presence(element)
        constant = element.text.strip() or None if presence is Presence.CONSTANT else None
        return EnumType(element.attrs["name"], encoding, tuple(values), presence, constant)

    def _set(self, element: _Element) -> SetType:
        encoding = self._simple_encoding(element, ("uint8", "uint16", "uint32", "uint64"))
        choices = []
        for child in element.children:
            if child.tag != "choice":
                raise self.fail(child, "unsupported element inside <set> (expected choice)")
            bit = int(self._literal(child, PRIMITIVES["uint8"], child.text))
            if bit >= encoding.primitive.size * 8:
                raise self.fail(child, f"bit {bit} does not fit the {encoding.primitive.name} encoding")
            choices.append((self._required(child, "name"), bit))
        return SetType(element.attrs["name"], encoding, tuple(choices))

    def _header(self, name: str) -> HeaderLayout:
        element = self.raw_types.get(name)
        if element is None or element.tag != "composite":
            raise SbeSchemaError(f"SBE schema {self.source}: the header type {name!r} (headerType) is not a composite "
                                 "in <types>")
        composite = self._type(name, element)
        assert isinstance(composite, CompositeType)
        members = []
        for wanted in ("blockLength", "templateId", "schemaId", "version"):
            member = composite.member(wanted)
            if member is None or not isinstance(member.type, EncodedType) or member.type.is_string \
                    or member.type.primitive.numpy_code[0] not in "iu" or member.type.length != 1:
                raise self.fail(element, f"the message header needs an integer member {wanted!r}")
            members.append(member)
        return HeaderLayout(composite, *members)

    # --- messages ------------------------------------------------------------------------------

    def _message(self, element: _Element, schema_version: int) -> Message:
        name = self._required(element, "name")
        template_id = self._int(element, "id", None)
        fields, groups, var_data, block_length = self._body(element, schema_version)
        declared = element.attrs.get("blockLength")
        if declared is not None:
            declared_length = self._int(element, "blockLength", 0)
            if declared_length < block_length:
                raise self.fail(element, f"blockLength={declared_length} is less than its fields need ({block_length})")
            block_length = declared_length
        return Message(name, template_id, block_length, fields, groups, var_data,
                       self._int(element, "sinceVersion", 0))

    def _body(self, element: _Element,
              schema_version: int) -> tuple[tuple[Field, ...], tuple[Group, ...], tuple[VarData, ...], int]:
        """Fields, then groups, then var data, in that order (the spec's layout rule)."""
        fields: list[Field] = []
        groups: list[Group] = []
        var_data: list[VarData] = []
        offset = 0
        names: set[str] = set()
        for child in element.children:
            name = self._required(child, "name") if child.tag in ("field", "group", "data") else ""
            if name in names:
                raise self.fail(child, f"the name {name!r} is used twice in {element.describe()}")
            names.add(name)
            if child.tag == "field":
                if groups or var_data:
                    raise self.fail(child, "a field must come before every group and data element")
                parsed = self._field(child, offset)
                offset = parsed.offset + parsed.type.size if not _is_constant(parsed) else offset
                fields.append(parsed)
            elif child.tag == "group":
                if var_data:
                    raise self.fail(child, "a group must come before every data element")
                groups.append(self._group(child, schema_version))
            elif child.tag == "data":
                var_data.append(self._data(child))
            else:
                raise self.fail(child, f"unsupported element inside {element.describe()} (expected field, group or data)")
        return tuple(fields), tuple(groups), tuple(var_data), offset

    def _field(self, element: _Element, next_offset: int) -> Field:
        name = self._required(element, "name")
        field_type = self._type(self._required(element, "type"), element)
        presence = self._presence(element, getattr(field_type, "presence", Presence.REQUIRED))
        offset = next_offset
        if "offset" in element.attrs:
            offset = self._int(element, "offset", 0)
            if offset < next_offset:
                raise self.fail(element, f"offset {offset} overlaps the previous field (which ends at {next_offset})")
        constant = None
        if presence is Presence.CONSTANT:
            constant = element.attrs.get("valueRef") or element.text.strip() or getattr(field_type, "constant", None)
            if not constant:
                raise self.fail(element, "a constant field needs valueRef, a text value or a constant type")
            if isinstance(field_type, EnumType):
                constant = constant.split(".")[-1]
                if constant not in dict(field_type.values):
                    raise self.fail(element, f"constant {constant!r} is not a validValue of enum {field_type.name!r}")
            elif not isinstance(field_type, EncodedType):
                raise self.fail(element, "only simple types and enums can be constant")
        elif isinstance(field_type, EncodedType) and field_type.presence is Presence.CONSTANT:
            presence, constant = Presence.CONSTANT, field_type.constant
        if presence is Presence.OPTIONAL and isinstance(field_type, EncodedType) \
                and field_type.presence is not Presence.OPTIONAL:
            field_type = EncodedType(field_type.name, field_type.primitive, field_type.length, Presence.OPTIONAL,
                                     field_type.null_value, None, field_type.character_encoding)
        return Field(name, self._int(element, "id", None), field_type, offset,
                     self._int(element, "sinceVersion", 0), presence, constant)

    def _group(self, element: _Element, schema_version: int) -> Group:
        dimension_name = element.attrs.get("dimensionType", "groupSizeEncoding")
        dimension = self._type(dimension_name, element)
        if not isinstance(dimension, CompositeType) or not _integer_member(dimension, "blockLength") \
                or not _integer_member(dimension, "numInGroup"):
            raise self.fail(element, f"dimensionType {dimension_name!r} must be a composite with integer members "
                                     "blockLength and numInGroup")
        fields, groups, var_data, block_length = self._body(element, schema_version)
        if "blockLength" in element.attrs:
            declared = self._int(element, "blockLength", 0)
            if declared < block_length:
                raise self.fail(element, f"blockLength={declared} is less than its fields need ({block_length})")
            block_length = declared
        return Group(element.attrs["name"], self._int(element, "id", None), block_length, dimension, fields,
                     groups, var_data, self._int(element, "sinceVersion", 0))

    def _data(self, element: _Element) -> VarData:
        type_name = self._required(element, "type")
        composite = self._type(type_name, element)
        length = composite.member("length") if isinstance(composite, CompositeType) else None
        data = composite.member("varData") if isinstance(composite, CompositeType) else None
        if length is None or data is None or not isinstance(length.type, EncodedType) \
                or length.type.primitive.numpy_code[0] != "u" or not isinstance(data.type, EncodedType) \
                or data.type.primitive.name not in ("char", "uint8", "int8"):
            raise self.fail(element, f"type {type_name!r} of a data element must be a composite with an unsigned "
                                     "integer member 'length' and a char/uint8 member 'varData'")
        # varStringEncoding declares a characterEncoding on its varData; varDataEncoding does not.
        is_string = "characterEncoding" in self._member_attrs(type_name, "varData")
        return VarData(element.attrs["name"], self._int(element, "id", None), length.type.primitive, length.offset,
                       data.offset, is_string, self._int(element, "sinceVersion", 0))

    def _member_attrs(self, composite_name: str, member: str) -> dict[str, str]:
        element = self.raw_types.get(composite_name)
        for child in element.children if element else ():
            if child.attrs.get("name") == member:
                return child.attrs
        return {}


def _is_constant(parsed: Field) -> bool:
    return parsed.presence is Presence.CONSTANT


def _integer_member(composite: CompositeType, name: str) -> bool:
    member = composite.member(name)
    return member is not None and isinstance(member.type, EncodedType) and member.type.length == 1 \
        and member.type.primitive.numpy_code[0] in "iu"
