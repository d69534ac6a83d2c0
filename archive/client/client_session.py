"""`ArchiveSession`: one control session with an archive, the base of `ArchiveClient`.

What every request needs lives here: the connect handshake (ConnectRequest / AuthConnectRequest,
challenges, the 1.15.x fallback of ``"auto"``), sending a request and waiting for its answer
(`_call`), the session's state (`is_connected`, `keep_alive`), recording signals, asynchronous
errors, and closing. The requests themselves are grouped by family in `recording_requests` and
`replay_requests`; `archive_client.ArchiveClient` combines them and creates connected clients.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Literal, Self

from aeron_spark.archive import codecs
from aeron_spark.archive.client.archive_driver import shares_archive_driver
from aeron_spark.archive.client.response_routing import (
    ArchiveError,
    ArchiveTimeoutError,
    AwaitConnect,
    AwaitResponse,
    Expectation,
    ResponseRouter,
    Value,
)
from aeron_spark.archive.client.transport import (
    RETRYABLE_OFFER_RESULTS,
    ControlTransport,
    endpoint_host,
)
from aeron_spark.archive.codecs import (
    Challenge,
    ControlResponse,
    RecordingSignal,
    RecordingSignalEvent,
    semantic_version,
)
from aeron_spark.archive.configuration import DEFAULT_TIMEOUT_S
from aeron_spark.driver_integration import AeronClient, OfferResult

Protocol = Literal["modern", "legacy", "auto"]
PROTOCOLS: tuple[str, ...] = ("modern", "legacy", "auto")

FRAGMENT_LIMIT = 16
#: An archive that pings (this sidecar and Aeron >= 1.47: every liveness check interval, 1 s by
#: default) and has sent nothing for this long has lost the session (it restarted or died before
#: the driver times the image out): `is_connected` says so, and a cached client is replaced.
PING_SILENCE_S = 3.0
#: How long `is_connected` waits for a fresh message from an archive that pings when all it could
#: read was waiting in the image since before a long gap (the ping interval, 1 s, and a margin).
FRESH_PING_WAIT_S = 1.5
#: A request to an archive that pings fails this soon when the archive falls silent while it is
#: awaited (killed or restarted: the new one does not know the session), not after the whole
#: timeout: each retry on a fresh connection then starts seconds earlier.
REQUEST_SILENCE_S = PING_SILENCE_S + FRESH_PING_WAIT_S
CLIENT_INFO = "name=aeron-spark-archive-client"
#: Archives reporting at least this protocol version (Aeron 1.44+) answer ArchiveIdRequest (68)
#: and MaxRecordedPositionRequest (67).
ARCHIVE_ID_MIN_VERSION = semantic_version(1, 11, 0)
#: In "auto" mode without an answer after this share of the timeout, connect is re-sent as
#: AuthConnectRequest (58) for archives that no longer know ConnectRequest (2).
AUTO_FALLBACK_SHARE = 0.5

SignalCallback = Callable[[RecordingSignalEvent], object]
ChallengeCallback = Callable[[bytes], bytes]
#: Builds a request from (controlSessionId, correlationId).
RequestBuilder = Callable[[int, int], codecs.ControlMessage]


def check_protocol_and_timeout(protocol: str, timeout: float) -> None:
    """ValueError naming the argument and what it accepts."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r} is invalid: expected one of {PROTOCOLS}")
    if not timeout > 0:
        raise ValueError(f"timeout {timeout} is invalid: must be a positive number of seconds")


