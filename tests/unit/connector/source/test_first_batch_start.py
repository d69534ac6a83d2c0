"""A stream without the source's checkpointLocation: batch 0's start travels in its logged end.

Spark's side is played out by hand: each offset goes through json.dumps / json.loads (as Spark
logs and hands it back), initialOffset() is asked again for batch 0's start, and a restart is a
new reader given the logged end.
"""

import json
import logging
import random

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable

from aeron_spark.connector.source.data_loss import DataLossError
from aeron_spark.connector.source.first_batch_start import (
    RESOLVED_START_KEY,
    clamped_to_end,
    end_carrying_start,
    parse_end,
)
from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader
from aeron_spark.connector.source.offsets import OffsetFormatError, RecordingPositions
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from tests.support.fake_archive import FakeArchive
from tests.support.synthetic_log import SyntheticLog

TERM = 64 * 1024
CHANNEL = "aeron:udp?endpoint=localhost:40123"
T0_MS = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_log(count, seed=0, size=(10, 3000), first_ms=None):
    rng = random.Random(seed)
    log = SyntheticLog(term_length=TERM, mtu=1408, session_id=100, stream_id=1001)
    for index in range(count):
        stamp = (first_ms + index) * 1_000_000 if first_ms is not None else index
        log.append(rng.randbytes(rng.randint(*size)), reserved_value=stamp)
    return log


def reader_without_checkpoint(archive, clock=None, **options):
    raw = {"archive.controlChannel": "aeron:ipc", **options}
    if "recordingIds" not in raw and "channel" not in raw:
        raw.update(channel="aeron:udp", streamId="1001")
    parsed = SourceOptions.parse(CaseInsensitiveDict(raw), ReadMode.STREAM)
    assert parsed.checkpoint_location is None
    opener = lambda connection: archive  # noqa: E731
    return AeronArchiveStreamReader(parsed, driver_opener=opener, executor_opener=opener, clock_ms=clock or Clock())


def logged(offset):
    """What Spark hands back: the offset through its JSON log."""
    return json.loads(json.dumps(offset))


def run_batch(reader, start, end):
    rows = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            rows += list(zip(batch.column("recording_id").to_pylist(), batch.column("position").to_pylist()))
    return rows


def positions_of(recording_id, log, after=-1, up_to=None):
    up_to = log.position if up_to is None else up_to
    return [(recording_id, m.end_position) for m in log.messages if after < m.end_position <= up_to]


def test_read_stream_needs_no_checkpoint_location_and_the_initial_offset_is_symbolic():
    archive = FakeArchive()
    archive.add(1, make_log(10), CHANNEL)
    reader = reader_without_checkpoint(archive, startingPositions="latest")
    assert reader.initialOffset() == {"start": "latest"}
    assert reader.initialOffset() == {"start": "latest"}
    assert archive.calls == {}  # resolving nothing: no archive request
    assert reader_without_checkpoint(archive, startingPositions='{"1": 64}').initialOffset() == {"start": '{"1": 64}'}
    timed = reader_without_checkpoint(archive, recordingIds="1", startingTimestamp=str(T0_MS), includeTimestamp="true")
    assert timed.initialOffset() == {"start": f"startingTimestamp={T0_MS}"}


def test_latest_makes_batch_0_empty_and_a_restart_before_its_commit_reads_the_same_nothing():
    archive = FakeArchive()
    log = make_log(40)
    archive.add(1, log, CHANNEL)
    reader = reader_without_checkpoint(archive, startingPositions="latest")
    start = reader.initialOffset()
    end0 = logged(reader.latestOffset(start, ReadAllAvailable()))
    at_start = log.position
    assert end0 == {"1": at_start, RESOLVED_START_KEY: {"1": at_start}}
    log.append(b"published while batch 0 runs")
    assert run_batch(reader, reader.initialOffset(), end0) == []
    # the query dies before commits/0; more arrives; the restart runs batch 0 again from offsets/0
    log.append(b"published while the query is down")
    restarted = reader_without_checkpoint(archive, startingPositions="latest")
    assert run_batch(restarted, restarted.initialOffset(), end0) == []
    end1 = logged(restarted.latestOffset(end0, ReadAllAvailable()))
    assert end1 == {"1": log.position}
    assert run_batch(restarted, end0, end1) == positions_of(1, log, after=at_start)  # no gap, no duplicate


