import json

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from aeron_spark.connector.source.offsets import EARLIEST, LATEST, OffsetFormatError, RecordingPositions
from aeron_spark.connector.options import OptionError
from aeron_spark.connector.source.options import ReadMode, SourceOptions, StartKind, validate_common

BASE = {"archive.controlChannel": "aeron:ipc", "recordingIds": "1,2"}
STREAM = {**BASE, "checkpointLocation": "/tmp/cp"}


def parse(mode=ReadMode.BATCH, **options):
    return SourceOptions.parse(CaseInsensitiveDict(options), mode)


def test_defaults_for_batch_and_stream():
    batch = parse(**BASE)
    assert batch.recording_ids == (1, 2)
    assert batch.starting.kind is StartKind.EARLIEST and batch.ending.kind is StartKind.LATEST
    assert batch.fail_on_data_loss and not batch.include_timestamp
    assert batch.max_bytes_per_partition == 256 << 20 and batch.min_partitions == 1
    stream = parse(ReadMode.STREAM, **STREAM)
    assert stream.starting.kind is StartKind.LATEST
    assert stream.max_trigger_delay_ms == 15 * 60 * 1000
    assert stream.connection.control_stream_id is None and stream.connection.response_stream_id == 20


def test_options_are_case_insensitive_as_spark_passes_them():
    parsed = parse(**{"ARCHIVE.CONTROLCHANNEL": "aeron:ipc", "recordingids": "[3, 4]", "FailOnDataLoss": "FALSE"})
    assert parsed.recording_ids == (3, 4) and parsed.fail_on_data_loss is False


def test_unknown_option_suggests_close_matches():
    with pytest.raises(OptionError, match=r"(?i)unknown option 'startingOffsets'.*Did you mean 'startingPositions'"):
        parse(**BASE, startingOffsets="earliest")
    with pytest.raises(OptionError, match=r"(?i)unknown option 'recordingId'.*'recordingIds'"):
        validate_common(CaseInsensitiveDict({"recordingId": "1", "archive.controlChannel": "aeron:ipc"}))


@pytest.mark.parametrize("options, message", [
    ({"archive.controlChannel": "aeron:ipc"}, "nothing to read"),
    ({**BASE, "channel": "aeron:ipc", "streamId": "5"}, "either recordingIds or channel"),
    ({"archive.controlChannel": "aeron:ipc", "channel": "aeron:ipc"}, "channel needs streamId"),
    ({"archive.controlChannel": "aeron:ipc", "streamId": "5"}, "streamId needs channel"),
    ({"archive.controlChannel": "aeron:ipc", "channel": "x", "streamId": "five"}, "streamId='five' is not an integer"),
    ({"recordingIds": "1"}, "say where the archive is"),
    ({**BASE, "archive.controlChannel": "udp://x"}, "not an Aeron channel"),
    ({**BASE, "recordingIds": "1,a"}, "'a' is not a recording id"),
    ({**BASE, "recordingIds": "1,1"}, "twice"),
    ({**BASE, "recordingIds": "[1, -2]"}, "not a recording id"),
    ({**BASE, "startingPositions": "latest"}, "startingPositions=latest is not allowed"),
    ({**BASE, "startingPositions": "newest"}, "accepted: earliest | JSON"),
    ({**BASE, "startingPositions": '{"1": 33}'}, "not a frame boundary"),
    ({**BASE, "startingPositions": '{"9": 0}'}, "not in recordingIds"),
    ({**BASE, "startingPositions": '{"1": "0"}'}, "must be an integer"),
    ({**BASE, "startingPositions": '{"1": 0'}, "not valid JSON"),
    ({**BASE, "endingPositions": "earliest"}, "endingPositions=earliest is not allowed"),
    ({**BASE, "endingPositions": '{"1": -2}'}, "marker -2"),
    ({**BASE, "maxBytesPerTrigger": "1g"}, "maxBytesPerTrigger only applies to spark.readStream"),
    ({**BASE, "failOnDataLoss": "yes"}, "accepted: true | false"),
    ({**BASE, "maxBytesPerPartition": "12 parsecs"}, "is not a size"),
    ({**BASE, "minPartitions": "0"}, "minPartitions=0 must be >= 1"),
    ({**BASE, "minPartitions": "two"}, "minPartitions='two' is not an integer"),
    ({**BASE, "path": "/a", "archive.dir": "/b"}, "disagree"),
])
def test_batch_rejections_name_the_option_and_accepted_values(options, message):
    with pytest.raises(OptionError, match=message):
        parse(**options)


