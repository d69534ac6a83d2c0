"""The one spec of every connector option: ``option_specs.json`` beside this module, loaded into
``OptionSpec`` values, one canonicaliser for every side, and the parsers of each spec ``type``.

The JSON file is the only place an option's default is written (docs/options.md's tables are
generated from it, ``option_docs``; the JVM module loads the same file from its jar). Sides:
``source`` and ``sink`` (this package's Python data source), ``jvm-source`` and ``jvm-sink`` (the
JVM module). A name is unique per side; ``channel``, ``streamId`` and ``checkpointLocation`` have one
entry for the reading sides and one for the writing sides, as they mean different things there.

Parsers take the options canonicalised by :func:`canonical_options` (camelCase names, stripped
values), read the default from the spec when the option is absent, and raise ``OptionError``
naming the option and what it accepts.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources



class OptionError(ValueError):
    """An option is unknown, missing, malformed or not allowed together with another."""


class ReadMode(Enum):
    BATCH = "batch"    # spark.read (the sink: write)
    STREAM = "stream"  # spark.readStream (the sink: writeStream)


BOTH_MODES = frozenset({ReadMode.BATCH, ReadMode.STREAM})

SPEC_FILE = "option_specs.json"
FORMAT_VERSION = 1
SIDES = ("source", "sink", "jvm-source", "jvm-sink")
TYPES = ("string", "channel", "int", "long", "bool", "enum", "size", "duration", "longList", "intList", "regex",
         "positions", "timestampMap", "custom")
_FIELDS = ("name", "sides", "modes", "type", "min", "max", "choices", "default", "defaultText", "accepted", "help")
#: Types whose default is a JSON number (sizes in bytes, durations in milliseconds).
_NUMBER_TYPES = ("int", "long", "size", "duration")

#: Wire ranges: stream ids are int32 in Aeron's frames and requests; recording ids and positions int64 >= 0.
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_TYPE_RANGE = {"int": (INT32_MIN, INT32_MAX), "long": (INT64_MIN, INT64_MAX)}

# Options Spark itself adds to a data source's options (e.g. writeStream.queryName(...)).
SPARK_SUPPLIED_OPTIONS = frozenset({"queryname"})

Default = int | bool | str | None


@dataclass(frozen=True)
class OptionSpec:
    """One entry of option_specs.json (its fields are described in docs/architecture.md)."""

    name: str
    sides: frozenset[str]
    modes: frozenset[ReadMode]
    type: str
    min: int | None
    max: int | None
    choices: tuple[str, ...] | None
    default: Default
    default_text: str | None  # the docs' words for a default derived at run time
    accepted: str
    help: str

    def accepted_by(self, side: str) -> bool:
        return side in self.sides


class OptionSpecFileError(RuntimeError):
    """option_specs.json does not follow its format (a packaging or editing mistake)."""


def load_option_specs(text: str) -> tuple[OptionSpec, ...]:
    """Parse and check the spec file's text: every field present, known sides, modes and types, a
    default of the type's kind, and no name twice on one side."""
    document = json.loads(text)
    if document.get("formatVersion") != FORMAT_VERSION:
        raise OptionSpecFileError(f"{SPEC_FILE}: formatVersion {document.get('formatVersion')!r}, "
                                  f"expected {FORMAT_VERSION}")
    specs = tuple(_spec_of(entry) for entry in document["options"])
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        for side in spec.sides:
            key = (spec.name.lower(), side)
            if key in seen:
                raise OptionSpecFileError(f"{SPEC_FILE}: option {spec.name} is listed twice for side {side}")
            seen.add(key)
    return specs


def _spec_of(entry: dict[str, object]) -> OptionSpec:
    name = entry.get("name")
    missing = [field for field in _FIELDS if field not in entry]
    if missing or not isinstance(name, str):
        raise OptionSpecFileError(f"{SPEC_FILE}: entry {name!r} lacks {', '.join(missing) or 'a name'}")
    sides, modes, choices = entry["sides"], entry["modes"], entry["choices"]
    kind, default = entry["type"], entry["default"]
    low, high = entry["min"], entry["max"]

    def wrong(what: str) -> OptionSpecFileError:
        return OptionSpecFileError(f"{SPEC_FILE}: option {name}: {what}")

    if not isinstance(sides, list) or not sides or not set(sides) <= set(SIDES):
        raise wrong(f"sides {sides!r} are not among {SIDES}")
    if not isinstance(modes, list) or not set(modes) <= {mode.value for mode in ReadMode}:
        raise wrong(f"modes {modes!r} are not among batch, stream")
    if kind not in TYPES or not isinstance(kind, str):
        raise wrong(f"type {kind!r} is not one of {TYPES}")
    if choices is not None and (not isinstance(choices, list) or not all(isinstance(c, str) for c in choices)):
        raise wrong(f"choices {choices!r} are not a list of strings")
    if kind == "enum" and not choices:
        raise wrong("an enum needs choices")
    for bound in (low, high):
        if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
            raise wrong(f"bound {bound!r} is not an integer")
    if not _default_fits(kind, default, choices):
        raise wrong(f"default {default!r} does not fit type {kind}")
    for field in ("defaultText", "accepted", "help"):
        if not isinstance(entry[field], str) and not (field == "defaultText" and entry[field] is None):
            raise wrong(f"{field} is not a string")
    return OptionSpec(
        name=name, sides=frozenset(sides), modes=frozenset(ReadMode(mode) for mode in modes), type=kind,
        min=low if isinstance(low, int) else None, max=high if isinstance(high, int) else None,
        choices=tuple(choices) if isinstance(choices, list) else None, default=default,  # type: ignore[arg-type]
        default_text=entry["defaultText"], accepted=entry["accepted"], help=entry["help"])  # type: ignore[arg-type]


