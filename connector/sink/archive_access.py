"""``SinkArchive`` over the real archive client: find, read, extend-and-append, seal.

``ClientSinkArchive.start_appender`` sets the appender up and ``ClientAppender`` appends to it. The
appender is an ``ExclusivePublication`` on the sink channel (``alias=aeron-spark-sink:<id>``
plus a fresh ``session-id``, so the archive's recording subscription only ever matches this
commit's publication) that starts exactly at the recording's stop position: ``init-term-id``,
``term-id``, ``term-offset``, ``term-length`` and ``mtu`` come from the descriptor, which is what
ExtendRecording requires of the image it records. A new sink recording is started the same way
at position 0 with ``sink.termLength`` / ``sink.mtu``. Both use ``autoStop``, so a recording whose
committing driver died stops when its publication goes away.

Frames are offered with ``offer_block`` in pieces of at most ``MAX_PIECE`` bytes (and a quarter
term, below the publication window), each starting at a DATA frame; a padding-only block (the next
message does not fit in the rest of the term) becomes ``append_padding``.

The archive is what keeps two committers of one sink apart: it refuses ExtendRecording of an active
recording (ACTIVE_RECORDING) and an extension whose image does not join at the stop position
(INVALID_EXTENSION); Aeron's archive does both, and so does ours (archive/service/recording_requests.py).
Those refusals become ``SinkConflict``. Nothing here truncates: a sink recording never is (why:
``sink/commit.py``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import ContextManager, TypeVar

import numpy as np
from aeron_spark.archive.client import (
    ArchiveClient,
    ArchiveError,
    ArchiveTimeoutError,
    RecordingDescriptor,
    RecordingSignal,
    RecordingSignalEvent,
    SourceLocation,
)
from aeron_spark.driver_integration.frame import HEADER_LENGTH
from aeron_spark.driver_integration.publication import ExclusivePublication, InitialPosition, OfferResult

from aeron_spark.connector.archive_connection import connect_client
from aeron_spark.connector.archive_reading import ClientArchiveAccess
from aeron_spark.connector.connection_cache import ConnectionCache
from aeron_spark.connector.sink.frames import PublicationLayout, TermBlock
from aeron_spark.connector.commit_markers import sink_alias
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.sink_archive import SinkConflict, SinkState

T = TypeVar("T")
LOG = logging.getLogger("aeron_spark.connector.sink")
MAX_PIECE = 1 << 20
# ArchiveErrorCode values (Aeron's ArchiveException codes) that mean another writer holds the recording.
ACTIVE_RECORDING = 2
INVALID_EXTENSION = 9


class SinkArchiveError(RuntimeError):
    pass


def open_sink_archive(options: SinkOptions) -> ClientSinkArchive:
    return ClientSinkArchive(connect_client(options.connection), options)


_connections: ConnectionCache[SinkOptions, ClientSinkArchive] = ConnectionCache(lambda o: open_sink_archive(o))


def shared_sink_archive(options: SinkOptions) -> tuple[ClientSinkArchive, bool]:
    """One archive connection per sink per process, kept across commits (Spark's commit worker is
    long-lived); returns (archive, whether it was reused). Callers forget it after a failure."""
    return _connections.get(options)


def leased_sink_archive(options: SinkOptions) -> ContextManager[tuple[ClientSinkArchive, bool]]:
    """`shared_sink_archive`, held for the ``with`` block and kept alive between blocks."""
    return _connections.lease(options)


def forget_shared_sink_archive(options: SinkOptions) -> None:
    _connections.forget(options)


class ClientSinkArchive:
    def __init__(self, client: ArchiveClient, options: SinkOptions) -> None:
        self._client = client
        self._access = ClientArchiveAccess(client)
        self.options = options
        # (sink id, stream id) -> the state this process's last commit left (sink/commit.py): kept
        # with the connection, so a new connection (e.g. to a restarted archive) starts without it.
        self.committed_states: dict[tuple[str, int], SinkState] = {}

    @property
    def is_connected(self) -> bool:
        """False once the archive has closed this session (see connection_cache)."""
        return self._access.is_connected

    def keep_alive(self) -> None:
        self._access.keep_alive()

    def find_sink_recordings(self, sink_id: str, stream_id: int) -> list[RecordingDescriptor]:
        return self._client.list_recordings_for_uri(0, None, f"alias={sink_alias(sink_id)}", stream_id)

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        return self._client.list_recording(recording_id)

    def read(self, recording_id: int, start: int, end: int) -> ContextManager[Iterator[tuple[int, bytes]]]:
        return self._access.replay(recording_id, start, end, self.options.replay)

    def stop_active(self, recording_id: int) -> None:
        self._client.stop_recording_by_identity(recording_id)

    def start_appender(self, recording: RecordingDescriptor | None, sink_id: str) -> ClientAppender:
        try:
            return self._open_appender(recording, sink_id)
        except ArchiveError as error:
            if recording is not None and error.error_code in (ACTIVE_RECORDING, INVALID_EXTENSION):
                raise SinkConflict(f"sink {sink_id}: the archive refused to extend recording {recording.recording_id} "
                                   f"at {recording.stop_position}: {error.archive_message or error}; another committer "
                                   f"is appending or has appended to it (one writer per sink.id; this commit failed, "
                                   "nothing of it was appended)") from error
            raise

    def _open_appender(self, recording: RecordingDescriptor | None, sink_id: str) -> ClientAppender:
        """Starts (``recording`` None) or extends the sink recording and opens the publication it
        records, positioned at its stop position (see the module docstring)."""
        options, client = self.options, self._client
        timeout = options.commit_timeout_ms / 1000.0
        session_id = random.randint(1, (1 << 31) - 1)
        channel = options.sink_channel(sink_id, session_id)
        location = SourceLocation.LOCAL if options.source_location_local else SourceLocation.REMOTE
        if recording is None:
            initial = InitialPosition(0, random.randint(-(1 << 31), (1 << 31) - 1), options.term_length, options.mtu)
        else:
            initial = InitialPosition(recording.stop_position, recording.initial_term_id,
                                      recording.term_buffer_length, recording.mtu_length)
        # Errors left by earlier requests (e.g. a tail replay refused asynchronously) are not this
        # extension's: drop them before INVALID_EXTENSION is watched for.
        while client.poll_for_error_response() is not None:
            pass
        # The recording subscription first, then the publication: over UDP the archive's endpoint is
        # then bound when the publication's first SETUP frame arrives. The other way round that frame
        # is lost and the driver sends the next one only after its 100 ms setup timeout, which every
        # commit paid (~106 ms of a small commit's ~112 ms). Nothing else can match the channel: its
        # session-id is this commit's.
        subscription_id: int | None = None
        publication: ExclusivePublication | None = None
        try:
            if recording is None:
                subscription_id = client.start_recording(channel, options.stream_id, location, auto_stop=True)
            else:
                subscription_id = client.extend_recording(recording.recording_id, channel, options.stream_id,
                                                          location, auto_stop=True)
            publication = client.aeron.add_exclusive_publication(channel, options.stream_id, initial_position=initial)
            if recording is None:
                recording_id = _await_signal(client, RecordingSignal.START, subscription_id, timeout).recording_id
            else:
                _await_signal(client, RecordingSignal.EXTEND, subscription_id, timeout)
                recording_id = recording.recording_id
            opened = publication
            _await_value(lambda: True if opened.is_connected else None, timeout,
                         "the archive to subscribe to the sink publication")
        except BaseException:
            _stop_recording_subscription(client, subscription_id)
            if publication is not None:
                with contextlib.suppress(Exception):
                    publication.close()
            raise
        return ClientAppender(client, publication, subscription_id, recording_id, initial.position, timeout,
                              self._access.live_position)

    def discard(self, recording_id: int) -> None:
        """Purges a recording this process started and abandoned, once it has stopped (best effort: an
        archive without PurgeRecording, e.g. Aeron 1.15, keeps it, empty and ignored)."""
        deadline = time.monotonic() + min(5.0, self.options.commit_timeout_ms / 1000.0)
        while True:
            descriptor = self._client.list_recording(recording_id)
            if descriptor is None:
                return
            if not descriptor.is_active:
                break
            if time.monotonic() > deadline:
                LOG.warning("recording %d did not stop; left in the catalog", recording_id)
                return
            time.sleep(0.01)
        try:
            self._client.purge_recording(recording_id)
        except ArchiveError as error:
            LOG.warning("could not purge the abandoned recording %d: %s", recording_id, error)

    def close(self) -> None:
        self._access.close()


class ClientAppender:
    """Appends to the publication ``ClientSinkArchive.start_appender`` opened, then seals the recording."""

    def __init__(self, client: ArchiveClient, publication: ExclusivePublication, subscription_id: int,
                 recording_id: int, position: int, timeout: float,
                 live_position: Callable[[int], int | None]) -> None:
        self._client = client
        self._publication = publication
        self._subscription_id: int | None = subscription_id
        self._recording_id = recording_id
        self._position = position
        self._timeout = timeout
        self._live_position = live_position
        self._layout = PublicationLayout(publication.initial_term_id, publication.term_buffer_length,
                                         publication.mtu_length, publication.session_id, publication.stream_id)
        self._max_piece = min(MAX_PIECE, publication.term_buffer_length // 4)
        # What back pressure cost this commit (its step timings report them): offers refused, and the
        # seconds from each first refusal to the offer that went through.
        self.refused_offers = 0
        self.back_pressure_s = 0.0

    @property
    def recording_id(self) -> int:
        return self._recording_id

    @property
    def layout(self) -> PublicationLayout:
        return self._layout

    @property
    def position(self) -> int:
        return self._position

    def append(self, block: TermBlock) -> None:
        if block.position != self._position:
            raise SinkArchiveError(f"block at {block.position}, publication at {self._position}")
        data = block.data
        if block.is_padding_only:
            self._retry(lambda: self._publication.append_padding(data.size - HEADER_LENGTH), "append_padding")
            self._position = block.end
            return
        size = int(data.size)
        offsets = block.split_offsets
        start = 0
        while start < size:
            limit = start + self._max_piece
            if limit >= size:
                end = size
            else:
                index = int(np.searchsorted(offsets, limit, side="right")) - 1
                end = int(offsets[index])
                if end <= start:  # one frame longer than a piece: offer it alone
                    following = int(np.searchsorted(offsets, start, side="right"))
                    end = int(offsets[following]) if following < offsets.size else size
            self._retry(functools.partial(self._publication.offer_block, data, start, end - start), "offer_block")
            start = end
        self._position = block.end

    def _retry(self, offer: Callable[[], int], what: str) -> None:
        result = offer()
        if result >= 0:
            return
        refused_at = time.monotonic()
        deadline = refused_at + self._timeout
        pause = 0.0
        while True:
            if result >= 0:
                self.back_pressure_s += time.monotonic() - refused_at
                return
            self.refused_offers += 1
            code = OfferResult(result)
            if not code.is_retryable:
                raise SinkArchiveError(f"{what} on the sink publication failed: {code.name}")
            if time.monotonic() > deadline:
                raise SinkArchiveError(f"{what} on the sink publication: still {code.name} after {self._timeout} s "
                                       "(is the archive recording it?)")
            if pause:
                time.sleep(pause)
            pause = min(0.001, pause + 0.00002)
            result = offer()

    def seal(self) -> RecordingDescriptor:
        target = self._position
        if self._publication.position != target:
            raise SinkArchiveError(f"publication at {self._publication.position}, appended up to {target}")
        _await_value(lambda: True if (self._live_position(self._recording_id) or -1) >= target else None,
                     self._timeout, f"recording {self._recording_id} to reach position {target}")
        self._stop_subscription()
        descriptor = _await_value(self._stopped_descriptor, self._timeout, f"recording {self._recording_id} to stop")
        self._publication.close()
        return descriptor

    def abandon(self) -> None:
        self._stop_subscription()
        with contextlib.suppress(Exception):
            self._publication.close()

    def _stop_subscription(self) -> None:
        subscription_id, self._subscription_id = self._subscription_id, None
        _stop_recording_subscription(self._client, subscription_id)

    def _stopped_descriptor(self) -> RecordingDescriptor | None:
        descriptor = self._client.list_recording(self._recording_id)
        return descriptor if descriptor is not None and not descriptor.is_active else None


def _stop_recording_subscription(client: ArchiveClient, subscription_id: int | None) -> None:
    if subscription_id is not None:
        with contextlib.suppress(Exception):  # autoStop may have removed it already
            client.stop_recording_subscription(subscription_id)


def _await_signal(client: ArchiveClient, signal: RecordingSignal, subscription_id: int,
                  timeout: float) -> RecordingSignalEvent:
    deadline = time.monotonic() + timeout
    while True:
        client.check_for_error_response()  # e.g. INVALID_EXTENSION, sent after the OK
        try:
            return client.await_recording_signal(signal, subscription_id=subscription_id, timeout=0.05)
        except ArchiveTimeoutError:
            if time.monotonic() > deadline:
                raise SinkArchiveError(f"no {signal.name} signal for the sink recording within {timeout} s")


def _await_value(produce: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = produce()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise SinkArchiveError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.001)