@pytest.mark.parametrize("options, message", [
    ({**STREAM, "endingPositions": "latest"}, "endingPositions only applies to spark.read"),
    ({**STREAM, "minBytesPerTrigger": "2m", "maxBytesPerTrigger": "1m"}, "must not exceed"),
    ({**STREAM, "maxTriggerDelay": "5s"}, "only applies together with minBytesPerTrigger"),
    ({**STREAM, "minBytesPerTrigger": "1k", "maxTriggerDelay": "soon"}, "is not a duration"),
    ({**STREAM, "discoveryIntervalMs": "-1"}, "must be >= 0"),
])
def test_stream_rejections(options, message):
    with pytest.raises(OptionError, match=message):
        parse(ReadMode.STREAM, **options)


def test_sizes_durations_and_position_specs_parse():
    parsed = parse(ReadMode.STREAM, **STREAM, maxBytesPerTrigger="256m", minBytesPerTrigger="1024",
                   maxTriggerDelay="30s", startingPositions='{"1": 64, "2": -2}', includeTimestamp="true")
    assert parsed.max_bytes_per_trigger == 256 << 20 and parsed.min_bytes_per_trigger == 1024
    assert parsed.max_trigger_delay_ms == 30_000 and parsed.include_timestamp
    assert parsed.starting.for_recording(1, EARLIEST) == 64 and parsed.starting.for_recording(2, LATEST) == EARLIEST
    channel = parse(**{"archive.dir": "/arch", "channel": "aeron:udp?endpoint=h:1", "streamId": "7"})
    assert channel.subscribes_to_channel and channel.stream_ids == (7,) and channel.connection.archive_dir == "/arch"
    assert parse(**{"path": "/arch", "recordingIds": "1"}).connection.archive_dir == "/arch"


def test_selection_identity_depends_on_what_is_read_not_on_where_the_archive_is():
    a = parse(ReadMode.STREAM, **STREAM)
    b = parse(ReadMode.STREAM, **{**STREAM, "archive.controlChannel": "aeron:udp?endpoint=x:1"})
    c = parse(ReadMode.STREAM, **{**STREAM, "startingPositions": "earliest"})
    assert a.selection_identity() == b.selection_identity() != c.selection_identity()


def test_offsets_round_trip_through_spark_json():
    positions = RecordingPositions({10: 4096, 2: 0, 7: 1 << 40})
    offset = positions.to_offset()
    assert list(offset) == ["2", "7", "10"]  # sorted, string keys
    assert RecordingPositions.from_offset(json.loads(json.dumps(offset))) == positions
    assert RecordingPositions.from_json(positions.to_json()) == positions
    assert positions.updated({2: 64}).without({7}) == RecordingPositions({2: 64, 10: 4096})


@pytest.mark.parametrize("offset, message", [
    ({"x": 0}, "not a recording id"),
    ({"-1": 0}, ">= 0"),
    ({"1": True}, "must be an integer"),
    ({"1": -1}, "is not a position >= 0"),
    ({"1": 48}, "not a frame boundary"),
    ([1, 2], "must be a JSON object"),
])
def test_bad_offsets_are_rejected(offset, message):
    with pytest.raises(OffsetFormatError, match=message):
        RecordingPositions.from_offset(offset)


def test_query_name_that_spark_adds_to_the_options_is_accepted():
    validate_common({**BASE, "queryName": "vwap"})
    assert parse(ReadMode.STREAM, **STREAM, queryName="vwap").recording_ids == (1, 2)