def _default_fits(kind: str, default: object, choices: object) -> bool:
    if default is None:
        return True
    if kind in _NUMBER_TYPES:
        return isinstance(default, int) and not isinstance(default, bool)
    if kind == "bool":
        return isinstance(default, bool)
    if kind == "enum":
        return isinstance(choices, list) and default in choices
    return isinstance(default, str)


@cache
def all_option_specs() -> tuple[OptionSpec, ...]:
    """Every entry of the spec file shipped with the package."""
    text = resources.files(__package__ or "aeron_spark.connector").joinpath(SPEC_FILE).read_text(encoding="utf-8")
    return load_option_specs(text)


def specs_for(side: str) -> tuple[OptionSpec, ...]:
    """The options one side accepts, in the file's order."""
    if side not in SIDES:
        raise ValueError(f"side {side!r} is not one of {SIDES}")
    return tuple(spec for spec in all_option_specs() if spec.accepted_by(side))


def option_spec(name: str, side: str | None = None) -> OptionSpec:
    """The spec of ``name`` (its camelCase name): on ``side``, or the one entry of that name (a shared
    option is one entry for every side that accepts it; channel/streamId & co need their side)."""
    matches = [spec for spec in all_option_specs() if spec.name == name and (side is None or side in spec.sides)]
    if len(matches) != 1:
        where = f" for side {side}" if side is not None else ""
        raise KeyError(f"{len(matches)} entries of option {name!r}{where} in {SPEC_FILE}; expected one")
    return matches[0]


def default_int(name: str, side: str | None = None) -> int:
    """The typed default of a numeric option (sizes in bytes, durations in milliseconds)."""
    default = option_spec(name, side).default
    if not isinstance(default, int) or isinstance(default, bool):
        raise OptionSpecFileError(f"{SPEC_FILE}: option {name} has no numeric default")
    return default


def default_str(name: str, side: str | None = None) -> str:
    """The typed default of an option whose default is a string (an enum's choice, ``auto``, ...)."""
    default = option_spec(name, side).default
    if not isinstance(default, str):
        raise OptionSpecFileError(f"{SPEC_FILE}: option {name} has no string default")
    return default


def bounds_of(name: str, side: str | None = None) -> tuple[int, int]:
    """(min, max) of an option whose spec gives both."""
    spec = option_spec(name, side)
    if spec.min is None or spec.max is None:
        raise OptionSpecFileError(f"{SPEC_FILE}: option {name} has no min and max")
    return spec.min, spec.max


def choices_of(name: str, side: str | None = None) -> tuple[str, ...]:
    choices = option_spec(name, side).choices
    if not choices:
        raise OptionSpecFileError(f"{SPEC_FILE}: option {name} has no choices")
    return choices


SpecRef = OptionSpec | str


def _spec(ref: SpecRef) -> OptionSpec:
    return ref if isinstance(ref, OptionSpec) else option_spec(ref)


# --- the one canonicaliser ----------------------------------------------------------------------

#: How an unknown-option error names the reader or writer of each Python side.
_TARGETS = {"source": "format aeron-archive", "sink": "the aeron-archive sink"}
#: An option of the other Python side: where it applies instead.
_OTHER_SIDE = {"source": ("sink", "only applies to write / writeStream, not to read / readStream"),
               "sink": ("source", "only applies to read / readStream, not to the aeron-archive sink")}


def canonical_options(options: Mapping[str, str | None], side: str) -> dict[str, str]:
    """The options with camelCase names and stripped values (Spark hands them over lower-cased);
    Spark's own and unset ones dropped. An option of the other side is an error saying where it
    applies; any other unknown one suggests the closest names and lists every accepted one."""
    by_lower = {spec.name.lower(): spec.name for spec in specs_for(side)}
    canonical: dict[str, str] = {}
    for key, value in options.items():
        if key.lower() in SPARK_SUPPLIED_OPTIONS:
            continue
        name = by_lower.get(key.lower())
        if name is None:
            raise OptionError(unknown_option_message(key, side))
        if value is not None:
            canonical[name] = str(value).strip()
    return canonical


