"""startingTimestamp & co -> positions over a fake archive: descriptor selection, bisection,
the strategy, and a stream's resolved start persisted as positions."""

import json
import struct
from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader
from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader
from aeron_spark.connector.source.offset_reader import OffsetReader, RecordingNotFound
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayPartition
from aeron_spark.connector.source.timestamp_resolution import (
    MessageTimesUnavailable,
    NoMessageAtTime,
    resolve_ending,
    resolve_starting,
)
from tests.support.fake_archive import FakeArchive
from tests.support.synthetic_log import SyntheticLog

TERM = 4096
T0_MS = 1_700_000_000_000
CHANNEL = "aeron:udp?endpoint=localhost:40123"


def ms_log(first_ms: int, count: int, step_ms: int = 1) -> SyntheticLog:
    """Messages stamped (reserved value) every step_ms from first_ms, in nanoseconds."""
    log = SyntheticLog(term_length=TERM, mtu=512)
    for index in range(count):
        log.append(b"p" * (40 + index % 500), reserved_value=(first_ms + index * step_ms) * 1_000_000)
    return log


def parse(mode=ReadMode.BATCH, **options):
    raw = {"archive.controlChannel": "aeron:ipc", **options}
    if "recordingIds" not in raw:
        raw.update(channel="aeron:udp", streamId="1001")
    return SourceOptions.parse(CaseInsensitiveDict(raw), mode)


def reader_for(archive, options):
    return OffsetReader(options, lambda: archive)


def first_at_or_after(log, time_ms):
    return next(m.begin_position for m in log.messages if m.reserved_value >= time_ms * 1_000_000)


@pytest.fixture
def archive():
    archive = FakeArchive()
    # 1: stopped before T0 + 1000; 2: covers it; 3: started after it.
    archive.add(1, ms_log(T0_MS, 300), CHANNEL, active=False).start_timestamp = T0_MS
    archive.recordings[1].stop_timestamp = T0_MS + 400
    archive.add(2, ms_log(T0_MS + 500, 1500), CHANNEL).start_timestamp = T0_MS + 500
    archive.add(3, ms_log(T0_MS + 2000, 50), CHANNEL).start_timestamp = T0_MS + 2000
    return archive


def test_starting_timestamp_selects_by_descriptor_and_bisects_the_recording_that_covers_it(archive):
    options = parse(startingTimestamp=str(T0_MS + 1000), includeTimestamp="true")
    positions = resolve_starting(options, reader_for(archive, options))
    log2 = archive.recordings[2].log
    assert dict(positions.items()) == {1: archive.recordings[1].log.position,
                                       2: first_at_or_after(log2, T0_MS + 1000), 3: 0}
    terms = log2.position // TERM
    assert terms > 60
    assert [r[0] for r in archive.replays] == [2] * len(archive.replays)
    assert len(archive.replays) <= terms.bit_length() + 2


def test_ending_timestamp_ends_before_the_first_message_at_or_after_it_and_at_latest_if_none(archive):
    options = parse(startingTimestamp=str(T0_MS), endingTimestamp=str(T0_MS + 1000), includeTimestamp="true")
    reader = reader_for(archive, options)
    ends = resolve_ending(options, reader)
    log2 = archive.recordings[2].log
    assert dict(ends.items()) == {1: archive.recordings[1].log.position, 2: first_at_or_after(log2, T0_MS + 1000),
                                  3: 0}
    late = parse(endingTimestamp=str(T0_MS + 2000), includeTimestamp="true")
    assert resolve_ending(late, reader_for(archive, late))[2] == log2.position  # no message at or after: latest
    by_time = parse(endingPositionsByTimestamp=json.dumps({"2": T0_MS + 600}), includeTimestamp="true")
    assert dict(resolve_ending(by_time, reader_for(archive, by_time)).items()) == {
        1: archive.recordings[1].log.position, 2: first_at_or_after(log2, T0_MS + 600),
        3: archive.recordings[3].log.position}  # not named: latest


def test_a_batch_between_two_times_has_exactly_the_messages_between(archive):
    start_ms, end_ms = T0_MS + 700, T0_MS + 1300
    options = parse(recordingIds="2", startingTimestamp=str(start_ms), endingTimestamp=str(end_ms),
                    includeTimestamp="true")
    reader = AeronArchiveBatchReader(options, driver_opener=lambda c: archive, executor_opener=lambda c: archive,
                                     forget_driver_connection=None)
    times = []
    for partition in reader.partitions():
        assert isinstance(partition, ReplayPartition)
        for batch in reader.read(partition):
            times += batch.column("reserved_value").to_pylist()
    assert times == [t * 1_000_000 for t in range(start_ms, end_ms)]


