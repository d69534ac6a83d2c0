"""archive.service.archive_counters and their writers: what is allocated in which threading mode, in
Aeron 1.51's order, the control-session counters (102/113) as sessions open and close in the control
demuxer, the recorder's/replayer's session counts (111/112) and the error count (101)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import archive_counters as layout
from aeron_spark.archive.service.archive_counters import ArchiveCounters, CycleThresholds
from aeron_spark.archive.service.authenticator import AcceptAllAuthenticator
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.service_options import ArchiveServiceOptions
from aeron_spark.archive.service.control_demuxer import ControlDemuxer
from aeron_spark.archive.service.error_log import MarkFileErrorLog
from aeron_spark.archive.service.session_agent import SessionAgent
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile

from tests.unit.archive.service.request_handler_parts import FakeAeron, FakeCounter

ARCHIVE_ID = 31

#: (type id, label) of everything a DEDICATED archive allocates, in the order Aeron 1.51's
#: Archive.Context.conclude does.
DEDICATED = [
    (101, "Archive Errors - archiveId=31 version=0.1.0 commit=unknown"),
    (103, "archive-conductor max cycle time in ns: DEDICATED - archiveId=31"),
    (104, "archive-conductor work cycle time exceeded count: threshold=100ms DEDICATED - archiveId=31"),
    (103, "archive-recorder max cycle time in ns: DEDICATED - archiveId=31"),
    (104, "archive-recorder work cycle time exceeded count: threshold=100ms DEDICATED - archiveId=31"),
    (103, "archive-replayer max cycle time in ns: DEDICATED - archiveId=31"),
    (104, "archive-replayer work cycle time exceeded count: threshold=100ms DEDICATED - archiveId=31"),
    (102, "Archive Control Sessions - archiveId=31"),
    (111, "Archive Recording Sessions - archiveId=31"),
    (112, "Archive Replay Sessions - archiveId=31"),
    (105, "archive-recorder max write time in ns - archiveId=31"),
    (106, "archive-recorder total write bytes - archiveId=31"),
    (107, "archive-recorder total write time in ns - archiveId=31"),
    (108, "archive-replayer max read time in ns - archiveId=31"),
    (109, "archive-replayer total read bytes - archiveId=31"),
    (110, "archive-replayer total read time in ns - archiveId=31"),
]


def allocated(aeron: FakeAeron) -> list[tuple[int, str]]:
    return [(c.type_id, c.label) for c in aeron.counters]


def test_a_dedicated_archive_allocates_every_counter_in_aerons_order_keyed_by_its_archive_id():
    aeron = FakeAeron()
    counters = ArchiveCounters.allocate(aeron, ARCHIVE_ID, version="0.1.0")
    assert allocated(aeron) == DEDICATED
    assert {c.key for c in aeron.counters} == {struct.pack("<q", ARCHIVE_ID)}
    assert counters.recorder_cycle is not None and counters.replayer_cycle is not None
    counters.close()
    counters.close()
    assert all(c.closed for c in aeron.counters)


def test_a_shared_archive_tracks_the_conductors_cycle_only_with_its_thresholds_in_the_labels():
    aeron = FakeAeron()
    counters = ArchiveCounters.allocate(aeron, ARCHIVE_ID, threading_mode="shared", version="0.1.0",
                                        thresholds=CycleThresholds(conductor_ns=2_500_000))
    assert [t for t, _ in allocated(aeron)] == [101, 103, 104, 102, 111, 112, 105, 106, 107, 108, 109, 110]
    assert allocated(aeron)[2][1] == \
        "archive-conductor work cycle time exceeded count: threshold=2500us SHARED - archiveId=31"
    assert counters.recorder_cycle is None and counters.replayer_cycle is None


def test_bad_settings_are_refused_before_anything_is_allocated():
    aeron = FakeAeron()
    with pytest.raises(ValueError, match="unknown threading mode 'invoker': expected one of dedicated, shared"):
        ArchiveCounters.allocate(aeron, ARCHIVE_ID, threading_mode="invoker")
    with pytest.raises(ValueError, match="recorder cycle threshold must be > 0 ns, got 0"):
        CycleThresholds(recorder_ns=0)
    assert aeron.counters == []


def test_a_failed_allocation_closes_what_was_allocated():
    class FailingAeron(FakeAeron):
        def add_counter(self, type_id: int, key: bytes, label: str) -> FakeCounter:
            if type_id == 111:
                raise RuntimeError("counters file full")
            return super().add_counter(type_id, key, label)

    aeron = FailingAeron()
    with pytest.raises(RuntimeError, match="counters file full"):
        ArchiveCounters.allocate(aeron, ARCHIVE_ID)
    assert len(aeron.counters) == 8 and all(c.closed for c in aeron.counters)


# ------------------------------------------------------------------ control sessions (102, 113)

class Image:
    source_identity = "127.0.0.1:40123"


class Subscription:
    def image_by_session_id(self, session_id: int) -> Image | None:
        return Image() if session_id == 5 else None


class DemuxerAeron(FakeAeron):
    def add_subscription(self, channel, stream_id, **_):
        return Subscription()


def connect(demuxer: ControlDemuxer, image_session_id: int, correlation_id: int, client_info: str) -> int:
    before = set(demuxer.sessions)
    demuxer.on_control_message(codecs.encode(codecs.AuthConnectRequest(
        correlation_id, 20, codecs.PROTOCOL_SEMANTIC_VERSION, "aeron:ipc", b"", client_info)), (0, image_session_id))
    (session_id,) = set(demuxer.sessions) - before
    return session_id


def test_each_control_session_has_a_counter_while_it_is_open_and_the_count_follows():
    aeron = DemuxerAeron()
    counters = ArchiveCounters.allocate(aeron, ARCHIVE_ID)
    count = counters.control_sessions.sessions_count
    demuxer = ControlDemuxer(aeron=aeron, settings=ConductorSettings(ArchiveServiceOptions(Path("/nonexistent")), ARCHIVE_ID),
                             authenticator=AcceptAllAuthenticator(), control_channels=[("aeron:ipc", 10)],
                             handlers={}, enqueue=lambda e: None, clock=lambda: 1_000,
                             session_counters=counters.control_sessions)
    first = connect(demuxer, 5, 1, "name=spark-driver")
    second = connect(demuxer, 6, 2, "")
    assert count.value == 2
    session_counters = [c for c in aeron.counters if c.type_id == 113]
    assert [(c.label, c.value) for c in session_counters] == [
        (f"control-session: name=spark-driver sourceIdentity=127.0.0.1:40123 sessionId=5 - archiveId={ARCHIVE_ID}",
         first),
        (f"control-session: sourceIdentity= sessionId=6 - archiveId={ARCHIVE_ID}", second)]
    assert [layout.decode_control_session_key(c.key) for c in session_counters] == [
        (ARCHIVE_ID, first), (ARCHIVE_ID, second)]
    demuxer.on_control_message(codecs.encode(codecs.CloseSessionRequest(first)), (0, 5))
    demuxer.service_sessions(1_000)
    assert first not in demuxer.sessions
    assert session_counters[0].closed and not session_counters[1].closed and count.value == 1
    demuxer.close_sessions("archive shutting down")
    assert session_counters[1].closed and count.value == 0


def test_a_session_whose_counter_the_driver_refuses_is_served_counted_and_the_error_reported():
    class RefusingAeron(DemuxerAeron):
        def add_counter(self, type_id, key, label):
            if type_id == 113:
                raise RuntimeError("no room for counters")
            return super().add_counter(type_id, key, label)

    aeron = RefusingAeron()
    counters = ArchiveCounters.allocate(aeron, ARCHIVE_ID)
    errors: list[BaseException] = []
    demuxer = ControlDemuxer(aeron=aeron, settings=ConductorSettings(ArchiveServiceOptions(Path("/nonexistent")), ARCHIVE_ID),
                             authenticator=AcceptAllAuthenticator(), control_channels=[("aeron:ipc", 10)],
                             handlers={}, enqueue=lambda e: None, clock=lambda: 1_000,
                             error_handler=errors.append, session_counters=counters.control_sessions)
    session_id = connect(demuxer, 5, 1, "")
    assert session_id in demuxer.sessions and counters.control_sessions.sessions_count.value == 1
    assert [str(e) for e in errors] == ["no room for counters"]
    demuxer.close_sessions("done")
    assert counters.control_sessions.sessions_count.value == 0


# ------------------------------------------------------------------ recorder/replayer session counts (111/112)

class Session:
    def __init__(self, cycles: int) -> None:
        self.cycles = cycles
        self.io_stats = None

    @property
    def is_done(self) -> bool:
        return self.cycles <= 0

    def do_work(self) -> int:
        self.cycles -= 1
        return 1

    def abort(self, reason: str = "") -> None:
        self.cycles = 0


class Agent(SessionAgent[Session]):
    def _describe(self, session: Session) -> str:
        return "session"

    def _apply(self, command: str, ident: int, session: Session) -> None:
        session.abort()

    def _retire(self, session: Session) -> None:
        pass


def test_an_agents_session_count_follows_the_sessions_it_drives():
    count = FakeCounter(0, 111, b"", "")
    agent = Agent(session_count=count)
    agent.add_session(Session(1))
    agent.add_session(Session(3))
    assert count.value == 0  # queued, not yet driven
    agent.do_work()
    assert count.value == 1  # one ran its only cycle and was retired in the same duty cycle
    agent.do_work()
    agent.add_session(Session(5))
    agent.do_work()
    assert count.value == 1
    agent.on_close()
    assert count.value == 0


# ------------------------------------------------------------------ errors (101)

def test_every_error_the_handler_records_is_counted(tmp_path):
    counter = FakeCounter(0, 101, b"", "")
    with ArchiveMarkFile.create(tmp_path, archive_id=ARCHIVE_ID, control_channel="", control_stream_id=10,
                                local_control_channel="aeron:ipc", local_control_stream_id=11, events_channel="",
                                events_stream_id=30, aeron_directory="/dev/shm/none") as mark_file:
        handler = MarkFileErrorLog(mark_file, counter)
        for _ in range(3):
            handler(OSError("disk full"))
        handler(ValueError("bad frame"))
    assert counter.value == handler.error_count == 4
    handler(OSError("after the mark file closed"))  # logged only, still counted
    assert counter.value == 5
