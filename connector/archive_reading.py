"""Reading an archive over ``aeron_spark.archive.client.archive_client.ArchiveClient``:
descriptors, listings, live positions and bounded replays. ``ClientArchiveAccess`` is the real
``source.archive_access.ArchiveAccess``; the sink reads back and watches its own recording with it
(``sink/archive_access.py``).

Real-client facts used here:
* live positions come from the archive's rec-pos counters (type 100, Aeron's RecordingPos;
  ``aeron_spark.archive.client.live_positions`` finds them by recording id and archive id) read
  through the client's CountersReader, so
  ``latestOffset`` costs no control round trip;
* each replay gets its own ``session-id`` on the replay channel and a subscription to that
  session only: replays of other partitions on the same channel/stream then never become images
  of this subscription (an unpolled IPC image would hold their publications back);
* replays go over IPC only to a client on the archive's media driver; elsewhere (another host)
  to this worker's UDP endpoint (``replay_endpoint``), and a replay that does not arrive there
  fails fast naming the endpoint and the options that set it (``ReplayEndpointUnreachable``);
* a replay is bounded so the archive never sends a byte past the range end: by a limit counter
  holding the end when this client shares the archive's driver (the archive reads the counter
  there), else by its length (a counter id from another driver names nothing, or an unrelated
  counter, on the archive's);
* a replay is watched while it is waited for: an ERROR the archive sends for it after its OK
  (``check_replay_error``) fails it at once with the archive's text; a replay idle at a position
  short of the range end replays the frame there once (``frame_end_at``) and fails at once if that
  frame crosses the end (the archive sends whole frames only, so it never would);
* replays are refused when the archive records their channel/stream (ListRecordingSubscriptions,
  re-checked every few seconds): each would become a new recording;
* a 1.15.x archive (no BoundedReplay) gets a plain Replay of exactly the range.

The client calls (checked against ``ArchiveClient`` and the sidecar): ``list_recording``,
``list_recordings(from, count)``, ``list_recordings_for_uri(from, count, fragment, stream_id)``,
``list_recordings_for_uri_page`` (the same, with where the archive's scan ended), ``recording_position`` (-1 when
not active), ``start_bounded_replay(recording_id, position, length, limit_counter_id, channel,
stream_id)``, ``start_replay(recording_id, position, length, channel, stream_id)`` and
``is_legacy`` (1.15.x), ``check_replay_error(replay_session_id)``,
``list_recording_subscriptions(index, count, fragment, stream_id, apply_stream_id)``,
``stop_replay``, ``close``; and on its AeronClient ``add_subscription``, ``add_counter(type_id,
key, label)`` and ``counters_reader``. Connecting is ``archive_connection.connect_client``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import struct
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import numpy as np

from aeron_spark.archive.client import live_positions
from aeron_spark.archive.client import RecordingDescriptor
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.driver_integration.frame import aligned_frame_length

from aeron_spark.connector.options import ReplaySettings
from aeron_spark.connector.replay_endpoint import ReplayEndpoints

LOG = logging.getLogger(__name__)

# Application counter type for our bounded-replay limits (Aeron reserves < 1000 for itself).
REPLAY_LIMIT_COUNTER_TYPE_ID = 1_977_100
LIST_PAGE_SIZE = 256
# A recording whose counter is not in the index (not visible yet, or not active) falls back to a
# RecordingPosition request; the index is rebuilt for it only when older than this.
COUNTER_INDEX_MAX_AGE_S = 0.05
REPLAY_BLOCK_LIMIT = 1 << 20
#: A replay idle this long (at most half the idle timeout) is examined once per position: the
#: frame there may cross the range end, which the archive never sends (a bounded replay sends
#: whole frames only), so waiting longer cannot help.
STALL_PROBE_AFTER_MS = 200
#: How long an ended replay image waits for the archive's ERROR that explains it.
LATE_ERROR_WAIT_MS = 500
#: How often the archive's recording subscriptions are looked at again for one replay stream.
RECORDED_STREAM_CHECK_INTERVAL_S = 5.0
RECORDING_SUBSCRIPTIONS_PAGE = 256
T = TypeVar("T")


class ReplayFailed(RuntimeError):
    """A replay stopped before delivering its whole range."""


class ReplayEndInsideFrame(ReplayFailed):
    """The range end falls inside a frame: the archive replays whole frames only, so the frame
    ``[frame_start, frame_end)`` that crosses it is never sent."""

    def __init__(self, recording_id: int, end: int, frame_start: int, frame_end: int) -> None:
        super().__init__(
            f"recording {recording_id}: the range end {end} is not a frame boundary, it falls inside "
            f"the frame [{frame_start}, {frame_end}); positions in endingPositions (and "
            f"startingPositions) must be frame boundaries of the recording, e.g. {frame_start} or "
            f"{frame_end} here")
        self.recording_id = recording_id
        self.end = end
        self.frame_start = frame_start
        self.frame_end = frame_end


class ReplayEndpointUnreachable(ReplayFailed):
    """The archive's replay did not reach this worker's endpoint."""


class ReplayImageTimeout(ReplayFailed):
    """No replay image appeared in time."""


#: How archives (ours, Java's) word a replay whose publication never connected.
NOT_CONNECTED_TEXT = "no connection established"


class ReplayStreamRecorded(ReplayFailed):
    """The archive records the channel/stream replays would be sent on."""


class ReplayWatch(Protocol):
    """What a waiting replay asks its archive connection (see ClientArchiveAccess)."""

    def check(self) -> None:
        """Raise ReplayFailed if the archive sent an error for this replay (non-blocking)."""

    def explain_end(self) -> str:
        """Why the replay image ended early: the archive's error text, "" if none arrives soon."""

    def stalled(self, position: int) -> None:
        """The replay made no progress at ``position`` for a while: raise ReplayFailed when that
        has a cause that waiting cannot fix (e.g. :class:`ReplayEndInsideFrame`)."""