def test_earliest_batch_0_is_the_same_after_a_restart_and_a_purge_in_between_is_data_loss(caplog):
    archive = FakeArchive()
    log = make_log(200, size=(1000, 2000))
    recording = archive.add(1, log, CHANNEL)
    reader = reader_without_checkpoint(archive, startingPositions="earliest")
    end0 = logged(reader.latestOffset(reader.initialOffset(), ReadAllAvailable()))
    assert end0 == {"1": log.position, RESOLVED_START_KEY: {"1": 0}}
    rows = run_batch(reader, reader.initialOffset(), end0)
    assert rows == positions_of(1, log)
    restarted = reader_without_checkpoint(archive, startingPositions="earliest")
    assert run_batch(restarted, restarted.initialOffset(), end0) == rows
    recording.start_position = 2 * TERM  # purged before batch 0 ran again: the logged start says so
    with pytest.raises(DataLossError, match=r"\[0, 131072\) was purged or detached"):
        run_batch(reader_without_checkpoint(archive, startingPositions="earliest"), {"start": "earliest"}, end0)
    lenient = reader_without_checkpoint(archive, startingPositions="earliest", failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="aeron_spark.connector"):
        assert run_batch(lenient, lenient.initialOffset(), end0) == positions_of(1, log, after=2 * TERM)


def test_explicit_positions_with_markers_and_a_recording_discovered_later():
    archive = FakeArchive()
    clock = Clock()
    first, second = make_log(30), make_log(20, seed=3)
    archive.add(1, first, CHANNEL)
    archive.add(2, second, CHANNEL)
    middle = first.messages[10].end_position
    options = dict(startingPositions=json.dumps({"1": middle, "2": -1}), discoveryIntervalMs="100")
    reader = reader_without_checkpoint(archive, clock, **options)
    end0 = logged(reader.latestOffset(reader.initialOffset(), ReadAllAvailable()))
    assert end0[RESOLVED_START_KEY] == {"1": middle, "2": second.position}
    second.append(b"after the start")
    restarted = reader_without_checkpoint(archive, clock, **options)
    assert run_batch(restarted, restarted.initialOffset(), end0) == positions_of(1, first, after=middle)
    third = make_log(5, seed=7)
    archive.add(3, third, CHANNEL)  # a new recording of the channel: read from its start
    clock.now += 1000
    end1 = logged(restarted.latestOffset(end0, ReadAllAvailable()))
    assert end1 == {"1": first.position, "2": second.position, "3": third.position}
    assert run_batch(restarted, end0, end1) == (positions_of(2, second, after=end0["2"]) + positions_of(3, third))


def test_a_starting_time_is_resolved_once_and_carried():
    archive = FakeArchive()
    log = make_log(300, first_ms=T0_MS)
    archive.add(1, log, CHANNEL).start_timestamp = T0_MS
    options = dict(recordingIds="1", startingTimestamp=str(T0_MS + 150), includeTimestamp="true")
    reader = reader_without_checkpoint(archive, **options)
    end0 = logged(reader.latestOffset(reader.initialOffset(), ReadAllAvailable()))
    replays = len(archive.replays)
    restarted = reader_without_checkpoint(archive, **options)
    rows = run_batch(restarted, restarted.initialOffset(), end0)
    assert rows == positions_of(1, log, after=log.messages[149].end_position)
    assert len(archive.replays) - replays == len(restarted.partitions(restarted.initialOffset(), end0))  # no bisection


