"""Reading an archive over ``aeron_spark.archive.client.ArchiveClient``: descriptors, listings,
live positions and bounded replays. ``ClientArchiveAccess`` is the real
``source.archive_access.ArchiveAccess``; the sink reads back and watches its own recording with it
(``sink/archive_access.py``). How a replay fails and is watched is ``replay_errors.py``; receiving
a replay's blocks is ``replay_pump.py``.

Real-client facts used here:
* live positions come from the archive's rec-pos counters (type 100, Aeron's RecordingPos;
  ``aeron_spark.archive.client.live_positions`` finds them by recording id and archive id) read
  through the client's CountersReader, so ``latestOffset`` costs no control round trip;
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
* a replay is watched while it is waited for (``replay_errors.ArchiveReplayWatch``): an ERROR the
  archive sends for it after its OK fails it at once with the archive's text; a replay idle at a
  position short of the range end replays the frame there once (``frame_end_at``) and fails at
  once if that frame crosses the end (the archive sends whole frames only, so it never would);
* a replay read to its range end gets no StopReplay: the archive ends a bounded replay itself once
  its last byte is sent (Aeron's ReplaySession too), and the round trip was a tenth of a live
  read; a replay left early (an error, a probe, a reader that stopped) is stopped;
* replays are refused when the archive records their channel/stream (ListRecordingSubscriptions,
  re-checked every few seconds): each would become a new recording;
* a 1.15.x archive (no BoundedReplay) gets a plain Replay of exactly the range.

What this module asks of the client is ``ReadingClient`` (``ArchiveClient`` satisfies it; unit
tests pass stand-ins that do too). Connecting is ``archive_connection.connect_client``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import struct
import time
from collections.abc import Iterator
from typing import Protocol

import numpy as np

from aeron_spark.archive.client import RecordingDescriptor, RecordingSubscriptionDescriptor, live_positions
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.driver_integration import AeronClient, AeronError, Counter, CountersReader, Image
from aeron_spark.driver_integration.channel_uri import MTU
from aeron_spark.driver_integration.frame import aligned_frame_length

from aeron_spark.connector.options import REPLAY_MTU_RECORDING, ReplaySettings
from aeron_spark.connector.replay_endpoint import ReplayEndpoints, replay_mtu_to_ask, with_param
from aeron_spark.connector.replay_errors import (
    ArchiveReplayWatch,
    ReplayFailed,
    ReplayStreamRecorded,
    ReplayWatch,
    archive_text,
    is_archive_error,
)
from aeron_spark.connector.replay_pump import ReplayPump, await_image, await_udp_image, pumped_blocks

LOG = logging.getLogger(__name__)

# Application counter type for our bounded-replay limits (Aeron reserves < 1000 for itself).
REPLAY_LIMIT_COUNTER_TYPE_ID = 1_977_100
LIST_PAGE_SIZE = 256
# A recording whose counter is not in the index (not visible yet, or not active) falls back to a
# RecordingPosition request; the index is rebuilt for it only when older than this.
COUNTER_INDEX_MAX_AGE_S = 0.05
#: How often the archive's recording subscriptions are looked at again for one replay stream.
RECORDED_STREAM_CHECK_INTERVAL_S = 5.0
RECORDING_SUBSCRIPTIONS_PAGE = 256
#: The longest a stalled replay's frame probe (``frame_end_at``) waits for that frame.
FRAME_PROBE_MAX_MS = 5_000


class ListingPage(Protocol):
    """One page of a listing and where the archive's scan ended (``ArchiveClient.list_recordings_for_uri_page``)."""

    @property
    def descriptors(self) -> list[RecordingDescriptor]: ...

    def next_from(self, from_id: int) -> int:
        """Where the next listing starts: past the last descriptor, or where the scan ended."""


