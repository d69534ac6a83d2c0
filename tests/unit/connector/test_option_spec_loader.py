"""connector/option_spec.py: the spec file's loader, the one canonicaliser and the parsers per type."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from aeron_spark.connector.option_spec import (
    INT32_MAX,
    SIDES,
    TYPES,
    OptionError,
    OptionSpec,
    OptionSpecFileError,
    ReadMode,
    all_option_specs,
    canonical_options,
    id_list_of,
    load_option_specs,
    option_spec,
    parse_bool,
    parse_duration_ms,
    parse_enum,
    parse_int,
    parse_optional_int,
    parse_optional_size,
    parse_size,
    parse_stream_id,
    parse_string,
    specs_for,
)
from aeron_spark.connector.options import DEFAULT_LOOPBACK_REPLAY_MTU, LOOPBACK_RECEIVE_WINDOW
from aeron_spark.driver_integration.process_driver import DRIVER_MODES
from aeron_spark.connector.source.sbe_columns import TIMESTAMP_UNITS_NS

ENTRY = {"name": "x.timeoutMs", "sides": ["source"], "modes": ["batch"], "type": "int", "min": 1, "max": None,
         "choices": None, "default": 5, "defaultText": None, "accepted": "an int > 0", "help": "A timeout."}


def document(*entries: dict[str, object]) -> str:
    return json.dumps({"formatVersion": 1, "options": list(entries)})


# --- the file --------------------------------------------------------------------------------------


def test_the_shipped_file_is_package_data_and_loads():
    text = resources.files("aeron_spark.connector").joinpath("option_specs.json").read_text(encoding="utf-8")
    assert load_option_specs(text) == all_option_specs()
    assert {spec.type for spec in all_option_specs()} <= set(TYPES)
    assert all(spec.sides <= set(SIDES) for spec in all_option_specs())


def test_every_entry_has_every_field_of_the_format():
    entries = json.loads(resources.files("aeron_spark.connector").joinpath("option_specs.json").read_text())["options"]
    fields = ["name", "sides", "modes", "type", "min", "max", "choices", "default", "defaultText", "accepted", "help"]
    assert all(list(entry) == fields for entry in entries)


def test_a_loaded_entry_is_typed():
    [spec] = load_option_specs(document(ENTRY))
    assert spec == OptionSpec("x.timeoutMs", frozenset({"source"}), frozenset({ReadMode.BATCH}), "int", 1, None, None, 5,
                              None, "an int > 0", "A timeout.")


@pytest.mark.parametrize("change, message", [
    ({"sides": ["python"]}, "sides"),
    ({"modes": ["later"]}, "modes"),
    ({"type": "float"}, "type 'float'"),
    ({"default": "5"}, "default '5' does not fit type int"),
    ({"default": True}, "default True does not fit type int"),
    ({"type": "enum", "choices": ["a"], "default": "b"}, "default 'b' does not fit type enum"),
    ({"type": "enum"}, "an enum needs choices"),
    ({"min": 1.5}, "bound 1.5"),
    ({"help": None}, "help is not a string"),
])
def test_a_malformed_entry_fails_naming_the_option_and_field(change, message):
    with pytest.raises(OptionSpecFileError, match=f"option x.timeoutMs: {message}"):
        load_option_specs(document({**ENTRY, **change}))


def test_a_missing_field_a_name_twice_on_one_side_and_a_wrong_version_fail():
    with pytest.raises(OptionSpecFileError, match="lacks help"):
        load_option_specs(document({key: value for key, value in ENTRY.items() if key != "help"}))
    with pytest.raises(OptionSpecFileError, match="X.TIMEOUTMS is listed twice for side source"):
        load_option_specs(document(ENTRY, {**ENTRY, "name": "X.TIMEOUTMS"}))
    assert len(load_option_specs(document(ENTRY, {**ENTRY, "sides": ["sink"]}))) == 2  # one per side is fine
    with pytest.raises(OptionSpecFileError, match="formatVersion 2"):
        load_option_specs(json.dumps({"formatVersion": 2, "options": []}))


def test_options_of_one_name_with_different_meanings_are_looked_up_by_side():
    assert option_spec("streamId", "source").type == "intList"
    assert option_spec("streamId", "sink").type == option_spec("streamId", "jvm-sink").type == "int"
    assert option_spec("channel", "jvm-source").type == "string"
    with pytest.raises(KeyError, match="2 entries of option 'channel'"):
        option_spec("channel")


def test_the_jvm_sides_accept_what_their_readers_need():
    assert {spec.name for spec in specs_for("jvm-source")} == {
        "recordingIds", "channel", "streamId", "channelPattern", "startingPositions", "failOnDataLoss",
        "maxBytesPerTrigger", "discoveryIntervalMs", "includeTimestamp", "archive.controlChannel",
        "archive.controlStreamId", "archive.responseChannel", "archive.responseStreamId", "archive.timeoutMs",
        "archive.credentials", "archive.credentialsEncoding", "aeron.dir", "aeron.host", "aeron.bindAddress"}
    assert {spec.name for spec in specs_for("jvm-sink")} == {
        "channel", "streamId", "archive.controlChannel", "archive.controlStreamId", "archive.responseChannel",
        "archive.responseStreamId", "archive.timeoutMs", "archive.credentials", "archive.credentialsEncoding",
        "aeron.dir", "sink.sourceLocation", "sink.offerTimeoutMs"}


def test_facts_the_spec_texts_repeat_agree_with_the_code():
    """Where a spec's words or choices restate a fact another module owns, they agree."""
    assert option_spec("aeron.driver").choices == DRIVER_MODES
    assert option_spec("sbe.timestampUnit").choices == tuple(TIMESTAMP_UNITS_NS)
    assert f"auto: {DEFAULT_LOOPBACK_REPLAY_MTU} when" in option_spec("replay.mtu").help
    assert f"auto: {LOOPBACK_RECEIVE_WINDOW >> 20}m" in option_spec("replay.receiveWindow").help
    for spec in all_option_specs():
        if spec.default is not None and spec.default_text is not None and spec.type in ("int", "long"):
            assert str(spec.default) in spec.default_text, spec.name