def unknown_option_message(key: str, side: str) -> str:
    other_side, where = _OTHER_SIDE[side]
    for spec in specs_for(other_side):
        if spec.name.lower() == key.lower():
            return f"option {spec.name} {where}"
    names = list(dict.fromkeys(spec.name for spec in specs_for(side)))
    by_lower = {name.lower(): name for name in names}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=3, cutoff=0.6)
    hint = (" Did you mean " + " or ".join(repr(by_lower[c]) for c in close) + "?") if close else ""
    return f"unknown option {key!r} for {_TARGETS[side]}.{hint} Accepted options: {', '.join(names)}"


# --- parsers, one per spec type; each reads its default from the spec ----------------------------


def parse_string(raw: Mapping[str, str], ref: SpecRef) -> str | None:
    spec = _spec(ref)
    text = raw.get(spec.name)
    if text is not None:
        return text
    return spec.default if isinstance(spec.default, str) else None


def parse_channel(raw: Mapping[str, str], ref: SpecRef) -> str | None:
    """A ``channel`` option, checked (see :func:`check_channel`)."""
    spec = _spec(ref)
    text = parse_string(raw, spec)
    if text is not None:
        check_channel(spec.name, text)
    return text


def parse_int(raw: Mapping[str, str], ref: SpecRef) -> int:
    """An ``int`` (int32) or ``long`` (int64) option within the spec's bounds."""
    spec = _spec(ref)
    value = parse_optional_int(raw, spec)
    return _required(spec, value)


def parse_optional_int(raw: Mapping[str, str], ref: SpecRef) -> int | None:
    spec = _spec(ref)
    text = raw.get(spec.name)
    if text is None:
        return spec.default if isinstance(spec.default, int) else None
    if not re.fullmatch(r"-?\d+", text):
        raise OptionError(f"option {spec.name}={text!r} is not an integer; accepted: {spec.accepted}")
    value = int(text)
    low, high = _TYPE_RANGE.get(spec.type, _TYPE_RANGE["long"])
    if spec.min is not None and value < spec.min:
        raise OptionError(f"option {spec.name}={value} must be >= {spec.min}; accepted: {spec.accepted}")
    high = high if spec.max is None else spec.max
    if not low <= value <= high:
        raise OptionError(f"option {spec.name}={value} is out of range; accepted: "
                          f"{low if spec.min is None else spec.min}..{high}")
    return value


def parse_stream_id(raw: Mapping[str, str], ref: SpecRef) -> int:
    """A stream id: an int32 on the wire, so rejected here (naming the option) rather than failing
    later in an encoder or the driver."""
    spec = _spec(ref)
    text = raw.get(spec.name)
    if text is None:
        return _required(spec, spec.default if isinstance(spec.default, int) else None)
    return stream_id_of(spec.name, text)


def stream_id_of(name: str, text: str) -> int:
    if not re.fullmatch(r"-?\d+", text):
        raise OptionError(f"option {name}={text!r} is not an integer; accepted: a stream id, an int32 "
                          f"({INT32_MIN}..{INT32_MAX})")
    value = int(text)
    if not INT32_MIN <= value <= INT32_MAX:
        raise OptionError(f"option {name}={value} is out of range for a stream id; accepted: an int32 "
                          f"({INT32_MIN}..{INT32_MAX})")
    return value


def parse_bool(raw: Mapping[str, str], ref: SpecRef) -> bool:
    spec = _spec(ref)
    text = raw.get(spec.name)
    if text is None:
        return bool(spec.default)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise OptionError(f"option {spec.name}={text!r} is not valid; accepted: true | false")


def parse_enum(raw: Mapping[str, str], ref: SpecRef) -> str:
    """One of the spec's choices (matched case-insensitively, returned lower-case)."""
    spec = _spec(ref)
    value = parse_optional_enum(raw, spec)
    return _required(spec, value)


def parse_optional_enum(raw: Mapping[str, str], ref: SpecRef) -> str | None:
    spec = _spec(ref)
    choices = spec.choices or ()
    text = raw.get(spec.name)
    if text is None:
        return spec.default if isinstance(spec.default, str) else None
    if text.lower() not in choices:
        raise OptionError(f"option {spec.name}={text!r} is not valid; accepted: {' | '.join(choices)}")
    return text.lower()


_LIST_RANGE = {"intList": _TYPE_RANGE["int"], "longList": _TYPE_RANGE["long"]}


