"""Every option of the `aeron-archive` source: parsing and cross-checks.

Each option's spec (name, read modes, type, default, docs text) is an entry of
``connector/option_specs.json`` with side ``source``; ``connector/option_spec.py`` loads it and has
the canonicaliser and the parsers of each value type, ``connector/options.py`` the options the
source shares with the sink (where the archive is, how it replays). This module parses the
source's own options and cross-checks them.

Like Kafka's KafkaSourceProvider, all validation happens on the driver before any data is read:
``SourceOptions.parse(options, mode)`` either returns a complete, typed value or raises
``OptionError`` naming the option and what it accepts. Spark hands options over lower-cased
(CaseInsensitiveDict), so names are matched case-insensitively and reported in camelCase.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from aeron_spark.connector.options import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    ArchiveConnection,
    OptionError,
    OptionSpec,
    ReadMode,
    ReplaySettings,
    bounds_of,
    choices_of,
    default_int,
    default_str,
    id_list_of,
    option_spec,
    parse_bool,
    parse_connection,
    parse_duration_ms,
    parse_enum,
    parse_int,
    parse_optional_size,
    parse_replay,
    parse_size,
    specs_for,
    stream_id_of,
)
from aeron_spark.connector.option_spec import canonical_options
from aeron_spark.connector.source.offsets import EARLIEST, LATEST, OffsetFormatError, parse_position_spec
from aeron_spark.connector.source.recording_selection import RecordingSelection

if TYPE_CHECKING:  # sbe_columns (pyarrow.compute, the SBE decoder) is imported only when sbe.* is set
    from aeron_spark.connector.source.sbe_columns import SbeSettings

SIDE = "source"
#: The source's options, in option_specs.json's order.
OPTION_SPECS: tuple[OptionSpec, ...] = specs_for(SIDE)
#: startingPositionsByTimestampStrategy: Kafka's startingOffsetsByTimestampStrategy values.
TIME_STRATEGIES = choices_of("startingPositionsByTimestampStrategy")
DEFAULT_MAX_BYTES_PER_PARTITION = default_int("maxBytesPerPartition")

_SPECS_BY_LOWER: dict[str, OptionSpec] = {spec.name.lower(): spec for spec in OPTION_SPECS}
_STREAM_ID_SPEC = option_spec("streamId", SIDE)
DEFAULT_TIME_STRATEGY = default_str("startingPositionsByTimestampStrategy")
# The spec's max: epoch ms times 1e6 (message times are ns) must stay an int64.
_EPOCH_MS_MAX = bounds_of("startingTimestamp")[1]


class StartKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    SPECIFIC = "specific"


@dataclass(frozen=True)
class PositionSpec:
    """startingPositions / endingPositions: earliest, latest, or per-recording positions."""

    kind: StartKind
    specific: tuple[tuple[int, int], ...] = ()  # (recordingId, position | EARLIEST | LATEST)

    def for_recording(self, recording_id: int, default: int) -> int:
        """The position (or EARLIEST/LATEST marker) this spec gives one recording."""
        if self.kind is StartKind.EARLIEST:
            return EARLIEST
        if self.kind is StartKind.LATEST:
            return LATEST
        return dict(self.specific).get(recording_id, default)

    def describe(self) -> str:
        if self.kind is StartKind.SPECIFIC:
            return json.dumps({str(k): v for k, v in self.specific})
        return self.kind.value


@dataclass(frozen=True)
class TimeSpec:
    """startingTimestamp / startingPositionsByTimestamp (or the ending pair): epoch ms, for every
    recording or per recording."""

    option_name: str
    every_ms: int | None = None
    by_recording: tuple[tuple[int, int], ...] = ()  # (recordingId, epoch ms)

    def time_ms_for(self, recording_id: int) -> int | None:
        """None: this spec does not name the recording."""
        if self.every_ms is not None:
            return self.every_ms
        return dict(self.by_recording).get(recording_id)

    def describe(self) -> str:
        if self.every_ms is not None:
            return f"{self.option_name}={self.every_ms}"
        return f"{self.option_name}=" + json.dumps({str(k): v for k, v in self.by_recording})


@dataclass(frozen=True)
class SourceOptions:
    mode: ReadMode
    recording_ids: tuple[int, ...] | None
    channel: str | None
    stream_ids: tuple[int, ...] | None  # None: any stream id (channelPattern without streamId)
    connection: ArchiveConnection
    replay: ReplaySettings
    starting: PositionSpec
    ending: PositionSpec
    fail_on_data_loss: bool
    max_bytes_per_trigger: int | None
    min_bytes_per_trigger: int | None
    max_trigger_delay_ms: int
    max_bytes_per_partition: int
    discovery_interval_ms: int
    include_timestamp: bool
    checkpoint_location: str | None
    min_partitions: int = 1
    # Names of the columns to produce and those declared nullable, from the schema given to the
    # reader (data_source.select_columns); None: the default schema.
    output_columns: tuple[str, ...] | None = None
    nullable_columns: frozenset[str] = frozenset()
    # With sbe.schema: (column, Arrow type) of each selected column the user schema declares with
    # nested fields nullable where the decoder's are NOT NULL (sbe_columns.SbeColumns casts to it).
    widened_column_types: tuple[tuple[str, Any], ...] = ()
    # startingTimestamp & co (connector/source/timestamp_resolution.py); None: not set.
    starting_time: TimeSpec | None = None
    ending_time: TimeSpec | None = None
    starting_time_strategy: str = DEFAULT_TIME_STRATEGY

    channel_pattern: str | None = None
    sbe: SbeSettings | None = None  # sbe.schema: decode the payloads (docs/sbe.md)
    read_on_driver: bool = False  # readOnDriver: micro-batches read by the driver (driver_read_stream.py)

    @property
    def subscribes_to_channel(self) -> bool:
        return self.recording_ids is None

    @property
    def selection(self) -> RecordingSelection:
        """channel or channelPattern + streamId (only when recordingIds is not set)."""
        return RecordingSelection(self.channel, self.channel_pattern, self.stream_ids)

    def selection_identity(self) -> str:
        """What this source reads, for keying persisted state (not where the archive is)."""
        stream_ids = self.stream_ids
        # One stream id keys as it did before lists were accepted (existing checkpoints match).
        stream_key = stream_ids[0] if stream_ids is not None and len(stream_ids) == 1 else (
            list(stream_ids) if stream_ids is not None else None)
        selected: dict[str, object]
        if self.recording_ids is not None:
            selected = {"recordingIds": list(self.recording_ids)}
        elif self.channel_pattern is not None:
            selected = {"channelPattern": self.channel_pattern, "streamId": stream_key}
        else:
            selected = {"channel": self.channel, "streamId": stream_key}
        identity = {**selected, "startingPositions": self.starting.describe()}
        if self.starting_time is not None:  # only when set: existing checkpoints keep their key
            identity["startingTime"] = self.starting_time.describe()
        return json.dumps(identity, sort_keys=True)

    @classmethod
    def parse(cls, options: Mapping[str, str], mode: ReadMode) -> "SourceOptions":
        raw = _canonical_options(options)
        _reject_wrong_mode(raw, mode)
        recording_ids, channel, stream_ids, channel_pattern = _parse_selection(raw)
        starting = _parse_starting(raw, mode, recording_ids)
        ending = _parse_ending(raw, mode, recording_ids)
        starting_time, ending_time, time_strategy = _parse_time_options(raw, recording_ids)
        max_bytes = parse_optional_size(raw, "maxBytesPerTrigger")
        min_bytes = parse_optional_size(raw, "minBytesPerTrigger")
        if max_bytes is not None and min_bytes is not None and min_bytes > max_bytes:
            raise OptionError(
                f"minBytesPerTrigger ({min_bytes}) must not exceed maxBytesPerTrigger ({max_bytes})")
        if "maxTriggerDelay" in raw and min_bytes is None:
            raise OptionError("maxTriggerDelay only applies together with minBytesPerTrigger; set that too")
        checkpoint = raw.get("checkpointLocation") or None  # optional: source/first_batch_start.py
        return cls(
            mode=mode,
            recording_ids=recording_ids,
            channel=channel,
            stream_ids=stream_ids,
            channel_pattern=channel_pattern,
            connection=parse_connection(raw),
            replay=parse_replay(raw),
            starting=starting,
            ending=ending,
            fail_on_data_loss=parse_bool(raw, "failOnDataLoss"),
            max_bytes_per_trigger=max_bytes,
            min_bytes_per_trigger=min_bytes,
            max_trigger_delay_ms=parse_duration_ms(raw, "maxTriggerDelay"),
            max_bytes_per_partition=parse_size(raw, "maxBytesPerPartition"),
            min_partitions=parse_int(raw, "minPartitions"),
            discovery_interval_ms=parse_int(raw, "discoveryIntervalMs"),
            include_timestamp=parse_bool(raw, "includeTimestamp"),
            checkpoint_location=checkpoint,
            starting_time=starting_time,
            ending_time=ending_time,
            starting_time_strategy=time_strategy,
            sbe=parse_sbe_options(raw),
            read_on_driver=parse_bool(raw, "readOnDriver"),
        )


def validate_common(options: Mapping[str, str]) -> None:
    """Checks that hold whatever the read mode (DataSource.__init__ cannot know the mode yet)."""
    raw = _canonical_options(options)
    _parse_selection(raw)
    parse_connection(raw)
    for name in ("failOnDataLoss", "includeTimestamp", "readOnDriver"):
        parse_bool(raw, name)
    for name in ("maxBytesPerTrigger", "minBytesPerTrigger", "maxBytesPerPartition"):
        parse_optional_size(raw, name)
    parse_int(raw, "discoveryIntervalMs")
    parse_duration_ms(raw, "maxTriggerDelay")
    parse_replay(raw)
    parse_sbe_options(raw)


def sbe_settings(options: Mapping[str, str]) -> SbeSettings | None:
    """The sbe.* options alone (DataSource.schema needs them before the read mode is known)."""
    return parse_sbe_options(_canonical_options(options))


# --- helpers -----------------------------------------------------------------------------------


def parse_sbe_options(raw: dict[str, str]) -> SbeSettings | None:
    """sbe_columns.parse_sbe_options, imported only when an sbe.* option is set: every Spark Python
    worker parses the options, and the SBE decoder's import is not free."""
    if not any(name.startswith("sbe.") for name in raw):
        return None
    from aeron_spark.connector.source.sbe_columns import parse_sbe_options as parse
    return parse(raw)


