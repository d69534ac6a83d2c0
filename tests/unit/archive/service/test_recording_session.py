"""RecordingSession, Recorder, rec-pos counters and the recorder/replayer I/O counters, with fakes.

A fake Image hands out blocks the way ``aeron_image_block_poll`` does (whole frames, never past a
term end, a PAD frame as a block of its own); the session writes them through the real
segment.SegmentWriter, so the files are checked byte for byte.
"""

from __future__ import annotations

import errno
import random
import struct
import threading

import pytest

from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.service.agent_runner import AgentRunner, BackoffIdleStrategy
from aeron_spark.archive.codecs.archive_io_counters import (
    RECORDER_MAX_WRITE_TIME_TYPE_ID, REPLAYER_TOTAL_READ_BYTES_TYPE_ID, archive_id_key, find_archive_counter)
from aeron_spark.archive.service.counters import IoCounters, archive_counter_label
from aeron_spark.archive.codecs.constants import ArchiveErrorCode
from aeron_spark.archive.service.recorder import Recorder
from aeron_spark.archive.service.recording_session import RecordingSession, RecordingState
from aeron_spark.archive.storage.segment import SegmentWriter

HEADER = struct.Struct("<iBBHiiiiq")
TERM = 64 * 1024
MTU = 1408


def aligned(n: int) -> int:
    return (n + 31) & ~31


def build_log(seed: int, size: int, start: int = 0) -> tuple[bytearray, list[int]]:
    """Frames from ``start`` as a publication appends them; returns (bytes, frame positions)."""
    rng = random.Random(seed)
    data, frames = bytearray(), []

    def frame(frame_type: int, flags: int, payload: bytes, length: int | None = None) -> None:
        position = start + len(data)
        length = 32 + len(payload) if length is None else length
        frames.append(position)
        data.extend(HEADER.pack(length, 0, flags, frame_type, position % TERM, 42, 7, position // TERM, 0))
        data.extend(payload + bytes(aligned(length) - 32 - len(payload)))

    while len(data) < size:
        payload = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 10, 200, 1500, 4000])))
        chunks = [payload[i:i + MTU - 32] for i in range(0, len(payload), MTU - 32)] or [b""]
        needed = sum(aligned(32 + len(c)) for c in chunks)
        offset = (start + len(data)) % TERM
        if offset + needed > TERM:
            frame(0, 0xC0, b"", TERM - offset)
        for index, chunk in enumerate(chunks):
            frame(1, (0x80 if index == 0 else 0) | (0x40 if index == len(chunks) - 1 else 0), chunk)
    return data, frames


