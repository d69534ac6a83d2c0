import json
import logging
import os
import random

import pytest
from pyspark import cloudpickle
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

from aeron_spark.connector.source.admission_control import Backlog, TriggerDelay, cap_by_bytes
from aeron_spark.connector.source.batch_reader import AeronArchiveBatchReader, EmptyPartition
from aeron_spark.connector.source.data_loss import DataLossError
from aeron_spark.connector.source.initial_offset_store import InitialOffsetStore, InitialOffsetStoreError
from aeron_spark.connector.source.offset_reader import STOPPED_RECHECKS_PER_INTERVAL
from aeron_spark.connector.source import micro_batch_stream
from aeron_spark.connector.source.micro_batch_stream import UNCAPPED_BYTES, AeronArchiveStreamReader
from aeron_spark.connector.source.offsets import RecordingPositions
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayPartition, ReplayRange
from tests.support.fake_archive import FakeArchive
from tests.support.synthetic_log import SyntheticLog

TERM = 64 * 1024
CHANNEL = "aeron:udp?endpoint=localhost:40123"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_log(count, seed=0, session_id=100, stream_id=1001, size=(10, 3000)):
    rng = random.Random(seed)
    log = SyntheticLog(term_length=TERM, mtu=1408, session_id=session_id, stream_id=stream_id)
    for index in range(count):
        log.append(rng.randbytes(rng.randint(*size)), reserved_value=index)
    return log


def stream_reader(archive, checkpoint, clock=None, **options):
    raw = {"archive.controlChannel": "aeron:ipc", "checkpointLocation": str(checkpoint), **options}
    if "recordingIds" not in raw and "channel" not in raw:
        raw.update(channel="aeron:udp", streamId="1001")
    parsed = SourceOptions.parse(CaseInsensitiveDict(raw), ReadMode.STREAM)
    opener = lambda connection: archive  # noqa: E731
    return AeronArchiveStreamReader(parsed, driver_opener=opener, executor_opener=opener, clock_ms=clock or Clock())


def run_batch(reader, start, end):
    rows = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            rows += list(zip(batch.column("recording_id").to_pylist(), batch.column("position").to_pylist(),
                             batch.column("payload").to_pylist()))
    return rows


def messages_of(recording_id, log, start=0, end=None):
    end = log.position if end is None else end
    return [(recording_id, m.end_position, m.payload) for m in log.messages if start < m.end_position <= end]


# --- initial offsets ---------------------------------------------------------------------------


def test_initial_offsets_are_resolved_once_and_identical_across_a_restart(tmp_path):
    archive = FakeArchive()
    recording = archive.add(1, make_log(50), CHANNEL)
    first = stream_reader(archive, tmp_path, startingPositions="latest")
    offset = first.initialOffset()
    assert offset == {"1": recording.position}
    recording.log.append(b"more data arrives")
    assert first.initialOffset() == offset  # Spark asks twice per run
    restarted = stream_reader(archive, tmp_path, startingPositions="latest")
    assert restarted.initialOffset() == offset  # and again after a restart
    files = os.listdir(tmp_path / "aeron-archive-source")
    assert len(files) == 1 and files[0].startswith("initial-positions-")
    document = json.loads((tmp_path / "aeron-archive-source" / files[0]).read_text())
    assert document["positions"] == offset and document["source"]["channel"] == "aeron:udp"


def test_initial_offset_store_keys_by_source_and_rejects_corruption(tmp_path):
    calls = []

    def resolve():
        calls.append(1)
        return RecordingPositions({1: 64})

    store = InitialOffsetStore(f"file:{tmp_path}", '{"recordingIds": [1]}')
    assert store.get_or_create(resolve) == RecordingPositions({1: 64})
    assert InitialOffsetStore(str(tmp_path), '{"recordingIds": [1]}').get_or_create(resolve) == RecordingPositions({1: 64})
    assert len(calls) == 1
    other = InitialOffsetStore(str(tmp_path), '{"recordingIds": [2]}')
    assert other.read() is None
    (tmp_path / "aeron-archive-source" / store.file_name).write_text("{not json")
    with pytest.raises(InitialOffsetStoreError, match="corrupt"):
        store.read()


def test_earliest_and_specific_starting_positions(tmp_path):
    archive = FakeArchive()
    log = make_log(30)
    archive.add(1, log, CHANNEL)
    archive.add(2, make_log(5, seed=2), CHANNEL)
    middle = log.messages[10].end_position
    reader = stream_reader(archive, tmp_path, startingPositions=json.dumps({"1": middle}))
    assert reader.initialOffset() == {"1": middle, "2": 0}  # unnamed recordings start at their start
    with pytest.raises(LookupError, match="do not match channel"):
        stream_reader(archive, tmp_path / "b", startingPositions='{"9": 0}').initialOffset()


