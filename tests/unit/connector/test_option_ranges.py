"""Ids and positions are validated to their wire range when the options are parsed, naming the
option (issue 13, item 7): a stream id is an int32, a recording id and a position an int64 >= 0."""

from __future__ import annotations

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from aeron_spark.connector.options import INT32_MAX, INT32_MIN, INT64_MAX, OptionError
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.source.options import ReadMode, SourceOptions, validate_common

SOURCE = {"archive.controlChannel": "aeron:ipc", "recordingIds": "1,2"}
SINK = {"channel": "aeron:ipc", "streamId": "7", "archive.dir": "/data/archive"}
BY_STREAM = {"archive.controlChannel": "aeron:ipc", "channel": "aeron:ipc"}
STREAM_ID_OPTIONS = ("archive.controlStreamId", "archive.responseStreamId", "replay.streamId")


def source(**options) -> SourceOptions:
    return SourceOptions.parse(CaseInsensitiveDict(options), ReadMode.BATCH)


@pytest.mark.parametrize("name", STREAM_ID_OPTIONS)
@pytest.mark.parametrize("value", [str(INT32_MAX + 1), str(INT32_MIN - 1), str(1 << 40)])
def test_connection_stream_ids_out_of_int32_are_rejected_naming_the_option(name, value):
    for parse in (lambda: source(**{**SOURCE, name: value}),
                  lambda: SinkOptions.parse({**SINK, name: value}, streaming=True),
                  lambda: validate_common(CaseInsensitiveDict({**SOURCE, name: value}))):
        with pytest.raises(OptionError, match=rf"option {name}={value} is out of range for a stream id; "
                                              r"accepted: an int32"):
            parse()


@pytest.mark.parametrize("name", STREAM_ID_OPTIONS)
def test_connection_stream_ids_at_the_int32_limits_are_accepted(name):
    for value in (INT32_MIN, 0, INT32_MAX):
        options = source(**{**SOURCE, name: str(value)})
        stream_ids = {"archive.controlStreamId": options.connection.control_stream_id,
                      "archive.responseStreamId": options.connection.response_stream_id,
                      "replay.streamId": options.replay.stream_id}
        assert stream_ids[name] == value


@pytest.mark.parametrize("value", [str(1 << 40), str(INT32_MAX + 1), str(INT32_MIN - 1)])
def test_the_stream_id_of_source_and_sink_is_an_int32(value):
    with pytest.raises(OptionError, match=rf"option streamId={value} is out of range for a stream id"):
        source(**BY_STREAM, streamId=value)
    with pytest.raises(OptionError, match=rf"option streamId={value} is out of range for a stream id"):
        SinkOptions.parse({**SINK, "streamId": value}, streaming=True)
    assert source(**BY_STREAM, streamId=str(INT32_MAX)).stream_ids == (INT32_MAX,)
    assert SinkOptions.parse({**SINK, "streamId": str(INT32_MIN)}, streaming=True).stream_id == INT32_MIN


@pytest.mark.parametrize("text", [str(INT64_MAX + 1), f"[1, {INT64_MAX + 1}]", str(1 << 80)])
def test_recording_ids_beyond_int64_are_rejected(text):
    with pytest.raises(OptionError, match=r"option recordingIds.*out of range; accepted: .*0\.\.9223372036854775807"):
        source(**{**SOURCE, "recordingIds": text})


def test_recording_ids_up_to_int64_max_are_accepted():
    assert source(**{**SOURCE, "recordingIds": f"0,{INT64_MAX}"}).recording_ids == (0, INT64_MAX)


@pytest.mark.parametrize("name", ["startingPositions", "endingPositions"])
@pytest.mark.parametrize("spec, message", [
    (f'{{"{INT64_MAX + 1}": 0}}', "recording id 9223372036854775808 is out of range"),
    ('{"-1": 0}', "recording id -1 is out of range"),
    (f'{{"1": {INT64_MAX + 1}}}', "position 9223372036854775808 of recording 1 is out of range"),
    ('{"1": -64}', "position -64 of recording 1 is not"),
])
def test_position_keys_and_values_are_checked_to_their_wire_range(name, spec, message):
    with pytest.raises(OptionError, match=rf"option {name}.*{message}"):
        source(**{**SOURCE, "recordingIds": f"1,{INT64_MAX}", name: spec})


def test_positions_at_the_top_of_the_range_are_accepted():
    top = INT64_MAX - INT64_MAX % 32  # a frame boundary
    options = source(**{**SOURCE, "recordingIds": f"1,{INT64_MAX}", "startingPositions": f'{{"{INT64_MAX}": 0}}',
                        "endingPositions": f'{{"1": {top}}}'})
    assert options.ending.for_recording(1, 0) == top


def test_a_response_channel_passes_through_and_its_control_mode_is_checked():
    from aeron_spark.connector.options import parse_connection

    response = "aeron:udp?control-mode=response|control=archive-host:8011"
    connection = parse_connection({"archive.controlChannel": "aeron:udp?endpoint=archive-host:8010",
                                   "archive.responseChannel": response})
    assert connection.response_channel == response
    assert parse_connection({"archive.controlChannel": "aeron:ipc",
                             "archive.responseChannel": "aeron:ipc?control-mode=response"}).response_channel
    for name in ("archive.responseChannel", "replay.channel"):
        with pytest.raises(OptionError, match=rf"option {name}=.*control-mode=respond is not valid; "
                                              r"accepted: manual \| dynamic \| response"):
            source(**{**SOURCE, name: "aeron:udp?control-mode=respond|control=h:1"})
        with pytest.raises(OptionError, match=rf"option {name}=.*needs control=<archive host>:<port>"):
            source(**{**SOURCE, name: "aeron:udp?control-mode=response"})
    with pytest.raises(OptionError, match="not a valid Aeron channel"):
        source(**{**SOURCE, "archive.responseChannel": "aeron:udp?endpoint"})
