"""Time-based positions end to end: the REAL sidecar records IPC publications of 64 KiB terms
whose messages carry their time in the reserved value (epoch ns, the includeTimestamp
convention); Spark starts (and ends) reads at times inside those recordings.

Message ``i`` of a recording is stamped ``base + i * STEP_NS``, ``base`` taken when the first
message is offered (after the archive started the recording, so the descriptor's start timestamp
is before every message time). Recordings stay active: their descriptors then cover any later
time, which is what makes the source look inside them.
"""

from __future__ import annotations

import contextlib
import json
import time

import pytest

from aeron_spark.connector.source.archive_access import open_archive
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.timestamp_resolution import resolve_starting
from tests.spark.source_fixtures import (
    TERM_LENGTH,
    numbered_payloads,
    progress_offsets,
    rows_of,
    run_available_now,
)

pytestmark = pytest.mark.integration

STEP_NS = 10_000  # 10 µs between messages: 1200 messages span 12 ms
MESSAGES = 1200   # ~2.4 MB of mixed sizes (4 B .. 8000 B, fragmented ones too): ~37 terms of 64 KiB


class Stamps:
    """reserved_value(i) = base + i * STEP_NS, base = the wall clock at the first message."""

    def __init__(self) -> None:
        self.base: int | None = None

    def __call__(self, index: int) -> int:
        if self.base is None:
            self.base = time.time_ns()
        return self.base + index * STEP_NS

    def ms_inside(self, index: int) -> int:
        """A time in ms (rounded up) that lies between message ``index`` - ~100 and ``index``."""
        return -(-(self.base + index * STEP_NS) // 1_000_000)


@pytest.fixture(scope="module")
def stamped(archive):
    """Two active recordings of stamped messages (each recorded on its own stream)."""
    recordings = []
    for _ in range(2):
        stamps = Stamps()
        recorded, _ = archive.record(numbered_payloads(0, MESSAGES), reserved_value=stamps)
        assert recorded.end > 30 * TERM_LENGTH
        recordings.append((recorded, stamps))
    return recordings


def rows_from(recorded, stamps, time_ms):
    """The rows a read starting at time_ms must give: messages stamped at or after it."""
    first = next(i for i in range(MESSAGES) if stamps(i) >= time_ms * 1_000_000)
    after = recorded.messages[first - 1][0] if first > 0 else -1
    return recorded.rows(after=after), first


def test_a_stream_started_at_a_time_in_the_middle_of_a_recording_gets_exactly_the_messages_from_there(
        spark_source, archive, stamped, tmp_path):
    recorded, stamps = stamped[0]
    time_ms = stamps.ms_inside(MESSAGES // 2)
    expected, first = rows_from(recorded, stamps, time_ms)
    assert 0 < first < MESSAGES
    query = run_available_now(spark_source, archive, tmp_path / "chk", query_name="from_time",
                              recordingIds=recorded.recording_id, startingTimestamp=time_ms,
                              includeTimestamp="true")
    assert rows_of(spark_source.table("from_time")) == expected
    # The resolved start is checkpointed as a position: where message `first` begins.
    (stored,) = (tmp_path / "chk" / "aeron-archive-source").glob("initial-positions-*.json")
    start = json.loads(stored.read_text())["positions"][str(recorded.recording_id)]
    assert recorded.messages[first - 1][0] <= start < recorded.messages[first][0]
    _, end = progress_offsets(query.recentProgress[0])
    assert end == {recorded.recording_id: recorded.end}
    timestamps = [row.timestamp for row in spark_source.table("from_time").select("timestamp").collect()]
    assert min(timestamps).timestamp() * 1000 >= time_ms - 1


def test_starting_positions_by_timestamp_for_two_recordings(spark_source, archive, stamped):
    (first_recording, first_stamps), (second_recording, second_stamps) = stamped
    first_ms = first_stamps.ms_inside(300)
    second_ms = second_stamps.ms_inside(900)
    by_time = {str(first_recording.recording_id): first_ms, str(second_recording.recording_id): second_ms}
    df = (spark_source.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
          .option("recordingIds", f"{first_recording.recording_id},{second_recording.recording_id}")
          .option("startingPositionsByTimestamp", json.dumps(by_time))
          .option("includeTimestamp", "true").load())
    expected = rows_from(first_recording, first_stamps, first_ms)[0] + rows_from(
        second_recording, second_stamps, second_ms)[0]
    assert rows_of(df) == sorted(expected)


def test_between_a_starting_and_an_ending_time(spark_source, archive, stamped):
    recorded, stamps = stamped[1]
    start_ms, end_ms = stamps.ms_inside(200), stamps.ms_inside(700)
    df = (spark_source.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
          .option("recordingIds", str(recorded.recording_id)).option("includeTimestamp", "true")
          .option("startingTimestamp", str(start_ms)).option("endingTimestamp", str(end_ms)).load())
    from_start, _ = rows_from(recorded, stamps, start_ms)
    _, first_not_read = rows_from(recorded, stamps, end_ms)
    assert rows_of(df) == [row for row in from_start if row[1] <= recorded.messages[first_not_read - 1][0]]


def test_no_message_at_the_time_fails_by_default_and_starts_at_latest_with_the_latest_strategy(
        spark_source, archive, stamped):
    recorded, _ = stamped[0]
    in_an_hour = str(int(time.time() * 1000) + 3_600_000)  # the recording is active: it covers that time

    def read(**options):
        reader = (spark_source.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
                  .option("recordingIds", str(recorded.recording_id)).option("includeTimestamp", "true")
                  .option("startingTimestamp", in_an_hour))
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load()

    with pytest.raises(Exception, match=f"recording {recorded.recording_id} has no message at or after"):
        read().collect()
    assert read(startingPositionsByTimestampStrategy="latest").collect() == []
    with pytest.raises(Exception, match="set includeTimestamp=true"):
        (spark_source.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
         .option("recordingIds", str(recorded.recording_id)).option("startingTimestamp", in_an_hour).load().collect())


class CountingAccess:
    """The real ArchiveAccess, counting replays and the bytes the resolution consumed."""

    def __init__(self, access) -> None:
        self._access = access
        self.replays = 0
        self.bytes_read = 0

    def __getattr__(self, name):
        return getattr(self._access, name)

    @contextlib.contextmanager
    def replay(self, recording_id, start, end, settings):
        self.replays += 1
        with self._access.replay(recording_id, start, end, settings) as blocks:
            def counted():
                for position, block in blocks:
                    self.bytes_read += len(block)
                    yield position, block
            yield counted()


def test_the_real_archive_is_bisected_with_a_logarithmic_number_of_short_replays(archive, stamped):
    recorded, stamps = stamped[0]
    time_ms = stamps.ms_inside(MESSAGES // 3)
    options = SourceOptions.parse({"archive.dir": archive.archive_dir, "recordingIds": str(recorded.recording_id),
                                   "startingTimestamp": str(time_ms), "includeTimestamp": "true"}, ReadMode.BATCH)
    access = CountingAccess(open_archive(options.connection))
    reader = OffsetReader(options, lambda: access)
    try:
        positions = resolve_starting(options, reader)
    finally:
        reader.close()
    _, first = rows_from(recorded, stamps, time_ms)
    assert recorded.messages[first - 1][0] <= positions[recorded.recording_id] < recorded.messages[first][0]
    terms = -(-recorded.end // TERM_LENGTH)
    assert access.replays <= terms.bit_length() + 2
    assert access.bytes_read < recorded.end / 4