# --- latestOffset: tailing, discovery, admission control ----------------------------------------


def test_tailing_live_recordings_and_discovering_new_ones(tmp_path):
    archive = FakeArchive()
    clock = Clock()
    log = make_log(20)
    recording = archive.add(1, log, CHANNEL)
    reader = stream_reader(archive, tmp_path, clock, startingPositions="earliest", discoveryIntervalMs="5000")
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"1": log.position}
    assert run_batch(reader, start, end) == messages_of(1, log)
    # more data, and a new recording of the same stream: not listed until the interval has passed
    for index in range(5):
        log.append(bytes([index]) * 2000)
    log2 = make_log(7, seed=9)
    archive.add(2, log2, CHANNEL)
    archive.add(3, make_log(3, stream_id=999), CHANNEL)  # another stream: never matched
    listings = archive.calls["list_matching"]
    clock.now += 1000
    end2 = reader.latestOffset(end, reader.getDefaultReadLimit())
    assert end2 == {"1": log.position} and archive.calls["list_matching"] == listings
    clock.now += 5000
    end3 = reader.latestOffset(end2, reader.getDefaultReadLimit())
    assert end3 == {"1": log.position, "2": log2.position}
    assert run_batch(reader, end, end3) == messages_of(1, log, end["1"]) + messages_of(2, log2)
    # the recording stops: its stop position ends it; the live counter is not read again
    recording.active = False
    clock.now += 5000
    assert reader.latestOffset(end3, ReadAllAvailable()) == end3
    lives = archive.calls["live_position"]
    reader.latestOffset(end3, ReadAllAvailable())
    assert archive.calls["live_position"] == lives + 1  # only recording 2 is still live
    assert reader.reportLatestOffset() == end3