class ReadingClient(Protocol):
    """What ``ClientArchiveAccess`` asks of a connected archive client (``ArchiveClient``)."""

    @property
    def aeron(self) -> AeronClient:
        """The client's Aeron: replay subscriptions, limit counters and the counters reader."""

    @property
    def archive_id(self) -> int: ...

    @property
    def timeout(self) -> float:
        """Seconds each request may take."""

    @property
    def control_channel(self) -> str:
        """The archive's control channel (named in errors: where an operator looks)."""

    @property
    def response_channel(self) -> str: ...

    @property
    def response_hosts(self) -> tuple[str, str] | None:
        """(address the archive reaches this client at, address bound) of a UDP response channel."""

    @property
    def is_connected(self) -> bool: ...

    @property
    def is_legacy(self) -> bool:
        """An Aeron 1.15.x archive: no BoundedReplay, no ListRecordingSubscriptions."""

    def shares_archive_driver(self) -> bool: ...

    def keep_alive(self) -> None: ...

    def list_recording(self, recording_id: int) -> RecordingDescriptor | None: ...

    def list_recordings(self, from_id: int = 0, count: int | None = None) -> list[RecordingDescriptor]: ...

    def list_recordings_for_uri_page(self, from_id: int, count: int, channel_fragment: str,
                                     stream_id: int) -> ListingPage: ...

    def list_recording_subscriptions(self, pseudo_index: int, subscription_count: int, channel_fragment: str,
                                     stream_id: int, apply_stream_id: bool) -> list[RecordingSubscriptionDescriptor]:
        ...

    def recording_position(self, recording_id: int) -> int:
        """The live recorded position, -1 when the recording is not active."""

    def start_replay(self, recording_id: int, position: int, length: int, replay_channel: str,
                     replay_stream_id: int, *, subscription_registration_id: int | None = None) -> int: ...

    def start_bounded_replay(self, recording_id: int, position: int, length: int, limit_counter_id: int,
                             replay_channel: str, replay_stream_id: int, *,
                             subscription_registration_id: int | None = None) -> int: ...

    def check_replay_error(self, replay_session_id: int) -> None:
        """Raise the ERROR the archive sent for this replay after its OK, if any (non-blocking)."""

    def stop_replay(self, replay_session_id: int) -> None: ...

    def close(self) -> None: ...



