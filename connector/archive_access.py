"""The only module of the connector that talks to the archive.

``ArchiveAccess`` is what the source needs from an archive, in the source's own terms; unit tests
implement it with a fake. ``open_archive(connection)`` builds the real one over
``aeron_spark.archive.client.ArchiveClient``; wiring a different client is a change to this file
only.

Real-client facts used here:
* live positions come from the archive's rec-pos counters (type 100; archive.recording_position
  finds them by recording id and archive id) read through the client's CountersReader, so
  ``latestOffset`` costs no control round trip;
* each replay gets its own ``session-id`` on the replay channel and a subscription to that
  session only: replays of other partitions on the same channel/stream then never become images
  of this subscription (an unpolled IPC image would hold their publications back);
* a replay is bounded by a limit counter holding the range end, so the archive never sends a
  byte past it;
* ``archive.dir`` is resolved through the archive's mark file, and a mark file that says the
  archive stopped (or stopped updating) is a clear error at once, not a connect timeout.

The client calls (checked against ``ArchiveClient`` and the sidecar): ``connect(control_channel,
control_stream_id, response_channel, response_stream_id, aeron_dir, timeout)``,
``list_recording``, ``list_recordings_for_uri(from, count, fragment, stream_id)``,
``recording_position`` (-1 when not active), ``start_bounded_replay(recording_id, position,
length, limit_counter_id, channel, stream_id)``, ``stop_replay``, ``close``; and on its
AeronClient ``add_subscription``, ``add_counter(type_id, key, label)`` and ``counters_reader``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import struct
import time
from collections.abc import Callable, Iterator
from typing import ContextManager, Protocol, TypeVar

from aeron_spark.archive import recording_position
from aeron_spark.archive.recording_descriptor import RecordingDescriptor

from .connection_cache import ConnectionCache
from .options import ArchiveConnection, DEFAULT_CONTROL_STREAM_ID, ReplaySettings

LOG = logging.getLogger(__name__)

# Application counter type for our bounded-replay limits (Aeron reserves < 1000 for itself).
REPLAY_LIMIT_COUNTER_TYPE_ID = 1_977_100
LIST_PAGE_SIZE = 256
REPLAY_BLOCK_LIMIT = 1 << 20
T = TypeVar("T")


class ArchiveUnavailable(RuntimeError):
    """The archive cannot be reached or located."""


class ReplayFailed(RuntimeError):
    """A replay stopped before delivering its whole range."""


class ArchiveAccess(Protocol):
    @property
    def archive_id(self) -> int: ...

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        """The recording's current descriptor, None if the catalog has no such (valid) recording."""

    def list_matching(self, channel_fragment: str, stream_id: int, from_recording_id: int) -> list[RecordingDescriptor]:
        """Recordings with id >= from_recording_id, this stream id and an original channel
        containing the fragment (Aeron's ListRecordingsForUri), all pages."""

    def live_position(self, recording_id: int) -> int | None:
        """The recorded position of an active recording, None once it is not being recorded."""

    def replay(self, recording_id: int, start: int, end: int,
               settings: ReplaySettings) -> ContextManager[Iterator[tuple[int, bytes]]]:
        """Frames of [start, end) as (position, block) pairs, contiguous, in order."""

    def close(self) -> None: ...


# --- locating the archive ----------------------------------------------------------------------


def resolve_connection(connection: ArchiveConnection) -> ArchiveConnection:
    """Fill control channel / stream id / aeron dir from the archive's mark file when asked to."""
    if connection.archive_dir is None:
        return connection
    mark = read_mark_file_location(connection.archive_dir)
    if not mark.is_live():
        state = ("stopped cleanly" if mark.terminated else
                 f"has not been updated for {mark.activity_age_ms() / 1000:.1f} s or its process {mark.pid} is gone")
        raise ArchiveUnavailable(f"option archive.dir: no archive is running on {connection.archive_dir} "
                                 f"(its mark file {mark.path} says it {state}); start `aeron-archive serve "
                                 f"--dir {connection.archive_dir}` or point archive.dir at a running archive")
    if not mark.control_channel and not connection.control_channel:
        raise ArchiveUnavailable(f"the archive mark file in {connection.archive_dir} names no control channel; "
                                 "set archive.controlChannel")
    return ArchiveConnection(
        archive_dir=connection.archive_dir,
        control_channel=connection.control_channel or mark.control_channel,
        control_stream_id=connection.control_stream_id if connection.control_stream_id is not None
        else mark.control_stream_id,
        response_channel=connection.response_channel,
        response_stream_id=connection.response_stream_id,
        aeron_dir=connection.aeron_dir or mark.aeron_dir,
        timeout_ms=connection.timeout_ms,
    )