def test_a_delayed_first_trigger_gives_an_empty_batch_0_and_no_extra_batch_after_it():
    archive = FakeArchive()
    clock = Clock()
    log = make_log(1, size=(100, 100))
    archive.add(1, log, CHANNEL)
    reader = reader_without_checkpoint(archive, clock, startingPositions="latest", minBytesPerTrigger="10k",
                                       maxTriggerDelay="1m")
    limit = reader.getDefaultReadLimit()
    end0 = logged(reader.latestOffset(reader.initialOffset(), limit))
    assert end0 == {"1": log.position, RESOLVED_START_KEY: {"1": log.position}}
    log.append(bytes(500))
    clock.now += 1000
    assert reader.latestOffset(end0, limit) == end0  # waiting: the same offset, so Spark runs no batch
    assert reader.latestOffset(end0, ReadAllAvailable()) == {"1": log.position}


def test_available_now_from_a_symbolic_start_stops_at_the_target():
    archive = FakeArchive()
    log = make_log(300, size=(1000, 2000))
    archive.add(1, log, CHANNEL)
    reader = reader_without_checkpoint(archive, startingPositions="earliest", maxBytesPerTrigger=str(TERM),
                                       minBytesPerTrigger="1")
    reader.prepareForTriggerAvailableNow()
    target = log.position
    log.append(b"after the target")
    start = reader.initialOffset()
    offset = logged(reader.latestOffset(start, reader.getDefaultReadLimit()))
    rows = run_batch(reader, start, offset)
    while True:
        end = logged(reader.latestOffset(offset, reader.getDefaultReadLimit()))
        if end == offset:
            break
        rows += run_batch(reader, offset, end)
        offset = end
    assert offset == {"1": target}
    assert rows == positions_of(1, log, up_to=target)


def test_a_batch_0_logged_without_its_start_is_resolved_again_within_its_end():
    """offsets/0 written while the start was kept under the source's checkpointLocation."""
    archive = FakeArchive()
    log = make_log(50)
    archive.add(1, log, CHANNEL)
    end0 = {"1": log.messages[20].end_position}
    latest = reader_without_checkpoint(archive, startingPositions="latest")
    assert run_batch(latest, latest.initialOffset(), end0) == []
    earliest = reader_without_checkpoint(archive, startingPositions="earliest")
    assert run_batch(earliest, earliest.initialOffset(), end0) == positions_of(1, log, up_to=end0["1"])


def test_offset_parsing_and_its_errors():
    start, end = RecordingPositions({1: 64, 2: 0}), RecordingPositions({1: 128, 2: 0, 3: 32})
    carried = end_carrying_start(end, start)
    assert list(carried) == ["1", "2", "3", RESOLVED_START_KEY]
    assert parse_end(logged(carried), "end offset") == (end, start)
    assert parse_end({"1": 64}, "end offset") == (RecordingPositions({1: 64}), None)
    with pytest.raises(OffsetFormatError, match="resolvedStart must be a JSON object"):
        parse_end({"1": 64, RESOLVED_START_KEY: 3}, "end offset")
    with pytest.raises(OffsetFormatError, match="end offset resolvedStart: position 5 of recording 1"):
        parse_end({"1": 64, RESOLVED_START_KEY: {"1": 5}}, "end offset")
    with pytest.raises(OffsetFormatError, match="is a symbolic start"):
        parse_end({"start": "latest"}, "end offset")
    assert clamped_to_end(RecordingPositions({1: 512, 2: 0, 4: 96}), end) == RecordingPositions({1: 128, 2: 0, 4: 96})


def test_checkpoint_location_given_to_the_source_keeps_the_stored_start(tmp_path):
    archive = FakeArchive()
    log = make_log(10)
    archive.add(1, log, CHANNEL)
    raw = {"archive.controlChannel": "aeron:ipc", "channel": "aeron:udp", "streamId": "1001",
           "startingPositions": "latest", "checkpointLocation": str(tmp_path)}
    options = SourceOptions.parse(CaseInsensitiveDict(raw), ReadMode.STREAM)
    reader = AeronArchiveStreamReader(options, driver_opener=lambda c: archive, executor_opener=lambda c: archive)
    assert reader.initialOffset() == {"1": log.position}
    assert (tmp_path / "aeron-archive-source").is_dir()
