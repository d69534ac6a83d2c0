"""One archive client's control session: an explicit state machine, sans-IO.

States (Aeron's ControlSession)::

    INIT -> CONNECTING -> CONNECTED -> (CHALLENGED) -> AUTHENTICATED -> ACTIVE -> DONE
                                  \\-> REJECTED -> DONE (timeout)

* INIT: created from a connect request; the control demuxer is adding the response publication.
  `publication_ready` moves to CONNECTING.
* CONNECTING: waits until the response publication is connected (`tick` is told).
* CONNECTED: every 200 ms either the "invalid client version" ERROR (relevantId =
  controlSessionId) is re-sent, or the authenticator is asked to decide.
* CHALLENGED: a Challenge was queued; the authenticator is polled every tick until it
  authenticates or rejects.
* AUTHENTICATED: the connect OK (relevantId = controlSessionId, version = 1.12.0) is re-sent every
  200 ms until the first request arrives; that request activates the session.
* ACTIVE: requests are dispatched (`accept_request` returns True); a Ping every liveness
  interval; the session ends when its response publication is no longer connected, when
  responses stay blocked for the connect timeout, or (if enabled) after an idle timeout.
* REJECTED: ERROR AUTHENTICATION_REJECTED is re-sent every 200 ms until the connect timeout.
* DONE: the control demuxer closes the response publication and forgets the session.

The session never touches Aeron. It queues typed codec messages (`Outbound`) in an outbox; the
control demuxer offers them in order (`drain`) and reports each offer's result. Handshake
messages that are re-sent anyway (connect OK, rejections, pings) are dropped when an offer fails;
responses, descriptors and signals wait at the head of the queue, and if they stay blocked for
the connect timeout the session aborts (as Aeron's "failed to send response for more than
connectTimeoutMs").

Clients of Aeron 1.15.x connect with ConnectRequest v0 (no version, decoded as 0); they and other
major-0 clients (1.16-1.21) are accepted, unlike in a stock modern archive, because this archive
serves both generations. Only a major version above ours is refused.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING

from aeron_spark.archive.configuration import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_SESSION_IDLE_TIMEOUT_MS,
    DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_MS,
)
from aeron_spark.archive.service.authenticator import AcceptAllAuthenticator, Authenticator
from aeron_spark.archive.codecs import (
    PROTOCOL_MAJOR_VERSION,
    PROTOCOL_SEMANTIC_VERSION,
    ArchiveErrorCode,
    Challenge,
    ControlResponse,
    ControlResponseCode,
    Ping,
    RecordingDescriptorMessage,
    RecordingSignal,
    RecordingSignalEvent,
    RecordingSubscriptionDescriptor,
    format_semantic_version,
    semantic_version_parts,
)
from aeron_spark.archive.codecs.codec import EncodedMessage
from aeron_spark.archive.codecs.descriptor_body import descriptor_message
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.driver_integration.publication import OfferResult

if TYPE_CHECKING:  # listing_sessions imports this module
    from aeron_spark.archive.service.listing_sessions import RecordingListingSession

log = logging.getLogger(__name__)

RESEND_INTERVAL_MS = 200

SESSION_CLOSED = "session closed"
RESPONSE_NOT_CONNECTED = "control response publication is not connected"
REQUEST_IMAGE_UNAVAILABLE = "control request publication image unavailable"
AUTHENTICATION_REJECTED = "authentication rejected"

#: An ERROR's text is cut to this many characters: with the response header it stays far below the
#: 8 KiB max message of the 64 KiB-term response publication (texts may quote client input).
MAX_ERROR_MESSAGE_LENGTH = 2048
#: The highest error code an Aeron 1.15.x client knows (INVALID_EXTENSION).
LEGACY_MAX_ERROR_CODE = ArchiveErrorCode.INVALID_EXTENSION
TRUNCATED_MARKER = "...[truncated]"

_BACK_PRESSURED = OfferResult.BACK_PRESSURED
_ADMIN_ACTION = OfferResult.ADMIN_ACTION

Outbound = (ControlResponse | Challenge | Ping | RecordingSignalEvent | RecordingDescriptorMessage
            | RecordingSubscriptionDescriptor | EncodedMessage)


class SessionState(Enum):
    INIT = "INIT"
    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    CHALLENGED = "CHALLENGED"
    AUTHENTICATED = "AUTHENTICATED"
    ACTIVE = "ACTIVE"
    REJECTED = "REJECTED"
    DONE = "DONE"


def bounded_text(text: str, max_length: int = MAX_ERROR_MESSAGE_LENGTH) -> str:
    """``text`` as US-ASCII (the codec's charset for error texts; others escaped), cut to
    ``max_length`` characters ending in `TRUNCATED_MARKER` when it is longer."""
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    if len(text) <= max_length:
        return text
    return text[:max_length - len(TRUNCATED_MARKER)] + TRUNCATED_MARKER


def invalid_version_message(client_version: int) -> str | None:
    """Why a client of this protocol version is refused, or None when it is accepted.

    Version 0 is ConnectRequest v0 (Aeron 1.15.x). Majors 0 and 1 are served.
    """
    major = semantic_version_parts(client_version)[0]
    if major <= PROTOCOL_MAJOR_VERSION:
        return None
    return (f"invalid client version {format_semantic_version(client_version)}, archive is "
            f"{format_semantic_version(PROTOCOL_SEMANTIC_VERSION)}")


class ControlSession:
    """See the module docstring. All times are epoch milliseconds supplied by the caller."""

    def __init__(self, *, control_session_id: int, connect_correlation_id: int, client_version: int,
                 response_channel: str, response_stream_id: int, now_ms: int,
                 authenticator: Authenticator | None = None,
                 connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
                 liveness_check_interval_ms: int = DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_MS,
                 idle_timeout_ms: int = DEFAULT_SESSION_IDLE_TIMEOUT_MS, client_info: str = "",
                 request_image_key: object = None) -> None:
        if connect_timeout_ms <= 0:
            raise ValueError(f"connect_timeout_ms must be > 0, got {connect_timeout_ms}")
        if liveness_check_interval_ms <= 0:
            raise ValueError(f"liveness_check_interval_ms must be > 0, got {liveness_check_interval_ms}")
        if idle_timeout_ms < 0:
            raise ValueError(f"idle_timeout_ms must be >= 0 (0 = off), got {idle_timeout_ms}")
        self.control_session_id = control_session_id
        self.correlation_id = connect_correlation_id  # the connect's, then a challenge response's
        self.client_version = client_version
        self.response_channel = response_channel
        self.response_stream_id = response_stream_id
        self.client_info = client_info
        #: which request Image created the session (its requests must come on that Image)
        self.request_image_key = request_image_key
        self.authenticator: Authenticator = authenticator or AcceptAllAuthenticator()
        self.connect_timeout_ms = connect_timeout_ms
        self.liveness_check_interval_ms = liveness_check_interval_ms
        self.idle_timeout_ms = idle_timeout_ms
        self.invalid_version_message = invalid_version_message(client_version)
        self.encoded_principal: bytes | None = None
        self.abort_reason: str | None = None
        #: the listing in progress (a `listing_sessions.RecordingListingSession`; one per session,
        #: a second listing request gets ACTIVE_LISTING), continued by the control demuxer
        self.active_listing: RecordingListingSession | None = None
        self._state = SessionState.INIT
        self._activity_deadline_ms: int | None = now_ms + connect_timeout_ms
        self._resend_deadline_ms = now_ms - 1  # the first connect response goes at once
        self._liveness_deadline_ms = now_ms + liveness_check_interval_ms
        self._last_request_ms = now_ms
        self._outbox: deque[tuple[Outbound, bool]] = deque()  # (message, droppable)

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int:  # the authenticator's SessionProxy view
        return self.control_session_id

    @property
    def is_done(self) -> bool:
        return self._state is SessionState.DONE

    @property
    def is_legacy_client(self) -> bool:
        """A client that sent no protocol version (ConnectRequest v0, Aeron 1.15.x)."""
        return self.client_version == 0

    def _set_state(self, state: SessionState, reason: str) -> None:
        log.debug("control session %d: %s -> %s (%s)", self.control_session_id,
                  self._state.value, state.value, reason)
        self._state = state

    def abort(self, reason: str) -> None:
        """Ends the session; the control demuxer closes its publication on the next cycle."""
        if self._state is not SessionState.DONE:
            self.abort_reason = reason
            self._set_state(SessionState.DONE, reason)
            self._outbox.clear()

    # ------------------------------------------------------------------ inputs

    def publication_ready(self, now_ms: int) -> None:
        """The response publication exists: INIT -> CONNECTING, with a fresh connect deadline."""
        if self._state is SessionState.INIT:
            self._activity_deadline_ms = now_ms + self.connect_timeout_ms
            self._set_state(SessionState.CONNECTING, "response publication added")

    def tick(self, now_ms: int, publication_connected: bool) -> int:
        """Advances timers and the handshake; returns a work count (0 when nothing happened)."""
        work = 0
        if self._state is SessionState.DONE:
            return 0
        if self._activity_deadline_ms is not None and now_ms > self._activity_deadline_ms:
            self.abort(f"failed to send response for more than connectTimeoutMs="
                       f"{self.connect_timeout_ms}" if self._state is SessionState.ACTIVE else
                       f"failed to establish initial connection: state={self._state.value}")
            return 1
        # Each step may move the session on; later steps see the new state in the same tick,
        # so a decision by the authenticator is answered without waiting for the next cycle.
        if self._state is SessionState.CONNECTING and publication_connected:
            self._set_state(SessionState.CONNECTED, "response publication connected")
            work += 1
        if self._state is SessionState.CONNECTED and now_ms > self._resend_deadline_ms:
            self._resend_deadline_ms = now_ms + RESEND_INTERVAL_MS
            if self.invalid_version_message is not None:
                self._queue(self._response(self.control_session_id, ControlResponseCode.ERROR,
                                           self.invalid_version_message), droppable=True)
            else:
                self.authenticator.on_connected_session(self, now_ms)
            work += 1
        elif self._state is SessionState.CHALLENGED:
            self.authenticator.on_challenged_session(self, now_ms)
            work += 1
        if self._state is SessionState.AUTHENTICATED and now_ms > self._resend_deadline_ms:
            self._resend_deadline_ms = now_ms + RESEND_INTERVAL_MS
            self._queue(self._response(self.control_session_id, ControlResponseCode.OK),
                        droppable=True)
            work += 1
        elif self._state is SessionState.REJECTED and now_ms > self._resend_deadline_ms:
            self._resend_deadline_ms = now_ms + RESEND_INTERVAL_MS
            self._queue(ControlResponse(
                self.control_session_id, self.correlation_id,
                int(ArchiveErrorCode.AUTHENTICATION_REJECTED), ControlResponseCode.ERROR,
                PROTOCOL_SEMANTIC_VERSION, AUTHENTICATION_REJECTED), droppable=True)
            work += 1
        elif self._state is SessionState.ACTIVE:
            if not publication_connected:
                self.abort(RESPONSE_NOT_CONNECTED)
                return work + 1
            if self.idle_timeout_ms and now_ms - self._last_request_ms > self.idle_timeout_ms:
                self.abort(f"no request for more than idleTimeoutMs={self.idle_timeout_ms}")
                return work + 1
            if now_ms - self._liveness_deadline_ms > 0:
                self._liveness_deadline_ms = now_ms + self.liveness_check_interval_ms
                self._queue(Ping(self.control_session_id), droppable=True)
                work += 1
        return work

    def accept_request(self, now_ms: int) -> bool:
        """A request other than connect/challenge-response/close arrived for this session.

        The first one activates an AUTHENTICATED session. Returns True when the request should
        be carried out (session ACTIVE); requests before authentication are ignored, as in Aeron.
        """
        if self._state is SessionState.AUTHENTICATED and self.invalid_version_message is None:
            self._set_state(SessionState.ACTIVE, "first request")
            self._drop_droppable()
        if self._state is SessionState.ACTIVE:
            self._last_request_ms = now_ms
            return True
        return False

    def on_keep_alive(self, now_ms: int) -> None:
        self.accept_request(now_ms)

    def on_challenge_response(self, correlation_id: int, encoded_credentials: bytes,
                              now_ms: int) -> None:
        if self._state is SessionState.CHALLENGED:
            self.correlation_id = correlation_id
            self.authenticator.on_challenge_response(
                self.control_session_id, encoded_credentials, now_ms)

    def on_close_request(self) -> None:
        self.abort(SESSION_CLOSED)

    def on_request_image_unavailable(self) -> None:
        self.abort(REQUEST_IMAGE_UNAVAILABLE)

    # ------------------------------------------------------------------ authenticator's proxy

    def challenge(self, encoded_challenge: bytes) -> bool:
        if self._state is not SessionState.CONNECTED:
            return False
        self._queue(Challenge(self.control_session_id, self.correlation_id, 0,
                              bytes(encoded_challenge)), droppable=False)
        self._set_state(SessionState.CHALLENGED, "challenged")
        return True

    def authenticate(self, encoded_principal: bytes) -> None:
        if self._state in (SessionState.CONNECTED, SessionState.CHALLENGED):
            self.encoded_principal = bytes(encoded_principal)
            self._activity_deadline_ms = None
            self._resend_deadline_ms = -1  # the connect OK goes out on the next tick
            self._set_state(SessionState.AUTHENTICATED, "authenticated")

    def reject(self) -> None:
        if self._state in (SessionState.CONNECTED, SessionState.CHALLENGED):
            self._resend_deadline_ms = -1
            self._set_state(SessionState.REJECTED, AUTHENTICATION_REJECTED)

    # ------------------------------------------------------------------ responses

    def send_ok(self, correlation_id: int, relevant_id: int = 0) -> None:
        self._queue(self._response(relevant_id, ControlResponseCode.OK, correlation_id=correlation_id))

    def send_error(self, correlation_id: int, message: str,
                   error_code: int = ArchiveErrorCode.GENERIC) -> None:
        if self.is_legacy_client and error_code > LEGACY_MAX_ERROR_CODE:
            # Aeron 1.15.x knows codes 0..9 and answered GENERIC where later archives have a code
            # (e.g. INVALID_POSITION 16): what the Java 1.15.1 archive sends (differential test).
            error_code = ArchiveErrorCode.GENERIC
        self._queue(self._response(int(error_code), ControlResponseCode.ERROR, message,
                                   correlation_id=correlation_id))

    def send_recording_unknown(self, correlation_id: int, recording_id: int) -> None:
        self._queue(self._response(recording_id, ControlResponseCode.RECORDING_UNKNOWN,
                                   correlation_id=correlation_id))

    def send_subscription_unknown(self, correlation_id: int) -> None:
        self._queue(self._response(0, ControlResponseCode.SUBSCRIPTION_UNKNOWN,
                                   correlation_id=correlation_id))

    def send_descriptor(self, correlation_id: int, descriptor: RecordingDescriptor) -> None:
        self._queue(RecordingDescriptorMessage.from_descriptor(
            descriptor, control_session_id=self.control_session_id, correlation_id=correlation_id))

    def send_stored_descriptor(self, correlation_id: int, body) -> None:
        """A RecordingDescriptor from the catalog's stored body, sent as it is (only this
        response's ids written): what `send_descriptor` sends, without decoding and encoding."""
        self._queue(descriptor_message(body, self.control_session_id, correlation_id))

    def send_subscription_descriptor(self, correlation_id: int, subscription_id: int,
                                     stream_id: int, stripped_channel: str) -> None:
        self._queue(RecordingSubscriptionDescriptor(
            self.control_session_id, correlation_id, subscription_id, stream_id, stripped_channel))

    def send_signal(self, correlation_id: int, recording_id: int, subscription_id: int,
                    position: int, signal: RecordingSignal) -> None:
        if self._state is SessionState.DONE:
            return
        self._queue(RecordingSignalEvent(self.control_session_id, correlation_id, recording_id,
                                         subscription_id, position, signal))

    def _response(self, relevant_id: int, code: ControlResponseCode, message: str = "", *,
                  correlation_id: int | None = None) -> ControlResponse:
        return ControlResponse(
            self.control_session_id, self.correlation_id if correlation_id is None else correlation_id,
            relevant_id, code, PROTOCOL_SEMANTIC_VERSION, bounded_text(message))

    # ------------------------------------------------------------------ outbox

    def _queue(self, message: Outbound, droppable: bool = False) -> None:
        if self._state is not SessionState.DONE:
            self._outbox.append((message, droppable))

    def _drop_droppable(self) -> None:
        self._outbox = deque(item for item in self._outbox if not item[1])

    @property
    def outbox_length(self) -> int:
        return len(self._outbox)

    def outbound_sent(self, now_ms: int) -> None:
        self._outbox.popleft()
        if self._state in (SessionState.AUTHENTICATED, SessionState.ACTIVE):
            self._activity_deadline_ms = None  # the handshake keeps its connect deadline

    def outbound_blocked(self, now_ms: int) -> None:
        """The head message could not be offered now: drop it if it is re-sent anyway, else
        keep it and arm the send deadline."""
        _, droppable = self._outbox[0]
        if droppable:
            self._outbox.popleft()
        if self._state is SessionState.ACTIVE and self._activity_deadline_ms is None:
            self._activity_deadline_ms = now_ms + self.connect_timeout_ms

    def drain(self, offer: Callable[[Outbound], int], now_ms: int, limit: int = 64) -> int:
        """Offers queued messages in order until one is refused; returns how many were sent.

        ``offer`` returns what the response publication's ``offer`` returns: the new position
        (>= 0, sent) or an `OfferResult`. BACK_PRESSURED and ADMIN_ACTION leave the message
        queued (try again later); any other result (not connected, closed, max position) means
        the response publication is gone: an ACTIVE session ends, a session still in its
        handshake waits (the client may still connect).
        """
        sent = 0
        while self._outbox and sent < limit and self._state is not SessionState.DONE:
            result = offer(self._outbox[0][0])
            if result >= 0:
                self.outbound_sent(now_ms)
                sent += 1
            elif result == _BACK_PRESSURED or result == _ADMIN_ACTION:
                self.outbound_blocked(now_ms)
                break
            else:
                if self._state is SessionState.ACTIVE:
                    self.abort(RESPONSE_NOT_CONNECTED)
                else:
                    self.outbound_blocked(now_ms)  # handshake: the client may still connect
                break
        return sent

    def __repr__(self) -> str:
        return (f"ControlSession(id={self.control_session_id}, state={self._state.value}, "
                f"responseChannel={self.response_channel!r}, responseStreamId={self.response_stream_id})")
