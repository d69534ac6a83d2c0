"""`ArchiveConductor`: the archive's control plane agent (Aeron's ArchiveConductor).

One duty cycle (`do_work`, on the conductor thread only):

1. drains the events other threads queued: images that became available/unavailable on the
   control and recording subscriptions (Aeron client thread) and recordings that started,
   progressed or stopped (recorder thread) - those threads only enqueue;
2. polls the control subscriptions (UDP control channel and local IPC control channel); every
   request is one reassembled message, decoded with `codecs.decode` using its own header's
   blockLength and version, routed by its controlSessionId to the `ControlSession` (which must
   have been created on the same request Image) and dispatched;
3. advances every control session (handshake, pings, timeouts), drains its outbox onto its
   exclusive response publication (modern block lengths), continues listings (at most
   `LISTING_BATCH` descriptors per cycle), and closes finished sessions;
4. updates the mark file's activity timestamp every second.

Bad input never ends the process: an undecodable or unknown request is answered with an ERROR
response when its controlSessionId names a session (or the request Image has one), otherwise
logged; an exception in a handler becomes an ERROR response to that request.

Recording: StartRecording adds a subscription on the stripped channel (``aeron-spy:`` for UDP
with sourceLocation LOCAL); each Image on it becomes a new catalog entry, a ``rec-pos`` counter and
a `RecordingSession` handed to the `Recorder`; the requesting session gets the START signal, then
STOP when the recorder reports the session stopped (the catalog gets the stop position first).
ExtendRecording does the same for an existing stopped recording (EXTEND signal; an Image whose
join position or log parameters do not continue the recording gets ERROR INVALID_EXTENSION).

Replay: validated here (§3.6 rules), then a replay session is created by the replayer module and
handed to the `Replayer`; the OK carries the replaySessionId ``(replayId << 32) | publication
sessionId``.

Not served (answered ERROR GENERIC "... is not supported by this archive"): replication (50, 62,
66; StopReplication gets UNKNOWN_REPLICATION), MigrateSegments (57), ReplayToken (105) and
UpdateChannel (107). The per-session ``control-session`` counters (types 102/113) are not
allocated.

ListRecordings uses the modern semantics (count = descriptors sent, RECORDING_UNKNOWN at the
end with the id where the scan stopped) for every client, including 1.15.x ones: the 1.15.1
client stops on whichever comes first (count descriptors or RECORDING_UNKNOWN), so it reads the
modern answer correctly. ListRecordingsForUri matches streamId and a substring of the original
or the stripped channel.
"""

from __future__ import annotations

import collections
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aeron_spark.archive import codecs
from aeron_spark.archive.storage import maintenance
from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.service.authenticator import AcceptAllAuthenticator, Authenticator
from aeron_spark.archive.storage.catalog import Catalog, UnknownRecordingError
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    BooleanType,
    CodecError,
    RecordingSignal,
    SchemaIdMismatchError,
    SourceLocation,
    UnknownTemplateError,
)
from aeron_spark.archive.service.control_session import ControlSession, OfferResult, SessionState
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor
from aeron_spark.archive.service.limit_counter import LimitCounterError, LimitCounterReader
from aeron_spark.archive.service.recording_session import RecordingSession
from aeron_spark.archive.service.replay_plan import (
    RecordingLayout,
    ReplayRequestError,
    make_replay_session_id,
    plan_replay,
)
from aeron_spark.archive.service.replay_session import ReplaySession
from aeron_spark.driver_integration import channel_uri

log = logging.getLogger(__name__)

LISTING_BATCH = 64  # descriptors scanned per session per duty cycle, as Aeron
MAX_OUTBOX_FOR_LISTING = 32  # a listing waits while its session's outbox is this long
MARK_FILE_UPDATE_INTERVAL_MS = 1_000
CONTROL_FRAGMENT_LIMIT = 10
CONTROL_TERM_LENGTH = 64 * 1024
NULL_VALUE = -1


# ------------------------------------------------------------------------------------------------
# What the conductor needs of driver_integration (duck-typed; see archive_service for wiring)
# ------------------------------------------------------------------------------------------------

class Publication(Protocol):
    def offer(self, data: bytes) -> int: ...

    @property
    def is_connected(self) -> bool: ...

    def close(self) -> None: ...


class Subscription(Protocol):
    registration_id: int

    def poll(self, handler: Callable[[memoryview, Any], object], fragment_limit: int) -> int: ...

    def close(self) -> None: ...


class AeronPort(Protocol):
    """The Aeron client calls the conductor makes (driver_integration's AeronClient)."""

    def add_subscription(self, channel: str, stream_id: int, *,
                         on_available_image: Callable[[Any], None] | None = None,
                         on_unavailable_image: Callable[[Any], None] | None = None) -> Subscription: ...

    def add_exclusive_publication(self, channel: str, stream_id: int) -> Publication: ...

    def add_counter(self, type_id: int, key: bytes, label: str) -> Any: ...


# Aeron's publication offer results (negative positions)
NOT_CONNECTED = -1
BACK_PRESSURED = -2
ADMIN_ACTION = -3
CLOSED = -4
MAX_POSITION_EXCEEDED = -5


def offer_result(position: int) -> OfferResult:
    if position >= 0:
        return OfferResult.SENT
    if position in (BACK_PRESSURED, ADMIN_ACTION):
        return OfferResult.BLOCKED
    return OfferResult.GONE