def test_a_user_schema_selects_columns_or_is_rejected_with_the_accepted_columns():
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType, TimestampType

    from aeron_spark.connector.data_source import select_columns, source_schema
    options = parse(**BASE)
    assert select_columns(None, options) is options
    assert select_columns(source_schema(False), options) is options
    chosen = select_columns(StructType([StructField("payload", BinaryType(), nullable=False),
                                        StructField("timestamp", TimestampType())]), options)
    assert chosen.output_columns == ("payload", "timestamp") and chosen.nullable_columns == {"timestamp"}
    payload = StructField("payload", BinaryType())
    for schema, what in ((StructType([StructField("payload", StringType())]), "wrong type: payload string"),
                         (StructType([payload, payload]), "twice")):
        with pytest.raises(OptionError, match=what) as error:
            select_columns(schema, options)
        assert "recording_id bigint, position bigint, payload binary, session_id int" in str(error.value)


def test_the_shared_option_names_match_the_source_options():
    from aeron_spark.connector.options import CONNECTION_OPTIONS
    from aeron_spark.connector.sink.options import SINK_OPTION_SPECS, SOURCE_ONLY_OPTIONS
    from aeron_spark.connector.source.options import OPTION_SPECS

    source_names = {spec.name for spec in OPTION_SPECS}
    sink_names = {spec.name for spec in SINK_OPTION_SPECS} | set(CONNECTION_OPTIONS)
    assert set(CONNECTION_OPTIONS) <= source_names
    assert set(SOURCE_ONLY_OPTIONS) == source_names - sink_names


# --- time-based positions ----------------------------------------------------------------------


def test_time_options_parse_into_specs_per_recording_and_for_all():
    parsed = parse(**BASE, startingTimestamp="1700000000000", endingPositionsByTimestamp='{"2": 1700000005000}')
    assert parsed.starting_time.time_ms_for(1) == 1700000000000 == parsed.starting_time.time_ms_for(2)
    assert parsed.ending_time.time_ms_for(2) == 1700000005000 and parsed.ending_time.time_ms_for(1) is None
    assert parsed.starting_time_strategy == "error"
    stream = parse(ReadMode.STREAM, **STREAM, startingPositionsByTimestamp='{"1": 5}',
                   startingPositionsByTimestampStrategy="LATEST")
    assert stream.starting_time.by_recording == ((1, 5),) and stream.starting_time_strategy == "latest"
    assert "startingTime" in stream.selection_identity()
    assert "startingTime" not in parse(ReadMode.STREAM, **STREAM).selection_identity()


@pytest.mark.parametrize("options, message", [
    ({"startingTimestamp": "5", "startingPositions": "earliest"},
     "options startingTimestamp and startingPositions are exclusive"),
    ({"startingTimestamp": "5", "startingPositionsByTimestamp": '{"1": 5}'},
     "options startingTimestamp and startingPositionsByTimestamp are exclusive"),
    ({"startingPositionsByTimestamp": '{"1": 5}', "startingPositions": '{"2": 0}'},
     "startingPositionsByTimestamp and startingPositions are exclusive"),
    ({"endingTimestamp": "5", "endingPositions": "latest"}, "endingTimestamp and endingPositions are exclusive"),
    ({"startingTimestamp": "09:30"}, r"startingTimestamp='09:30' is not valid; accepted: milliseconds since"),
    ({"startingTimestamp": "-1"}, "startingTimestamp='-1' is not valid"),
    ({"startingPositionsByTimestamp": '{"3": 5}'}, r"names recording 3, which is not in recordingIds \[1, 2\]"),
    ({"startingPositionsByTimestamp": '{"1": "5"}'}, "the time of recording 1 .* is not an int"),
    ({"startingPositionsByTimestamp": "[1]"}, "accepted: a JSON object"),
    ({"startingTimestamp": "5", "startingPositionsByTimestampStrategy": "earliest"},
     "startingPositionsByTimestampStrategy='earliest' is not valid; accepted: error | latest"),
    ({"startingPositionsByTimestampStrategy": "latest"},
     "only applies together with startingTimestamp or startingPositionsByTimestamp"),
    ({"startingTimestamp": "50", "endingTimestamp": "40"}, r"endingTimestamp \(40\) is before startingTimestamp"),
])
def test_bad_time_options_name_the_options_and_what_is_accepted(options, message):
    with pytest.raises(OptionError, match=message):
        parse(**BASE, **options)


def test_ending_times_are_batch_only():
    with pytest.raises(OptionError, match="option endingTimestamp only applies to spark.read"):
        parse(ReadMode.STREAM, **STREAM, endingTimestamp="5")