class ClientArchiveAccess:
    """``ArchiveAccess`` over a connected ``ArchiveClient`` (see the module docstring)."""

    def __init__(self, client, hosts: tuple[str, str] | None = None) -> None:
        """``hosts``: (address the archive reaches this worker at, address to bind) for UDP
        replays; None: those of the client's response channel."""
        self._client = client
        self._hosts = hosts
        self._counter_ids: dict[int, int] = {}  # recording id -> its rec-pos counter id, once read
        self._counter_index: dict[int, int] | None = None
        self._counter_index_built = 0.0
        # Bumped when _counter_ids changes; `live_positions` keeps the ids it gathers by until then.
        self._counter_ids_version = 0
        self._gather: tuple | None = None
        self._recorded_stream_checks: dict[tuple[str, int], float] = {}
        self._endpoints: ReplayEndpoints | None = None

    @property
    def replay_endpoints(self) -> ReplayEndpoints:
        """Chosen on first use: whether this client shares the archive's driver does not change."""
        if self._endpoints is None:
            shares = getattr(self._client, "shares_archive_driver", None)
            self._endpoints = ReplayEndpoints(
                self._client.aeron, shares() if shares is not None else True,
                self._hosts or getattr(self._client, "response_hosts", None), getattr(self._client, "timeout", 10.0),
                response_channel=getattr(self._client, "response_channel", None))
        return self._endpoints

    @property
    def archive_id(self) -> int:
        return self._client.archive_id

    @property
    def is_connected(self) -> bool:
        """False once the archive has closed this session (see connection_cache)."""
        return bool(getattr(self._client, "is_connected", True))

    def keep_alive(self) -> None:
        """Reads what the archive sent while this connection sat idle and tells it the client
        lives (connection_cache's keeper calls it between tasks)."""
        keep_alive = getattr(self._client, "keep_alive", None)
        if keep_alive is not None and self.is_connected:
            keep_alive()

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        return self._client.list_recording(recording_id)

    def list_matching(self, channel_fragment: str, stream_id: int, from_recording_id: int) -> list[RecordingDescriptor]:
        return self.list_matching_since(channel_fragment, stream_id, from_recording_id)[0]

    def list_matching_since(self, channel_fragment: str, stream_id: int,
                            from_recording_id: int) -> tuple[list[RecordingDescriptor], int]:
        """The matching recordings from ``from_recording_id`` on, and the id the next listing starts
        at: past the last match, or further, where the archive's scan ended (its RECORDING_UNKNOWN
        says), so that recordings of other streams are not scanned again at the next discovery."""
        found: list[RecordingDescriptor] = []
        next_id = from_recording_id
        while True:
            page = self._client.list_recordings_for_uri_page(next_id, LIST_PAGE_SIZE, channel_fragment, stream_id)
            found.extend(page.descriptors)
            next_id = page.next_from(next_id)
            if len(page.descriptors) < LIST_PAGE_SIZE:
                return found, next_id

    def has_recording_from(self, from_recording_id: int) -> bool:
        """Whether the archive has any valid recording with id >= ``from_recording_id``: one
        ListRecordings of one record (cheap for the archive: it stops at the first)."""
        return bool(self._client.list_recordings(from_recording_id, 1))

    def list_from(self, from_recording_id: int) -> list[RecordingDescriptor]:
        found: list[RecordingDescriptor] = []
        next_id = from_recording_id
        while True:
            page = self._client.list_recordings(next_id, LIST_PAGE_SIZE)
            found.extend(page)
            if len(page) < LIST_PAGE_SIZE:
                return found
            next_id = page[-1].recording_id + 1

    def live_position(self, recording_id: int) -> int | None:
        counters = self._client.aeron.counters_reader
        counter_id = self._counter_ids.get(recording_id)
        if counter_id is None:
            counter_id = self._find_counter(counters, recording_id)
        if counter_id >= 0:
            value = live_positions.recorded_position(counters, counter_id)
            # Checked after reading: a freed counter id may be reused by another recording.
            if live_positions.is_counter_of(counters, counter_id, recording_id):
                if self._counter_ids.get(recording_id) != counter_id:
                    self._counter_ids[recording_id] = counter_id
                    self._counter_ids_version += 1
                return value
        if self._counter_ids.pop(recording_id, None) is not None:
            self._counter_ids_version += 1
        position = self._client.recording_position(recording_id)  # a counter not visible yet
        return None if position is None or position < 0 else position

    def live_positions(self, recording_ids: list[int]) -> dict[int, int | None]:
        """`live_position` of each recording: those whose counter is known are read together with
        one numpy gather and ownership check over the counters (no per-recording C call); the rest
        one at a time as `live_position` (which finds their counter, or asks the archive)."""
        if not recording_ids:
            return {}
        counters = self._client.aeron.counters_reader
        columns = getattr(counters, "columns", None)
        known = self._counter_ids
        if columns is None:  # a reader without numpy views (a stand-in)
            return {recording_id: self.live_position(recording_id) for recording_id in recording_ids}
        gather = self._gather
        if gather is None or gather[0] != self._counter_ids_version or gather[1] != recording_ids:
            with_counter = [recording_id for recording_id in recording_ids if recording_id in known]
            gather = self._gather = (self._counter_ids_version, list(recording_ids), with_counter,
                                     np.array([known[recording_id] for recording_id in with_counter], dtype=np.intp),
                                     np.array(with_counter, dtype=np.int64))
        with_counter = gather[2]
        positions: dict[int, int | None] = {}
        if with_counter:
            values, owned = live_positions.read_owned_positions(columns(), gather[3], gather[4])
            if owned.all():
                positions = dict(zip(with_counter, values.tolist()))
            else:
                positions = {recording_id: value for recording_id, value, mine
                             in zip(with_counter, values.tolist(), owned.tolist()) if mine}
        if len(positions) < len(recording_ids):
            for recording_id in recording_ids:
                if recording_id not in positions:
                    positions[recording_id] = self.live_position(recording_id)
        return positions

    def _find_counter(self, counters, recording_id: int) -> int:
        """The recording's rec-pos counter id, from an index of every rec-pos counter of this
        archive built in one pass and rebuilt at most every COUNTER_INDEX_MAX_AGE_S: a source's
        first trigger over N live recordings then costs one pass over the counters, not N."""
        now = time.monotonic()
        if self._counter_index is None or now - self._counter_index_built >= COUNTER_INDEX_MAX_AGE_S:
            self._counter_index = live_positions.counter_ids_by_recording(counters, self.archive_id)
            self._counter_index_built = now
        return self._counter_index.get(recording_id, live_positions.NULL_COUNTER_ID)

    @contextlib.contextmanager
    def replay(self, recording_id: int, start: int, end: int,
               settings: ReplaySettings) -> Iterator[Iterator[tuple[int, bytes]]]:
        with self._replay_image(recording_id, start, end, settings) as (image, watch):
            yield _replayed_blocks(image, recording_id, start, end, settings.idle_timeout_ms, watch)

    @contextlib.contextmanager
    def replay_pump(self, recording_id: int, start: int, end: int,
                    settings: ReplaySettings) -> Iterator[ReplayPump]:
        """Like :meth:`replay`, but the caller copies each block where it wants it (one copy)."""
        with self._replay_image(recording_id, start, end, settings) as (image, watch):
            try:
                yield ReplayPump(image, recording_id, start, end, settings.idle_timeout_ms, watch)
            finally:
                image.close()

    @contextlib.contextmanager
    def _replay_image(self, recording_id: int, start: int, end: int, settings: ReplaySettings):
        """(image, watch) of a replay of exactly [start, end) on a private session."""
        endpoints = self.replay_endpoints
        self._refuse_recorded_replay_stream(settings, endpoints.base_channel(settings.channel))
        aeron = self._client.aeron
        session_id = random.randint(1, (1 << 31) - 1)
        receiver = endpoints.subscribe(settings.channel, settings.stream_id, session_id)
        subscription = receiver.subscription
        limit = None
        replay_session_id = None
        # A response channel's replay names its subscription (and the Image has the replay's session id).
        over_response = {"subscription_registration_id": subscription.registration_id} \
            if receiver.response_mode else {}
        try:
            try:
                if getattr(self._client, "is_legacy", False) or not endpoints.shares_archive_driver:
                    # Bounded by length: a 1.15.x archive has no BoundedReplay, and an archive on
                    # another driver cannot read our counters. The same for recorded data (ranges
                    # never end past the recorded position).
                    replay_session_id = self._client.start_replay(
                        recording_id, start, end - start, receiver.told, settings.stream_id, **over_response)
                else:
                    limit = aeron.add_counter(REPLAY_LIMIT_COUNTER_TYPE_ID, struct.pack("<q", recording_id),
                                              f"aeron-archive source replay limit: {recording_id} [{start}, {end})")
                    limit.value = end
                    replay_session_id = self._client.start_bounded_replay(
                        recording_id, start, end - start, limit.counter_id, receiver.told, settings.stream_id,
                        **over_response)
            except Exception as error:
                if _is_archive_error(error):
                    raise ReplayFailed(f"recording {recording_id}: the archive refused the replay of "
                                       f"[{start}, {end}): {_archive_text(error)}") from error
                raise
            watch = _ArchiveReplayWatch(self, recording_id, end, replay_session_id, settings)
            if receiver.response_mode:
                session_id = replay_image_session_id(replay_session_id)
            if receiver.over_udp:
                image = _await_udp_image(subscription, session_id, self._image_timeout_ms(settings), recording_id,
                                         watch, receiver.told)
            else:
                image = _await_image(subscription, session_id, settings.idle_timeout_ms, recording_id, watch)
            yield image, watch
        finally:
            if replay_session_id is not None:
                with contextlib.suppress(Exception):
                    self._client.stop_replay(replay_session_id)
            for resource in (subscription, limit):
                if resource is not None:
                    with contextlib.suppress(Exception):
                        resource.close()

    def _image_timeout_ms(self, settings: ReplaySettings) -> int:
        """How long a UDP replay may take to arrive: the archive's own connect timeout is seconds,
        so waiting the whole idle timeout would only delay the error."""
        return min(settings.idle_timeout_ms, int(getattr(self._client, "timeout", 10.0) * 1000))

    def _refuse_recorded_replay_stream(self, settings: ReplaySettings, channel: str) -> None:
        """Fails when the archive records the replay ``channel``/stream: each replay would become a
        new recording (and a source discovering that stream would read its own replays)."""
        key = (channel, settings.stream_id)
        now = time.monotonic()
        checked = self._recorded_stream_checks.get(key)
        if checked is not None and now - checked < RECORDED_STREAM_CHECK_INTERVAL_S:
            return
        list_subscriptions = getattr(self._client, "list_recording_subscriptions", None)
        if list_subscriptions is None or getattr(self._client, "is_legacy", False):
            return  # 1.15.x archives cannot list their recording subscriptions
        found = []
        index = 0
        try:
            while True:
                page = list_subscriptions(index, RECORDING_SUBSCRIPTIONS_PAGE, "", settings.stream_id, True)
                found.extend(page)
                if len(page) < RECORDING_SUBSCRIPTIONS_PAGE:
                    break
                index += len(page)
        except Exception as error:
            if not _is_archive_error(error):
                raise
            # An archive without ListRecordingSubscriptions (older than Aeron 1.17): replay unchecked.
            LOG.warning("cannot check whether the archive records replay.channel=%s replay.streamId=%d: %s",
                        channel, settings.stream_id, error)
            found = []
        for subscription in found:
            if records_replays(subscription.stripped_channel, subscription.stream_id,
                               channel, settings.stream_id):
                raise ReplayStreamRecorded(
                    f"options replay.channel={channel} and replay.streamId={settings.stream_id}: "
                    f"the archive records that stream (recording subscription {subscription.subscription_id} "
                    f"on {subscription.stripped_channel} stream {subscription.stream_id}), so every replay of "
                    f"this source would become a new recording; set replay.streamId to a stream id the archive "
                    f"does not record (or stop that recording)")
        self._recorded_stream_checks[key] = now

    def frame_end_at(self, recording_id: int, position: int, settings: ReplaySettings,
                     timeout_ms: int) -> int | None:
        """Where the frame recorded at ``position`` ends (32-aligned), by replaying it; None when
        nothing is recorded there yet or the replay does not deliver it within ``timeout_ms``."""
        descriptor = self.describe(recording_id)
        if descriptor is None:
            return None
        term_length = descriptor.term_buffer_length
        term_end = (position // term_length + 1) * term_length
        recorded = descriptor.stop_position if not descriptor.is_active else self.live_position(recording_id)
        # Term ends and the recorded end are frame boundaries, so this replay never stalls.
        probe_end = min(term_end, recorded if recorded is not None else descriptor.stop_position)
        if probe_end <= position:
            return None
        probe = ReplaySettings(settings.channel, settings.stream_id, timeout_ms)
        lengths: list[int] = []
        try:
            with self._replay_image(recording_id, position, probe_end, probe) as (image, watch):
                try:
                    deadline = time.monotonic() + timeout_ms / 1000.0
                    while not lengths and time.monotonic() < deadline:
                        image.block_poll(lambda view, *_: lengths.append(struct.unpack_from("<i", view, 0)[0]),
                                         probe_end - position)
                        if not lengths:
                            watch.check()
                            time.sleep(0.0005)
                finally:
                    image.close()
        except ReplayFailed:
            return None
        if not lengths or lengths[0] <= 0:
            return None
        return position + aligned_frame_length(lengths[0])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()


class _ArchiveReplayWatch:
    """ReplayWatch over the archive client: asynchronous ERRORs of this replay session (the
    archive may fail a replay after its OK: Java 1.15.x checks the start frame then, ours when a
    segment is unreadable) and the frame at a stall."""

    def __init__(self, access: ClientArchiveAccess, recording_id: int, end: int, replay_session_id: int,
                 settings: ReplaySettings) -> None:
        self._access = access
        self._recording_id = recording_id
        self._end = end
        self._replay_session_id = replay_session_id
        self._settings = settings
        self._check_error = getattr(access._client, "check_replay_error", None)

    def _archive_error(self) -> Exception | None:
        """The archive's ERROR for this replay, if one has arrived (polls once, non-blocking)."""
        if self._check_error is None:
            return None
        try:
            self._check_error(self._replay_session_id)
        except Exception as error:
            if _is_archive_error(error):
                return error
            raise
        return None

    def check(self) -> None:
        error = self._archive_error()
        if error is not None:
            raise ReplayFailed(f"recording {self._recording_id}: the archive failed the replay "
                               f"(replaySessionId={self._replay_session_id}): {_archive_text(error)}") from error

    def explain_end(self) -> str:
        # The ERROR follows the end of the image closely (the archive revokes, then reports).
        deadline = time.monotonic() + LATE_ERROR_WAIT_MS / 1000.0
        while self._check_error is not None:
            error = self._archive_error()
            if error is not None:
                return f"the archive reports: {_archive_text(error)}"
            if time.monotonic() > deadline:
                break
            time.sleep(0.002)
        return ""

    def stalled(self, position: int) -> None:
        if position >= self._end:
            return
        frame_end = self._access.frame_end_at(self._recording_id, position, self._settings,
                                              timeout_ms=min(self._settings.idle_timeout_ms, 5_000))
        if frame_end is not None and frame_end > self._end:
            raise ReplayEndInsideFrame(self._recording_id, self._end, position, frame_end)


def records_replays(recorded_channel: str, recorded_stream_id: int, replay_channel: str,
                    replay_stream_id: int) -> bool:
    """Whether a recording subscription on ``recorded_channel``/``recorded_stream_id`` would see
    the replay publications of this source (``replay_channel`` plus a random session-id): same
    stream id and media, and for UDP the same endpoint; a subscription limited to one session-id
    does not (the source's session ids are random)."""
    from aeron_spark.driver_integration.channel_uri import ChannelUriError, parse
    if recorded_stream_id != replay_stream_id:
        return False
    try:
        recorded, replay = parse(recorded_channel), parse(replay_channel)
    except ChannelUriError:
        return False
    if recorded.media != replay.media or "session-id" in recorded:
        return False
    if recorded.is_ipc:
        return True
    return recorded.get("endpoint") is not None and recorded.get("endpoint") == replay.get("endpoint")


def _is_archive_error(error: Exception) -> bool:
    # ArchiveError is imported late (executors may not need the client); match by its fields.
    return hasattr(error, "archive_message") and hasattr(error, "error_code")


def _archive_text(error: Exception) -> str:
    return getattr(error, "archive_message", "") or str(error)


def _await_image(subscription, session_id: int, timeout_ms: int, recording_id: int,
                 watch: ReplayWatch | None = None):
    deadline = time.monotonic() + timeout_ms / 1000.0
    while time.monotonic() < deadline:
        image = subscription.image_by_session_id(session_id)
        if image is not None:
            return image
        if watch is not None:
            watch.check()  # an archive that fails the replay after its OK never sends the image
        time.sleep(0.001)
    raise ReplayImageTimeout(f"recording {recording_id}: replay image did not appear within {timeout_ms} ms")


def _await_udp_image(subscription, session_id: int, timeout_ms: int, recording_id: int, watch: ReplayWatch,
                     told_channel: str):
    """``_await_image`` for a replay sent to this worker over UDP: when it does not arrive, the
    error names the endpoint the archive was told and the options that choose it."""
    try:
        return _await_image(subscription, session_id, timeout_ms, recording_id, watch)
    except ReplayFailed as error:
        if not isinstance(error, ReplayImageTimeout) and NOT_CONNECTED_TEXT not in str(error):
            raise  # the archive failed the replay for another reason, told in its own words
        raise ReplayEndpointUnreachable(
            f"recording {recording_id}: the replay sent to this worker's endpoint {told_channel} did not arrive "
            f"({error}); the archive must reach that address over UDP: set aeron.host to an address of this host "
            f"the archive can reach (and aeron.bindAddress when the local address differs, e.g. behind NAT), "
            f"open its port to the archive host, or set replay.channel") from error


class ReplayPump:
    """Polls one replay image block by block; ``next_block(consume)`` hands the block to
    ``consume(view, position)`` while the view still points into the term buffer, so a caller
    that copies it straight to where it is needed makes the only copy.

    While no block arrives it asks ``watch`` (when given) whether the archive failed the replay,
    and once per stalled position whether the stall can ever end."""

    def __init__(self, image, recording_id: int, start: int, end: int, idle_timeout_ms: int,
                 watch: ReplayWatch | None = None) -> None:
        self._image = image
        self._recording_id = recording_id
        self._end = end
        self._idle_timeout_ms = idle_timeout_ms
        self._watch = watch
        self._stall_probe_s = min(STALL_PROBE_AFTER_MS, idle_timeout_ms / 2) / 1000.0
        self._probed_at: int | None = None
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
        image, result, watch = self._image, self._result, self._watch
        while True:
            result.clear()
            image.block_poll(self._on_block, min(REPLAY_BLOCK_LIMIT, self._end - self.position))
            if result:
                position, length, value = result[0]
                result.clear()
                self.position = position + length
                return position, value
            if watch is not None:
                watch.check()
            if image.is_closed or image.is_end_of_stream:
                reason = watch.explain_end() if watch is not None else ""
                raise ReplayFailed(
                    f"recording {self._recording_id}: replay ended at {self.position}, before {self._end}"
                    + (f": {reason}" if reason else ""))
            idle_s = time.monotonic() - idle_since
            if watch is not None and self._probed_at != self.position and idle_s >= self._stall_probe_s:
                self._probed_at = self.position
                watch.stalled(self.position)
            if idle_s > self._idle_timeout_ms / 1000.0:
                raise ReplayFailed(
                    f"recording {self._recording_id}: replay made no progress at {self.position} "
                    f"for {self._idle_timeout_ms} ms (replay.idleTimeoutMs)")
            time.sleep(0.0005)


def _copied(view, _position: int) -> bytes:
    # Copied: the view points into the term buffer and is only valid during the callback.
    return bytes(view)


def _replayed_blocks(image, recording_id: int, start: int, end: int, idle_timeout_ms: int,
                     watch: ReplayWatch | None = None) -> Iterator[tuple[int, bytes]]:
    pump = ReplayPump(image, recording_id, start, end, idle_timeout_ms, watch)
    try:
        while (block := pump.next_block(_copied)) is not None:
            yield block
    finally:
        image.close()
