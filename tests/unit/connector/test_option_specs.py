"""The option specs (connector/option_specs.json, loaded by connector/option_spec.py): the shared
connection options are specified once, both sides accept them, and the defaults the specs hold
are the ones the parsers give."""

from aeron_spark.archive.configuration import DEFAULT_CONTROL_STREAM_ID, DEFAULT_RESPONSE_STREAM_ID
from aeron_spark.connector.options import (
    CONNECTION_OPTION_SPECS,
    CONNECTION_OPTIONS,
    OptionSpec,
    option_spec,
    parse_connection,
    parse_replay,
)
from aeron_spark.connector.sink.options import SINK_OPTION_SPECS, SinkOptions
from aeron_spark.connector.source.options import OPTION_SPECS, ReadMode, SourceOptions

WHERE = {"archive.controlChannel": "aeron:udp?endpoint=localhost:8010"}


def default(name: str, side: str = "source") -> object:
    return option_spec(name, side).default


def test_the_source_and_the_sink_list_the_same_connection_specs_once():
    assert all(isinstance(spec, OptionSpec) for spec in (*OPTION_SPECS, *SINK_OPTION_SPECS))
    assert CONNECTION_OPTIONS == tuple(spec.name for spec in CONNECTION_OPTION_SPECS)
    assert [spec for spec in OPTION_SPECS if spec.name in CONNECTION_OPTIONS] == list(CONNECTION_OPTION_SPECS)
    assert [spec for spec in SINK_OPTION_SPECS if spec.name in CONNECTION_OPTIONS] == list(CONNECTION_OPTION_SPECS)
    for specs in (OPTION_SPECS, SINK_OPTION_SPECS):
        names = [spec.name.lower() for spec in specs]
        assert len(names) == len(set(names))


def test_the_connection_defaults_the_specs_tell_are_the_parsed_ones():
    connection, replay = parse_connection(WHERE), parse_replay({})
    assert default("archive.responseStreamId") == connection.response_stream_id
    assert default("archive.timeoutMs") == connection.timeout_ms
    assert default("aeron.driver") == connection.driver_mode
    assert default("replay.streamId") == replay.stream_id
    assert default("replay.idleTimeoutMs") == replay.idle_timeout_ms
    assert default("replay.mtu") == replay.mtu and default("replay.receiveWindow") == replay.receive_window
    # The archive's own stream ids (archive/configuration.py): a client without a mark file uses them.
    assert (default("archive.controlStreamId"), default("archive.responseStreamId")) == (
        DEFAULT_CONTROL_STREAM_ID, DEFAULT_RESPONSE_STREAM_ID)


def test_the_source_defaults_the_specs_tell_are_the_parsed_ones():
    batch = SourceOptions.parse({**WHERE, "recordingIds": "1"}, ReadMode.BATCH)
    stream = SourceOptions.parse({**WHERE, "recordingIds": "1"}, ReadMode.STREAM)
    assert default("failOnDataLoss") is batch.fail_on_data_loss is True
    assert default("includeTimestamp") is batch.include_timestamp is False
    assert default("readOnDriver") is stream.read_on_driver is False
    assert default("maxBytesPerPartition") == batch.max_bytes_per_partition == 256 << 20
    assert default("minPartitions") == batch.min_partitions
    assert default("maxTriggerDelay") == stream.max_trigger_delay_ms == 15 * 60_000
    assert default("discoveryIntervalMs") == stream.discovery_interval_ms
    assert default("startingPositionsByTimestampStrategy") == batch.starting_time_strategy
    assert default("endingPositions") == batch.ending.kind.value
    # startingPositions: the spec's default is a stream's; its defaultText tells both.
    assert default("startingPositions") == stream.starting.kind.value == "latest"
    assert batch.starting.kind.value == "earliest"
    assert option_spec("startingPositions").default_text == "latest (stream), earliest (batch)"


def test_the_sink_defaults_the_specs_tell_are_the_parsed_ones(tmp_path):
    sink = SinkOptions.parse({**WHERE, "channel": "aeron:ipc", "streamId": "7", "sink.stagingDir": str(tmp_path)},
                             streaming=False)
    assert default("sink.termLength", "sink") == sink.term_length == 16 << 20
    assert default("sink.commitTimeoutMs", "sink") == sink.commit_timeout_ms
    assert default("sink.mtu", "sink") == "auto" and sink.mtu == 8192  # auto: 8192 for IPC (its defaultText)
    assert sink.source_location_local  # local for IPC (its defaultText)


def test_every_connection_option_is_accepted_by_both_sides(tmp_path):
    given = {**WHERE, "archive.timeoutMs": "2500", "replay.idleTimeoutMs": "700"}
    source = SourceOptions.parse({**given, "recordingIds": "1"}, ReadMode.BATCH)
    sink = SinkOptions.parse({**given, "channel": "aeron:ipc", "streamId": "7", "sink.stagingDir": str(tmp_path)},
                             streaming=False)
    for parsed in (source, sink):
        assert (parsed.connection.timeout_ms, parsed.replay.idle_timeout_ms) == (2500, 700)