def test_live_position_cutting_a_message_delivers_it_in_the_next_batch(tmp_path):
    archive = FakeArchive()
    log = SyntheticLog(term_length=TERM, mtu=128)
    log.append(b"small")
    big = log.append(bytes(range(250)) * 4)
    recording = archive.add(1, log, CHANNEL)
    boundaries = log.frame_boundaries()
    recording.recorded_to = boundaries[boundaries.index(big.begin_position) + 3]  # recorder mid-message
    reader = stream_reader(archive, tmp_path, startingPositions="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert run_batch(reader, start, end) == [(1, log.messages[0].end_position, b"small")]
    recording.recorded_to = None
    end2 = reader.latestOffset(end, ReadAllAvailable())
    assert run_batch(reader, end, end2) == [(1, big.end_position, big.payload)]


def test_max_bytes_per_trigger_rounds_to_term_boundaries_and_always_progresses(tmp_path):
    archive = FakeArchive()
    log = make_log(400, size=(1000, 2000))  # ~600 KiB, about 9 terms
    archive.add(1, log, CHANNEL, active=False)
    reader = stream_reader(archive, tmp_path, startingPositions="earliest", maxBytesPerTrigger=str(2 * TERM + 100))
    assert reader.getDefaultReadLimit() == ReadMaxBytes(2 * TERM + 100)
    offset = reader.initialOffset()
    rows, ends = [], []
    while True:
        end = reader.latestOffset(offset, reader.getDefaultReadLimit())
        if end == offset:
            break
        ends.append(end["1"])
        rows += run_batch(reader, offset, end)
        offset = end
    assert ends[:-1] == [2 * TERM * (i + 1) for i in range(len(ends) - 1)]
    assert ends[-1] == log.position
    assert rows == messages_of(1, log)


def test_cap_by_bytes_shares_in_proportion_and_hands_out_leftovers():
    backlogs = [Backlog(1, 0, 8 * TERM, TERM), Backlog(2, 0, 2 * TERM, TERM), Backlog(3, 64, 96, TERM)]
    assert cap_by_bytes(backlogs, 100 * TERM) == {1: 8 * TERM, 2: 2 * TERM, 3: 96}
    ends = cap_by_bytes(backlogs, 5 * TERM)
    assert ends[1] == 4 * TERM and ends[2] == TERM  # 4:1 proportion
    assert sum(ends[b.recording_id] - b.start for b in backlogs) <= 5 * TERM
    # budget smaller than any step: one term of the first recording with data
    assert cap_by_bytes([Backlog(1, 100, 3 * TERM, TERM)], 10) == {1: TERM}
    # a backlog ending before the next term boundary is taken whole when it fits
    assert cap_by_bytes([Backlog(1, 0, 500, TERM), Backlog(2, 0, 5 * TERM, TERM)], TERM + 500) == {1: 500, 2: TERM}


def test_min_bytes_waits_until_enough_data_or_the_delay(tmp_path):
    archive = FakeArchive()
    clock = Clock()
    log = make_log(1, size=(100, 100))
    archive.add(1, log, CHANNEL)
    reader = stream_reader(archive, tmp_path, clock, startingPositions="earliest", minBytesPerTrigger="10k",
                           maxTriggerDelay="1m")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxBytes(UNCAPPED_BYTES)
    start = reader.initialOffset()
    assert reader.latestOffset(start, limit) == {"1": log.position}  # first trigger is immediate (Kafka)
    first_end = {"1": log.position}
    log.append(bytes(500))
    clock.now += 1000
    assert reader.latestOffset(first_end, limit) == first_end  # 500 B < 10 KiB: wait
    assert reader.latestOffset(first_end, ReadAllAvailable()) == {"1": log.position}  # Trigger.Once ignores it
    clock.now += 60_000
    assert reader.latestOffset(first_end, limit) == {"1": log.position}  # delay passed
    delay = TriggerDelay(100, 1000, clock, last_trigger_ms=clock.now)
    assert delay.should_delay(99) and not delay.should_delay(100)


def test_available_now_stops_at_the_target_and_ignores_later_recordings(tmp_path):
    archive = FakeArchive()
    log = make_log(300, size=(1000, 2000))
    archive.add(1, log, CHANNEL)
    reader = stream_reader(archive, tmp_path, startingPositions="earliest", maxBytesPerTrigger=str(TERM),
                           minBytesPerTrigger="1")
    offset = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    target = log.position
    log.append(b"after the target")
    archive.add(2, make_log(3, seed=4), CHANNEL)
    batches = 0
    while True:
        end = reader.latestOffset(offset, reader.getDefaultReadLimit())
        if end == offset:
            break
        batches += 1
        offset = end
    assert offset == {"1": target} and batches > 3


# --- data loss ----------------------------------------------------------------------------------


def test_purged_range_fails_clearly_or_is_skipped_with_a_warning(tmp_path, caplog):
    archive = FakeArchive()
    log = make_log(200, size=(1000, 2000))
    recording = archive.add(1, log, CHANNEL, active=False)
    reader = stream_reader(archive, tmp_path, startingPositions="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    recording.start_position = 2 * TERM  # segments detached/purged before the batch ran
    with pytest.raises(DataLossError, match=r"\[0, 131072\) was purged or detached.*failOnDataLoss=false"):
        run_batch(reader, start, end)
    lenient = stream_reader(archive, tmp_path / "lenient", startingPositions="earliest", failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="aeron_spark.connector"):
        rows = run_batch(lenient, start, end)
    assert rows == messages_of(1, log, 2 * TERM)
    assert "skipped (failOnDataLoss=false)" in caplog.text


def test_truncated_and_deleted_recordings(tmp_path, caplog):
    archive = FakeArchive()
    log = make_log(100)
    recording = archive.add(1, log, CHANNEL, active=False)
    reader = stream_reader(archive, tmp_path, startingPositions="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    cut = log.messages[40].end_position
    recording.recorded_to = cut  # truncated below the batch end
    with pytest.raises(DataLossError, match="was truncated"):
        run_batch(reader, start, end)
    del archive.recordings[1]  # a stopped recording deleted: found when its range is read
    with pytest.raises(DataLossError, match="no longer in the archive"):
        run_batch(reader, start, end)
    live = archive.add(2, make_log(10), CHANNEL)
    live_reader = stream_reader(archive, tmp_path / "live", recordingIds="2", startingPositions="earliest")
    live_start = live_reader.initialOffset()
    live_end = live_reader.latestOffset(live_start, ReadAllAvailable())
    del archive.recordings[2]  # a live recording deleted: found by latestOffset
    with pytest.raises(DataLossError, match="recording 2 is no longer in the archive"):
        live_reader.latestOffset(live_end, ReadAllAvailable())
    lenient = stream_reader(archive, tmp_path / "x", recordingIds="2", failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="aeron_spark.connector"):
        assert lenient.latestOffset(live_end, ReadAllAvailable()) == {}
        assert list(lenient.read(ReplayPartition(ReplayRange(2, 0, 640)))) == []
    assert live.recording_id == 2 and "skipped" in caplog.text


# --- pickling and batch reads -------------------------------------------------------------------


def test_executor_copy_carries_options_but_no_connection(tmp_path):
    archive = FakeArchive()
    archive.add(1, make_log(3), CHANNEL)
    reader = stream_reader(archive, tmp_path, startingPositions="earliest")
    reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert reader._offset_reader is not None
    copy = cloudpickle.loads(cloudpickle.dumps(reader))
    assert copy._offset_reader is None and copy.options == reader.options
    assert list(copy.read(EmptyPartition())) == []


def test_batch_reader_reads_between_starting_and_ending_positions():
    archive = FakeArchive()
    log1, log2 = make_log(60, seed=1), make_log(40, seed=2, session_id=7)
    archive.add(1, log1, CHANNEL, active=False)
    archive.add(2, log2, CHANNEL)
    raw = {"archive.controlChannel": "aeron:ipc", "recordingIds": "1,2", "maxBytesPerPartition": "16k",
           "endingPositions": json.dumps({"1": log1.messages[30].end_position}), "includeTimestamp": "true"}
    options = SourceOptions.parse(CaseInsensitiveDict(raw), ReadMode.BATCH)
    reader = AeronArchiveBatchReader(options, driver_opener=lambda c: archive, executor_opener=lambda c: archive)
    partitions = reader.partitions()
    assert len(partitions) > 2
    rows, sessions = [], set()
    for partition in partitions:
        for batch in reader.read(partition):
            assert "timestamp" in batch.schema.names
            sessions |= {(r, s) for r, s in zip(batch.column("recording_id").to_pylist(),
                                                batch.column("session_id").to_pylist())}
            rows += list(zip(batch.column("recording_id").to_pylist(), batch.column("position").to_pylist(),
                             batch.column("payload").to_pylist()))
    assert rows == messages_of(1, log1, 0, log1.messages[30].end_position) + messages_of(2, log2)
    assert sessions == {(1, 100), (2, 7)}


def test_batch_ending_positions_must_be_recorded_already():
    archive = FakeArchive()
    log = make_log(10)
    archive.add(1, log, CHANNEL)  # active
    archive.add(2, make_log(10, seed=3), CHANNEL, active=False)
    for ending, message in (({"1": log.position + 64}, "beyond what is recorded"),
                            ({"2": 1 << 30}, "after its stop position")):
        raw = {"archive.controlChannel": "aeron:ipc", "recordingIds": "1,2", "endingPositions": json.dumps(ending)}
        options = SourceOptions.parse(CaseInsensitiveDict(raw), ReadMode.BATCH)
        reader = AeronArchiveBatchReader(options, driver_opener=lambda c: archive)
        with pytest.raises(ValueError, match=message):
            reader.partitions()


def test_a_stopped_recording_that_is_extended_later_is_read_on(tmp_path):
    archive = FakeArchive()
    clock = Clock()
    log = make_log(10)
    recording = archive.add(1, log, CHANNEL, active=False)
    reader = stream_reader(archive, tmp_path, clock, recordingIds="1", startingPositions="earliest",
                           discoveryIntervalMs="2000")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"1": log.position}
    describes = archive.calls["describe"]
    reader.latestOffset(end, ReadAllAvailable())
    assert archive.calls["describe"] == describes  # stopped: not described on every call
    # extended: active again and growing; seen once the discovery interval has passed
    for index in range(4):
        log.append(bytes([index]) * 500)
    recording.active = True
    clock.now += 2000
    extended = reader.latestOffset(end, ReadAllAvailable())
    assert extended == {"1": log.position}
    assert run_batch(reader, end, extended) == messages_of(1, log, end["1"])


def test_stopped_recordings_are_described_again_a_bounded_number_per_interval(tmp_path):
    archive = FakeArchive()
    clock = Clock()
    log = make_log(3)
    stopped = 3 * STOPPED_RECHECKS_PER_INTERVAL
    recordings = [archive.add(rid, log, CHANNEL, active=False) for rid in range(stopped)]
    reader = stream_reader(archive, tmp_path, clock, startingPositions="earliest", discoveryIntervalMs="1000")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    described = []
    for _ in range(3):  # three intervals: each describes at most the budget, and all get their turn
        clock.now += 1000
        before = archive.calls.get("describe", 0)
        end = reader.latestOffset(end, ReadAllAvailable())
        reader.latestOffset(end, ReadAllAvailable())  # a second trigger in the same interval: none
        described.append(archive.calls.get("describe", 0) - before)
    assert described == [STOPPED_RECHECKS_PER_INTERVAL] * 3
    # an extension is seen once the recording's turn comes
    for index in range(3):
        log.append(bytes([index]) * 300)
    recordings[-1].active = True
    for _ in range(3):
        clock.now += 1000
        end = reader.latestOffset(end, ReadAllAvailable())
    assert end[str(stopped - 1)] == log.position


def test_a_trigger_costs_what_changed_offsets_parsed_once_as_they_come_back_from_spark(tmp_path, monkeypatch):
    archive = FakeArchive()
    logs = {rid: make_log(3, seed=rid, session_id=rid) for rid in range(200)}
    for rid, log in logs.items():
        archive.add(rid, log, CHANNEL)
    reader = stream_reader(archive, tmp_path, startingPositions="earliest", discoveryIntervalMs="600000")
    from_offset, backlogs = RecordingPositions.from_offset, []
    parsed = []
    monkeypatch.setattr(RecordingPositions, "from_offset",
                        classmethod(lambda cls, *args: parsed.append(1) or from_offset(*args)))
    monkeypatch.setattr(micro_batch_stream, "Backlog", lambda *args: backlogs.append(args) or Backlog(*args))
    start = json.loads(json.dumps(reader.initialOffset()))  # as Spark hands offsets over: JSON
    for trigger in range(4):
        changed = {3 * trigger, 100 + trigger}
        for rid in changed:
            logs[rid].append(b"news %d" % trigger)
        parsed.clear(), backlogs.clear()
        end = json.loads(json.dumps(reader.latestOffset(start, ReadAllAvailable())))
        assert end == {str(rid): log.position for rid, log in logs.items()}
        rows = run_batch(reader, json.loads(json.dumps(start)), end)
        assert {row[0] for row in rows} == (set(logs) if trigger == 0 else changed)
        assert len(parsed) == (1 if trigger == 0 else 0)  # the first start only: then known offsets
        assert len(backlogs) == (200 if trigger == 0 else 2)
        start = end
    assert reader.reportLatestOffset() == end
    with pytest.raises(ValueError, match="start offset: position 5 of recording 1 is not a frame boundary"):
        reader.latestOffset({**end, "1": 5}, ReadAllAvailable())  # an offset not seen is validated


def test_recording_positions_updated_keeps_order_and_its_offset_dict():
    positions = RecordingPositions({9: 64, 2: 32, 5: 0})
    offset = positions.to_offset()
    assert list(offset) == ["2", "5", "9"] and positions.to_offset() is offset
    moved = positions.updated({5: 96, 9: 64})
    assert moved == RecordingPositions({2: 32, 5: 96, 9: 64}) and list(moved) == [2, 5, 9]
    assert moved.to_offset() == {"2": 32, "5": 96, "9": 64} and offset == {"2": 32, "5": 0, "9": 64}
    assert moved.changed_since(positions) == RecordingPositions({5: 96})
    grown = moved.updated({3: 0})
    assert list(grown) == [2, 3, 5, 9] and grown.to_offset() == {"2": 32, "3": 0, "5": 96, "9": 64}
    assert grown.changed_since(positions) == RecordingPositions({3: 0, 5: 96})  # not derived from it
    assert positions.updated({2: 32}) is positions and positions.without({7}) is positions
    assert positions.without({2}).to_offset() == {"5": 0, "9": 64}


def test_batch_planning_keeps_its_cached_connection_and_retries_once_on_a_fresh_one():
    archive = FakeArchive()
    archive.add(1, make_log(10), CHANNEL, active=False)

    class Stale:
        def describe(self, recording_id):
            raise RuntimeError("control session closed by the archive")

        def close(self):
            raise AssertionError("a cached connection is not closed by planning")

    opened, forgotten = [Stale(), archive], []
    options = SourceOptions.parse(CaseInsensitiveDict({"archive.controlChannel": "aeron:ipc", "recordingIds": "1"}),
                                  ReadMode.BATCH)
    reader = AeronArchiveBatchReader(options, driver_opener=lambda c: opened.pop(0),
                                     forget_driver_connection=forgotten.append)
    assert len(reader.partitions()) == 1
    assert forgotten == [options.connection] and not opened
    # a wrong request is not retried
    bad = AeronArchiveBatchReader(SourceOptions.parse(CaseInsensitiveDict(
        {"archive.controlChannel": "aeron:ipc", "recordingIds": "7"}), ReadMode.BATCH),
        driver_opener=lambda c: archive, forget_driver_connection=forgotten.append)
    with pytest.raises(LookupError):
        bad.partitions()
    assert len(forgotten) == 1