def read_mark_file_location(path):
    """The archive's ArchiveMarkInfo (control channel, control stream id, aeron dir) from its mark file."""
    from aeron_spark.archive.mark_file import MarkFileError, read_location
    try:
        return read_location(path)
    except MarkFileError as error:
        raise ArchiveUnavailable(f"option archive.dir: {error}") from None
    except (OSError, ValueError) as error:
        raise ArchiveUnavailable(f"option archive.dir: cannot read the archive mark file {path}: {error}") from None


def default_response_channel(control_channel: str) -> str:
    return "aeron:ipc" if control_channel.startswith("aeron:ipc") else "aeron:udp?endpoint=localhost:0"


# --- the real archive ---------------------------------------------------------------------------


def open_archive(connection: ArchiveConnection) -> ArchiveAccess:
    resolved = resolve_connection(connection)
    if not resolved.control_channel:
        raise ArchiveUnavailable("no archive control channel: set archive.controlChannel or archive.dir")
    from aeron_spark.archive.client import ArchiveClient  # imported late: executors may not need it
    try:
        client = ArchiveClient.connect(
            control_channel=resolved.control_channel,
            control_stream_id=resolved.control_stream_id or DEFAULT_CONTROL_STREAM_ID,
            response_channel=resolved.response_channel or default_response_channel(resolved.control_channel),
            response_stream_id=resolved.response_stream_id,
            aeron_dir=resolved.aeron_dir,
            timeout=resolved.timeout_ms / 1000.0,
        )
    except Exception as error:
        raise ArchiveUnavailable(
            f"cannot connect to the archive at {resolved.control_channel} stream {resolved.control_stream_id} "
            f"(aeron.dir={resolved.aeron_dir}): {error}") from error
    return ClientArchiveAccess(client)


_connections: ConnectionCache[ArchiveConnection, ArchiveAccess] = ConnectionCache(lambda c: open_archive(c))


def shared_archive(connection: ArchiveConnection) -> ArchiveAccess:
    """One connection per Python worker process (Spark reuses workers across tasks)."""
    return _connections.get(connection)[0]


def forget_shared_archive(connection: ArchiveConnection) -> None:
    _connections.forget(connection)


class ClientArchiveAccess:
    def __init__(self, client) -> None:
        self._client = client
        self._counter_ids: dict[int, int] = {}

    @property
    def archive_id(self) -> int:
        return self._client.archive_id

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        return self._client.list_recording(recording_id)

    def list_matching(self, channel_fragment: str, stream_id: int, from_recording_id: int) -> list[RecordingDescriptor]:
        found: list[RecordingDescriptor] = []
        next_id = from_recording_id
        while True:
            page = self._client.list_recordings_for_uri(next_id, LIST_PAGE_SIZE, channel_fragment, stream_id)
            found.extend(page)
            if len(page) < LIST_PAGE_SIZE:
                return found
            next_id = page[-1].recording_id + 1

    def live_position(self, recording_id: int) -> int | None:
        counters = self._client.aeron.counters_reader
        counter_id = self._counter_ids.get(recording_id)
        if counter_id is None:
            counter_id = recording_position.find_counter_id_by_recording(counters, recording_id, self.archive_id)
        if counter_id >= 0:
            value = recording_position.recorded_position(counters, counter_id)
            # Checked after reading: a freed counter id may be reused by another recording.
            if recording_position.is_active(counters, counter_id, recording_id):
                self._counter_ids[recording_id] = counter_id
                return value
        self._counter_ids.pop(recording_id, None)
        position = self._client.recording_position(recording_id)  # a counter not visible yet
        return None if position is None or position < 0 else position

    @contextlib.contextmanager
    def replay(self, recording_id: int, start: int, end: int,
               settings: ReplaySettings) -> Iterator[Iterator[tuple[int, bytes]]]:
        with self._replay_image(recording_id, start, end, settings) as image:
            yield _replayed_blocks(image, recording_id, start, end, settings.idle_timeout_ms)

    @contextlib.contextmanager
    def _replay_image(self, recording_id: int, start: int, end: int, settings: ReplaySettings):
        aeron = self._client.aeron
        session_id = random.randint(1, (1 << 31) - 1)
        channel = _with_param(settings.channel, "session-id", str(session_id))
        subscription = aeron.add_subscription(channel, settings.stream_id)
        limit = aeron.add_counter(REPLAY_LIMIT_COUNTER_TYPE_ID, struct.pack("<q", recording_id),
                                  f"aeron-archive source replay limit: {recording_id} [{start}, {end})")
        limit.value = end
        replay_session_id = None
        try:
            replay_session_id = self._client.start_bounded_replay(
                recording_id, start, end - start, limit.counter_id, channel, settings.stream_id)
            yield _await_image(subscription, session_id, settings.idle_timeout_ms, recording_id)
        finally:
            if replay_session_id is not None:
                with contextlib.suppress(Exception):
                    self._client.stop_replay(replay_session_id)
            for resource in (subscription, limit):
                with contextlib.suppress(Exception):
                    resource.close()

    @contextlib.contextmanager
    def replay_pump(self, recording_id: int, start: int, end: int,
                    settings: ReplaySettings) -> Iterator[ReplayPump]:
        """Like :meth:`replay`, but the caller copies each block where it wants it (one copy)."""
        with self._replay_image(recording_id, start, end, settings) as image:
            try:
                yield ReplayPump(image, recording_id, start, end, settings.idle_timeout_ms)
            finally:
                image.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()