class ClientArchiveAccess:
    """``ArchiveAccess`` over a connected ``ArchiveClient`` (see the module docstring)."""

    def __init__(self, client: ReadingClient, hosts: tuple[str, str] | None = None) -> None:
        """``hosts``: (address the archive reaches this worker at, address to bind) for UDP
        replays; None: those of the client's response channel."""
        self._client = client
        self._hosts = hosts
        self._counter_ids: dict[int, int] = {}  # recording id -> its rec-pos counter id, once read
        self._counter_index: dict[int, int] | None = None
        self._counter_index_built = 0.0
        # Bumped when _counter_ids changes; `live_positions` keeps the ids it gathers by until then.
        self._counter_ids_version = 0
        # (ids version, recording ids, those with a known counter, their counter ids, their ids as int64)
        self._gather: tuple[int, list[int], list[int], np.ndarray, np.ndarray] | None = None
        self._recorded_stream_checks: dict[tuple[str, int], float] = {}
        self._endpoints: ReplayEndpoints | None = None
        self._mtu_layouts: dict[int, tuple[int, int]] = {}  # recording id -> (mtu, term length), once listed

    @property
    def replay_endpoints(self) -> ReplayEndpoints:
        """Chosen on first use: whether this client shares the archive's driver does not change."""
        if self._endpoints is None:
            client = self._client
            self._endpoints = ReplayEndpoints(client.aeron, client.shares_archive_driver(),
                                              self._hosts or client.response_hosts, client.timeout,
                                              response_channel=client.response_channel)
        return self._endpoints

    @property
    def archive_id(self) -> int:
        return self._client.archive_id

    @property
    def _archive_endpoint(self) -> str:
        """The archive's control channel, for errors."""
        return self._client.control_channel

    @property
    def is_connected(self) -> bool:
        """False once the archive has closed this session (see connection_cache)."""
        return self._client.is_connected

    def keep_alive(self) -> None:
        """Reads what the archive sent while this connection sat idle and tells it the client
        lives (connection_cache's keeper calls it between tasks)."""
        if self.is_connected:
            self._client.keep_alive()

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
        known = self._counter_ids
        gather = self._gather
        if gather is None or gather[0] != self._counter_ids_version or gather[1] != recording_ids:
            with_counter = [recording_id for recording_id in recording_ids if recording_id in known]
            gather = self._gather = (self._counter_ids_version, list(recording_ids), with_counter,
                                     np.array([known[recording_id] for recording_id in with_counter], dtype=np.intp),
                                     np.array(with_counter, dtype=np.int64))
        with_counter = gather[2]
        positions: dict[int, int | None] = {}
        if with_counter:
            values, owned = live_positions.read_owned_positions(counters.columns(), gather[3], gather[4])
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

    def _find_counter(self, counters: CountersReader, recording_id: int) -> int:
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
            yield pumped_blocks(ReplayPump(image, recording_id, start, end, settings.idle_timeout_ms, watch,
                                           self._archive_endpoint))

    @contextlib.contextmanager
    def replay_pump(self, recording_id: int, start: int, end: int,
                    settings: ReplaySettings) -> Iterator[ReplayPump]:
        """Like :meth:`replay`, but the caller copies each block where it wants it (one copy)."""
        with self._replay_image(recording_id, start, end, settings) as (image, watch):
            yield ReplayPump(image, recording_id, start, end, settings.idle_timeout_ms, watch, self._archive_endpoint)

    @contextlib.contextmanager
    def _replay_image(self, recording_id: int, start: int, end: int,
                      settings: ReplaySettings) -> Iterator[tuple[Image, ReplayWatch]]:
        """(image, watch) of a replay of exactly [start, end) on a private session; the image is
        closed here after use. A replay read to ``end`` is not stopped: the archive ends a
        bounded replay itself once it sent its last byte (Aeron's ReplaySession too), so a
        StopReplay would only cost a control round trip per read; any other replay is stopped."""
        endpoints = self.replay_endpoints
        self._refuse_recorded_replay_stream(settings, endpoints.base_channel(settings.channel))
        aeron = self._client.aeron
        session_id = random.randint(1, (1 << 31) - 1)
        receiver = endpoints.subscribe(settings.channel, settings.stream_id, session_id, settings.receive_window)
        subscription = receiver.subscription
        told = receiver.told
        limit: Counter | None = None
        replay_session_id: int | None = None
        image: Image | None = None
        # A response channel's replay names its subscription (and the Image has the replay's session id).
        registration_id = subscription.registration_id if receiver.response_mode else None
        try:
            if receiver.over_udp and settings.mtu != REPLAY_MTU_RECORDING:
                told = self._with_replay_mtu(told, recording_id, settings)
            try:
                if self._client.is_legacy or not endpoints.shares_archive_driver:
                    # Bounded by length: a 1.15.x archive has no BoundedReplay, and an archive on
                    # another driver cannot read our counters. The same for recorded data (ranges
                    # never end past the recorded position).
                    replay_session_id = self._client.start_replay(
                        recording_id, start, end - start, told, settings.stream_id,
                        subscription_registration_id=registration_id)
                else:
                    limit = aeron.add_counter(REPLAY_LIMIT_COUNTER_TYPE_ID, struct.pack("<q", recording_id),
                                              f"aeron-archive source replay limit: {recording_id} [{start}, {end})")
                    limit.value = end
                    replay_session_id = self._client.start_bounded_replay(
                        recording_id, start, end - start, limit.counter_id, told, settings.stream_id,
                        subscription_registration_id=registration_id)
            except Exception as error:
                if is_archive_error(error):
                    raise ReplayFailed(f"recording {recording_id}: the archive refused the replay of "
                                       f"[{start}, {end}): {archive_text(error)}") from error
                raise
            watch = self._watch(recording_id, end, replay_session_id, settings)
            if receiver.response_mode:
                session_id = replay_image_session_id(replay_session_id)
            if receiver.over_udp:
                image = await_udp_image(subscription, session_id, self._image_timeout_ms(settings), recording_id,
                                        watch, receiver.told)
            else:
                image = await_image(subscription, session_id, settings.idle_timeout_ms, recording_id, watch)
            yield image, watch
        finally:
            delivered = image is not None and delivered_to(image, end)
            if image is not None:
                image.close()
            if replay_session_id is not None and not delivered:
                with contextlib.suppress(Exception):
                    self._client.stop_replay(replay_session_id)
            for resource in (subscription, limit):
                if resource is not None:
                    with contextlib.suppress(Exception):
                        resource.close()

    def _with_replay_mtu(self, told: str, recording_id: int, settings: ReplaySettings) -> str:
        """``told`` with the ``mtu`` ``replay.mtu`` asks for, if any (replay_endpoint.replay_mtu_to_ask)."""
        layout = self._mtu_layouts.get(recording_id)
        if layout is None:
            descriptor = self.describe(recording_id)
            if descriptor is None:
                return told
            # Fixed for a recording's life: one ListRecording per recording and connection.
            layout = self._mtu_layouts[recording_id] = (descriptor.mtu_length, descriptor.term_buffer_length)
        mtu = replay_mtu_to_ask(settings.mtu, told, *layout)
        return told if mtu is None else with_param(told, MTU, str(mtu))

    def _watch(self, recording_id: int, end: int, replay_session_id: int, settings: ReplaySettings) -> ReplayWatch:
        """The archive's later ERRORs of this replay, and the frame at a stall (probed by replaying it)."""
        probe_ms = min(settings.idle_timeout_ms, FRAME_PROBE_MAX_MS)
        return ArchiveReplayWatch(
            recording_id, end, replay_session_id, check_error=self._client.check_replay_error,
            frame_end_at=lambda position: self.frame_end_at(recording_id, position, settings, timeout_ms=probe_ms))

    def _image_timeout_ms(self, settings: ReplaySettings) -> int:
        """How long a UDP replay may take to arrive: the archive's own connect timeout is seconds,
        so waiting the whole idle timeout would only delay the error."""
        return min(settings.idle_timeout_ms, int(self._client.timeout * 1000))

    def _refuse_recorded_replay_stream(self, settings: ReplaySettings, channel: str) -> None:
        """Fails when the archive records the replay ``channel``/stream: each replay would become a
        new recording (and a source discovering that stream would read its own replays)."""
        key = (channel, settings.stream_id)
        now = time.monotonic()
        checked = self._recorded_stream_checks.get(key)
        if checked is not None and now - checked < RECORDED_STREAM_CHECK_INTERVAL_S:
            return
        if self._client.is_legacy:
            return  # 1.15.x archives cannot list their recording subscriptions
        found: list[RecordingSubscriptionDescriptor] = []
        index = 0
        try:
            while True:
                page = self._client.list_recording_subscriptions(index, RECORDING_SUBSCRIPTIONS_PAGE, "",
                                                                 settings.stream_id, True)
                found.extend(page)
                if len(page) < RECORDING_SUBSCRIPTIONS_PAGE:
                    break
                index += len(page)
        except Exception as error:
            if not is_archive_error(error):
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
        probe = ReplaySettings(settings.channel, settings.stream_id, timeout_ms, settings.mtu, settings.receive_window)
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


def delivered_to(image: Image, end: int) -> bool:
    """Whether this subscriber read ``image`` up to ``end``; False when that is not known (the
    image released already): such a replay is stopped."""
    try:
        return image.position >= end
    except AeronError:
        return False


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
