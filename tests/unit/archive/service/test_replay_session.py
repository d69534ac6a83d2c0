"""ReplaySession, plan_replay, prepare_block, limit counters and the Replayer, with fakes.

Recordings are built frame by frame the way a publication appends them (fragmentation at
mtu - 32, PAD frames at term ends), written into real segment files with segment.SegmentWriter,
and replayed into a fake exclusive publication that re-assembles its term log exactly as
offer_block / append_padding would. The replayed log must equal the recording byte for byte,
except the session and stream ids, which are the publication's.
"""

from __future__ import annotations

import dataclasses
import random
import struct

import numpy as np
import pytest

from aeron_spark.archive.service.counters import IoStats
from aeron_spark.archive.storage.checksum import CRC32C
from aeron_spark.archive.codecs.constants import ArchiveErrorCode
from aeron_spark.archive.service.limit_counter import (
    RECORD_ALLOCATED, RECORD_RECLAIMED, FixedLimit, LimitCounterError, LimitCounterReader)
from aeron_spark.archive.service.replay_blocks import ReplayFrameError, prepare_block
from aeron_spark.archive.service.replay_plan import (
    INT64_MAX, RecordingLayout, ReplayPlan, ReplayRequestError, make_replay_session_id, plan_replay)
from aeron_spark.archive.service.replay_session import (
    BACK_PRESSURED, NOT_CONNECTED, ReplaySession, ReplayState)
from aeron_spark.archive.service.replayer import Replayer
from aeron_spark.archive.storage.segment import SegmentWriter

HEADER = struct.Struct("<iBBHiiiiq")
TERM = 64 * 1024
MTU = 1408
INITIAL_TERM_ID = 100
REC_SESSION = 777
REC_STREAM = 1001
PUB_SESSION = -123456
PUB_STREAM = 2002


def aligned(n: int) -> int:
    return (n + 31) & ~31