def _with_param(channel: str, name: str, value: str) -> str:
    separator = "|" if "?" in channel else "?"
    return f"{channel}{separator}{name}={value}"


def _await_image(subscription, session_id: int, timeout_ms: int, recording_id: int):
    deadline = time.monotonic() + timeout_ms / 1000.0
    while time.monotonic() < deadline:
        image = subscription.image_by_session_id(session_id)
        if image is not None:
            return image
        time.sleep(0.001)
    raise ReplayFailed(f"recording {recording_id}: replay image did not appear within {timeout_ms} ms")


class ReplayPump:
    """Polls one replay image block by block; ``next_block(consume)`` hands the block to
    ``consume(view, position)`` while the view still points into the term buffer, so a caller
    that copies it straight to where it is needed makes the only copy."""

    def __init__(self, image, recording_id: int, start: int, end: int, idle_timeout_ms: int) -> None:
        self._image = image
        self._recording_id = recording_id
        self._end = end
        self._idle_timeout_ms = idle_timeout_ms
        self.position = start
        self._result: list = []

    def _on_block(self, view, position: int, _session_id: int, _term_id: int) -> None:
        self._result.append((position, len(view), self._consume(view, position)))

    def next_block(self, consume: Callable[[memoryview, int], T]) -> tuple[int, T] | None:
        """(block position, what ``consume`` returned) for the next block; None at the range end."""
        if self.position >= self._end:
            return None
        self._consume = consume
        idle_since = time.monotonic()
        image, result = self._image, self._result
        while True:
            result.clear()
            image.block_poll(self._on_block, min(REPLAY_BLOCK_LIMIT, self._end - self.position))
            if result:
                position, length, value = result[0]
                result.clear()
                self.position = position + length
                return position, value
            if image.is_closed or image.is_end_of_stream:
                raise ReplayFailed(
                    f"recording {self._recording_id}: replay ended at {self.position}, before {self._end}")
            if time.monotonic() - idle_since > self._idle_timeout_ms / 1000.0:
                raise ReplayFailed(
                    f"recording {self._recording_id}: replay made no progress at {self.position} "
                    f"for {self._idle_timeout_ms} ms (replay.idleTimeoutMs)")
            time.sleep(0.0005)


def _copied(view, _position: int) -> bytes:
    # Copied: the view points into the term buffer and is only valid during the callback.
    return bytes(view)


def _replayed_blocks(image, recording_id: int, start: int, end: int,
                     idle_timeout_ms: int) -> Iterator[tuple[int, bytes]]:
    pump = ReplayPump(image, recording_id, start, end, idle_timeout_ms)
    try:
        while (block := pump.next_block(_copied)) is not None:
            yield block
    finally:
        image.close()
