"""The request handlers wired as the conductor wires them, over a real catalog in a directory,
with fakes for what faces the media driver and the agents (Aeron calls, recorder, replayer,
counters). Shared by test_recording_requests, test_replay_requests, test_maintenance_requests and
test_recording_queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aeron_spark.archive.codecs import (
    PROTOCOL_SEMANTIC_VERSION, ControlResponse, ControlResponseCode, RecordingSignalEvent, semantic_version)
from aeron_spark.archive.codecs.counter_layout import RECORD_ALLOCATED
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.service_options import ArchiveServiceOptions
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.maintenance_requests import MaintenanceRequests
from aeron_spark.archive.service.recording_events_publisher import RecordingEventsPublisher
from aeron_spark.archive.service.recording_queries import RecordingQueries
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.recording_session import RecordingSession
from aeron_spark.archive.service.replay_requests import ReplayRequests
from aeron_spark.archive.service.replay_session import ReplaySession
from aeron_spark.archive.service.request_errors import ArchiveRequestError
from aeron_spark.archive.storage.catalog import Catalog

from aeron_spark.driver_integration import frame, position as positions

from tests.unit.archive.storage.test_maintenance import FRAME_LENGTH, INITIAL_TERM_ID, SEGMENT, TERM

CONTROL_SESSION_ID = 5
ARCHIVE_ID = 77
UDP_CHANNEL = "aeron:udp?endpoint=localhost:40123"
IPC_CHANNEL = "aeron:ipc"
STREAM_ID = 1001
MTU = 1408


class FakeSubscription:
    def __init__(self, registration_id: int, channel: str, stream_id: int, on_available_image) -> None:
        self.registration_id = registration_id
        self.channel = channel
        self.stream_id = stream_id
        self.on_available_image = on_available_image
        self.closed = False

    def poll(self, handler, fragment_limit: int) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


class FakePublication:
    def __init__(self, channel: str, stream_id: int, session_id: int) -> None:
        self.channel = channel
        self.stream_id = stream_id
        self.session_id = session_id
        self.is_connected = False
        self.closed = False

    def offer(self, data: bytes) -> int:
        return 0

    def offer_block(self, buffer, offset: int, length: int) -> int:
        return 0

    def append_padding(self, length: int) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


class FakeCounter:
    def __init__(self, counter_id: int, type_id: int, key: bytes, label: str) -> None:
        self.counter_id = counter_id
        self.type_id = type_id
        self.key = key
        self.label = label
        self.value = 0
        self.closed = False

    def close(self) -> None:
        self.closed = True


class FakePendingPublication:
    """An async add: the publication (or the driver's refusal), held back while ``held``."""

    def __init__(self, publication: FakePublication | None, refusal: Exception | None = None) -> None:
        self.publication = publication
        self.refusal = refusal
        self.held = False
        self.polls = 0

    def poll(self) -> FakePublication | None:
        self.polls += 1
        if self.held:
            return None
        if self.refusal is not None:
            raise self.refusal
        return self.publication


class FakeAeron:
    """The `AeronPort` calls, recorded; ids count up as the driver's would."""

    def __init__(self) -> None:
        self.subscriptions: list[FakeSubscription] = []
        self.publications: list[FakePublication] = []
        self.counters: list[FakeCounter] = []
        self.pending: list[FakePendingPublication] = []
        self.hold_publications = False  # async adds stay pending until the test releases them
        self.refusal: Exception | None = None  # the driver's answer to the next async adds
        self._next_id = 100

    def add_subscription(self, channel: str, stream_id: int, *, on_available_image=None,
                         on_unavailable_image=None) -> FakeSubscription:
        self._next_id += 1
        subscription = FakeSubscription(self._next_id, channel, stream_id, on_available_image)
        self.subscriptions.append(subscription)
        return subscription

    def add_exclusive_publication(self, channel: str, stream_id: int) -> FakePublication:
        publication = FakePublication(channel, stream_id, session_id=900 + len(self.publications))
        self.publications.append(publication)
        return publication

    def async_add_exclusive_publication(self, channel: str, stream_id: int) -> FakePendingPublication:
        """Added at once unless ``hold_publications`` (then the test settles each pending one)."""
        if self.refusal is not None:
            pending = FakePendingPublication(None, self.refusal)
        else:
            pending = FakePendingPublication(self.add_exclusive_publication(channel, stream_id))
        if self.hold_publications:
            pending.held = True
        self.pending.append(pending)
        return pending

    def add_counter(self, type_id: int, key: bytes, label: str) -> FakeCounter:
        counter = FakeCounter(len(self.counters), type_id, key, label)
        self.counters.append(counter)
        return counter


@dataclass
class FakeImage:
    """An Image of a recording subscription: each poll delivers one 1024-byte DATA frame (as
    test_maintenance's files hold) until ``published_position``; nothing by default."""

    join_position: int = 0
    session_id: int = 4242
    initial_term_id: int = INITIAL_TERM_ID
    term_buffer_length: int = TERM
    mtu_length: int = MTU
    source_identity: str = "127.0.0.1:50000"
    is_end_of_stream: bool = False
    is_closed: bool = False
    published_position: int = 0
    polled_position: int = field(default=-1)

    def block_poll(self, handler, block_length_limit: int) -> int:
        position = max(self.polled_position, self.join_position)
        if position >= self.published_position:
            return 0
        bits = positions.position_bits_to_shift(self.term_buffer_length)
        term_id = positions.compute_term_id_from_position(position, bits, self.initial_term_id)
        header = frame.DataFrameHeader(frame_length=FRAME_LENGTH, term_offset=position & (self.term_buffer_length - 1),
                                       session_id=self.session_id, stream_id=STREAM_ID, term_id=term_id)
        handler(memoryview(header.pack() + bytes(1024 - 32)), position, self.session_id, term_id)
        self.polled_position = position + 1024
        return 1024


class FakeRecorder:
    def __init__(self) -> None:
        self.sessions: list[RecordingSession] = []
        self.stop_requests: list[int] = []

    def add_session(self, session: RecordingSession) -> None:
        self.sessions.append(session)

    def stop_recording(self, recording_id: int) -> None:
        self.stop_requests.append(recording_id)


class FakeReplayer:
    def __init__(self) -> None:
        self.sessions: list[ReplaySession] = []
        self.stopped_replays: list[int] = []
        self.stopped_recordings: list[int] = []
        self.lowest_positions: dict[int, int] = {}

    def add_session(self, session: ReplaySession) -> None:
        self.sessions.append(session)

    def stop_replay(self, replay_session_id: int) -> None:
        self.stopped_replays.append(replay_session_id)

    def stop_all_replays(self, recording_id: int = -1) -> None:
        self.stopped_recordings.append(recording_id)

    def lowest_replay_position(self, recording_id: int) -> int | None:
        return self.lowest_positions.get(recording_id)


@dataclass
class FakeCounters:
    """A `CountersView`: id -> (state, type id, key, value)."""

    records: dict[int, tuple[int, int, bytes, int]] = field(default_factory=dict)

    def allocate(self, counter_id: int, value: int, type_id: int = 0) -> None:
        self.records[counter_id] = (RECORD_ALLOCATED, type_id, b"key", value)

    def state(self, counter_id: int) -> int:
        if counter_id not in self.records:
            raise IndexError(f"no counter {counter_id}")
        return self.records[counter_id][0]

    def type_id(self, counter_id: int) -> int:
        return self.records[counter_id][1]

    def key(self, counter_id: int) -> bytes:
        return self.records[counter_id][2]

    def value(self, counter_id: int) -> int:
        return self.records[counter_id][3]


class RecordingListenerLog:
    """The recorder's listener (the conductor): what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def on_recording_started(self, session: RecordingSession) -> None:
        self.calls.append(("started", session.recording_id))

    def on_recording_progress(self, session: RecordingSession, position: int) -> bool:
        return True

    def on_recording_stopped(self, session: RecordingSession) -> None:
        self.calls.append(("stopped", session.recording_id))


class ReplayListenerLog:
    def on_replay_ready(self, session: ReplaySession) -> None:
        pass

    def on_replay_ended(self, session: ReplaySession) -> None:
        pass


@dataclass
class Handlers:
    """The handlers of one archive, and what they drive."""

    directory: Path
    catalog: Catalog
    aeron: FakeAeron
    recorder: FakeRecorder
    replayer: FakeReplayer
    counters: FakeCounters
    events: list
    recordings: RecordingRequests
    replays: ReplayRequests
    maintenance: MaintenanceRequests
    queries: RecordingQueries
    session: ControlSession

    def sent(self) -> list:
        """What the control session has queued since the last call."""
        return outbox(self.session)


def make_handlers(directory: Path, catalog: Catalog, *, with_replayer: bool = True,
                  with_counters: bool = True, **settings) -> Handlers:
    options = dict(archive_dir=directory, segment_file_length=SEGMENT, replay_buffer_length=64 * 1024)
    options.update(settings)
    conductor_settings = ConductorSettings(ArchiveServiceOptions(**options), ARCHIVE_ID)
    aeron, recorder, replayer, counters = FakeAeron(), FakeRecorder(), FakeReplayer(), FakeCounters()
    events: list = []
    recordings = RecordingRequests(aeron=aeron, catalog=catalog, settings=conductor_settings,
                                   recorder=recorder, listener=RecordingListenerLog(),
                                   enqueue=events.append, events=RecordingEventsPublisher(None))
    replays = ReplayRequests(aeron=aeron, catalog=catalog, settings=conductor_settings,
                             replayer=replayer if with_replayer else None, recordings=recordings,
                             counters_reader=counters if with_counters else None,
                             listener=ReplayListenerLog())
    maintenance = MaintenanceRequests(catalog=catalog, settings=conductor_settings,
                                      recordings=recordings, replays=replays)
    queries = RecordingQueries(catalog=catalog, archive_id=ARCHIVE_ID, recordings=recordings)
    session = ControlSession(control_session_id=CONTROL_SESSION_ID, connect_correlation_id=1,
                             client_version=semantic_version(1, 12, 0), response_channel=IPC_CHANNEL,
                             response_stream_id=20, now_ms=0)
    return Handlers(directory, catalog, aeron, recorder, replayer, counters, events, recordings,
                    replays, maintenance, queries, session)


@contextmanager
def opened_handlers(directory: Path, **options) -> Iterator[Handlers]:
    """`make_handlers` over the catalog of ``directory``, closed afterwards."""
    with Catalog.open(directory) as catalog:
        yield make_handlers(directory, catalog, **options)


def outbox(session: ControlSession) -> list:
    sent: list = []
    session.drain(lambda message: sent.append(message) or 0, 0, limit=10_000)
    return sent


def ok(correlation_id: int, relevant_id: int) -> ControlResponse:
    return ControlResponse(CONTROL_SESSION_ID, correlation_id, relevant_id, ControlResponseCode.OK,
                           PROTOCOL_SEMANTIC_VERSION, "")


def error(correlation_id: int, code: int, message: str) -> ControlResponse:
    return ControlResponse(CONTROL_SESSION_ID, correlation_id, int(code), ControlResponseCode.ERROR,
                           PROTOCOL_SEMANTIC_VERSION, message)


def signal(correlation_id: int, recording_id: int, subscription_id: int, position: int,
           kind) -> RecordingSignalEvent:
    return RecordingSignalEvent(CONTROL_SESSION_ID, correlation_id, recording_id, subscription_id,
                                position, kind)


def refused(action, code: int, match: str | None = None) -> ArchiveRequestError:
    """Runs ``action`` and returns the `ArchiveRequestError` it must raise, checking its code."""
    with pytest.raises(ArchiveRequestError, match=match) as caught:
        action()
    assert caught.value.code == code, (caught.value.code, str(caught.value))
    return caught.value