def test_without_a_message_time_a_time_inside_a_recording_is_an_error_naming_the_options(archive):
    options = parse(startingTimestamp=str(T0_MS + 1000))
    with pytest.raises(MessageTimesUnavailable, match=r"startingTimestamp: the time .* inside recording 2.*"
                                                      r"includeTimestamp=true.*sbe.timestampField"):
        resolve_starting(options, reader_for(archive, options))
    # Descriptor selection alone needs no message time: 1 stopped before, 3 started after.
    outside = parse(recordingIds="1,3", startingTimestamp=str(T0_MS + 1000))
    assert dict(resolve_starting(outside, reader_for(archive, outside)).items()) == {
        1: archive.recordings[1].log.position, 3: 0}


def test_strategy_error_fails_and_latest_starts_at_the_recorded_end(archive):
    future = str(T0_MS + 10_000)  # recording 2 is active: it covers the time, but no message has it yet
    failing = parse(recordingIds="2", startingTimestamp=future, includeTimestamp="true")
    with pytest.raises(NoMessageAtTime, match="recording 2 has no message at or after .*"
                                              "startingPositionsByTimestampStrategy=latest"):
        resolve_starting(failing, reader_for(archive, failing))
    latest = parse(recordingIds="2", startingTimestamp=future, includeTimestamp="true",
                   startingPositionsByTimestampStrategy="latest")
    assert resolve_starting(latest, reader_for(archive, latest))[2] == archive.recordings[2].log.position


def test_starting_positions_by_timestamp_per_recording_and_earliest_for_the_others(archive):
    by_time = json.dumps({"2": T0_MS + 900, "1": T0_MS + 100})
    options = parse(startingPositionsByTimestamp=by_time, includeTimestamp="true")
    positions = resolve_starting(options, reader_for(archive, options))
    assert dict(positions.items()) == {1: first_at_or_after(archive.recordings[1].log, T0_MS + 100),
                                       2: first_at_or_after(archive.recordings[2].log, T0_MS + 900), 3: 0}
    unknown = parse(startingPositionsByTimestamp='{"9": 5}', includeTimestamp="true")
    with pytest.raises(RecordingNotFound, match=r"startingPositionsByTimestamp names recording\(s\) \[9\]"):
        resolve_starting(unknown, reader_for(archive, unknown))


def test_a_stream_persists_the_resolved_positions_and_never_resolves_the_time_again(archive, tmp_path):
    options = parse(ReadMode.STREAM, recordingIds="2", startingTimestamp=str(T0_MS + 1000), includeTimestamp="true",
                    checkpointLocation=str(tmp_path))
    first = AeronArchiveStreamReader(options, driver_opener=lambda c: archive, executor_opener=lambda c: archive)
    offset = first.initialOffset()
    assert offset == {"2": first_at_or_after(archive.recordings[2].log, T0_MS + 1000)}
    replays = len(archive.replays)
    restarted = AeronArchiveStreamReader(options, driver_opener=lambda c: archive, executor_opener=lambda c: archive)
    assert restarted.initialOffset() == offset
    assert len(archive.replays) == replays


SBE_SCHEMA = Path(__file__).parents[1] / "sbe" / "market_data_v1.xml"


def sbe_trade_log(first_ms: int, count: int) -> SyntheticLog:
    """SBE Trade messages whose transactTime (ms here) is the time; reserved values carry none."""
    from aeron_spark.connector.sbe.schema_loading import parsed_schema

    schema = parsed_schema(SBE_SCHEMA.read_text(), str(SBE_SCHEMA))
    trade = schema.message("Trade")
    time_offset = schema.header.size + trade.field("transactTime").offset
    log = SyntheticLog(term_length=TERM, mtu=512)
    for index in range(count):
        payload = bytearray(schema.header.size + trade.block_length)
        struct.pack_into("<HHHH", payload, 0, trade.block_length, trade.template_id, schema.id, schema.version)
        struct.pack_into("<Q", payload, time_offset, first_ms + index)
        log.append(bytes(payload), reserved_value=0)
    return log


def test_an_sbe_time_field_places_a_time_inside_a_recording(tmp_path):
    archive = FakeArchive()
    log = sbe_trade_log(T0_MS, 2000)
    archive.add(1, log, CHANNEL).start_timestamp = T0_MS
    options = parse(recordingIds="1", startingTimestamp=str(T0_MS + 1234), **{
        "sbe.schema": str(SBE_SCHEMA), "sbe.messages": "Trade", "sbe.timestampField": "transactTime",
        "sbe.timestampUnit": "ms"})
    assert resolve_starting(options, reader_for(archive, options)).positions == {1: log.messages[1234].begin_position}
    with pytest.raises(ValueError, match=r"sbe.timestampField='nope'.*accepted: an integer root-block field"):
        parse(recordingIds="1", **{"sbe.schema": str(SBE_SCHEMA), "sbe.timestampField": "nope", "sbe.messages": "Trade"})