# --- the canonicaliser -----------------------------------------------------------------------------


def test_names_are_matched_in_any_case_and_values_stripped():
    raw = canonical_options({"RECORDINGIDS": " 1,2 ", "archive.timeoutms": "5", "queryName": "q", "streamid": None},
                            "source")
    assert raw == {"recordingIds": "1,2", "archive.timeoutMs": "5"}
    assert canonical_options({"SINK.ID": "s"}, "sink") == {"sink.id": "s"}


def test_an_unknown_option_suggests_the_closest_names_and_lists_every_accepted_one():
    with pytest.raises(OptionError) as error:
        canonical_options({"startingOffsets": "earliest"}, "source")
    message = str(error.value)
    assert message.startswith("unknown option 'startingOffsets' for format aeron-archive. Did you mean "
                              "'startingPositions'")
    assert "Accepted options: recordingIds, channel, streamId" in message
    with pytest.raises(OptionError, match=r"unknown option 'sink.idd' for the aeron-archive sink. Did you mean "
                                          r"'sink.id'"):
        canonical_options({"sink.idd": "x"}, "sink")


def test_an_option_of_the_other_side_says_where_it_applies():
    with pytest.raises(OptionError, match="^option startingPositions only applies to read / readStream, not to the "
                                          "aeron-archive sink$"):
        canonical_options({"STARTINGPOSITIONS": "earliest"}, "sink")
    with pytest.raises(OptionError, match="^option sink.id only applies to write / writeStream, not to read"):
        canonical_options({"sink.id": "s"}, "source")


# --- parsers per type --------------------------------------------------------------------------------


def test_each_parser_gives_the_spec_default_when_the_option_is_absent():
    assert parse_int({}, "archive.timeoutMs") == option_spec("archive.timeoutMs").default
    assert parse_stream_id({}, "replay.streamId") == option_spec("replay.streamId").default
    assert parse_bool({}, "failOnDataLoss") is True and parse_bool({}, "includeTimestamp") is False
    assert parse_enum({}, "aeron.driver") == "auto"
    assert parse_size({}, "maxBytesPerPartition") == 256 << 20
    assert parse_duration_ms({}, "maxTriggerDelay") == 15 * 60_000
    assert parse_optional_size({}, "maxBytesPerTrigger") is None
    assert parse_optional_int({}, "startingTimestamp") is None
    assert parse_string({}, "archive.dir") is None