class FakeImage:
    def __init__(self, data: bytes, frames: list[int], join_position: int = 0) -> None:
        self.data = bytes(data)
        self.frames = frames + [join_position + len(data)]
        self.join_position = join_position
        self.position = join_position
        self.available = join_position + len(data)  # what the publisher has written so far
        self.session_id = 42
        self.term_buffer_length = TERM
        self.source_identity = "aeron:ipc"
        self.eos = False
        self.closed = False
        self.blocks: list[int] = []

    @property
    def is_end_of_stream(self) -> bool:
        return self.eos and self.position >= self.join_position + len(self.data)

    @property
    def is_closed(self) -> bool:
        return self.closed

    def block_poll(self, handler, limit: int) -> int:
        start = self.position
        bound = min(start + limit, (start // TERM + 1) * TERM, self.available)
        end = start
        while end < bound:
            length, _, _, frame_type = HEADER.unpack_from(self.data, end - self.join_position)[:4]
            if frame_type == 0 and end > start:
                break  # padding comes as a block of its own
            if end + aligned(length) > bound:
                break
            end += aligned(length)
            if frame_type == 0:
                break
        if end == start:
            return 0
        handler(memoryview(self.data)[start - self.join_position:end - self.join_position], start,
                self.session_id, start // TERM)
        self.position = end
        self.blocks.append(end - start)
        return end - start


class FakeCounter:
    def __init__(self, counter_id: int = 12) -> None:
        self.counter_id = counter_id
        self.value = 0
        self.values: list[int] = []
        self.closed = False

    def __setattr__(self, name, value):
        if name == "value" and hasattr(self, "values"):
            self.values.append(value)
        object.__setattr__(self, name, value)

    def close(self) -> None:
        self.closed = True


class Listener:
    def __init__(self, progress_results: list[bool] | None = None) -> None:
        self.events: list[tuple] = []
        self.progress_results = list(progress_results or [])

    def on_recording_started(self, session) -> None:
        self.events.append(("started", session.recording_id, session.join_position))

    def on_recording_progress(self, session, position: int) -> bool:
        self.events.append(("progress", position))
        return self.progress_results.pop(0) if self.progress_results else True

    def on_recording_stopped(self, session) -> None:
        self.events.append(("stopped", session.stop_position, session.error))


def writer_factory(tmp_path, start: int = 0, segment_length: int = TERM):
    return lambda: SegmentWriter(tmp_path, 3, start, TERM, segment_length)


def expected_file_bytes(data: bytes, frames: list[int], start: int, base: int, length: int) -> bytes:
    """What a segment file holds: the frames verbatim, PAD frames as their header only."""
    out = bytearray(length)
    for position in frames:
        if not base <= position < base + length:
            continue
        offset = position - start
        frame_length, _, _, frame_type = HEADER.unpack_from(data, offset)[:4]
        size = 32 if frame_type == 0 else aligned(frame_length)
        out[position - base:position - base + size] = data[offset:offset + size]
    return bytes(out)


def test_records_every_block_into_segment_files(tmp_path):
    data, frames = build_log(1, 3 * TERM + 3000)
    image = FakeImage(data, frames)
    counter, listener = FakeCounter(), Listener()
    session = RecordingSession(recording_id=3, image=image, writer_factory=writer_factory(tmp_path),
                               position_counter=counter, listener=listener, file_io_max_length=4096)
    assert session.block_length_limit == 4096 and session.state is RecordingState.INIT
    session.do_work()
    assert session.state is RecordingState.RECORDING
    while image.position < len(data):
        assert session.do_work() > 0
        assert counter.value == image.position == session.recorded_position
    image.eos = True
    session.do_work()
    assert session.is_done and session.stop_position == len(data) and session.error is None
    assert counter.value == len(data) and not counter.closed  # stays open for followers
    assert listener.events[0] == ("started", 3, 0) and listener.events[-1] == ("stopped", len(data), None)
    assert [e[1] for e in listener.events if e[0] == "progress"] == sorted(set(counter.values) - {0})
    assert max(image.blocks) <= 4096
    for base in range(0, len(data), TERM):
        with open(tmp_path / f"3-{base}.rec", "rb") as file:
            assert file.read() == expected_file_bytes(data, frames, 0, base, TERM)
    session.close()
    assert counter.closed
    assert session.io_stats.total_bytes == len(data) and session.io_stats.max_time_ns > 0


def test_records_from_a_mid_term_join_position(tmp_path):
    join = TERM + 4096
    data, frames = build_log(2, TERM, start=join)
    image = FakeImage(data, frames, join_position=join)
    session = RecordingSession(recording_id=3, image=image,
                               writer_factory=writer_factory(tmp_path, start=join, segment_length=2 * TERM),
                               position_counter=FakeCounter())
    image.closed = True  # closed images are still drained first
    for _ in range(1000):
        if session.is_done:
            break
        session.do_work()
    assert session.stop_position == join + len(data)
    with open(tmp_path / f"3-{TERM}.rec", "rb") as file:
        assert file.read() == expected_file_bytes(data, frames, join, TERM, 2 * TERM)


def test_an_image_that_closes_under_the_poll_ends_the_recording_normally(tmp_path):
    data, frames = build_log(8, 3000)
    image = FakeImage(data, frames)

    def gone(handler, limit):
        image.closed = True
        raise RuntimeError("image session 42 (stream 7) is closed")

    session = RecordingSession(recording_id=3, image=image, writer_factory=writer_factory(tmp_path),
                               position_counter=FakeCounter())
    session.do_work()
    image.block_poll = gone
    session.do_work()
    assert session.is_done and session.error is None and "image closed" in session.stop_reason


def test_writer_creation_failure_stops_with_an_error(tmp_path):
    def broken():
        raise PermissionError(13, "Permission denied", str(tmp_path / "3-0.rec"))
    data, frames = build_log(3, 1000)
    counter, listener = FakeCounter(), Listener()
    session = RecordingSession(recording_id=3, image=FakeImage(data, frames), writer_factory=broken,
                               position_counter=counter, listener=listener)
    session.do_work()
    assert session.is_done and session.stop_position == 0
    assert session.error.code == ArchiveErrorCode.GENERIC and "Permission denied" in session.error.message
    assert listener.events == [("stopped", 0, session.error)]


def test_disk_full_ends_the_recording_with_storage_space(tmp_path):
    data, frames = build_log(4, 8000)

    class FullDisk:
        position = 0

        def append(self, block):
            if self.position >= 2048:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.position += len(block)

        def close(self):
            pass

    counter = FakeCounter()
    session = RecordingSession(recording_id=3, image=FakeImage(data, frames), writer_factory=FullDisk,
                               position_counter=counter, file_io_max_length=2048)
    for _ in range(10):
        session.do_work()
    assert session.is_done and session.error.code == ArchiveErrorCode.STORAGE_SPACE
    assert "No space left on device" in session.error.message
    assert 2048 <= session.stop_position == counter.value < len(data)  # what was written before the error


def test_abort_stops_at_the_next_cycle(tmp_path):
    data, frames = build_log(5, 20000)
    image = FakeImage(data, frames)
    session = RecordingSession(recording_id=3, image=image, writer_factory=writer_factory(tmp_path),
                               position_counter=FakeCounter(), file_io_max_length=4096)
    session.do_work()
    session.abort("stop recording")
    session.do_work()
    assert session.is_done and session.stop_reason == "stop recording"
    assert session.stop_position == image.position


def test_back_pressured_progress_is_offered_again(tmp_path):
    data, frames = build_log(6, 3000)
    image = FakeImage(data, frames)
    image.available = frames[2]
    listener = Listener(progress_results=[False])
    session = RecordingSession(recording_id=3, image=image, writer_factory=writer_factory(tmp_path),
                               position_counter=FakeCounter(), listener=listener)
    session.do_work()  # init + first poll: progress refused
    session.do_work()  # nothing new polled, the same progress is offered again
    progress = [e for e in listener.events if e[0] == "progress"]
    assert progress == [("progress", frames[2]), ("progress", frames[2])]
    session.do_work()
    assert len([e for e in listener.events if e[0] == "progress"]) == 2


def test_recorder_runs_sessions_publishes_counters_and_closes(tmp_path):
    counters = IoCounters(FakeCounter(1), FakeCounter(2), FakeCounter(3))
    recorder = Recorder(counters)
    images, counters_of = [], []
    for recording_id in (3, 4):
        data, frames = build_log(recording_id, 5000)
        image = FakeImage(data, frames)
        image.eos = True
        images.append(image)
        counters_of.append(FakeCounter())
        recorder.add_session(RecordingSession(
            recording_id=recording_id, image=image, position_counter=counters_of[-1],
            writer_factory=lambda rid=recording_id: SegmentWriter(tmp_path, rid, 0, TERM, TERM)))
    with AgentRunner([recorder], idle_strategy=BackoffIdleStrategy(max_park_ns=100_000)) as runner:
        for _ in range(2000):
            if recorder.session_count == 0:
                break
            threading.Event().wait(0.001)
        assert runner.is_running
    assert recorder.session_count == 0 and all(c.closed for c in counters_of)  # no listener: closed here
    assert counters.total_bytes.value == sum(len(i.data) for i in images)
    assert counters.max_time.closed  # the recorder owns its counters and closed them on close


def test_recorder_stop_recording_and_on_close(tmp_path):
    recorder = Recorder()
    listener = Listener()
    data, frames = build_log(7, 50000)
    sessions = []
    for recording_id in (3, 4):
        sessions.append(RecordingSession(
            recording_id=recording_id, image=FakeImage(data, frames), position_counter=FakeCounter(),
            writer_factory=lambda rid=recording_id: SegmentWriter(tmp_path, rid, 0, TERM, TERM),
            listener=listener, file_io_max_length=4096))
        recorder.add_session(sessions[-1])
    recorder.do_work()
    recorder.stop_recording(4)
    recorder.do_work()
    assert sessions[1].is_done and not sessions[0].is_done and recorder.session_count == 1
    recorder.on_close()
    assert sessions[0].is_done and [e[0] for e in listener.events].count("stopped") == 2
    with pytest.raises(RuntimeError, match="recorder is closed"):
        recorder.add_session(sessions[0])


def test_agent_runner_counts_errors_and_keeps_going():
    calls = []

    class Flaky:
        def do_work(self):
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("boom")
            return 0

        def on_close(self):
            calls.append("closed")

    errors = []
    runner = AgentRunner([Flaky()], error_handler=errors.append)
    runner.do_work()
    runner.do_work()
    assert runner.error_count == 1 and str(errors[0]) == "boom"
    runner.close()
    assert calls[-1] == "closed"
    with pytest.raises(ValueError, match="needs at least one agent"):
        AgentRunner([])


# -- rec-pos counters ----------------------------------------------------------------------------------------
def test_rec_pos_key_and_label_layout():
    key = recording_position.encode_key(7, -5, "127.0.0.1:40123", 0x1122334455667788)
    assert key == struct.pack("<qii", 7, -5, 15) + b"127.0.0.1:40123" + struct.pack("<q", 0x1122334455667788)
    assert len(key) == 24 + 15
    decoded = recording_position.decode_key(key + bytes(112 - len(key)))
    assert decoded == recording_position.RecordingPositionKey(7, -5, "127.0.0.1:40123", 0x1122334455667788)
    long_identity = "x" * 200
    assert len(recording_position.encode_key(1, 1, long_identity, 2)) == 112  # identity cut to 88
    assert recording_position.label(7, -5, 1001, "aeron:ipc", 9) == "rec-pos: 7 -5 1001 aeron:ipc - archiveId=9"
    long_label = recording_position.label(7, -5, 1001, "aeron:udp?endpoint=" + "a" * 500, 9)
    assert len(long_label) == 380 and long_label.endswith(" - archiveId=9")


class FakeCountersReader:
    def __init__(self) -> None:
        self.records: dict[int, tuple[int, bytes, int, int]] = {}  # id -> (type, key, value, state)

    def add(self, counter_id: int, type_id: int, key: bytes, value: int, state: int = 1) -> None:
        self.records[counter_id] = (type_id, key + bytes(112 - len(key)), value, state)

    def value(self, i): return self.records[i][2]
    def type_id(self, i): return self.records[i][0]
    def key(self, i): return self.records[i][1]
    def state(self, i): return self.records[i][3] if i in self.records else 0

    def find(self, type_id, predicate):
        return [i for i, (t, k, _, s) in sorted(self.records.items())
                if s == 1 and t == type_id and (predicate is None or predicate(k))]


def test_rec_pos_lookups():
    reader = FakeCountersReader()
    reader.add(0, 100, recording_position.encode_key(1, 11, "a", 5), 4096)
    reader.add(1, 100, recording_position.encode_key(2, 22, "bb", 6), 8192)
    reader.add(2, 100, recording_position.encode_key(2, 22, "bb", 5), 9000)
    reader.add(3, 101, recording_position.encode_key(3, 33, "c", 5), 1)
    assert recording_position.find_counter_id_by_recording(reader, 2) == 1
    assert recording_position.find_counter_id_by_recording(reader, 2, archive_id=5) == 2
    assert recording_position.find_counter_id_by_recording(reader, 3) == -1
    assert recording_position.find_counter_id_by_session(reader, 11, archive_id=5) == 0
    assert recording_position.find_counter_id_by_session(reader, 11, archive_id=6) == -1
    assert recording_position.get_recording_id(reader, 2) == 2
    assert recording_position.get_recording_id(reader, 3) == -1
    assert recording_position.get_source_identity(reader, 1) == "bb"
    assert recording_position.is_active(reader, 0, 1) and not recording_position.is_active(reader, 0, 2)
    assert recording_position.recorded_position(reader, 2) == 9000


def test_rec_pos_allocate_uses_the_client():
    class Client:
        def add_counter(self, type_id, key, label):
            self.args = (type_id, key, label)
            return FakeCounter()
    client = Client()
    recording_position.allocate(client, archive_id=3, recording_id=8, session_id=9, stream_id=10,
                                stripped_channel="aeron:ipc", source_identity="aeron:ipc")
    assert client.args == (100, recording_position.encode_key(8, 9, "aeron:ipc", 3),
                           "rec-pos: 8 9 10 aeron:ipc - archiveId=3")


def test_archive_io_counters():
    assert archive_id_key(-1) == b"\xff" * 8
    assert archive_counter_label(RECORDER_MAX_WRITE_TIME_TYPE_ID, 4) == \
        "archive-recorder max write time in ns - archiveId=4"
    with pytest.raises(ValueError, match="not a recorder/replayer I/O counter"):
        archive_counter_label(100, 1)

    class Client:
        def __init__(self):
            self.made = []

        def add_counter(self, type_id, key, label):
            self.made.append((type_id, key, label))
            return FakeCounter(len(self.made))
    client = Client()
    replayer = IoCounters.allocate_replayer(client, 4)
    assert [m[0] for m in client.made] == [108, 109, 110] and all(m[1] == archive_id_key(4) for m in client.made)
    reader = FakeCountersReader()
    reader.add(5, REPLAYER_TOTAL_READ_BYTES_TYPE_ID, archive_id_key(4), 0)
    assert find_archive_counter(reader, REPLAYER_TOTAL_READ_BYTES_TYPE_ID, 4) == 5
    assert find_archive_counter(reader, REPLAYER_TOTAL_READ_BYTES_TYPE_ID, 3) == -1
    replayer.close()
    assert replayer.total_bytes.closed