class ArchiveSession:
    """A connected control session (the requests are in `ArchiveClient`'s other bases). Close it
    (or use it as a context manager) to send CloseSession and release its Aeron resources."""

    def __init__(self, transport: ControlTransport, *, aeron: AeronClient | None = None,
                 owns_aeron: bool = False, timeout: float = DEFAULT_TIMEOUT_S,
                 protocol: Protocol = "modern", credentials: bytes | None = None,
                 on_challenge: ChallengeCallback | None = None,
                 on_recording_signal: SignalCallback | None = None) -> None:
        """Runs the connect handshake over ``transport`` (normally use `ArchiveClient.connect`)."""
        check_protocol_and_timeout(protocol, timeout)
        self._transport: ControlTransport = transport
        self._aeron = aeron
        self._owns_aeron = owns_aeron
        #: Seconds each request waits for its answer.
        self.timeout: float = float(timeout)
        self.protocol: Protocol = protocol
        self.on_recording_signal: SignalCallback | None = on_recording_signal
        self._router = ResponseRouter()
        self._last_heard = time.monotonic()  # when the archive was last known to have sent something
        self._last_drained = self._last_heard  # when a poll last found the response image empty
        self._legacy = protocol == "legacy"
        self._closed = False
        self._replay_correlations: dict[int, int] = {}
        self.archive_protocol_version: int = 0
        self.control_session_id: int = -1
        self.archive_id: int = -1
        try:
            self._handshake(credentials, on_challenge)
        except BaseException:
            self._release()
            raise


    # ------------------------------------------------------------------------------ properties
    @property
    def aeron(self) -> AeronClient:
        """The AeronClient this archive client uses (for replay subscriptions, counters)."""
        if self._aeron is None:
            raise ArchiveError("this ArchiveClient was made over a bare transport: it has no AeronClient")
        return self._aeron

    @property
    def is_legacy(self) -> bool:
        """True when talking the Aeron 1.15.x protocol."""
        return self._legacy

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def description(self) -> str:
        return self._transport.description

    @property
    def control_channel(self) -> str:
        """The channel requests go to (the description without its stream id)."""
        return getattr(self._transport, "control_channel", self._transport.description.split(" stream ")[0])

    @property
    def response_channel(self) -> str:
        """The response channel as told to the archive (a UDP port resolved, the host it reaches)."""
        return self._transport.response_channel

    @property
    def response_hosts(self) -> tuple[str, str] | None:
        """(host the archive sends responses to, host bound for them) of a UDP response channel,
        None for IPC: replays to this client can use the same pair."""
        told = endpoint_host(self._transport.response_channel)
        bound = endpoint_host(getattr(self._transport, "response_bind_channel", self._transport.response_channel))
        return None if told is None or bound is None else (told, bound)

    def shares_archive_driver(self) -> bool:
        """Whether this client runs on the archive's media driver, so that the archive can read
        counters this client allocates (see ``archive_driver``)."""
        return shares_archive_driver(self.control_channel, self.archive_id, self.aeron.counters_reader)

    @property
    def is_connected(self) -> bool:
        """Whether the session still looks usable: open, its request publication connected and the
        archive's response publication to this client still there (reads what has arrived). False once the archive has
        closed the session (idle timeout, restart): a cached client should be replaced then."""
        if self._closed:
            return False
        while self._poll_once() > 0:  # read what waits (pings, signals): an ended image shows only then
            pass
        if self._router.pings_received and time.monotonic() - self._last_heard > PING_SILENCE_S \
                and not self._fresh_message_within(FRESH_PING_WAIT_S):
            return False  # an archive that pings fell silent: restarted or gone, the image not yet timed out
        return self._transport.is_request_connected and self._transport.is_response_connected

    def _fresh_message_within(self, seconds: float) -> bool:
        """Polls for up to ``seconds`` for a message sent now (the image was just drained)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._poll_once() > 0:
                return True
            time.sleep(0.005)
        return False

    def keep_alive(self) -> None:
        """Sends a KeepAliveRequest (it has no answer): the request that resets an archive's
        session idle timeout without doing anything. Aeron 1.15.x has none; nothing is sent then."""
        self._require_open()
        if self._legacy:
            return
        correlation_id = self._transport.next_correlation_id()
        self._send(codecs.KeepAliveRequest(self.control_session_id, correlation_id),
                   "KeepAliveRequest", correlation_id)

    # ------------------------------------------------------------------------------ handshake
    def _handshake(self, credentials: bytes | None, on_challenge: ChallengeCallback | None) -> None:
        transport = self._transport
        correlation_id = transport.next_correlation_id()
        auth = credentials is not None or on_challenge is not None
        if self.protocol == "legacy":
            if auth:
                raise ArchiveError("credentials and on_challenge need protocol 'modern' or 'auto': "
                                   "Aeron 1.15.x has no authentication")
            first: codecs.ConnectRequest | codecs.AuthConnectRequest = codecs.ConnectRequest(
                correlation_id, transport.response_stream_id, codecs.NULL_VERSION, transport.response_channel)
        elif self.protocol == "modern" or auth:
            first = self._auth_connect(correlation_id, credentials)
        else:
            first = codecs.ConnectRequest(correlation_id, transport.response_stream_id,
                                          codecs.PROTOCOL_SEMANTIC_VERSION, transport.response_channel)
        expectation = AwaitConnect(type(first).__name__, frozenset((correlation_id,)))
        self._send(first, expectation.request, correlation_id)
        on_idle = None
        if self.protocol == "auto" and not auth:
            on_idle = self._auto_fallback(expectation, credentials)
        answer = self._await_connect(expectation, on_idle)

        while isinstance(answer, Challenge):
            if on_challenge is None:
                self._close_session_quietly(answer.control_session_id)
                raise ArchiveError(
                    f"the archive at {self.description} sent an authentication challenge "
                    f"({len(answer.encoded_challenge)} bytes) but no on_challenge callback was given",
                    request="connect")
            try:
                credentials_answer = bytes(on_challenge(bytes(answer.encoded_challenge)))
            except BaseException:
                self._close_session_quietly(answer.control_session_id)
                raise
            response_id = transport.next_correlation_id()
            reply = codecs.ChallengeResponse(answer.control_session_id, response_id, credentials_answer)
            expectation = AwaitConnect("ChallengeResponse", frozenset((response_id,)))
            self._send(reply, expectation.request, response_id)
            answer = self._await_connect(expectation, None)

        assert isinstance(answer, ControlResponse)
        self.control_session_id = answer.control_session_id
        self._router.control_session_id = answer.control_session_id
        self.archive_protocol_version = answer.version
        if answer.version == codecs.NULL_VERSION:
            self._legacy = True  # 1.15.x answers without a version field
        if not self._legacy and answer.version >= ARCHIVE_ID_MIN_VERSION:
            self.archive_id = self._call(lambda s, c: codecs.ArchiveIdRequest(s, c))

    def _await_connect(self, expectation: AwaitConnect,
                       on_idle: Callable[[float], None] | None) -> ControlResponse | Challenge:
        try:
            return self._await(expectation, on_idle=on_idle)
        except ArchiveError:
            if expectation.rejected_session_id is not None:  # as Aeron: close what was refused
                self._close_session_quietly(expectation.rejected_session_id)
            raise

    def _auth_connect(self, correlation_id: int, credentials: bytes | None) -> codecs.AuthConnectRequest:
        return codecs.AuthConnectRequest(
            correlation_id, self._transport.response_stream_id, codecs.PROTOCOL_SEMANTIC_VERSION,
            self._transport.response_channel, credentials or b"", CLIENT_INFO)

    def _auto_fallback(self, expectation: AwaitConnect, credentials: bytes | None) -> Callable[[float], None]:
        """After half the timeout without an answer, also try AuthConnectRequest (the newest
        archives no longer know ConnectRequest); whichever connect is answered first wins."""
        started = time.monotonic()
        sent = False

        def on_idle(now: float) -> None:
            nonlocal sent
            if sent or now - started < self.timeout * AUTO_FALLBACK_SHARE:
                return
            sent = True
            correlation_id = self._transport.next_correlation_id()
            expectation.correlation_ids = expectation.correlation_ids | {correlation_id}
            expectation.request = "ConnectRequest/AuthConnectRequest"
            self._send(self._auth_connect(correlation_id, credentials), "AuthConnectRequest",
                       correlation_id)
        return on_idle

    # ------------------------------------------------------------------------------ plumbing
    def _encode(self, message: codecs.ControlMessage, request: str) -> bytes:
        try:
            return codecs.encode(message, version=0 if self._legacy else codecs.SCHEMA_VERSION)
        except codecs.EncodeError as error:
            raise ArchiveError(f"cannot send {request}: {error}", request=request) from None

    def _send(self, message: codecs.ControlMessage, request: str, correlation_id: int | None = None, *,
              offer: Callable[[bytes], int] | None = None) -> None:
        """Offers ``message`` on the request publication (or with ``offer``), retrying while it is
        not connected or back pressured, for up to the timeout."""
        data = self._encode(message, request)
        deadline = time.monotonic() + self.timeout
        idle = 0
        offer = offer or self._transport.offer
        while True:
            result = offer(data)
            if result >= 0:
                return
            if result not in RETRYABLE_OFFER_RESULTS:
                raise ArchiveError(f"cannot send {request} to {self.description}: offer failed with "
                                   f"{_offer_result_name(result)}", request=request,
                                   correlation_id=correlation_id)
            if time.monotonic() > deadline:
                raise ArchiveTimeoutError(
                    f"could not send {request}"
                    + (f" correlationId={correlation_id}" if correlation_id is not None else "")
                    + f" within {self.timeout} s to {self.description}: the request publication "
                    f"stayed {_offer_result_name(result)}", request=request,
                    correlation_id=correlation_id)
            idle = idle_backoff(idle)

    def _poll_once(self) -> int:
        fragments = self._transport.poll(self._router.on_message, FRAGMENT_LIMIT)
        now = time.monotonic()
        if not fragments:
            self._last_drained = now
        elif now - self._last_drained <= PING_SILENCE_S:
            self._last_heard = now
        else:
            # Read after a long gap, these may have waited in the image since it began (a dead
            # archive's last pings stay there until the driver times the image out): they prove
            # the archive alive only as of the last time the image was found empty.
            self._last_heard = max(self._last_heard, self._last_drained)
        return fragments

    def _await(self, expectation: Expectation[Value], *, timeout: float | None = None,
               on_idle: Callable[[float], None] | None = None) -> Value:
        """Polls responses until ``expectation`` completes; its value, or raises."""
        self._require_open()
        router = self._router
        router.begin(expectation)
        wait = self.timeout if timeout is None else timeout
        awaited_at = time.monotonic()
        deadline = awaited_at + wait
        idle = 0
        try:
            while not expectation.done:
                if self._poll_once() > 0:
                    idle = 0
                    continue
                now = time.monotonic()
                if now > deadline:
                    raise ArchiveTimeoutError(self._timeout_message(expectation, wait),
                                              request=expectation.request,
                                              correlation_id=min(expectation.correlation_ids))
                silent_s = now - self._last_heard
                if router.pings_received and silent_s > REQUEST_SILENCE_S and now - awaited_at > REQUEST_SILENCE_S:
                    raise ArchiveTimeoutError(
                        self._timeout_message(expectation, round(now - awaited_at, 1)) + f": the archive, which pings every "
                        f"second, has sent nothing for {silent_s:.1f} s (restarted or gone)",
                        request=expectation.request, correlation_id=min(expectation.correlation_ids))
                if on_idle is not None:
                    on_idle(now)
                idle = idle_backoff(idle)
        finally:
            router.end()
        return expectation.result()

    def _timeout_message(self, expectation: Expectation[object], wait: float) -> str:
        ids = ",".join(str(i) for i in sorted(expectation.correlation_ids))
        text = (f"no response to {expectation.request} correlationId={ids} within {wait} s from "
                f"{self.description}")
        progress = expectation.progress()
        if progress:
            text += f" ({progress})"
        if not self._transport.is_response_connected:
            text += (f"; the response channel {self._transport.response_channel} stream "
                     f"{self._transport.response_stream_id} has no connected archive publication "
                     f"(can the archive reach it?)")
        return text + self._router.decode_problems()

    def _call(self, build: RequestBuilder, *, offer: Callable[[bytes], int] | None = None) -> int:
        """Sends ``build(controlSessionId, correlationId)`` (on the request publication, or with
        ``offer``) and waits for its one ControlResponse: its relevantId."""
        return self._call_expecting(build, AwaitResponse, offer=offer)

    def _call_expecting(self, build: RequestBuilder,
                        expect: Callable[[str, frozenset[int]], Expectation[Value]], *,
                        offer: Callable[[bytes], int] | None = None) -> Value:
        """As `_call`, waiting for what ``expect(request name, correlation ids)`` waits for
        (descriptors, ...): its value."""
        self._require_open()
        correlation_id = self._transport.next_correlation_id()
        message = build(self.control_session_id, correlation_id)
        request = type(message).__name__
        expectation = expect(request, frozenset((correlation_id,)))
        self._send(message, request, correlation_id, offer=offer)
        try:
            return self._await(expectation)
        finally:
            self._deliver_signals()

    def _require_open(self) -> None:
        if self._closed:
            raise ArchiveError(f"this ArchiveClient ({self.description}) is closed")

    def _require_modern(self, request: str) -> None:
        if self._legacy:
            raise ArchiveError(f"{request} is not supported by the Aeron 1.15.x archive protocol "
                               f"this client speaks to {self.description}", request=request)

    # ------------------------------------------------------------------------------ signals, errors
    def _deliver_signals(self) -> None:
        callback = self.on_recording_signal
        if callback is None:
            return
        for signal in self._router.take_signals():
            callback(signal)

    def poll_for_recording_signals(self) -> list[RecordingSignalEvent]:
        """Reads what has arrived (without waiting) and returns the queued signals, also handing
        each to ``on_recording_signal`` when set."""
        self._require_open()
        while self._poll_once() > 0:
            pass
        signals = self._router.take_signals()
        if self.on_recording_signal is not None:
            for signal in signals:
                self.on_recording_signal(signal)
        return signals

    def await_recording_signal(self, signal: RecordingSignal | None = None, *,
                               recording_id: int | None = None, subscription_id: int | None = None,
                               correlation_id: int | None = None,
                               timeout: float | None = None) -> RecordingSignalEvent:
        """Waits for (and removes from the queue) the first signal matching every given field."""
        self._require_open()

        def matches(event: RecordingSignalEvent) -> bool:
            return ((signal is None or event.signal == signal)
                    and (recording_id is None or event.recording_id == recording_id)
                    and (subscription_id is None or event.subscription_id == subscription_id)
                    and (correlation_id is None or event.correlation_id == correlation_id))
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        idle = 0
        while True:
            found = self._router.take_signal(matches)
            if found is not None:
                return found
            if self._poll_once() > 0:
                idle = 0
                continue
            if time.monotonic() > deadline:
                wanted = ", ".join(f"{name}={value}" for name, value in (
                    ("signal", getattr(signal, "name", signal)), ("recordingId", recording_id),
                    ("subscriptionId", subscription_id), ("correlationId", correlation_id))
                    if value is not None) or "any"
                raise ArchiveTimeoutError(
                    f"no recording signal ({wanted}) within {wait} s from {self.description}",
                    request="recording signal")
            idle = idle_backoff(idle)

    def poll_for_error_response(self) -> str | None:
        """The message of an ERROR the archive sent for an earlier request (e.g. an asynchronous
        replay failure), or None; reads what has arrived without waiting."""
        self._require_open()
        self._poll_once()
        response = self._router.take_error_response()
        return None if response is None else response.error_message

    def check_for_error_response(self) -> None:
        """Raises such an asynchronous ERROR as ArchiveError, if one arrived."""
        self._require_open()
        self._poll_once()
        response = self._router.take_error_response()
        if response is not None:
            raise ArchiveError.from_response(response, "an earlier request")

    # ------------------------------------------------------------------------------ lifetime
    def _close_session_quietly(self, control_session_id: int) -> None:
        data = self._encode(codecs.CloseSessionRequest(control_session_id), "CloseSessionRequest")
        deadline = time.monotonic() + min(self.timeout, 1.0)
        idle = 0
        while time.monotonic() < deadline:
            result = self._transport.offer(data)
            if result >= 0 or result not in RETRYABLE_OFFER_RESULTS:
                return
            idle = idle_backoff(idle)

    def close(self) -> None:
        """Sends CloseSession (best effort), then releases the transport and an owned Aeron
        client; harmless when repeated."""
        if self._closed:
            return
        try:
            if self.control_session_id != -1:
                with contextlib.suppress(Exception):
                    self._close_session_quietly(self.control_session_id)
        finally:
            self._release()

    def _release(self) -> None:
        self._closed = True
        try:
            self._transport.close()
        finally:
            if self._owns_aeron and self._aeron is not None:
                self._aeron.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"controlSessionId={self.control_session_id}"
        return (f"{type(self).__name__}({self.description}, {state}, archiveId={self.archive_id}, "
                f"protocol={'1.15.x' if self._legacy else 'modern'})")

def _offer_result_name(result: int) -> str:
    try:
        return OfferResult(result).name
    except ValueError:
        return str(result)


def idle_backoff(count: int) -> int:
    """Back-off while nothing arrives: spin briefly, then sleep up to 1 ms."""
    if count < 10:
        pass
    elif count < 20:
        time.sleep(0)
    else:
        time.sleep(min(0.001, 0.00005 * (count - 19)))
    return count + 1
