"""The option specs (connector/options.py OptionSpec): the shared connection options are specified
once, both sides accept them, and the defaults the specs tell (docs/options.md) are the parsers'."""

from aeron_spark.connector.options import (
    CONNECTION_OPTION_SPECS,
    CONNECTION_OPTIONS,
    OptionSpec,
    parse_connection,
    parse_replay,
)
from aeron_spark.connector.sink.options import SINK_OPTION_SPECS, SinkOptions
from aeron_spark.connector.source.options import OPTION_SPECS, ReadMode, SourceOptions

WHERE = {"archive.controlChannel": "aeron:udp?endpoint=localhost:8010"}


def test_the_source_and_the_sink_list_the_same_connection_specs_once():
    assert all(isinstance(spec, OptionSpec) for spec in (*OPTION_SPECS, *SINK_OPTION_SPECS))
    assert CONNECTION_OPTIONS == tuple(spec.name for spec in CONNECTION_OPTION_SPECS)
    assert [spec for spec in OPTION_SPECS if spec.name in CONNECTION_OPTIONS] == list(CONNECTION_OPTION_SPECS)
    for specs in (OPTION_SPECS, SINK_OPTION_SPECS):
        names = [spec.name for spec in specs]
        assert len(names) == len(set(names))
    assert not {spec.name for spec in SINK_OPTION_SPECS} & set(CONNECTION_OPTIONS)


def test_the_connection_defaults_the_specs_tell_are_the_parsed_ones():
    default = {spec.name: spec.default for spec in CONNECTION_OPTION_SPECS}
    connection, replay = parse_connection(WHERE), parse_replay({})
    assert default["archive.responseStreamId"] == str(connection.response_stream_id)
    assert default["archive.timeoutMs"] == str(connection.timeout_ms)
    assert default["aeron.driver"] == connection.driver_mode
    assert default["replay.streamId"] == str(replay.stream_id)
    assert default["replay.idleTimeoutMs"] == str(replay.idle_timeout_ms)


def test_every_connection_option_is_accepted_by_both_sides(tmp_path):
    given = {**WHERE, "archive.timeoutMs": "2500", "replay.idleTimeoutMs": "700"}
    source = SourceOptions.parse({**given, "recordingIds": "1"}, ReadMode.BATCH)
    sink = SinkOptions.parse({**given, "channel": "aeron:ipc", "streamId": "7", "sink.stagingDir": str(tmp_path)},
                             streaming=False)
    for parsed in (source, sink):
        assert (parsed.connection.timeout_ms, parsed.replay.idle_timeout_ms) == (2500, 700)