def _canonical_options(options: Mapping[str, str]) -> dict[str, str]:
    return canonical_options(options, SIDE)


def _reject_wrong_mode(raw: dict[str, str], mode: ReadMode) -> None:
    for name in raw:
        spec = _SPECS_BY_LOWER[name.lower()]
        if mode not in spec.modes:
            where = "spark.readStream" if ReadMode.STREAM in spec.modes else "spark.read (batch)"
            hint = ""
            if name == "endingPositions":
                hint = "; a stream runs until stopped (use trigger(availableNow=True) to stop at the current end)"
            raise OptionError(f"option {name} only applies to {where}, not to {_mode_name(mode)}{hint}")


def _mode_name(mode: ReadMode) -> str:
    return "spark.readStream" if mode is ReadMode.STREAM else "spark.read (batch)"


def _parse_selection(raw: dict[str, str]) -> tuple[
        tuple[int, ...] | None, str | None, tuple[int, ...] | None, str | None]:
    """(recordingIds, channel, streamId(s), channelPattern): recordingIds, or a subscription."""
    ids_text = raw.get("recordingIds")
    channel = raw.get("channel")
    pattern = raw.get("channelPattern")
    stream_text = raw.get("streamId")
    if ids_text is not None and (channel is not None or pattern is not None or stream_text is not None):
        raise OptionError("set either recordingIds or channel/channelPattern + streamId, not both")
    if ids_text is not None:
        return _parse_recording_ids(ids_text), None, None, None
    if channel is not None and pattern is not None:
        raise OptionError("options channel and channelPattern are exclusive; set one: channel matches a fragment of "
                          "the original channel (Aeron ListRecordingsForUri), channelPattern a regular expression")
    if channel is None and pattern is None and stream_text is None:
        raise OptionError(
            "nothing to read: set recordingIds (e.g. 1,2 or [1,2]) or channel + streamId "
            "(every recording of that stream whose original channel contains the fragment) or channelPattern "
            "(+ streamId: every recording whose original channel matches the regular expression)")
    if channel is None and pattern is None:
        raise OptionError("option streamId needs channel (a channel fragment; \"\" matches every channel) "
                          "or channelPattern (a regular expression) too")
    if pattern is not None:
        _check_channel_pattern(pattern)
        return None, None, _parse_stream_ids(stream_text) if stream_text is not None else None, pattern
    if stream_text is None:
        raise OptionError("option channel needs streamId too (an int, or a list like 1001,1002)")
    return None, channel, _parse_stream_ids(stream_text), None