class ArchiveRequestError(Exception):
    """A request that is answered with ERROR ``code`` and this message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)


@dataclass(frozen=True, slots=True)
class ConductorSettings:
    archive_dir: Path
    archive_id: int
    segment_file_length: int = 128 * 1024 * 1024
    file_sync: int = 0
    checksum: Any = None  # a checksum.FrameChecksum or None
    replay_buffer_length: int = 1024 * 1024
    max_concurrent_recordings: int = 20
    max_concurrent_replays: int = 20
    connect_timeout_ms: int = 5_000
    session_liveness_check_interval_ms: int = 1_000
    session_idle_timeout_ms: int = 0
    replay_linger_timeout_ns: int = 5_000_000_000
    replay_checksum: Any = None


# ------------------------------------------------------------------------------------------------
# Bookkeeping
# ------------------------------------------------------------------------------------------------

@dataclass(eq=False)
class RecordingSubscription:
    """A subscription created by StartRecording or ExtendRecording."""

    subscription: Any
    subscription_id: int
    key: str
    channel: str  # as the client sent it
    subscribed_channel: str  # stripped, with aeron-spy: for LOCAL UDP
    stripped_channel: str
    stream_id: int
    auto_stop: bool
    control_session: ControlSession
    correlation_id: int
    extend_recording_id: int | None = None
    recordings: set[int] = field(default_factory=set)
    closing: bool = False


@dataclass(eq=False)
class ListingCursor:
    correlation_id: int
    next_recording_id: int
    remaining: int
    matches: Callable[[RecordingDescriptor], bool]


@dataclass(frozen=True, slots=True)
class ActiveRecording:
    session: RecordingSession
    subscription: RecordingSubscription
    descriptor: RecordingDescriptor
    extension: bool


class ArchiveConductor:
    """See the module docstring. Construct, then call `do_work` from one thread; `close` last."""

    role_name = "archive-conductor"

    def __init__(self, *, aeron: AeronPort, catalog: Catalog, settings: ConductorSettings,
                 recorder: Any, replayer: Any = None,
                 control_channels: list[tuple[str, int]],
                 authenticator: Authenticator | None = None,
                 recording_events: tuple[str, int] | None = None,
                 mark_file: Any = None, epoch_clock: Callable[[], int] | None = None,
                 counters_reader: Any = None) -> None:
        self.aeron = aeron
        self.catalog = catalog
        self.settings = settings
        self.recorder = recorder
        self.replayer = replayer
        self.authenticator = authenticator or AcceptAllAuthenticator()
        self.mark_file = mark_file
        self.counters_reader = counters_reader
        self._clock = epoch_clock or (lambda: time.time_ns() // 1_000_000)
        self._events: collections.deque[tuple] = collections.deque()  # thread-safe appends
        self._next_session_id = random.randrange(0, 1 << 31)
        self._sessions: dict[int, ControlSession] = {}
        self._session_publications: dict[int, Any] = {}
        self._listings: dict[int, ListingCursor] = {}
        self._recording_subscriptions: dict[str, RecordingSubscription] = {}
        self._subscriptions_by_id: dict[int, RecordingSubscription] = {}
        self._active_recordings: dict[int, ActiveRecording] = {}
        self._pending_progress: dict[int, tuple[int, int]] = {}
        self._replays: dict[int, int] = {}  # replaySessionId -> recordingId
        self._replay_id = 0
        self._mark_deadline_ms = 0
        self._closed = False
        self.control_subscriptions: list[tuple[Any, str, int]] = []
        for channel, stream_id in control_channels:
            subscription = aeron.add_subscription(
                channel, stream_id,
                on_available_image=None,
                on_unavailable_image=self._control_image_unavailable_callback(len(self.control_subscriptions)))
            self.control_subscriptions.append((subscription, channel, stream_id))
        self.events_publication = None
        if recording_events is not None:
            self.events_publication = aeron.add_exclusive_publication(*recording_events)
        self._handlers: dict[type, Callable[[ControlSession, Any], None]] = self._build_dispatch()

    # ------------------------------------------------------------------ callbacks (any thread)

    def _control_image_unavailable_callback(self, index: int) -> Callable[[Any], None]:
        def on_unavailable(image: Any) -> None:
            self._events.append(("control-image-gone", (index, image.session_id)))
        return on_unavailable

    # RecordingListener (recorder thread: enqueue only)
    def on_recording_started(self, session: RecordingSession) -> None:
        self._events.append(("recording-started", session))

    def on_recording_progress(self, session: RecordingSession, position: int) -> bool:
        self._events.append(("recording-progress", session.recording_id, session.join_position, position))
        return True

    def on_recording_stopped(self, session: RecordingSession) -> None:
        self._events.append(("recording-stopped", session))

    # ------------------------------------------------------------------ duty cycle

    def do_work(self) -> int:
        now = self._clock()
        work = self._drain_events(now)
        for index, (subscription, _, _) in enumerate(self.control_subscriptions):
            work += subscription.poll(self._control_handler(index), CONTROL_FRAGMENT_LIMIT)
        now = self._clock()
        for session in list(self._sessions.values()):
            work += self._service_session(session, now)
        work += self._flush_progress_events()
        if self.mark_file is not None and now >= self._mark_deadline_ms:
            self._mark_deadline_ms = now + MARK_FILE_UPDATE_INTERVAL_MS
            self.mark_file.update_activity(now)
            work += 1
        return work

    def _control_handler(self, index: int) -> Callable[[memoryview, Any], None]:
        def on_message(payload: memoryview, header: Any) -> None:
            self.on_control_message(bytes(payload), (index, header.session_id))
        return on_message

    def _drain_events(self, now: int) -> int:
        work = 0
        while self._events:
            event = self._events.popleft()
            kind = event[0]
            try:
                if kind == "recording-image":
                    self._on_recording_image(event[1]["id"], event[2], now)
                elif kind == "recording-started":
                    self._on_recording_started(event[1])
                elif kind == "recording-progress":
                    self._pending_progress[event[1]] = (event[2], event[3])
                elif kind == "recording-stopped":
                    self._on_recording_stopped(event[1])
                elif kind == "stop-all-recordings":
                    self.stop_all_recordings()
                elif kind == "replay-ready":
                    self._on_replay_ready(event[1])
                elif kind == "replay-ended":
                    self._on_replay_ended(event[1])
                elif kind == "control-image-gone":
                    for session in self._sessions.values():
                        if session.request_image_key == event[1]:
                            session.on_request_image_unavailable()
            except Exception:  # noqa: BLE001 - one bad event must not stop the conductor
                log.exception("archive conductor: handling %s failed", kind)
            work += 1
        return work

    # ------------------------------------------------------------------ requests

    def on_control_message(self, data: bytes, image_key: Any) -> None:
        """One request as received on a control Image (``image_key`` names that Image)."""
        now = self._clock()
        try:
            message = codecs.decode(data)
        except CodecError as error:
            self._answer_undecodable(error, image_key, now)
            return
        if isinstance(message, (codecs.ConnectRequest, codecs.AuthConnectRequest)):
            self._on_connect(message, image_key, now)
            return
        control_session_id = getattr(message, "control_session_id", None)
        if control_session_id is None or type(message) not in self._handlers \
                and not isinstance(message, (codecs.ChallengeResponse, codecs.CloseSessionRequest,
                                             codecs.KeepAliveRequest)):
            self._answer_unexpected(message, image_key, now)
            return
        session = self._sessions.get(control_session_id)
        if session is None:
            self._answer_unknown_session(message, image_key, now)
            return
        if session.request_image_key != image_key:
            log.warning("request %s for controlSessionId=%d arrived on another request image; "
                        "dropped", type(message).__name__, control_session_id)
            return
        if isinstance(message, codecs.CloseSessionRequest):
            session.on_close_request()
        elif isinstance(message, codecs.ChallengeResponse):
            session.on_challenge_response(message.correlation_id, message.encoded_credentials, now)
        elif isinstance(message, codecs.KeepAliveRequest):
            session.on_keep_alive(now)
        elif session.accept_request(now):
            self._dispatch(session, message)

    def _dispatch(self, session: ControlSession, message: Any) -> None:
        correlation_id = message.correlation_id
        try:
            self._handlers[type(message)](session, message)
        except ArchiveRequestError as error:
            session.send_error(correlation_id, str(error), error.code)
        except UnknownRecordingError as error:
            session.send_error(correlation_id, str(error), ArchiveErrorCode.UNKNOWN_RECORDING)
        except Exception as error:  # noqa: BLE001 - the session and the process carry on
            log.exception("%s (correlationId=%d) failed", type(message).__name__, correlation_id)
            session.send_error(correlation_id, f"{type(message).__name__} failed: "
                                               f"{type(error).__name__}: {error}")

    def _answer_undecodable(self, error: CodecError, image_key: Any, now: int) -> None:
        session = self._sessions.get(error.control_session_id) if error.control_session_id is not None else None
        if session is None or session.request_image_key != image_key:
            session = self._latest_session_on(image_key)
        if session is None:
            log.warning("undecodable control request with no session to answer: %s", error)
            return
        if isinstance(error, UnknownTemplateError):
            what = f"unknown request templateId={error.template_id}"
        elif isinstance(error, SchemaIdMismatchError):
            what = "not an archive control message"
        else:
            what = "malformed request"
        log.warning("control session %d: %s: %s", session.control_session_id, what, error)
        # Without a readable correlationId the ERROR carries -1: no request waits for it, but the
        # client's log shows why its bytes were refused.
        correlation_id = NULL_VALUE if error.correlation_id is None else error.correlation_id
        if session.accept_request(now):
            session.send_error(correlation_id, f"{what}: {error}")

    def _answer_unexpected(self, message: Any, image_key: Any, now: int) -> None:
        session = self._latest_session_on(image_key)
        correlation_id = getattr(message, "correlation_id", None)
        text = (f"{type(message).__name__} (templateId={message.TEMPLATE_ID}) is not a request "
                f"this archive serves")
        if session is not None and correlation_id is not None and session.accept_request(now):
            session.send_error(correlation_id, text)
        else:
            log.warning("%s", text)

    def _answer_unknown_session(self, message: Any, image_key: Any, now: int) -> None:
        text = (f"unknown controlSessionId={message.control_session_id} in "
                f"{type(message).__name__}")
        session = self._latest_session_on(image_key)
        correlation_id = getattr(message, "correlation_id", None)
        if session is not None and correlation_id is not None and session.accept_request(now):
            session.send_error(correlation_id, text)
        else:
            log.warning("%s; dropped (no session on this request image to tell)", text)

    def _latest_session_on(self, image_key: Any) -> ControlSession | None:
        found = None
        for session in self._sessions.values():
            if session.request_image_key == image_key and not session.is_done:
                found = session
        return found

    # ------------------------------------------------------------------ sessions

    def _on_connect(self, message: Any, image_key: Any, now: int) -> None:
        session_id = self._allocate_session_id()
        credentials = getattr(message, "encoded_credentials", b"")
        session = ControlSession(
            control_session_id=session_id, connect_correlation_id=message.correlation_id,
            client_version=message.version, response_channel=message.response_channel,
            response_stream_id=message.response_stream_id, now_ms=now,
            authenticator=self.authenticator, connect_timeout_ms=self.settings.connect_timeout_ms,
            liveness_check_interval_ms=self.settings.session_liveness_check_interval_ms,
            idle_timeout_ms=self.settings.session_idle_timeout_ms,
            client_info=getattr(message, "client_info", ""), request_image_key=image_key)
        self.authenticator.on_connect_request(session_id, credentials, now)
        try:
            publication = self.aeron.add_exclusive_publication(
                response_publication_channel(message.response_channel), message.response_stream_id)
        except Exception as error:  # noqa: BLE001 - a bad response channel is the client's problem
            log.warning("control session %d: cannot add response publication %s stream %d: %s",
                        session_id, message.response_channel, message.response_stream_id, error)
            return
        self._sessions[session_id] = session
        self._session_publications[session_id] = publication
        session.publication_ready(now)
        log.info("control session %d: connect from %s (version %s%s) responses on %s stream %d",
                 session_id, session.client_info or "client",
                 codecs.format_semantic_version(message.version) if message.version else "none/1.15",
                 ", legacy" if session.is_legacy_client else "", message.response_channel,
                 message.response_stream_id)

    def _allocate_session_id(self) -> int:
        session_id = self._next_session_id
        self._next_session_id = (self._next_session_id + 1) & 0x7FFF_FFFF_FFFF_FFFF
        return session_id

    def _service_session(self, session: ControlSession, now: int) -> int:
        publication = self._session_publications[session.control_session_id]
        work = session.tick(now, _is_connected(publication))
        cursor = self._listings.get(session.control_session_id)
        if cursor is not None and session.state is SessionState.ACTIVE \
                and session.outbox_length < MAX_OUTBOX_FOR_LISTING:
            work += self._continue_listing(session, cursor)

        def offer(message: Any) -> OfferResult:
            return offer_result(publication.offer(codecs.encode(message)))

        if session.outbox_length:
            work += session.drain(offer, now)
        if session.is_done:
            self._close_session(session)
            work += 1
        return work

    def _close_session(self, session: ControlSession) -> None:
        session_id = session.control_session_id
        self._sessions.pop(session_id, None)
        self._listings.pop(session_id, None)
        publication = self._session_publications.pop(session_id, None)
        if publication is not None:
            try:
                publication.close()
            except Exception:  # noqa: BLE001
                log.exception("control session %d: closing its response publication failed", session_id)
        level = logging.INFO if session.abort_reason in ("session closed", None) else logging.WARNING
        log.log(level, "control session %d closed: %s", session_id, session.abort_reason)

    @property
    def sessions(self) -> dict[int, ControlSession]:
        return dict(self._sessions)

    # ------------------------------------------------------------------ dispatch table

    def _build_dispatch(self) -> dict[type, Callable[[ControlSession, Any], None]]:
        c = codecs
        return {
            c.ArchiveIdRequest: lambda s, m: s.send_ok(m.correlation_id, self.settings.archive_id),
            c.StartRecordingRequest: lambda s, m: self._start_recording(s, m, auto_stop=False),
            c.StartRecordingRequest2: lambda s, m: self._start_recording(
                s, m, auto_stop=m.auto_stop == BooleanType.TRUE),
            c.StopRecordingRequest: self._stop_recording,
            c.StopRecordingSubscriptionRequest: self._stop_recording_subscription,
            c.StopRecordingByIdentityRequest: self._stop_recording_by_identity,
            c.ExtendRecordingRequest: lambda s, m: self._extend_recording(s, m, auto_stop=False),
            c.ExtendRecordingRequest2: lambda s, m: self._extend_recording(
                s, m, auto_stop=m.auto_stop == BooleanType.TRUE),
            c.ReplayRequest: self._replay,
            c.BoundedReplayRequest: self._replay,
            c.StopReplayRequest: self._stop_replay,
            c.StopAllReplaysRequest: self._stop_all_replays,
            c.ListRecordingsRequest: self._list_recordings,
            c.ListRecordingsForUriRequest: self._list_recordings_for_uri,
            c.ListRecordingRequest: self._list_recording,
            c.RecordingPositionRequest: self._recording_position,
            c.StopPositionRequest: self._stop_position,
            c.StartPositionRequest: self._start_position,
            c.MaxRecordedPositionRequest: self._max_recorded_position,
            c.FindLastMatchingRecordingRequest: self._find_last_matching_recording,
            c.ListRecordingSubscriptionsRequest: self._list_recording_subscriptions,
            c.TruncateRecordingRequest: self._truncate_recording,
            c.PurgeRecordingRequest: self._purge_recording,
            c.DetachSegmentsRequest: self._detach_segments,
            c.DeleteDetachedSegmentsRequest: self._delete_detached_segments,
            c.PurgeSegmentsRequest: self._purge_segments,
            c.AttachSegmentsRequest: self._attach_segments,
            c.MigrateSegmentsRequest: self._not_supported,
            c.ReplicateRequest: self._not_supported,
            c.TaggedReplicateRequest: self._not_supported,
            c.ReplicateRequest2: self._not_supported,
            c.StopReplicationRequest: self._stop_replication,
            c.ReplayTokenRequest: self._not_supported,
            c.UpdateChannelRequest: self._not_supported,
        }

    def _not_supported(self, session: ControlSession, message: Any) -> None:
        raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                  f"{type(message).__name__} is not supported by this archive")

    def _stop_replication(self, session: ControlSession, message: Any) -> None:
        raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_REPLICATION,
                                  f"unknown replication id {message.replication_id}")

    # ------------------------------------------------------------------ recordings

    def _recording(self, recording_id: int) -> RecordingDescriptor:
        descriptor = self.catalog.descriptor(recording_id) if recording_id >= 0 else None
        if descriptor is None:
            raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_RECORDING,
                                      f"unknown recording id: {recording_id}")
        return descriptor

    def _check_recording_capacity(self) -> None:
        if len(self._active_recordings) >= self.settings.max_concurrent_recordings:
            raise ArchiveRequestError(
                ArchiveErrorCode.MAX_RECORDINGS,
                f"max concurrent recordings reached {self.settings.max_concurrent_recordings}")

    def _add_recording_subscription(self, session: ControlSession, message: Any, *, auto_stop: bool,
                                    extend_recording_id: int | None) -> RecordingSubscription:
        channel = message.channel
        stream_id = message.stream_id
        try:
            stripped = channel_uri.strip_channel(channel)
            key = channel_uri.recording_key(stream_id, channel)
            subscribed = channel_uri.recording_subscription_channel(
                channel, local=int(message.source_location) == SourceLocation.LOCAL)
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, f"invalid channel {channel!r}: {error}") from None
        if key in self._recording_subscriptions:
            raise ArchiveRequestError(
                ArchiveErrorCode.ACTIVE_SUBSCRIPTION,
                f"recording exists for streamId={stream_id} channel={channel}")
        # Images may be announced (client thread) before add_subscription returns the id.
        holder: dict[str, int] = {}
        subscription = self.aeron.add_subscription(
            subscribed, stream_id,
            on_available_image=lambda image: self._events.append(("recording-image", holder, image)))
        subscription_id = subscription.registration_id
        holder["id"] = subscription_id
        entry = RecordingSubscription(
            subscription=subscription, subscription_id=subscription_id, key=key, channel=channel,
            subscribed_channel=subscribed, stripped_channel=stripped, stream_id=stream_id,
            auto_stop=auto_stop, control_session=session, correlation_id=message.correlation_id,
            extend_recording_id=extend_recording_id)
        self._recording_subscriptions[key] = entry
        self._subscriptions_by_id[subscription_id] = entry
        log.info("recording subscription %d: %s stream %d (%s%s)", subscription_id, subscribed,
                 stream_id, "extend %d" % extend_recording_id if extend_recording_id is not None
                 else "new recordings", ", autoStop" if auto_stop else "")
        return entry

    def _start_recording(self, session: ControlSession, message: Any, *, auto_stop: bool) -> None:
        self._check_recording_capacity()
        entry = self._add_recording_subscription(session, message, auto_stop=auto_stop,
                                                 extend_recording_id=None)
        session.send_ok(message.correlation_id, entry.subscription_id)

    def _extend_recording(self, session: ControlSession, message: Any, *, auto_stop: bool) -> None:
        descriptor = self._recording(message.recording_id)
        if message.recording_id in self._active_recordings or descriptor.is_active:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_RECORDING,
                                      f"cannot extend active recording {message.recording_id}")
        if descriptor.stream_id != message.stream_id:
            raise ArchiveRequestError(
                ArchiveErrorCode.UNKNOWN_RECORDING,
                f"cannot extend recording {message.recording_id} with streamId="
                f"{message.stream_id} != existing streamId={descriptor.stream_id}")
        self._check_recording_capacity()
        entry = self._add_recording_subscription(session, message, auto_stop=auto_stop,
                                                 extend_recording_id=message.recording_id)
        session.send_ok(message.correlation_id, entry.subscription_id)

    def _on_recording_image(self, subscription_id: int, image: Any, now: int) -> None:
        entry = self._subscriptions_by_id.get(subscription_id)
        if entry is None or entry.closing:
            return
        control = entry.control_session
        if entry.extend_recording_id is not None:
            self._start_extension(entry, image)
            return
        from aeron_spark.archive.storage.segment import SegmentWriter, recording_segment_length

        segment_length = recording_segment_length(self.settings.segment_file_length,
                                                  image.term_buffer_length)
        recording_id = self.catalog.add_recording(
            start_position=image.join_position, initial_term_id=image.initial_term_id,
            segment_file_length=segment_length, term_buffer_length=image.term_buffer_length,
            mtu_length=image.mtu_length, session_id=image.session_id, stream_id=entry.stream_id,
            stripped_channel=entry.stripped_channel, original_channel=entry.channel,
            source_identity=image.source_identity)
        descriptor = self.catalog.descriptor(recording_id)
        settings = self.settings

        def writer_factory() -> SegmentWriter:
            return SegmentWriter(settings.archive_dir, recording_id, image.join_position,
                                 image.term_buffer_length, segment_length,
                                 file_sync=settings.file_sync, checksum=settings.checksum)

        self._launch_recording(entry, image, descriptor, writer_factory, extension=False)
        control.send_signal(entry.correlation_id, recording_id, entry.subscription_id,
                            image.join_position, RecordingSignal.START)

    def _start_extension(self, entry: RecordingSubscription, image: Any) -> None:
        recording_id = entry.extend_recording_id
        control = entry.control_session
        descriptor = self.catalog.descriptor(recording_id)
        problem = None
        if descriptor is None:
            problem = f"recording {recording_id} no longer exists"
        elif recording_id in self._active_recordings:
            problem = f"recording {recording_id} is already being extended"
        elif image.join_position != descriptor.stop_position:
            problem = (f"cannot extend recording {recording_id} image joinPosition="
                       f"{image.join_position} != stopPosition={descriptor.stop_position}")
        elif image.initial_term_id != descriptor.initial_term_id:
            problem = (f"cannot extend recording {recording_id} image initialTermId="
                       f"{image.initial_term_id} != initialTermId={descriptor.initial_term_id}")
        elif image.term_buffer_length != descriptor.term_buffer_length:
            problem = (f"cannot extend recording {recording_id} image termBufferLength="
                       f"{image.term_buffer_length} != termBufferLength={descriptor.term_buffer_length}")
        elif image.mtu_length != descriptor.mtu_length:
            problem = (f"cannot extend recording {recording_id} image mtuLength="
                       f"{image.mtu_length} != mtuLength={descriptor.mtu_length}")
        if problem is not None:
            log.warning("%s", problem)
            control.send_error(entry.correlation_id, problem, ArchiveErrorCode.INVALID_EXTENSION)
            return
        from aeron_spark.archive.storage.segment import SegmentWriter

        self.catalog.extend(recording_id, control_session_id=control.control_session_id,
                            correlation_id=entry.correlation_id, session_id=image.session_id)
        descriptor = self.catalog.descriptor(recording_id)
        settings = self.settings
        start = descriptor.start_position

        def writer_factory() -> SegmentWriter:
            return SegmentWriter(settings.archive_dir, recording_id, start, descriptor.term_buffer_length,
                                 descriptor.segment_file_length, file_sync=settings.file_sync,
                                 checksum=settings.checksum, position=image.join_position)

        self._launch_recording(entry, image, descriptor, writer_factory, extension=True)
        control.send_signal(entry.correlation_id, recording_id, entry.subscription_id,
                            image.join_position, RecordingSignal.EXTEND)

    def _launch_recording(self, entry: RecordingSubscription, image: Any,
                          descriptor: RecordingDescriptor, writer_factory: Callable[[], Any], *,
                          extension: bool) -> None:
        counter = recording_position.allocate(
            self.aeron, archive_id=self.settings.archive_id, recording_id=descriptor.recording_id,
            session_id=image.session_id, stream_id=entry.stream_id,
            stripped_channel=entry.stripped_channel, source_identity=image.source_identity)
        counter.value = image.join_position
        session = RecordingSession(
            recording_id=descriptor.recording_id, image=image, writer_factory=writer_factory,
            position_counter=counter, correlation_id=entry.correlation_id, owner=entry,
            file_io_max_length=self.settings.replay_buffer_length, listener=self)
        entry.recordings.add(descriptor.recording_id)
        self._active_recordings[descriptor.recording_id] = ActiveRecording(session, entry, descriptor, extension)
        self.recorder.add_session(session)
        log.info("recording %d %s: session %d stream %d from position %d (%s)",
                 descriptor.recording_id, "extended" if extension else "started", image.session_id,
                 entry.stream_id, image.join_position, image.source_identity)

    def _on_recording_started(self, session: RecordingSession) -> None:
        active = self._active_recordings.get(session.recording_id)
        if active is None or self.events_publication is None:
            return
        self._offer_event(codecs.RecordingStarted(
            session.recording_id, session.join_position, active.descriptor.session_id
            if not active.extension else session.image.session_id, active.descriptor.stream_id,
            active.subscription.channel, active.descriptor.source_identity))

    def _on_recording_stopped(self, session: RecordingSession) -> None:
        active = self._active_recordings.pop(session.recording_id, None)
        stop_position = session.stop_position if session.stop_position is not None else session.recorded_position
        try:
            self.catalog.recording_stopped(session.recording_id, stop_position)
        finally:
            session.close()
        self._pending_progress.pop(session.recording_id, None)
        log.info("recording %d stopped at %d (%s)", session.recording_id, stop_position,
                 session.stop_reason or "stopped")
        if active is None:
            return
        entry = active.subscription
        control = entry.control_session
        if session.error is not None:
            control.send_error(entry.correlation_id, session.error.message, session.error.code)
        control.send_signal(entry.correlation_id, session.recording_id, entry.subscription_id,
                            stop_position, RecordingSignal.STOP)
        if self.events_publication is not None:
            self._offer_event(codecs.RecordingStopped(session.recording_id, session.join_position,
                                                      stop_position))
        entry.recordings.discard(session.recording_id)
        if not entry.recordings and (entry.closing or entry.auto_stop):
            self._close_recording_subscription(entry)

    def _flush_progress_events(self) -> int:
        if not self._pending_progress:
            return 0
        work = 0
        if self.events_publication is not None:
            for recording_id, (start, position) in list(self._pending_progress.items()):
                if self._offer_event(codecs.RecordingProgress(recording_id, start, position)):
                    work += 1
        self._pending_progress.clear()  # a later progress event supersedes a dropped one
        return work

    def _offer_event(self, message: Any) -> bool:
        data = codecs.encode(message)
        for _ in range(3):
            result = self.events_publication.offer(data)
            if result >= 0:
                return True
            if result not in (BACK_PRESSURED, ADMIN_ACTION):
                return False
        return False

    def _live_position(self, recording_id: int) -> int | None:
        active = self._active_recordings.get(recording_id)
        return None if active is None else active.session.recorded_position

    def _stop_subscription_recordings(self, entry: RecordingSubscription) -> None:
        """Stops the subscription's recordings; the subscription closes once they have stopped
        (the recorder may be polling its images on another thread until then)."""
        self._recording_subscriptions.pop(entry.key, None)
        entry.closing = True
        if entry.recordings:
            for recording_id in list(entry.recordings):
                self.recorder.stop_recording(recording_id)
        else:
            self._close_recording_subscription(entry)

    def _close_recording_subscription(self, entry: RecordingSubscription) -> None:
        self._recording_subscriptions.pop(entry.key, None)
        self._subscriptions_by_id.pop(entry.subscription_id, None)
        entry.closing = True
        try:
            entry.subscription.close()
        except Exception:  # noqa: BLE001
            log.exception("closing recording subscription %d failed", entry.subscription_id)
        log.info("recording subscription %d closed", entry.subscription_id)

    def _stop_recording(self, session: ControlSession, message: Any) -> None:
        try:
            key = channel_uri.recording_key(message.stream_id, message.channel)
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"invalid channel {message.channel!r}: {error}") from None
        entry = self._recording_subscriptions.get(key)
        if entry is None:
            raise ArchiveRequestError(
                ArchiveErrorCode.UNKNOWN_SUBSCRIPTION,
                f"no recording found for streamId={message.stream_id} channel={message.channel}")
        self._stop_subscription_recordings(entry)
        session.send_ok(message.correlation_id, 0)

    def _stop_recording_subscription(self, session: ControlSession, message: Any) -> None:
        entry = self._subscriptions_by_id.get(message.subscription_id)
        if entry is None or entry.closing:
            raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_SUBSCRIPTION,
                                      f"no recording subscription found for subscriptionId="
                                      f"{message.subscription_id}")
        self._stop_subscription_recordings(entry)
        session.send_ok(message.correlation_id, 0)

    def _stop_recording_by_identity(self, session: ControlSession, message: Any) -> None:
        self._recording(message.recording_id)
        active = self._active_recordings.get(message.recording_id)
        if active is None:
            session.send_ok(message.correlation_id, 0)
            return
        entry = active.subscription
        if entry.recordings == {message.recording_id}:
            self._stop_subscription_recordings(entry)
        else:
            self.recorder.stop_recording(message.recording_id)
        session.send_ok(message.correlation_id, 1)

    # ------------------------------------------------------------------ positions and queries

    def _recording_position(self, session: ControlSession, message: Any) -> None:
        self._recording(message.recording_id)
        live = self._live_position(message.recording_id)
        session.send_ok(message.correlation_id, NULL_POSITION if live is None else live)

    def _stop_position(self, session: ControlSession, message: Any) -> None:
        session.send_ok(message.correlation_id, self._recording(message.recording_id).stop_position)

    def _start_position(self, session: ControlSession, message: Any) -> None:
        session.send_ok(message.correlation_id, self._recording(message.recording_id).start_position)

    def _max_recorded_position(self, session: ControlSession, message: Any) -> None:
        descriptor = self._recording(message.recording_id)
        live = self._live_position(message.recording_id)
        if live is None:
            live = descriptor.stop_position if not descriptor.is_active else descriptor.start_position
        session.send_ok(message.correlation_id, live)

    def _find_last_matching_recording(self, session: ControlSession, message: Any) -> None:
        if message.min_recording_id < 0:
            raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_RECORDING,
                                      f"minRecordingId={message.min_recording_id} < 0")
        fragment = message.channel
        found = NULL_VALUE
        for recording_id in range(self.catalog.next_recording_id - 1, message.min_recording_id - 1, -1):
            d = self.catalog.descriptor(recording_id)
            if d is not None and d.session_id == message.session_id and d.stream_id == message.stream_id \
                    and fragment in d.original_channel:
                found = recording_id
                break
        session.send_ok(message.correlation_id, found)

    # ------------------------------------------------------------------ listings

    def _begin_listing(self, session: ControlSession, correlation_id: int, from_recording_id: int,
                       count: int, matches: Callable[[RecordingDescriptor], bool]) -> None:
        if session.control_session_id in self._listings:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_LISTING,
                                      "active listing already in progress")
        self._listings[session.control_session_id] = ListingCursor(
            correlation_id, max(0, from_recording_id), count, matches)

    def _continue_listing(self, session: ControlSession, cursor: ListingCursor) -> int:
        scanned = 0
        end = self.catalog.next_recording_id
        while scanned < LISTING_BATCH:
            if cursor.remaining <= 0:
                del self._listings[session.control_session_id]
                return scanned + 1
            if cursor.next_recording_id >= end:
                session.send_recording_unknown(cursor.correlation_id, cursor.next_recording_id)
                del self._listings[session.control_session_id]
                return scanned + 1
            descriptor = self.catalog.descriptor(cursor.next_recording_id)
            cursor.next_recording_id += 1
            scanned += 1
            if descriptor is not None and cursor.matches(descriptor):
                session.send_descriptor(cursor.correlation_id, descriptor)
                cursor.remaining -= 1
        return scanned

    def _list_recordings(self, session: ControlSession, message: Any) -> None:
        self._begin_listing(session, message.correlation_id, message.from_recording_id,
                            message.record_count, lambda d: True)

    def _list_recordings_for_uri(self, session: ControlSession, message: Any) -> None:
        stream_id, fragment = message.stream_id, message.channel

        def matches(d: RecordingDescriptor) -> bool:
            return d.stream_id == stream_id and (fragment in d.original_channel
                                                 or fragment in d.stripped_channel)

        self._begin_listing(session, message.correlation_id, message.from_recording_id,
                            message.record_count, matches)

    def _list_recording(self, session: ControlSession, message: Any) -> None:
        if session.control_session_id in self._listings:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_LISTING,
                                      "active listing already in progress")
        descriptor = self.catalog.descriptor(message.recording_id) if message.recording_id >= 0 else None
        if descriptor is None:
            session.send_recording_unknown(message.correlation_id, message.recording_id)
        else:
            session.send_descriptor(message.correlation_id, descriptor)

    def _list_recording_subscriptions(self, session: ControlSession, message: Any) -> None:
        if session.control_session_id in self._listings:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_LISTING,
                                      "active listing already in progress")
        entries = [e for e in self._subscriptions_by_id.values() if not e.closing]
        apply_stream_id = int(message.apply_stream_id) == BooleanType.TRUE
        sent = 0
        if 0 <= message.pseudo_index < len(entries) and message.subscription_count > 0:
            for entry in entries[message.pseudo_index:]:
                if (not apply_stream_id or entry.stream_id == message.stream_id) \
                        and message.channel in entry.subscribed_channel:
                    session.send_subscription_descriptor(message.correlation_id, entry.subscription_id,
                                                         entry.stream_id, entry.subscribed_channel)
                    sent += 1
                    if sent >= message.subscription_count:
                        return
        session.send_subscription_unknown(message.correlation_id)

    # ------------------------------------------------------------------ replay

    def _replay(self, session: ControlSession, message: Any) -> None:
        if self.replayer is None:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, "replay is not available in this archive")
        if len(self._replays) >= self.settings.max_concurrent_replays:
            raise ArchiveRequestError(ArchiveErrorCode.MAX_REPLAYS,
                                      f"max concurrent replays reached {self.settings.max_concurrent_replays}")
        descriptor = self._recording(message.recording_id)
        limit = None
        try:
            if isinstance(message, codecs.BoundedReplayRequest):
                limit = LimitCounterReader(self.counters_reader, message.limit_counter_id)
            elif message.recording_id in self._active_recordings:
                counter_id = self._active_recordings[message.recording_id].session.counter_id
                limit = LimitCounterReader(self.counters_reader, counter_id)
        except LimitCounterError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, str(error)) from None
        layout = RecordingLayout.of(descriptor)
        file_io_max_length = max(0, message.file_io_max_length)
        try:
            plan = plan_replay(layout, message.position, message.length,
                               limit_position=None if limit is None else limit.position(),
                               file_io_max_length=file_io_max_length,
                               replay_buffer_length=self.settings.replay_buffer_length)
        except ReplayRequestError as error:
            raise ArchiveRequestError(error.code, str(error)) from None
        try:
            channel = channel_uri.replay_channel(
                message.replay_channel, plan.replay_position, descriptor.initial_term_id,
                descriptor.term_buffer_length, descriptor.mtu_length,
                self.settings.replay_linger_timeout_ns)
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"invalid replay channel {message.replay_channel!r}: {error}") from None
        publication = self.aeron.add_exclusive_publication(channel, message.replay_stream_id)
        self._replay_id = (self._replay_id + 1) & 0x7FFF_FFFF
        replay_session_id = make_replay_session_id(self._replay_id, publication.session_id)
        try:
            replay = ReplaySession(
                replay_session_id=replay_session_id, recording=layout, plan=plan,
                publication=publication, archive_dir=self.settings.archive_dir, limit=limit,
                correlation_id=message.correlation_id, owner=session,
                replay_buffer_length=self.settings.replay_buffer_length,
                file_io_max_length=file_io_max_length,
                connect_timeout_ns=self.settings.connect_timeout_ms * 1_000_000,
                checksum=self.settings.replay_checksum, listener=self)
        except Exception:
            _close_quietly(publication)
            raise
        self._replays[replay_session_id] = message.recording_id
        self.replayer.add_session(replay)
        log.info("replay %d of recording %d from %d length %d on %s stream %d",
                 replay_session_id, message.recording_id, plan.replay_position, plan.replay_length,
                 channel, message.replay_stream_id)

    # ReplayListener (replayer thread: enqueue only)
    def on_replay_ready(self, replay: ReplaySession) -> None:
        self._events.append(("replay-ready", replay))

    def on_replay_ended(self, replay: ReplaySession) -> None:
        self._events.append(("replay-ended", replay))

    def _on_replay_ready(self, replay: ReplaySession) -> None:
        control: ControlSession = replay.owner
        control.send_ok(replay.correlation_id, replay.replay_session_id)

    def _on_replay_ended(self, replay: ReplaySession) -> None:
        self._replays.pop(replay.replay_session_id, None)
        if replay.error is not None:
            control: ControlSession = replay.owner
            control.send_error(replay.correlation_id, replay.error.message, replay.error.code)
        log.info("replay %d of recording %d ended: %s", replay.replay_session_id,
                 replay.recording_id, replay.end_reason or "done")

    def _stop_replay(self, session: ControlSession, message: Any) -> None:
        if self.replayer is not None:
            self.replayer.stop_replay(message.replay_session_id)
        session.send_ok(message.correlation_id, 0)

    def _stop_all_replays(self, session: ControlSession, message: Any) -> None:
        if self.replayer is not None:
            self.replayer.stop_all_replays(message.recording_id)
        session.send_ok(message.correlation_id, 0)

    def _has_replays(self, recording_id: int) -> bool:
        return recording_id in self._replays.values()

    # ------------------------------------------------------------------ maintenance

    def _stopped(self, recording_id: int, action: str) -> RecordingDescriptor:
        descriptor = self._recording(recording_id)
        if recording_id in self._active_recordings or descriptor.is_active:
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_RECORDING,
                                      f"cannot {action} active recording {recording_id}")
        return descriptor

    def _maintenance(self, action: Callable[[], maintenance.MaintenanceResult]) -> maintenance.MaintenanceResult:
        try:
            return action()
        except maintenance.MaintenanceError as error:
            text = str(error)
            code = ArchiveErrorCode.GENERIC
            if "not aligned" in text or "outside the recording" in text:
                code = ArchiveErrorCode.INVALID_POSITION
            elif "active" in text:
                code = ArchiveErrorCode.ACTIVE_RECORDING
            raise ArchiveRequestError(code, text) from None

    def _send_delete_signal(self, session: ControlSession, correlation_id: int, recording_id: int) -> None:
        session.send_signal(correlation_id, recording_id, NULL_VALUE, NULL_VALUE, RecordingSignal.DELETE)

    def _truncate_recording(self, session: ControlSession, message: Any) -> None:
        descriptor = self._stopped(message.recording_id, "truncate")
        if message.position % 32 or not descriptor.start_position <= message.position <= descriptor.stop_position:
            raise ArchiveRequestError(
                ArchiveErrorCode.INVALID_POSITION,
                f"invalid truncate position {message.position}: recording {message.recording_id} "
                f"spans [{descriptor.start_position}, {descriptor.stop_position}] and positions are "
                f"32-byte aligned")
        if self.replayer is not None:
            self.replayer.stop_all_replays(message.recording_id)
        result = self._maintenance(lambda: maintenance.truncate_recording(
            self.catalog, self.settings.archive_dir, message.recording_id, message.position))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def _purge_recording(self, session: ControlSession, message: Any) -> None:
        self._stopped(message.recording_id, "purge")
        if self._has_replays(message.recording_id):
            raise ArchiveRequestError(ArchiveErrorCode.ACTIVE_RECORDING,
                                      f"cannot purge recording {message.recording_id} with active replay")
        result = self._maintenance(lambda: maintenance.purge_recording(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def _detach_segments(self, session: ControlSession, message: Any) -> None:
        self._recording(message.recording_id)
        self._maintenance(lambda: maintenance.detach_segments(
            self.catalog, self.settings.archive_dir, message.recording_id, message.new_start_position,
            recorded_position=self._live_position(message.recording_id)))
        session.send_ok(message.correlation_id, 0)

    def _delete_detached_segments(self, session: ControlSession, message: Any) -> None:
        self._recording(message.recording_id)
        result = self._maintenance(lambda: maintenance.delete_detached_segments(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def _purge_segments(self, session: ControlSession, message: Any) -> None:
        self._recording(message.recording_id)
        self._maintenance(lambda: maintenance.detach_segments(
            self.catalog, self.settings.archive_dir, message.recording_id, message.new_start_position,
            recorded_position=self._live_position(message.recording_id)))
        result = self._maintenance(lambda: maintenance.delete_detached_segments(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.deleted_files))
        self._send_delete_signal(session, message.correlation_id, message.recording_id)

    def _attach_segments(self, session: ControlSession, message: Any) -> None:
        self._recording(message.recording_id)
        result = self._maintenance(lambda: maintenance.attach_segments(
            self.catalog, self.settings.archive_dir, message.recording_id))
        session.send_ok(message.correlation_id, len(result.attached_files))

    # ------------------------------------------------------------------ shutdown

    @property
    def active_recording_ids(self) -> list[int]:
        return sorted(self._active_recordings)

    def request_stop_all_recordings(self) -> None:
        """Thread-safe: the next duty cycle stops every recording (archive shutdown)."""
        self._events.append(("stop-all-recordings",))

    @property
    def all_recordings_stopped(self) -> bool:
        """No recording left whose stop position is still to be stored (any thread)."""
        return not self._active_recordings and not any(e[0] == "stop-all-recordings" for e in list(self._events))

    def stop_all_recordings(self) -> None:
        """Asks the recorder to stop everything; `do_work` then records the stop positions."""
        for entry in list(self._subscriptions_by_id.values()):
            self._stop_subscription_recordings(entry)

    def on_close(self) -> None:
        """Closes sessions, subscriptions and publications (call after the recorder stopped)."""
        if self._closed:
            return
        self._closed = True
        self._drain_events(self._clock())
        for session in list(self._sessions.values()):
            session.abort("archive shutting down")
            self._close_session(session)
        for entry in list(self._subscriptions_by_id.values()):
            self._close_recording_subscription(entry)
        for subscription, _, _ in self.control_subscriptions:
            _close_quietly(subscription)
        if self.events_publication is not None:
            _close_quietly(self.events_publication)


def response_publication_channel(channel: str) -> str:
    """The client's response channel with Aeron's control defaults where it sets none: a 64 KiB
    term (not the driver's 16/64 MiB per session) and sparse log buffers."""
    uri = channel_uri.parse(channel)
    if uri.get("term-length") is None:
        uri.set("term-length", CONTROL_TERM_LENGTH)
    if uri.get("sparse") is None:
        uri.set("sparse", "true")
    return uri.build()


def _is_connected(publication: Any) -> bool:
    connected = publication.is_connected
    return bool(connected() if callable(connected) else connected)


def _close_quietly(resource: Any) -> None:
    try:
        resource.close()
    except Exception:  # noqa: BLE001
        log.exception("closing %r failed", resource)
