"""The control demuxer: control requests in, control sessions served, responses out.

It owns the control subscriptions (the UDP control channel and the local IPC control channel)
and one `ControlSession` per client with the client's response publication:

* `poll` polls the control subscriptions; every request is one reassembled message, decoded with
  `codecs.decode` using its own header's blockLength and version. A connect request creates a
  session (and its response publication); any other request is routed by its controlSessionId to
  its session, which must have been created on the same request Image (``image_key`` = control
  subscription index and Image session id), and dispatched to its handler (Aeron's
  ControlSessionDemuxer). The one exception is a replay carrying a replay token over a response
  channel, routed by its token (below).
* A connect never waits for the media driver: the session starts in INIT, its response publication
  is asked of the driver without waiting (``async_add_exclusive_publication``, as Aeron's
  ControlSessionDemuxer) and polled each cycle; once it is there the session is CONNECTING and its
  counter (113) is asked for the same way; the connect OK waits for both. A session that does not
  get there within the connect timeout is closed, and adds still pending then are discarded
  (settled and closed as the driver answers). Sessions still connecting are capped in all and per
  request Image (`connecting_sessions`): a flood of connects nobody answers on cannot starve a
  new client.
* `service_sessions` advances every session (handshake, pings, timeouts), continues its listing
  (`listing_sessions`), drains its outbox onto its response publication and closes finished
  sessions.

Response channels (``control-mode=response``, Aeron 1.45+, GA in 1.48): the client opens every
connection itself. Its request publication carries ``response-correlation-id=<its response
subscription's registration id>``; the archive creates the session's response publication on the
client's response channel with ``response-correlation-id=<the request Image's correlation id>``,
and the media drivers send the responses back over that connection. A replay to such a client
comes with a replay token (`replay_tokens`): the ReplayTokenRequest is answered on the session,
and the Replay/BoundedReplay carrying the token arrives on a new request Image (a publication the
client opened for it), is routed to the token's session whatever Image brought it, and its replay
publication gets ``response-correlation-id=<that Image's correlation id>``. An unknown or expired
token is answered with an ERROR on the session the request names, if it exists (Aeron's archive
answers nothing and logs).

Bad input never ends the process: an undecodable or unknown request is answered with an ERROR
response when its controlSessionId names a session (or the request Image has one), otherwise
logged; a handler's `ArchiveRequestError` becomes an ERROR with its code, any other exception an
ERROR GENERIC to that request (and goes to the error handler: the mark file's error log).
Repeated failures of one kind are logged once with a count (`failure_log.FailureLog`).

Counters (``session_counters``, `archive_counters.ControlSessionCounters`): the control-session
count (102) counts a session from its connect to its close, and each session has its own counter
(113, "control-session: <clientInfo> sourceIdentity=... sessionId=...", value = its id,
reference id = its response publication's registration id), allocated once the response
publication is there and closed with the session. A counter the driver refuses is logged and
counted as an error; the session goes on without it.

One session cannot stop the others: whatever fails while a session is served (an offer or an
encoding raising, an answer longer than the response publication's max message) closes that
session with one logged reason and is counted (``error_count`` and the error handler); the other
sessions and the rest of the conductor's duty cycle go on.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from typing import Any

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ArchiveErrorCode, CodecError, SchemaIdMismatchError, UnknownTemplateError
from aeron_spark.archive.codecs.counter_layout import WritableCounter
from aeron_spark.archive.service.aeron_port import AeronPort, close_quietly, is_connected
from aeron_spark.archive.service.archive_counters import ControlSessionCounters
from aeron_spark.archive.service.authenticator import Authenticator
from aeron_spark.archive.service.conductor_events import ControlImageUnavailable
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.connecting_sessions import (
    MAX_DISCARDS, ConnectingSessions, Discards, PendingResource, Settled)
from aeron_spark.archive.service.control_session import SESSION_CLOSED, ControlSession, Outbound, SessionState
from aeron_spark.archive.service.failure_log import FailureLog
from aeron_spark.archive.service.replay_tokens import NULL_TOKEN, ReplayTokens
from aeron_spark.archive.service.request_errors import NULL_VALUE, ArchiveRequestError
from aeron_spark.archive.storage.catalog import UnknownRecordingError
from aeron_spark.driver_integration import channel_uri
from aeron_spark.driver_integration.errors import AeronError

log = logging.getLogger(__name__)

CONTROL_FRAGMENT_LIMIT = 10
CONTROL_TERM_LENGTH = 64 * 1024
MAX_OUTBOX_FOR_LISTING = 32  # a listing waits while its session's outbox is this long

RequestHandler = Callable[[ControlSession, Any], None]

_SESSION_MESSAGES = (codecs.ChallengeResponse, codecs.CloseSessionRequest, codecs.KeepAliveRequest)
_REPLAY_REQUESTS = (codecs.ReplayRequest, codecs.BoundedReplayRequest)

CONTROL_MODE_RESPONSE = "response"
RESPONSE_CORRELATION_ID = "response-correlation-id"


class ControlDemuxer:
    """See the module docstring. ``handlers`` maps a request type to its handler; ``enqueue``
    queues an event for the conductor (called on Aeron's client thread)."""

    def __init__(self, *, aeron: AeronPort, settings: ConductorSettings, authenticator: Authenticator,
                 control_channels: list[tuple[str, int]], handlers: dict[type, RequestHandler],
                 enqueue: Callable[[ControlImageUnavailable], None], clock: Callable[[], int],
                 error_handler: Callable[[BaseException], None] | None = None,
                 replay_tokens: ReplayTokens[ControlSession] | None = None,
                 session_counters: ControlSessionCounters | None = None) -> None:
        self.aeron = aeron
        self.session_counters = session_counters
        self._session_counters: dict[int, WritableCounter | None] = {}
        self.error_handler = error_handler  # told of a handler's unexpected exception
        self.settings = settings
        self.authenticator = authenticator
        self._handlers = handlers
        self._clock = clock
        self.failures = FailureLog(log)
        self.error_count = 0  # failures caught while serving sessions or handling requests
        self._next_session_id = random.randrange(0, 1 << 31)
        self._sessions: dict[int, ControlSession] = {}
        self._session_publications: dict[int, Any] = {}
        #: adds the driver is still carrying out for a session (response publication, 113 counter)
        self._pending_publications: dict[int, PendingResource[Any]] = {}
        self._pending_counters: dict[int, PendingResource[WritableCounter]] = {}
        self.connecting = ConnectingSessions()
        self.discards = Discards()  # adds of closed sessions, settled and closed as they answer
        #: tokens of replays over response channels (ReplayTokenRequest), valid for the connect timeout
        self.replay_tokens: ReplayTokens[ControlSession] = replay_tokens if replay_tokens is not None \
            else ReplayTokens(validity_ms=settings.connect_timeout_ms)
        self.control_subscriptions: list[tuple[Any, str, int]] = []
        self._fragment_handlers: list[Callable[[memoryview, Any], None]] = []
        for channel, stream_id in control_channels:
            index = len(self.control_subscriptions)
            subscription = aeron.add_subscription(
                channel, stream_id, on_available_image=None,
                on_unavailable_image=_image_unavailable_callback(index, enqueue))
            self.control_subscriptions.append((subscription, channel, stream_id))
            self._fragment_handlers.append(self._fragment_handler(index))

    @property
    def sessions(self) -> dict[int, ControlSession]:
        return dict(self._sessions)

    # ------------------------------------------------------------------ requests in

    def poll(self) -> int:
        work = 0
        for (subscription, _, _), handler in zip(self.control_subscriptions, self._fragment_handlers):
            work += subscription.poll(handler, CONTROL_FRAGMENT_LIMIT)
        return work

    def _fragment_handler(self, index: int) -> Callable[[memoryview, Any], None]:
        def on_message(payload: memoryview, header: Any) -> None:
            try:
                self.on_control_message(bytes(payload), (index, header.session_id),
                                        image_correlation_id=header.image_correlation_id)
            except Exception as error:  # noqa: BLE001 - one request must not stop the poll
                self.count_error(error)
                self.failures.failed(("request", type(error).__name__),
                                     "control request on image %s failed: %s: %s",
                                     (index, header.session_id), type(error).__name__, error, exc_info=True)
        return on_message

    def count_error(self, error: BaseException) -> None:
        self.error_count += 1
        if self.error_handler is not None:
            try:
                self.error_handler(error)
            except Exception:  # noqa: BLE001 - the handler must not stop the duty cycle either
                log.warning("the error handler failed", exc_info=True)

    def on_control_message(self, data: bytes, image_key: object, *, image_correlation_id: int = NULL_VALUE) -> None:
        """One request as received on a control Image (``image_key`` names that Image;
        ``image_correlation_id`` is the media driver's correlation id of it, which response
        channels need)."""
        now = self._clock()
        try:
            message = codecs.decode(data)
        except CodecError as error:
            self._answer_undecodable(error, image_key, now)
            return
        if isinstance(message, (codecs.ConnectRequest, codecs.AuthConnectRequest)):
            self._on_connect(message, image_key, image_correlation_id, now)
            return
        if isinstance(message, _REPLAY_REQUESTS) and message.replay_token != NULL_TOKEN \
                and _is_response_channel(message.replay_channel):
            self._on_token_replay(message, image_key, image_correlation_id, now)
            return
        control_session_id = getattr(message, "control_session_id", None)
        if control_session_id is None or type(message) not in self._handlers \
                and not isinstance(message, _SESSION_MESSAGES):
            self._answer_unexpected(message, image_key, now)
            return
        session = self._sessions.get(control_session_id)
        if session is None:
            self._answer_unknown_session(message, control_session_id, image_key, now)
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

    def _on_token_replay(self, message: codecs.ReplayRequest | codecs.BoundedReplayRequest, image_key: object,
                         image_correlation_id: int, now: int) -> None:
        """A replay over a response channel: it comes on a request Image of its own, and its token
        (not that Image) names the session (see the module docstring)."""
        session = self.replay_tokens.session_for(message.replay_token, message.recording_id, now)
        if session is None or session.is_done:
            text = (f"Unknown session or token timeout for replayToken={message.replay_token} "
                    f"(recordingId={message.recording_id})")
            named = self._sessions.get(message.control_session_id)
            if named is not None and named.accept_request(now):
                named.send_error(message.correlation_id, text)
            else:
                self.failures.failed(("replay token", "unknown"), "%s; dropped (no session to tell)", text)
            return
        if image_correlation_id == NULL_VALUE:
            if session.accept_request(now):
                session.send_error(message.correlation_id, "a replay over a response channel needs the "
                                                           "request Image's correlation id, which is unknown")
            return
        try:
            uri = channel_uri.parse(message.replay_channel)
        except ValueError as error:
            if session.accept_request(now):
                session.send_error(message.correlation_id,
                                   f"invalid replay channel {message.replay_channel!r}: {error}")
            return
        uri.set(RESPONSE_CORRELATION_ID, str(image_correlation_id))
        if session.accept_request(now):
            self._dispatch(session, dataclasses.replace(message, replay_channel=uri.build()))

    def issue_replay_token(self, session: ControlSession, message: codecs.ReplayTokenRequest) -> None:
        """ReplayTokenRequest (105): OK with a new token for the session and the recording."""
        token = self.replay_tokens.issue(session, session.control_session_id, message.recording_id,
                                         self._clock())
        session.send_ok(message.correlation_id, token)

    def _dispatch(self, session: ControlSession, message: Any) -> None:  # a request: its handler's own type
        correlation_id = message.correlation_id
        try:
            self._handlers[type(message)](session, message)
        except ArchiveRequestError as error:
            session.send_error(correlation_id, str(error), error.code)
        except UnknownRecordingError as error:
            session.send_error(correlation_id, str(error), ArchiveErrorCode.UNKNOWN_RECORDING)
        except AeronError as error:  # the media driver refused what the client asked for (a channel)
            refusal = driver_refusal(error)
            self.count_error(error)
            self.failures.failed((type(message).__name__, "driver refusal"),
                                 "%s (correlationId=%d) refused by the media driver: %s",
                                 type(message).__name__, correlation_id, refusal)
            session.send_error(correlation_id, f"{type(message).__name__}: media driver refused: {refusal}")
        except Exception as error:  # noqa: BLE001 - the session and the process carry on
            self.count_error(error)
            self.failures.failed((type(message).__name__, type(error).__name__),
                                 "%s (correlationId=%d) failed: %s: %s", type(message).__name__,
                                 correlation_id, type(error).__name__, error, exc_info=True)
            session.send_error(correlation_id, f"{type(message).__name__} failed: "
                                               f"{type(error).__name__}: {error}")

    def _answer_undecodable(self, error: CodecError, image_key: object, now: int) -> None:
        session = self._sessions.get(error.control_session_id) if error.control_session_id is not None else None
        if session is None or session.request_image_key != image_key:
            session = self._latest_session_on(image_key)
        if session is None:
            self.failures.failed(("undecodable", type(error).__name__),
                                 "undecodable control request with no session to answer: %s", error)
            return
        if isinstance(error, UnknownTemplateError):
            what = f"unknown request templateId={error.template_id}"
        elif isinstance(error, SchemaIdMismatchError):
            what = "not an archive control message"
        else:
            what = "malformed request"
        self.failures.failed(("undecodable", type(error).__name__),
                             "control session %d: %s: %s", session.control_session_id, what, error)
        # Without a readable correlationId the ERROR carries -1: no request waits for it, but the
        # client's log shows why its bytes were refused.
        correlation_id = NULL_VALUE if error.correlation_id is None else error.correlation_id
        if session.accept_request(now):
            session.send_error(correlation_id, f"{what}: {error}")

    def _answer_unexpected(self, message: codecs.ControlMessage, image_key: object, now: int) -> None:
        session = self._latest_session_on(image_key)
        correlation_id = getattr(message, "correlation_id", None)
        text = (f"{type(message).__name__} (templateId={message.TEMPLATE_ID}) is not a request "
                f"this archive serves")
        if session is not None and correlation_id is not None and session.accept_request(now):
            session.send_error(correlation_id, text)
        else:
            self.failures.failed(("unexpected", type(message).__name__), "%s", text)

    def _answer_unknown_session(self, message: codecs.ControlMessage, control_session_id: int, image_key: object,
                                now: int) -> None:
        text = (f"unknown controlSessionId={control_session_id} in "
                f"{type(message).__name__}")
        session = self._latest_session_on(image_key)
        correlation_id = getattr(message, "correlation_id", None)
        if session is not None and correlation_id is not None and session.accept_request(now):
            session.send_error(correlation_id, text)
        else:
            self.failures.failed(("unknown session", type(message).__name__),
                                 "%s; dropped (no session on this request image to tell)", text)

    def _latest_session_on(self, image_key: object) -> ControlSession | None:
        """The newest ACTIVE session of the request Image, else its newest session still connecting
        (a connect sent on a client's own request Image must not take the answers meant for it)."""
        found = active = None
        for session in self._sessions.values():
            if session.request_image_key == image_key and not session.is_done:
                found = session
                if session.state is SessionState.ACTIVE:
                    active = session
        return active or found

    def on_request_image_unavailable(self, image_key: object) -> None:
        """The request Image ``image_key`` went away: its sessions end."""
        for session in self._sessions.values():
            if session.request_image_key == image_key:
                session.on_request_image_unavailable()

    # ------------------------------------------------------------------ sessions

    def _on_connect(self, message: codecs.ConnectRequest | codecs.AuthConnectRequest, image_key: object,
                    image_correlation_id: int, now: int) -> None:
        """A new session in INIT; its response publication is asked of the driver without waiting
        and polled each cycle (`_poll_adds`). Connecting sessions are bounded (`connecting_sessions`)."""
        try:
            response_channel = response_publication_channel(message.response_channel, image_correlation_id)
        except ValueError as error:
            # No session to answer on: only the log says why the client hears nothing.
            self.failures.failed(("response channel", type(error).__name__),
                                 "connect (correlationId=%d): response channel %r refused: %s",
                                 message.correlation_id, message.response_channel, error)
            return
        if not self._admit(image_key, message):
            return
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
        try:
            pending = self._request_publication(response_channel, message.response_stream_id)
        except Exception as error:  # noqa: BLE001 - the client library refused it before the driver
            self._publication_refused(session, error)
            return
        self.authenticator.on_connect_request(session_id, credentials, now)
        self._sessions[session_id] = session
        self.connecting.add(image_key, session_id)
        self._pending_publications[session_id] = pending
        if self.session_counters is not None:
            self.session_counters.session_opened()
        log.info("control session %d: connect from %s (version %s%s) responses on %s stream %d",
                 session_id, session.client_info or "client",
                 codecs.format_semantic_version(message.version) if message.version else "none/1.15",
                 ", legacy" if session.is_legacy_client else "", message.response_channel,
                 message.response_stream_id)
        self._poll_adds(session, now)  # a publication the driver already has is used at once

    def _admit(self, image_key: object, message: codecs.ConnectRequest | codecs.AuthConnectRequest) -> bool:
        """Whether a connect from ``image_key`` may open a session now (may close the busiest
        request Image's oldest connecting session to make room)."""
        if len(self.discards) >= MAX_DISCARDS:
            self.failures.failed(("connect", "driver behind"),
                                 "connect (correlationId=%d) dropped: %d unwanted publications and counters "
                                 "still wait for the media driver's answer", message.correlation_id,
                                 len(self.discards))
            return False
        admitted, evicted = self.connecting.admit(image_key)
        if not admitted:
            self.failures.failed(("connect", "too many connecting"),
                                 "connect (correlationId=%d) on request image %s dropped: %d sessions are "
                                 "connecting (at most %d, %d per request image)", message.correlation_id,
                                 image_key, len(self.connecting), self.connecting.max_sessions,
                                 self.connecting.max_per_image)
            return False
        if evicted is not None:
            session = self._sessions[evicted]
            session.abort(f"closed to admit a connect from another request image: {len(self.connecting)} "
                          f"sessions were connecting")
            self._close_session(session)
        return True

    def _request_publication(self, channel: str, stream_id: int) -> PendingResource[Any]:
        # A port without the async add (a unit test's fake) adds at once.
        async_add = getattr(self.aeron, "async_add_exclusive_publication", None)
        if async_add is not None:
            pending: PendingResource[Any] = async_add(channel, stream_id)
            return pending
        return Settled.of(lambda: self.aeron.add_exclusive_publication(channel, stream_id))

    def _publication_refused(self, session: ControlSession, error: BaseException) -> None:
        # No session to answer on: only the log says why the client hears nothing.
        self.failures.failed(("response publication", type(error).__name__),
                             "control session %d: cannot add response publication %s stream %d: %s",
                             session.control_session_id, session.response_channel, session.response_stream_id,
                             driver_refusal(error) if isinstance(error, AeronError) else error)
        session.abort("response publication refused")

    def _poll_adds(self, session: ControlSession, now: int) -> int:
        """Polls the session's pending response publication and counter; returns work done."""
        session_id = session.control_session_id
        work = 0
        pending = self._pending_publications.get(session_id)
        if pending is not None:
            try:
                publication = pending.poll()
            except Exception as error:  # noqa: BLE001 - the driver refused the client's channel
                del self._pending_publications[session_id]
                self._publication_refused(session, error)
                return 1
            if publication is None:
                return 0
            del self._pending_publications[session_id]
            self._session_publications[session_id] = publication
            session.publication_ready(now)
            work += 1
            if self.session_counters is not None:
                self._request_session_counter(session)
        pending_counter = self._pending_counters.get(session_id)
        if pending_counter is not None:
            work += self._poll_session_counter(session, pending_counter)
        return work

    def _request_session_counter(self, session: ControlSession) -> None:
        counters = self.session_counters
        assert counters is not None
        image_session_id, source_identity = _request_image_identity(self.control_subscriptions,
                                                                    session.request_image_key)
        try:
            self._pending_counters[session.control_session_id] = counters.request_counter(
                session.control_session_id, client_info=session.client_info, source_identity=source_identity,
                image_session_id=image_session_id)
        except Exception as error:  # noqa: BLE001 - a diagnostic: the session works without it
            self._session_counter_failed(session, error)

    def _poll_session_counter(self, session: ControlSession, pending: PendingResource[WritableCounter]) -> int:
        session_id = session.control_session_id
        try:
            counter = pending.poll()
        except Exception as error:  # noqa: BLE001 - a diagnostic: the session works without it
            del self._pending_counters[session_id]
            self._session_counter_failed(session, error)
            return 1
        if counter is None:
            return 0
        del self._pending_counters[session_id]
        self._session_counters[session_id] = counter
        publication = self._session_publications.get(session_id)
        ControlSessionCounters.counter_added(counter, session_id, getattr(publication, "registration_id", None))
        return 1

    def _session_counter_failed(self, session: ControlSession, error: BaseException) -> None:
        self.count_error(error)
        self.failures.failed(("session counter", type(error).__name__),
                             "control session %d: its counter was not allocated: %s: %s",
                             session.control_session_id, type(error).__name__, error)

    def allocate_session_id(self) -> int:
        """The next id of the control sessions' counter (replication ids come from it too, as Aeron)."""
        return self._allocate_session_id()

    def _allocate_session_id(self) -> int:
        session_id = self._next_session_id
        self._next_session_id = (self._next_session_id + 1) & 0x7FFF_FFFF_FFFF_FFFF
        return session_id

    def service_sessions(self, now: int) -> int:
        work = self.replay_tokens.expire(now) if len(self.replay_tokens) else 0
        work += self.discards.reap()
        for session in list(self._sessions.values()):
            try:
                work += self._service_session(session, now)
            except Exception as error:  # noqa: BLE001 - this session ends, the others go on
                self._fail_session(session, error)
                work += 1
        return work

    def _fail_session(self, session: ControlSession, error: BaseException) -> None:
        self.count_error(error)
        session.abort(f"serving the session failed: {type(error).__name__}: {error}")
        self._close_session(session)

    def _service_session(self, session: ControlSession, now: int) -> int:
        session_id = session.control_session_id
        work = 0
        if session_id in self._pending_publications or session_id in self._pending_counters:
            work += self._poll_adds(session, now)
        publication = self._session_publications.get(session_id)
        if publication is None:  # INIT: only its connect deadline (or a refusal) can end it
            work += session.tick(now, False)
            if session.is_done:
                self._close_session(session)
                work += 1
            return work
        max_length = getattr(publication, "max_message_length", None)
        # The connect OK waits for the session's counter (the client may look for it once connected).
        work += session.tick(now, is_connected(publication) and session_id not in self._pending_counters)
        if session_id in self.connecting and session.state is SessionState.ACTIVE:
            self.connecting.remove(session_id)
        listing = session.active_listing
        if listing is not None and session.state is SessionState.ACTIVE \
                and session.outbox_length < MAX_OUTBOX_FOR_LISTING:
            work += listing.do_work()

        def offer(message: Outbound) -> int:
            data = codecs.encode(message)
            if max_length is not None and len(data) > max_length:
                raise ValueError(f"{type(message).__name__} of {len(data)} bytes exceeds the response "
                                 f"publication's max message length {max_length}")
            return publication.offer(data)

        if session.outbox_length:
            work += session.drain(offer, now)
        if session.is_done:
            self._close_session(session)
            work += 1
        return work

    def _close_session(self, session: ControlSession) -> None:
        session_id = session.control_session_id
        if self._sessions.pop(session_id, None) is None:
            return
        was_connecting = session_id in self.connecting
        self.connecting.remove(session_id)
        self.replay_tokens.remove_session(session_id)
        session.active_listing = None
        for pending in (self._pending_publications.pop(session_id, None),
                        self._pending_counters.pop(session_id, None)):
            if pending is not None:
                self.discards.add(pending)
        counters = self.session_counters
        if counters is not None:
            try:
                counters.session_closed(self._session_counters.pop(session_id, None))
            except Exception:  # noqa: BLE001
                log.exception("control session %d: closing its counter failed", session_id)
        publication = self._session_publications.pop(session_id, None)
        if publication is not None:
            try:
                publication.close()
            except Exception:  # noqa: BLE001
                log.exception("control session %d: closing its response publication failed", session_id)
        reason = session.abort_reason
        if reason in (SESSION_CLOSED, None):
            log.info("control session %d closed: %s", session_id, reason)
        elif was_connecting:
            # A flood of connects nobody answers on expires in bulk: one line per kind, counted.
            self.failures.failed(("connecting session closed", reason.split(":", 1)[0]),
                                 "control session %d closed while connecting: %s", session_id, reason)
        else:
            log.warning("control session %d closed: %s", session_id, reason)

    def close_sessions(self, reason: str) -> None:
        for session in list(self._sessions.values()):
            session.abort(reason)
            self._close_session(session)
        self.discards.drain()

    def close_subscriptions(self) -> None:
        for subscription, _, _ in self.control_subscriptions:
            close_quietly(subscription)


def response_publication_channel(channel: str, image_correlation_id: int = NULL_VALUE) -> str:
    """The client's response channel with Aeron's control defaults where it sets none: a 64 KiB
    term (not the driver's 16/64 MiB per session) and sparse log buffers. A response channel
    (``control-mode=response``) gets ``response-correlation-id=<the request Image's correlation
    id>``, as Aeron's archive does: the media driver then answers over the connection the
    client's request publication opened. ValueError when that id is unknown."""
    uri = channel_uri.parse(channel)
    if uri.get("term-length") is None:
        uri.set("term-length", CONTROL_TERM_LENGTH)
    if uri.get("sparse") is None:
        uri.set("sparse", "true")
    if uri.get(channel_uri.CONTROL_MODE) == CONTROL_MODE_RESPONSE:
        if image_correlation_id == NULL_VALUE:
            raise ValueError("a control-mode=response channel needs the request Image's correlation id")
        uri.set(RESPONSE_CORRELATION_ID, str(image_correlation_id))
    return uri.build()


def _is_response_channel(channel: str) -> bool:
    """Whether ``channel`` is a response channel (``control-mode=response``); False if unparsable."""
    try:
        return channel_uri.parse(channel).get(channel_uri.CONTROL_MODE) == CONTROL_MODE_RESPONSE
    except ValueError:
        return False


def _request_image_identity(subscriptions: list[tuple[Any, str, int]], image_key: object) -> tuple[int, str]:
    """(session id, source identity) of the request Image ``image_key`` names (its subscription
    index and session id); the source identity is "" when the Image is no longer known."""
    index, image_session_id = image_key if isinstance(image_key, tuple) else (None, NULL_VALUE)
    source_identity = ""
    if isinstance(index, int) and 0 <= index < len(subscriptions):
        find_image = getattr(subscriptions[index][0], "image_by_session_id", None)
        image = find_image(image_session_id) if find_image is not None else None
        source_identity = getattr(image, "source_identity", "") or ""
    return int(image_session_id), source_identity


def _image_unavailable_callback(index: int, enqueue: Callable[[ControlImageUnavailable], None]
                                ) -> Callable[[Any], None]:
    def on_unavailable(image: Any) -> None:
        enqueue(ControlImageUnavailable((index, image.session_id)))
    return on_unavailable


def driver_refusal(error: AeronError) -> str:
    """The media driver's reason for refusing a request, on one line.

    A C client error is the call, then the driver's error stack one frame per line; the line that
    names the cause (e.g. ``port out of range: '-1'``) is in that stack, so all of it is kept.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " | ".join(lines)