def test_parsers_read_values_and_bounds_from_the_spec():
    assert parse_int({"archive.timeoutMs": "250"}, "archive.timeoutMs") == 250
    assert parse_enum({"aeron.driver": "EMBEDDED"}, "aeron.driver") == "embedded"
    assert parse_bool({"failOnDataLoss": "FALSE"}, "failOnDataLoss") is False
    assert parse_size({"maxBytesPerPartition": "64m"}, "maxBytesPerPartition") == 64 << 20
    assert parse_duration_ms({"maxTriggerDelay": "30s"}, "maxTriggerDelay") == 30_000
    assert parse_stream_id({"streamId": "-5"}, option_spec("streamId", "sink")) == -5


@pytest.mark.parametrize("parse, raw, message", [
    (parse_int, {"archive.timeoutMs": "soon"}, r"option archive.timeoutMs='soon' is not an integer; accepted: an int > 0"),
    (parse_int, {"archive.timeoutMs": "0"}, r"option archive.timeoutMs=0 must be >= 1; accepted: an int > 0"),
    (parse_int, {"archive.timeoutMs": str(INT32_MAX + 1)}, rf"archive.timeoutMs={INT32_MAX + 1} is out of range; "
                                                           rf"accepted: 1..{INT32_MAX}"),
    (parse_stream_id, {"replay.streamId": "x"}, r"option replay.streamId='x' is not an integer; accepted: a stream id"),
    (parse_bool, {"failOnDataLoss": "yes"}, r"option failOnDataLoss='yes' is not valid; accepted: true \| false"),
    (parse_enum, {"aeron.driver": "shared"}, r"aeron.driver='shared' is not valid; accepted: auto \| embedded \| external"),
    (parse_size, {"maxBytesPerPartition": "lots"}, r"maxBytesPerPartition='lots' is not a size; accepted: bytes"),
    (parse_size, {"maxBytesPerPartition": "0"}, r"maxBytesPerPartition='0' must be > 0"),
    (parse_duration_ms, {"maxTriggerDelay": "soon"}, r"maxTriggerDelay='soon' is not a duration; accepted: e.g. 500ms"),
])
def test_a_bad_value_names_the_option_and_what_it_accepts(parse, raw, message):
    with pytest.raises(OptionError, match=message):
        parse(raw, next(iter(raw)))


def test_a_size_out_of_the_spec_bounds_names_what_it_accepts():
    with pytest.raises(OptionError, match=r"sink.termLength='32k' is not valid; accepted: a power of two between "
                                          r"64k and 1g"):
        parse_size({"sink.termLength": "32k"}, "sink.termLength")


def test_a_required_option_without_a_default_says_so():
    with pytest.raises(OptionError, match=r"option streamId is required; accepted: a stream id"):
        parse_stream_id({}, option_spec("streamId", "sink"))


def test_id_lists_take_their_bounds_from_the_spec_and_their_type():
    recording_ids, stream_ids = option_spec("recordingIds"), option_spec("streamId", "source")
    assert id_list_of(recording_ids, "[1, 2]", "recording id", "ids") == (1, 2)
    assert id_list_of(stream_ids, "-7, 9", "stream id", "ids") == (-7, 9)
    with pytest.raises(OptionError, match=r"option recordingIds='-1,2': '-1' is not a recording id; accepted: ids"):
        id_list_of(recording_ids, "-1,2", "recording id", "ids")
    with pytest.raises(OptionError, match=rf"{INT32_MAX + 1} is not a stream id, out of range; accepted: ids"):
        id_list_of(stream_ids, f"1,{INT32_MAX + 1}", "stream id", "ids")
    with pytest.raises(OptionError, match="lists a stream id twice"):
        id_list_of(stream_ids, "1,1", "stream id", "ids")
