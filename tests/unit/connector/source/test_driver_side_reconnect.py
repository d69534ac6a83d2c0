"""The streaming source's driver side across an archive restart: a request that times out on the
query's long-lived connection is made once more on a fresh one (micro_batch_stream._reconnecting),
and a second failure ends the call with the error."""

import random

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable

from aeron_spark.archive.client import ArchiveTimeoutError
from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from tests.support.fake_archive import FakeArchive
from tests.support.synthetic_log import SyntheticLog

CONTROL = "aeron:udp?endpoint=archive-host:8010"


class RestartedArchive(FakeArchive):
    """A connection whose archive went away: every request times out once ``gone``."""

    gone: bool = False

    def _check(self) -> None:
        if self.gone:
            raise ArchiveTimeoutError(f"no response to ListRecordingRequest within 10.0 s from {CONTROL} stream 10")

    def describe(self, recording_id):
        self._check()
        return super().describe(recording_id)

    def live_positions(self, recording_ids):
        self._check()
        return super().live_positions(recording_ids)


def log_of(count: int) -> SyntheticLog:
    rng = random.Random(7)
    log = SyntheticLog(term_length=64 * 1024, mtu=1408, session_id=100, stream_id=1001)
    for index in range(count):
        log.append(rng.randbytes(rng.randint(10, 300)), reserved_value=index)
    return log


def reader_over(connections: list[FakeArchive], opened: list[FakeArchive]) -> AeronArchiveStreamReader:
    options = SourceOptions.parse(CaseInsensitiveDict({"archive.controlChannel": CONTROL, "recordingIds": "1",
                                                       "startingPositions": "earliest"}), ReadMode.STREAM)

    def open_next(_connection):
        opened.append(connections.pop(0))
        return opened[-1]
    return AeronArchiveStreamReader(options, driver_opener=open_next, executor_opener=open_next)


def test_a_trigger_timing_out_on_a_restarted_archive_is_made_again_on_a_fresh_connection():
    log = log_of(40)
    first = RestartedArchive()
    recording = first.add(1, log)
    second = RestartedArchive(recordings=first.recordings)
    opened: list[FakeArchive] = []
    reader = reader_over([first, second], opened)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert reader.partitions(start, end)

    first.gone = True  # the archive was killed and restarted: the old session is dead
    log.append(b"published after the restart", reserved_value=40)
    later = reader.latestOffset(end, ReadAllAvailable())
    assert opened == [first, second] and first.closed and not second.closed
    assert later["1"] == recording.position  # what the restarted archive has, read on the new session
    assert reader.partitions(end, later)


def test_a_second_timeout_in_a_row_ends_the_call_with_the_error_naming_the_archive():
    first = RestartedArchive()
    first.add(1, log_of(10))
    second = RestartedArchive(recordings=first.recordings)
    opened: list[FakeArchive] = []
    reader = reader_over([first, second], opened)
    start = reader.initialOffset()
    first.gone = second.gone = True
    with pytest.raises(ArchiveTimeoutError, match="archive-host:8010"):
        reader.latestOffset(start, ReadAllAvailable())
    assert opened == [first, second] and first.closed