def id_list_of(spec: OptionSpec, text: str, noun: str, accepted: str) -> tuple[int, ...]:
    """An ``intList`` / ``longList`` value: a comma list or JSON list of distinct integers within
    the spec's bounds (else the type's), e.g. ``1,2`` or ``[1,2]``; errors name the option and say
    ``accepted``."""
    low, high = _LIST_RANGE[spec.type]
    low, high = low if spec.min is None else spec.min, high if spec.max is None else spec.max
    option = spec.name
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            raise OptionError(f"option {option}={text!r} is not a JSON list; accepted: {accepted}") from None
        if not isinstance(items, list):
            raise OptionError(f"option {option}={text!r} is not valid; accepted: {accepted}")
    else:
        items = [item.strip() for item in text.split(",")]
    ids: list[int] = []
    for item in items:
        is_int = (isinstance(item, int) and not isinstance(item, bool)) or (
            isinstance(item, str) and re.fullmatch(r"-?\d+", item) is not None)
        if not is_int or int(item) < low:
            raise OptionError(f"option {option}={text!r}: {item!r} is not a {noun}; accepted: {accepted}")
        if int(item) > high:
            raise OptionError(f"option {option}={text!r}: {item} is not a {noun}, out of range; accepted: {accepted}")
        ids.append(int(item))
    if not ids:
        raise OptionError(f"option {option} is empty; accepted: {accepted}")
    if len(set(ids)) != len(ids):
        raise OptionError(f"option {option}={text!r} lists a {noun} twice")
    return tuple(ids)


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
               "tib": 1 << 40}


def size_of(name: str, text: str) -> int:
    """Bytes: a number, or with k, m, g, t (binary units); > 0."""
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", text)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise OptionError(f"option {name}={text!r} is not a size; accepted: bytes, or a number with k, m, g, t "
                          "(binary units), e.g. 268435456 or 256m")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if value <= 0:
        raise OptionError(f"option {name}={text!r} must be > 0")
    return value


def parse_size(raw: Mapping[str, str], ref: SpecRef) -> int:
    spec = _spec(ref)
    return _required(spec, parse_optional_size(raw, spec))


def parse_optional_size(raw: Mapping[str, str], ref: SpecRef) -> int | None:
    spec = _spec(ref)
    text = raw.get(spec.name)
    if text is None:
        return spec.default if isinstance(spec.default, int) else None
    value = size_of(spec.name, text)
    if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
        raise OptionError(f"option {spec.name}={text!r} is not valid; accepted: {spec.accepted}")
    return value


_DURATION_UNITS = {"": 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(raw: Mapping[str, str], ref: SpecRef) -> int:
    """Milliseconds: a number, or with ms, s, m (min), h, d."""
    spec = _spec(ref)
    text = raw.get(spec.name)
    if text is None:
        return _required(spec, spec.default if isinstance(spec.default, int) else None)
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", text)
    if not match or match.group(2).lower() not in _DURATION_UNITS:
        raise OptionError(f"option {spec.name}={text!r} is not a duration; accepted: e.g. 500ms, 30s, 15m, 1h, "
                          "or a number of milliseconds")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]


def _required[T](spec: OptionSpec, value: T | None) -> T:
    if value is None:
        raise OptionError(f"option {spec.name} is required; accepted: {spec.accepted}")
    return value


#: Aeron's values of a channel's ``control-mode`` (``response``: a response channel, Aeron 1.45+).
CONTROL_MODES = ("manual", "dynamic", "response")


def check_channel(name: str, value: str) -> None:
    """An Aeron channel; a ``control-mode`` one of Aeron's, and a UDP response channel
    (``control-mode=response``) naming the archive's response endpoint with ``control=``."""
    if not value.startswith(("aeron:udp", "aeron:ipc", "aeron-spy:")):
        raise OptionError(f"option {name}={value!r} is not an Aeron channel; accepted: aeron:udp?... | aeron:ipc?...")
    # Here, not at the top: every Spark Python worker imports this module (data_source), most never parse a channel.
    from aeron_spark.driver_integration.channel_uri import ChannelUriError
    from aeron_spark.driver_integration.channel_uri import parse as parse_channel_uri
    try:
        uri = parse_channel_uri(value)
    except ChannelUriError as error:
        raise OptionError(f"option {name}={value!r} is not a valid Aeron channel: {error}") from None
    mode = uri.get("control-mode")
    if mode is None:
        return
    if mode not in CONTROL_MODES:
        raise OptionError(f"option {name}={value!r}: control-mode={mode} is not valid; accepted: "
                          f"{' | '.join(CONTROL_MODES)}")
    if mode == "response" and uri.is_udp and uri.get("control") is None:
        raise OptionError(f"option {name}={value!r}: a UDP response channel needs control=<archive host>:<port>, "
                          "a port of the archive's host it answers from (the archive opens no connection to this "
                          "host), e.g. aeron:udp?control-mode=response|control=archive-host:8011")