def _parse_stream_ids(text: str) -> tuple[int, ...]:
    accepted = f"a stream id, an int32 ({INT32_MIN}..{INT32_MAX}), or a comma list or JSON list of them, e.g. 1001,1002"
    if not text.startswith("[") and "," not in text:
        return (stream_id_of("streamId", text),)  # one id: its own, precise errors
    return id_list_of(_STREAM_ID_SPEC, text, "stream id", accepted)


def _check_channel_pattern(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as error:
        raise OptionError(f"option channelPattern={pattern!r} is not a valid regular expression ({error}); accepted: "
                          "a Python regular expression matched with re.search against each recording's original "
                          "channel, e.g. endpoint=10\\.0\\.0\\.5:4012[0-9]") from None


def _parse_recording_ids(text: str) -> tuple[int, ...]:
    accepted = f"a comma list or JSON list of recording ids 0..{INT64_MAX}, e.g. 1,2 or [1,2]"
    return id_list_of(option_spec("recordingIds"), text, "recording id", accepted)


def _parse_starting(raw: dict[str, str], mode: ReadMode, recording_ids: tuple[int, ...] | None) -> PositionSpec:
    # The spec's default is a stream's; a batch read cannot start at latest, so it starts at earliest.
    default = default_str("startingPositions") if mode is ReadMode.STREAM else StartKind.EARLIEST.value
    text = raw.get("startingPositions", default)
    spec = _parse_position_spec("startingPositions", text, recording_ids, allow_earliest=True,
                                allow_latest=mode is ReadMode.STREAM)
    return spec


def _parse_ending(raw: dict[str, str], mode: ReadMode, recording_ids: tuple[int, ...] | None) -> PositionSpec:
    if mode is ReadMode.STREAM:
        return PositionSpec(StartKind.LATEST)
    return _parse_position_spec("endingPositions", raw.get("endingPositions", default_str("endingPositions")), recording_ids,
                                allow_earliest=False, allow_latest=True)


def _parse_position_spec(name: str, text: str, recording_ids: tuple[int, ...] | None, *,
                         allow_earliest: bool, allow_latest: bool) -> PositionSpec:
    accepted = " | ".join(
        [w for w, ok in (("earliest", allow_earliest), ("latest", allow_latest)) if ok]
        + ["JSON {\"<recordingId>\": <position>}"])
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        allowed = allow_earliest if lowered == "earliest" else allow_latest
        if not allowed:
            raise OptionError(f"option {name}={text} is not allowed here; accepted: {accepted}")
        return PositionSpec(StartKind(lowered))
    if not text.startswith("{"):
        raise OptionError(f"option {name}={text!r} is not valid; accepted: {accepted}")
    try:
        specific = parse_position_spec(text, f"option {name}")
    except OffsetFormatError as error:
        raise OptionError(f"{error}; accepted: {accepted}") from None
    for recording_id, position in specific.items():
        if (position == EARLIEST and not allow_earliest) or (position == LATEST and not allow_latest):
            raise OptionError(
                f"option {name}: marker {position} for recording {recording_id} is not allowed here; "
                f"accepted: {accepted}")
        if recording_ids is not None and recording_id not in recording_ids:
            raise OptionError(
                f"option {name} names recording {recording_id}, which is not in recordingIds {list(recording_ids)}")
    return PositionSpec(StartKind.SPECIFIC, tuple(sorted(specific.items())))


def _parse_time_options(raw: dict[str, str], recording_ids: tuple[int, ...] | None
                        ) -> tuple[TimeSpec | None, TimeSpec | None, str]:
    """startingTimestamp / startingPositionsByTimestamp / endingTimestamp / endingPositionsByTimestamp
    and the strategy. Kafka lets startingTimestamp silently win over startingOffsetsByTimestamp and
    startingOffsets (and endingOffsetsByTimestamp over endingOffsets); here setting two of one
    group is an error, because an ignored option is a mistake the user would not see."""
    starting = _parse_time_group(raw, recording_ids, "startingTimestamp", "startingPositionsByTimestamp",
                                 "startingPositions")
    ending = _parse_time_group(raw, recording_ids, "endingTimestamp", "endingPositionsByTimestamp",
                               "endingPositions")
    strategy_name = "startingPositionsByTimestampStrategy"
    strategy = parse_enum(raw, strategy_name)
    if strategy_name in raw and starting is None:
        raise OptionError(f"option {strategy_name} only applies together with startingTimestamp or "
                          "startingPositionsByTimestamp; set one of those too")
    if (starting is not None and ending is not None and starting.every_ms is not None
            and ending.every_ms is not None and ending.every_ms < starting.every_ms):
        raise OptionError(f"option endingTimestamp ({ending.every_ms}) is before startingTimestamp "
                          f"({starting.every_ms}); accepted: a time at or after startingTimestamp")
    return starting, ending, strategy


def _parse_time_group(raw: dict[str, str], recording_ids: tuple[int, ...] | None, every_name: str,
                      by_recording_name: str, positions_name: str) -> TimeSpec | None:
    present = [name for name in (every_name, by_recording_name, positions_name) if name in raw]
    if len(present) > 1 and (every_name in present or by_recording_name in present):
        raise OptionError(f"options {' and '.join(present)} are exclusive: set one of {every_name}, "
                          f"{by_recording_name} or {positions_name}")
    if every_name in raw:
        return TimeSpec(every_name, every_ms=_parse_epoch_ms(every_name, raw[every_name]))
    if by_recording_name not in raw:
        return None
    text = raw[by_recording_name]
    accepted = f"a JSON object {{\"<recordingId>\": <epoch ms>, ...}}, ids 0..{INT64_MAX}, times >= 0"
    try:
        items = json.loads(text)
    except json.JSONDecodeError:
        raise OptionError(f"option {by_recording_name}={text!r} is not JSON; accepted: {accepted}") from None
    if not isinstance(items, dict) or not items:
        raise OptionError(f"option {by_recording_name}={text!r}: accepted: {accepted}")
    by_recording: dict[int, int] = {}
    for key, value in items.items():
        if re.fullmatch(r"\d+", key) is None or int(key) > INT64_MAX:
            raise OptionError(f"option {by_recording_name}: {key!r} is not a recording id; accepted: {accepted}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise OptionError(f"option {by_recording_name}: the time of recording {key} ({value!r}) is not "
                              f"an int; accepted: {accepted}")
        recording_id = int(key)
        if recording_ids is not None and recording_id not in recording_ids:
            raise OptionError(f"option {by_recording_name} names recording {recording_id}, which is not in "
                              f"recordingIds {list(recording_ids)}")
        by_recording[recording_id] = _parse_epoch_ms(by_recording_name, str(value))
    return TimeSpec(by_recording_name, by_recording=tuple(sorted(by_recording.items())))


def _parse_epoch_ms(name: str, text: str) -> int:
    limit = _EPOCH_MS_MAX
    if re.fullmatch(r"\d+", text.strip()) is None or int(text) > limit:
        raise OptionError(f"option {name}={text!r} is not valid; accepted: milliseconds since the epoch, "
                          f"an int 0..{limit}, e.g. 1700000000000")
    return int(text)