class LogBuilder:
    """Frames as an Aeron publication appends them, from ``start`` (a frame-aligned position)."""

    def __init__(self, start: int = 0, term_length: int = TERM, mtu: int = MTU) -> None:
        self.start = start
        self.term_length = term_length
        self.mtu = mtu
        self.data = bytearray()
        self.frame_starts: list[int] = []  # positions
        self.message_starts: list[int] = []

    @property
    def position(self) -> int:
        return self.start + len(self.data)

    def _frame(self, frame_type: int, flags: int, payload: bytes, frame_length: int | None = None) -> None:
        position = self.position
        length = frame_length if frame_length is not None else 32 + len(payload)
        self.frame_starts.append(position)
        self.data += HEADER.pack(length, 0, flags, frame_type, position % self.term_length, REC_SESSION,
                                 REC_STREAM, INITIAL_TERM_ID + position // self.term_length, 0)
        self.data += payload + bytes(aligned(length) - 32 - len(payload))

    def message(self, payload: bytes) -> None:
        max_payload = self.mtu - 32
        chunks = [payload[i:i + max_payload] for i in range(0, len(payload), max_payload)] or [b""]
        needed = sum(aligned(32 + len(c)) for c in chunks)
        offset = self.position % self.term_length
        if offset + needed > self.term_length:
            remainder = self.term_length - offset
            self._frame(0, 0xC0, b"", frame_length=remainder)
        self.message_starts.append(self.position)
        for index, chunk in enumerate(chunks):
            flags = (0x80 if index == 0 else 0) | (0x40 if index == len(chunks) - 1 else 0)
            self._frame(1, flags, chunk)


def random_log(seed: int, size: int, start: int = 0, max_message: int = 5000) -> LogBuilder:
    rng = random.Random(seed)
    log = LogBuilder(start)
    while len(log.data) < size:
        length = rng.choice([0, 1, 31, 32, 100, rng.randrange(0, 2000), rng.randrange(0, max_message)])
        log.message(bytes(rng.getrandbits(8) for _ in range(min(length, 64))) * (length // 64 + 1))
    return log


def expected_replay(log: LogBuilder, from_position: int, to_position: int) -> bytes:
    """The log between two frame boundaries with DATA frames re-stamped and PAD payloads zeroed."""
    out = bytearray()
    for position in log.frame_starts:
        if not from_position <= position < to_position:
            continue
        offset = position - log.start
        length, version, flags, ftype, term_offset, _, _, term_id, reserved = HEADER.unpack_from(log.data, offset)
        frame = bytearray(log.data[offset:offset + aligned(length)])
        HEADER.pack_into(frame, 0, length, version, flags, ftype, term_offset, PUB_SESSION, PUB_STREAM, term_id,
                         reserved)
        if ftype == 0:
            frame[32:] = bytes(len(frame) - 32)
        out += frame
    return bytes(out)


class FakePublication:
    """Checks each call like Aeron's exclusive publication and rebuilds the term log it writes."""

    def __init__(self, start_position: int, *, connected: bool = True, max_message_length: int = TERM // 8,
                 refusals: list[int] | None = None) -> None:
        self.session_id = PUB_SESSION
        self.stream_id = PUB_STREAM
        self.channel = "aeron:ipc?fake"
        self.max_message_length = max_message_length
        self.is_connected = connected
        self.start = start_position
        self.position = start_position
        self.log = bytearray()
        self.refusals = list(refusals or [])
        self.calls: list[tuple[str, int]] = []
        self.closed = self.revoked = False

    def _refused(self) -> int | None:
        return self.refusals.pop(0) if self.refusals else None

    def offer_block(self, buffer, offset: int, length: int) -> int:
        refused = self._refused()
        if refused is not None:
            return refused
        block = bytes(memoryview(buffer)[offset:offset + length])
        term_offset = self.position % TERM
        assert length > 0 and length % 32 == 0 and term_offset + length <= TERM, "block crosses a term end"
        _, _, _, ftype, frame_offset, session_id, stream_id, term_id, _ = HEADER.unpack_from(block, 0)
        assert (ftype, frame_offset, session_id, stream_id, term_id) == (
            1, term_offset, PUB_SESSION, PUB_STREAM, INITIAL_TERM_ID + self.position // TERM)
        self.log += block
        self.position += length
        self.calls.append(("block", length))
        return self.position

    def append_padding(self, length: int) -> int:
        assert 0 <= length <= self.max_message_length
        refused = self._refused()
        if refused is not None:
            return refused
        frame_length = length + 32
        term_offset = self.position % TERM
        assert term_offset + aligned(frame_length) <= TERM
        self.log += HEADER.pack(frame_length, 0, 0xC0, 0, term_offset, PUB_SESSION, PUB_STREAM,
                                INITIAL_TERM_ID + self.position // TERM, 0)
        self.log += bytes(aligned(frame_length) - 32)
        self.position += aligned(frame_length)
        self.calls.append(("pad", frame_length))
        return self.position

    def close(self) -> None:
        self.closed = True

    def revoke(self) -> None:
        self.revoked = True


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class FakeLimit:
    def __init__(self, position: int) -> None:
        self.value = position
        self.closed = False

    def position(self) -> int:
        return self.value

    @property
    def is_closed(self) -> bool:
        return self.closed


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def on_replay_ready(self, session) -> None:
        self.events.append(("ready", session.replay_session_id))

    def on_replay_ended(self, session) -> None:
        self.events.append(("ended", session.replay_session_id))


def record(tmp_path, log: LogBuilder, segment_length: int = TERM, upto: int | None = None) -> RecordingLayout:
    """Write the log into segment files (blocks of whole frames within a term, PAD on its own)."""
    writer = SegmentWriter(tmp_path, 5, log.start, TERM, segment_length)
    end = log.position if upto is None else upto
    starts = [p for p in log.frame_starts if p < end] + [end]
    for begin, finish in zip(starts, starts[1:], strict=False):
        writer.append(memoryview(log.data)[begin - log.start:finish - log.start])
    writer.close()
    return RecordingLayout(recording_id=5, start_position=log.start, stop_position=end,
                           initial_term_id=INITIAL_TERM_ID, segment_file_length=segment_length,
                           term_buffer_length=TERM, mtu_length=MTU, stream_id=REC_STREAM)


def make_session(tmp_path, recording: RecordingLayout, position: int, length: int, *, limit=None,
                 publication: FakePublication | None = None, buffer: int = 1024 * 1024, **kwargs):
    plan = plan_replay(recording, position, length,
                       limit_position=None if limit is None else limit.position())
    publication = publication or FakePublication(plan.replay_position)
    listener = kwargs.pop("listener", Listener())
    session = ReplaySession(replay_session_id=make_replay_session_id(1, PUB_SESSION), recording=recording,
                            plan=plan, publication=publication, archive_dir=tmp_path, limit=limit,
                            replay_buffer_length=buffer, listener=listener, **kwargs)
    return session, publication, listener


def run(session: ReplaySession, cycles: int = 100_000) -> None:
    for _ in range(cycles):
        if session.is_done:
            return
        session.do_work()
    raise AssertionError(f"replay did not finish, state {session.state}")


# -- plan_replay -------------------------------------------------------------------------------------
STOPPED = RecordingLayout(5, 1024, 8192, 0, TERM, TERM, MTU, 1)
ACTIVE = RecordingLayout(5, 1024, -1, 0, TERM, TERM, MTU, 1)


def test_plan_from_start_and_lengths():
    assert plan_replay(STOPPED, -1, -1) == ReplayPlan(1024, 8192 - 1024, 8192)
    assert plan_replay(STOPPED, 2048, 100) == ReplayPlan(2048, 100, 8192)
    assert plan_replay(STOPPED, 2048, 1 << 40) == ReplayPlan(2048, 8192 - 2048, 8192)
    assert plan_replay(STOPPED, 2048, -2) == ReplayPlan(2048, 8192 - 2048, 8192)
    follow = plan_replay(ACTIVE, -1, -1, limit_position=4096)
    assert follow == ReplayPlan(1024, INT64_MAX - 1024, 4096) and follow.replay_limit == INT64_MAX
    assert plan_replay(ACTIVE, 1024, -2, limit_position=4096) == ReplayPlan(1024, 3072, 4096)


@pytest.mark.parametrize("position, length, limit, code, text", [
    (1040, -1, None, ArchiveErrorCode.GENERIC, "not a multiple of FRAME_ALIGNMENT"),
    (992, -1, None, ArchiveErrorCode.INVALID_POSITION, "less than recording start position=1024"),
    (8192, -1, None, ArchiveErrorCode.INVALID_POSITION, "must be less than the limit position=8192"),
    (4128, -1, 4096, ArchiveErrorCode.INVALID_POSITION, "limit position=4096"),
    (4096, -2, 4096, ArchiveErrorCode.EMPTY_RECORDING, "must be non-zero"),
    (1024, -7, None, ArchiveErrorCode.GENERIC, "replay length must be positive"),
])
def test_plan_rejections(position, length, limit, code, text):
    recording = ACTIVE if limit is not None else STOPPED
    with pytest.raises(ReplayRequestError, match=text) as raised:
        plan_replay(recording, position, length, limit_position=limit)
    assert raised.value.code == code


def test_plan_rejects_small_io_lengths():
    with pytest.raises(ReplayRequestError, match="fileIoMaxLength=1024 < mtuLength=1408"):
        plan_replay(STOPPED, -1, -1, file_io_max_length=1024)
    with pytest.raises(ReplayRequestError, match="replayBufferCapacity=1024"):
        plan_replay(STOPPED, -1, -1, replay_buffer_length=1024)
    with pytest.raises(ReplayRequestError, match="active but no position counter"):
        plan_replay(ACTIVE, -1, -1)


def test_replay_session_id_layout():
    assert make_replay_session_id(1, 5) == (1 << 32) | 5
    assert make_replay_session_id(3, -1) == (3 << 32) | 0xFFFFFFFF
    assert make_replay_session_id(0x80000000, 7) == -(1 << 63) + 7  # wraps like Java's long
    assert make_replay_session_id(2, PUB_SESSION) & 0xFFFFFFFF == PUB_SESSION & 0xFFFFFFFF


# -- prepare_block: numpy path == python path, byte for byte ---------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_prepare_block_vectorized_matches_python(seed):
    rng = random.Random(seed)
    log = random_log(seed, 3 * TERM)
    for _ in range(20):
        start = rng.choice(log.frame_starts)
        term_end = (start // TERM + 1) * TERM
        length = min(rng.choice([64, 1408, 4096, 1 << 20]), term_end - start, log.position - start)
        if length < 32:
            continue
        remaining = rng.choice([INT64_MAX, rng.randrange(1, length + 64)])
        chunk = bytes(log.data[start:start + length])
        a, b = np.frombuffer(bytearray(chunk), dtype=np.uint8).copy(), bytearray(chunk)
        c = np.frombuffer(bytearray(chunk), dtype=np.uint8).copy()
        fast = prepare_block(a, length, remaining, PUB_SESSION, PUB_STREAM, block_position=start)
        slow = prepare_block(np.frombuffer(b, dtype=np.uint8), length, remaining, PUB_SESSION, PUB_STREAM,
                             block_position=start, vectorized=False)
        by_fields = prepare_block(c, length, remaining, PUB_SESSION, PUB_STREAM, block_position=start,
                                  term_offset=start % TERM, term_id=INITIAL_TERM_ID + start // TERM)
        assert fast == slow == by_fields
        assert bytes(a) == bytes(b) == bytes(c)
        end = start + fast.data_length
        assert bytes(a[:fast.data_length]) == expected_replay(log, start, end)
        assert bytes(a[fast.data_length:]) == chunk[fast.data_length:]  # nothing else touched
        frames = [p for p in log.frame_starts if start <= p < start + length]
        if fast.padding_frame_length:
            pad_at = end
            assert HEADER.unpack_from(log.data, pad_at)[3] == 0
            assert fast.padding_frame_length == HEADER.unpack_from(log.data, pad_at)[0]
        else:  # stopped at the limit, at a frame cut by the read length, or at the read end
            whole = [p for p in frames if p + aligned(HEADER.unpack_from(log.data, p)[0]) <= start + length]
            sent = [p for p in frames if start <= p < end]
            assert sent == [p for p in whole if p - start < remaining][:len(sent)]


def test_prepare_block_limit_sends_a_started_frame_whole():
    log = LogBuilder()
    for _ in range(4):
        log.message(bytes(100))  # 160-byte frames
    buffer = np.frombuffer(bytearray(log.data), dtype=np.uint8).copy()
    assert prepare_block(buffer, len(log.data), 161, PUB_SESSION, PUB_STREAM).data_length == 320
    assert prepare_block(buffer, len(log.data), 160, PUB_SESSION, PUB_STREAM).data_length == 160


@pytest.mark.parametrize("term_fields", [False, True])
def test_prepare_block_false_header_in_payload_is_not_a_frame(term_fields):
    log = LogBuilder()
    # Payload slots that carry their own term offset and the term id: plausible frame headers.
    payload = b"".join(HEADER.pack(64, 0, 0xC0, 1, 32 + 32 * i, REC_SESSION, REC_STREAM, INITIAL_TERM_ID, 0)
                       for i in range(4))
    log.message(payload)
    log.message(b"x" * 40)
    buffer = np.frombuffer(bytearray(log.data), dtype=np.uint8).copy()
    fields = {"term_offset": 0, "term_id": INITIAL_TERM_ID} if term_fields else {}
    block = prepare_block(buffer, len(log.data), INT64_MAX, PUB_SESSION, PUB_STREAM, **fields)
    assert block.data_length == len(log.data)
    assert bytes(buffer) == expected_replay(log, 0, log.position)


def test_prepare_block_errors():
    log = LogBuilder()
    log.message(b"a" * 50)
    data = bytearray(log.data) + bytes(256)
    with pytest.raises(ReplayFrameError, match="unexpected end of recording at position=96"):
        prepare_block(np.frombuffer(data, dtype=np.uint8).copy(), len(data), INT64_MAX, 1, 2)
    with pytest.raises(ReplayFrameError, match="unexpected end of recording at position=96"):
        prepare_block(np.frombuffer(data, dtype=np.uint8).copy(), len(data), INT64_MAX, 1, 2, vectorized=False)
    odd = bytearray(log.data) + HEADER.pack(64, 0, 0xC0, 3, 96, 1, 1, 1, 0) + bytes(32)
    with pytest.raises(ReplayFrameError, match="unexpected frame type 3"):
        prepare_block(np.frombuffer(odd, dtype=np.uint8).copy(), len(odd), INT64_MAX, 1, 2)


# -- whole replays ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("buffer", [1024 * 1024, 4096, MTU])
def test_replay_matches_recording_across_terms_and_segments(tmp_path, buffer):
    log = random_log(1, 4 * TERM + 5000)
    recording = record(tmp_path, log)  # 64 KiB segments: a new file per term
    session, publication, listener = make_session(tmp_path, recording, -1, -1, buffer=buffer)
    run(session)
    assert session.error is None and not publication.revoked
    assert bytes(publication.log) == expected_replay(log, 0, log.position)
    assert publication.position == log.position == session.replay_position
    assert ("pad", TERM - 0) not in publication.calls and any(k == "pad" for k, _ in publication.calls)
    assert listener.events == [("ready", session.replay_session_id), ("ended", session.replay_session_id)]
    session.close()
    assert publication.closed and not publication.revoked


def test_replay_numpy_and_python_paths_publish_the_same(tmp_path):
    log = random_log(2, 2 * TERM)
    recording = record(tmp_path, log)
    logs = []
    for vectorized in (True, False):
        session, publication, _ = make_session(tmp_path, recording, -1, -1, vectorized=vectorized, buffer=8192)
        run(session)
        logs.append((bytes(publication.log), publication.calls))
    assert logs[0] == logs[1]


def test_replay_from_a_mid_position_and_with_a_length(tmp_path):
    log = random_log(3, 3 * TERM, start=TERM + 4096)  # a recording that starts mid-term
    recording = record(tmp_path, log, segment_length=2 * TERM)
    mid = log.message_starts[len(log.message_starts) // 2]
    session, publication, _ = make_session(tmp_path, recording, mid, -1)
    run(session)
    assert bytes(publication.log) == expected_replay(log, mid, log.position)
    later = log.message_starts[len(log.message_starts) // 2 + 3]
    session, publication, _ = make_session(tmp_path, recording, mid, later - mid)
    run(session)
    assert bytes(publication.log) == expected_replay(log, mid, later) and session.replay_position == later


def test_replay_position_not_on_a_frame_is_rejected(tmp_path):
    log = LogBuilder()
    log.message(bytes(200))  # one 256-byte frame; position 64 is inside its payload
    log.message(bytes(10))
    recording = record(tmp_path, log)
    session, publication, listener = make_session(tmp_path, recording, 64, -1)
    run(session)
    assert session.error.code == ArchiveErrorCode.INVALID_POSITION
    assert "replayPosition=64 does not point to a valid frame" in session.error.message
    assert listener.events == [("ended", session.replay_session_id)]
    session.close()
    assert publication.revoked


def test_back_pressure_retries_without_losing_data(tmp_path):
    log = random_log(4, 2 * TERM)
    recording = record(tmp_path, log)
    refusals = [BACK_PRESSURED, BACK_PRESSURED, -3] * 30
    publication = FakePublication(0, refusals=refusals)
    session, _, _ = make_session(tmp_path, recording, -1, -1, publication=publication, buffer=2048)
    run(session)
    assert session.error is None and not publication.refusals
    assert bytes(publication.log) == expected_replay(log, 0, log.position)


def test_subscriber_gone_ends_the_replay_and_revokes(tmp_path):
    log = random_log(5, TERM)
    recording = record(tmp_path, log)
    publication = FakePublication(0, refusals=[NOT_CONNECTED])
    session, _, _ = make_session(tmp_path, recording, -1, -1, publication=publication)
    run(session)
    assert session.error is None and session.end_reason == "stream closed before replay complete"
    session.close()
    assert publication.revoked


def test_no_subscriber_within_the_connect_timeout_is_an_error(tmp_path):
    log = random_log(6, 4096)
    recording = record(tmp_path, log)
    clock = FakeClock()
    publication = FakePublication(0, connected=False)
    session, _, listener = make_session(tmp_path, recording, -1, -1, publication=publication,
                                        connect_timeout_ns=5_000_000_000, clock_ns=clock)
    assert session.do_work() == 0 and session.state is ReplayState.INIT
    assert listener.events == [("ready", session.replay_session_id)]
    clock.now = 5_000_000_000
    session.do_work()
    assert session.state is ReplayState.INIT
    clock.now = 5_000_000_001
    session.do_work()
    assert session.is_done and session.error.code == ArchiveErrorCode.GENERIC
    assert "no connection established for replayChannel=aeron:ipc?fake, replayStreamId=2002" in session.error.message


def test_waits_for_the_first_segment_file_then_times_out(tmp_path):
    recording = RecordingLayout(9, 0, -1, INITIAL_TERM_ID, TERM, TERM, MTU, REC_STREAM)
    clock = FakeClock()
    session, _, listener = make_session(tmp_path, recording, -1, -1, limit=FakeLimit(0), clock_ns=clock,
                                        connect_timeout_ns=10)
    session.do_work()
    assert session.state is ReplayState.INIT and listener.events == []
    clock.now = 11
    session.do_work()
    assert session.is_done and "recording segment file not created" in session.error.message


def test_follow_replay_tails_the_limit_and_ends_at_its_final_value(tmp_path):
    log = random_log(7, 3 * TERM)
    cut1 = log.message_starts[len(log.message_starts) // 3]
    cut2 = log.message_starts[2 * len(log.message_starts) // 3]
    recording = record(tmp_path, log)  # all bytes are on disk; the limit says what is "recorded"
    active = dataclasses.replace(recording, stop_position=-1)
    limit = FakeLimit(cut1)
    session, publication, _ = make_session(tmp_path, active, -1, -1, limit=limit)
    for _ in range(200):
        session.do_work()
    assert publication.position == cut1 and not session.is_done
    limit.value = cut2
    for _ in range(200):
        session.do_work()
    assert publication.position == cut2 and not session.is_done
    limit.value, limit.closed = log.position, True  # the recording stopped at the end of the log
    run(session)
    assert session.error is None and bytes(publication.log) == expected_replay(log, 0, log.position)


def test_bounded_replay_with_a_closed_limit_stops_at_its_last_value(tmp_path):
    log = random_log(8, TERM)
    recording = record(tmp_path, log)
    cut = log.message_starts[10]
    limit = FakeLimit(cut)
    session, publication, _ = make_session(tmp_path, recording, -1, -1, limit=limit)
    for _ in range(50):
        session.do_work()
    limit.closed = True
    run(session)
    assert publication.position == cut and session.error is None


def test_abort_revokes_the_publication(tmp_path):
    log = random_log(9, TERM)
    recording = record(tmp_path, log)
    session, publication, _ = make_session(tmp_path, recording, -1, -1, buffer=2048)
    session.do_work()
    session.abort("stop replay")
    session.do_work()
    assert session.is_done and session.end_reason == "stop replay" and session.error is None
    session.close()
    assert publication.revoked and not publication.closed


def test_checksums_are_verified_and_restored(tmp_path):
    log = random_log(10, TERM)
    writer = SegmentWriter(tmp_path, 5, 0, TERM, TERM, checksum=CRC32C)
    starts = log.frame_starts + [log.position]
    for begin, finish in zip(starts, starts[1:], strict=False):
        writer.append(memoryview(log.data)[begin:finish])
    writer.close()
    recording = RecordingLayout(5, 0, log.position, INITIAL_TERM_ID, TERM, TERM, MTU, REC_STREAM)
    session, publication, _ = make_session(tmp_path, recording, -1, -1, checksum=CRC32C)
    run(session)
    assert session.error is None and bytes(publication.log) == expected_replay(log, 0, log.position)
    # Corrupt one payload byte of the 4th frame on disk: the replay ends with an error there.
    victim = log.frame_starts[3]
    with open(tmp_path / "5-0.rec", "r+b") as file:
        file.seek(victim + 32)
        byte = file.read(1)
        file.seek(victim + 32)
        file.write(bytes([byte[0] ^ 0xFF]))
    session, publication, _ = make_session(tmp_path, recording, -1, -1, checksum=CRC32C)
    run(session)
    assert session.error.code == ArchiveErrorCode.GENERIC
    assert f"checksum mismatch at position={victim}" in session.error.message
    assert publication.position == 0  # nothing of the bad block was published


def test_padding_larger_than_a_message_is_split_with_the_same_end(tmp_path):
    log = LogBuilder()
    log.message(bytes(100))
    log.message(bytes(8000))
    while log.position % TERM < TERM - 9000:
        log.message(bytes(8000))
    log.message(bytes(8000))  # does not fit: a PAD of > 8 KiB fills the rest of the term
    pad = [HEADER.unpack_from(log.data, p)[0] for p in log.frame_starts if HEADER.unpack_from(log.data, p)[3] == 0]
    assert pad and pad[0] > 1024 + 32
    recording = record(tmp_path, log)
    publication = FakePublication(0, max_message_length=1024)
    session, _, _ = make_session(tmp_path, recording, -1, -1, publication=publication)
    run(session)
    assert publication.position == log.position and session.error is None
    pads = [n for kind, n in publication.calls if kind == "pad"]
    assert sum(aligned(n) for n in pads) == pad[0] and len(pads) > 1


# -- limit counters ---------------------------------------------------------------------------------------
class FakeCounters:
    def __init__(self) -> None:
        self.values: dict[int, int] = {}
        self.states: dict[int, int] = {}
        self.keys: dict[int, bytes] = {}
        self.registrations: dict[int, int] = {}

    def allocate(self, counter_id: int, value: int, registration: int, key: bytes = b"k") -> None:
        self.values[counter_id], self.states[counter_id] = value, RECORD_ALLOCATED
        self.keys[counter_id], self.registrations[counter_id] = key, registration

    def free(self, counter_id: int) -> None:  # like aeron_counters_manager_free: value untouched
        self.states[counter_id], self.keys[counter_id] = RECORD_RECLAIMED, bytes(1)

    def value(self, i): return self.values[i]
    def state(self, i): return self.states.get(i, 0)
    def type_id(self, i): return 1
    def key(self, i): return self.keys[i]
    def registration_id(self, i): return self.registrations[i]


def test_limit_counter_follows_then_freezes_at_the_final_value():
    counters = FakeCounters()
    counters.allocate(3, 100, registration=55)
    limit = LimitCounterReader(counters, 3)
    assert limit.position() == 100 and not limit.is_closed
    counters.values[3] = 200
    counters.values[3] = 320  # the last write before the close, never sampled while live
    counters.free(3)
    assert limit.is_closed and limit.position() == 320
    counters.allocate(3, 0, registration=56)  # reused by someone else later
    assert limit.position() == 320


def test_limit_counter_reused_slot_is_not_read():
    counters = FakeCounters()
    counters.allocate(4, 500, registration=1)
    limit = LimitCounterReader(counters, 4)
    counters.allocate(4, 7, registration=2)  # freed and reused between two samples
    assert limit.position() == 500 and limit.is_closed


def test_limit_counter_must_exist():
    counters = FakeCounters()
    with pytest.raises(LimitCounterError, match="limit counter id 9 is not allocated"):
        LimitCounterReader(counters, 9)
    with pytest.raises(LimitCounterError, match="must be >= 0"):
        LimitCounterReader(counters, -1)
    assert FixedLimit(64).position() == 64 and FixedLimit(64).is_closed


# -- the replayer agent --------------------------------------------------------------------------------------
class FakeCounter:
    def __init__(self) -> None:
        self.value = 0
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_replayer_runs_stops_and_counts(tmp_path):
    from aeron_spark.archive.service.counters import IoCounters
    log = random_log(11, 2 * TERM)
    recording = record(tmp_path, log)
    counters = IoCounters(FakeCounter(), FakeCounter(), FakeCounter())
    replayer = Replayer(counters)
    first, pub1, _ = make_session(tmp_path, recording, -1, -1, buffer=2048)
    second, pub2, _ = make_session(tmp_path, recording, -1, -1, buffer=2048)
    second.replay_session_id = 99
    replayer.add_session(first)
    replayer.add_session(second)
    assert replayer.has_replays(5) and replayer.session_count == 2
    replayer.do_work()
    replayer.stop_replay(99)
    for _ in range(10_000):
        if replayer.do_work() == 0 and replayer.session_count == 0:
            break
    assert replayer.session_count == 0 and not replayer.has_replays(5)
    assert pub2.revoked and pub1.closed and bytes(pub1.log) == expected_replay(log, 0, log.position)
    assert counters.total_bytes.value >= log.position and counters.total_time.value >= counters.max_time.value > 0
    replayer.on_close()
    assert counters.max_time.closed and counters.total_bytes.closed


def test_replayer_stop_all_replays_of_one_recording(tmp_path):
    log = random_log(12, TERM)
    recording = record(tmp_path, log)
    replayer = Replayer()
    sessions = [make_session(tmp_path, recording, -1, -1, buffer=2048) for _ in range(2)]
    for session, _, _ in sessions:
        replayer.add_session(session)
    replayer.stop_all_replays(6)  # another recording: nothing happens
    replayer.do_work()
    assert replayer.session_count == 2
    replayer.stop_all_replays(5)
    replayer.do_work()
    assert replayer.session_count == 0 and all(p.revoked for _, p, _ in sessions)
    assert isinstance(replayer.io_stats, IoStats)
