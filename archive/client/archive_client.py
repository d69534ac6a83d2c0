"""`ArchiveClient`: a blocking, typed client of an Aeron Archive (ours, or a real Java archive).

In the spirit of Aeron's ``AeronArchive``::

    with ArchiveClient.connect(control_channel="aeron:udp?endpoint=localhost:8010",
                               aeron_dir=driver_dir) as archive:
        subscription_id = archive.start_recording("aeron:ipc", 1001, SourceLocation.LOCAL)
        ...
        for descriptor in archive.list_recordings():
            print(descriptor.recording_id, descriptor.stop_position)
        with archive.replay(recording_id, 0, length, "aeron:ipc", 2001) as replay:
            for message in replay.messages():
                ...

Every call sends one request on the control channel and waits (``timeout`` seconds, default
10 s like Aeron's message timeout) for its answer on the response channel. Failures raise
`ArchiveError` (code, the archive's error code and message); timeouts raise
`ArchiveTimeoutError`, whose message says which request timed out, on which channel.

Protocols: ``"modern"`` connects with AuthConnectRequest (58) and sends schema-v13 layouts;
``"legacy"`` speaks Aeron 1.15.x (ConnectRequest v0 and version-0 layouts) for a real 1.15.1
archive; ``"auto"`` connects with a ConnectRequest (2) that both understand and then talks
1.15.x if the archive's answer carries no protocol version (a 1.15.x archive), modern otherwise.
Requests a 1.15.x archive does not have either fall back (``start_position`` via the descriptor,
``max_recorded_position`` via recording/stop position) or raise `ArchiveError`.

Response channels (``response_channel="aeron:udp?control-mode=response|control=<archive host>:<port>"``,
Aeron's ``control-mode=response``): every connection is opened by this client, so the archive
needs no route to it (a client behind NAT or a firewall that admits no inbound traffic). Replays
to a response channel (``replay_channel`` with ``control-mode=response``) go as Aeron's
AeronArchive sends them: a ReplayTokenRequest on the session, then the Replay/BoundedReplay with
the token over a request publication of its own whose ``response-correlation-id`` names the
replay subscription (`start_replay` needs that subscription's ``subscription_registration_id``;
`replay` subscribes itself).

Recording signals (START, STOP, EXTEND, DELETE, ...) arrive interleaved with responses; they are
queued, never dropped, and handed to ``on_recording_signal`` after each call completes, or taken
with `poll_for_recording_signals` / `await_recording_signal`.

**Thread safety:** like Aeron's AeronArchive, one client is used by one thread at a time (use
one client per thread). A call made while another call on the same client is waiting raises
RuntimeError.

Why one module of this size: it is the one facade of every request, as ``AeronArchive`` is (one
short method per request); the plumbing is elsewhere in this package (`transport`,
`response_routing`, `replay_subscription`, `archive_location`, `live_positions`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs.constants import DEFAULT_CONTROL_CHANNEL, DEFAULT_CONTROL_STREAM_ID
from aeron_spark.archive.client.response_routing import (
    ArchiveError,
    ArchiveTimeoutError,
    AwaitConnect,
    AwaitDescriptors,
    AwaitResponse,
    AwaitSubscriptionDescriptors,
    Expectation,
    ResponseRouter,
)
from aeron_spark.archive.client.archive_driver import shares_archive_driver
from aeron_spark.archive.client.transport import (
    RETRYABLE_OFFER_RESULTS,
    AeronControlTransport,
    ControlTransport,
    RequestPublication,
    default_aeron_dir,
    endpoint_host,
    is_response_channel,
    subscribe_resolved,
)
from aeron_spark.archive.codecs import (
    BooleanType,
    Challenge,
    ControlResponse,
    RecordingSignal,
    RecordingSignalEvent,
    RecordingSubscriptionDescriptor,
    SourceLocation,
    semantic_version,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor
from aeron_spark.archive.client.replay_subscription import (
    ReplaySubscription,
    replay_image_session_id,
)
from aeron_spark.driver_integration import AeronClient, OfferResult

__all__ = [
    "DEFAULT_CONTROL_CHANNEL",
    "DEFAULT_CONTROL_STREAM_ID",
    "DEFAULT_RESPONSE_CHANNEL",
    "DEFAULT_RESPONSE_STREAM_ID",
    "DEFAULT_TIMEOUT_S",
    "NULL_POSITION",
    "ArchiveClient",
    "ArchiveError",
    "ArchiveTimeoutError",
    "Protocol",
    "RecordingSignal",
    "RecordingSignalEvent",
    "RecordingSubscriptionDescriptor",
    "ReplaySubscription",
    "SourceLocation",
]

Protocol = Literal["modern", "legacy", "auto"]
PROTOCOLS: tuple[str, ...] = ("modern", "legacy", "auto")

DEFAULT_RESPONSE_CHANNEL = "aeron:udp?endpoint=localhost:0"
DEFAULT_RESPONSE_STREAM_ID = 20
DEFAULT_TIMEOUT_S = 10.0
AERON_DRIVER_TIMEOUT_S = 10.0
#: ListRecordings page size when listing everything (``count=None``).
LIST_PAGE_SIZE = 1000
FRAGMENT_LIMIT = 16
#: An archive that pings (this sidecar and Aeron >= 1.47: every liveness check interval, 1 s by
#: default) and has sent nothing for this long has lost the session (it restarted or died before
#: the driver times the image out): `is_connected` says so, and a cached client is replaced.
PING_SILENCE_S = 3.0
#: How long `is_connected` waits for a fresh message from an archive that pings when all it could
#: read was waiting in the image since before a long gap (the ping interval, 1 s, and a margin).
FRESH_PING_WAIT_S = 1.5
CLIENT_INFO = "name=aeron-spark-archive-client"
#: Archives reporting at least this protocol version (Aeron 1.44+) answer ArchiveIdRequest (68)
#: and MaxRecordedPositionRequest (67).
ARCHIVE_ID_MIN_VERSION = semantic_version(1, 11, 0)
#: In "auto" mode without an answer after this share of the timeout, connect is re-sent as
#: AuthConnectRequest (58) for archives that no longer know ConnectRequest (2).
AUTO_FALLBACK_SHARE = 0.5

SignalCallback = Callable[[RecordingSignalEvent], object]
ChallengeCallback = Callable[[bytes], bytes]



@dataclass(frozen=True)
class ListingPage:
    """One ListRecordings / ListRecordingsForUri answer.

    ``scanned_to``: the relevantId of the RECORDING_UNKNOWN that ended the listing, i.e. the id where
    the archive's scan of its catalog stopped (every archive, 1.15.1 included, sends the first id
    past its catalog there); None when the listing ended with ``count`` descriptors.
    """

    descriptors: list[RecordingDescriptor]
    scanned_to: int | None

    def next_from(self, from_id: int) -> int:
        """Where the next listing continues: past every recording this one returned or scanned."""
        after_listed = self.descriptors[-1].recording_id + 1 if self.descriptors else from_id
        return max(from_id, after_listed, self.scanned_to if self.scanned_to is not None else from_id)


@dataclass
class _AwaitListingPage(AwaitDescriptors):
    scanned_to: int | None = None

    def on_control_response(self, response) -> None:
        if response.code == codecs.ControlResponseCode.RECORDING_UNKNOWN and not self.done:
            self.scanned_to = response.relevant_id
        super().on_control_response(response)

    def value(self) -> ListingPage:  # type: ignore[override]
        return ListingPage(list(self.descriptors), self.scanned_to)


class ArchiveClient:
    """A connected control session. Create with `connect` or `from_mark_file`; close it (or use
    it as a context manager) to send CloseSession and release its Aeron resources."""

    def __init__(self, transport: ControlTransport, *, aeron: AeronClient | None = None,
                 owns_aeron: bool = False, timeout: float = DEFAULT_TIMEOUT_S,
                 protocol: Protocol = "modern", credentials: bytes | None = None,
                 on_challenge: ChallengeCallback | None = None,
                 on_recording_signal: SignalCallback | None = None) -> None:
        """Runs the connect handshake over ``transport`` (normally use `connect`)."""
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol {protocol!r} is invalid: expected one of {PROTOCOLS}")
        if not timeout > 0:
            raise ValueError(f"timeout {timeout} is invalid: must be a positive number of seconds")
        self._transport = transport
        self._aeron = aeron
        self._owns_aeron = owns_aeron
        self.timeout = float(timeout)
        self.protocol = protocol
        self.on_recording_signal = on_recording_signal
        self._router = ResponseRouter()
        self._last_heard = time.monotonic()  # when the archive was last known to have sent something
        self._last_drained = self._last_heard  # when a poll last found the response image empty
        self._legacy = protocol == "legacy"
        self._closed = False
        self._replay_correlations: dict[int, int] = {}
        self.archive_protocol_version = 0
        self.control_session_id = -1
        self.archive_id = -1
        try:
            self._handshake(credentials, on_challenge)
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------------------ creation
    @classmethod
    def connect(cls, *, control_channel: str = DEFAULT_CONTROL_CHANNEL,
                control_stream_id: int = DEFAULT_CONTROL_STREAM_ID,
                response_channel: str = DEFAULT_RESPONSE_CHANNEL,
                response_stream_id: int = DEFAULT_RESPONSE_STREAM_ID,
                aeron_dir: str | None = None, aeron: AeronClient | None = None,
                timeout: float = DEFAULT_TIMEOUT_S, protocol: Protocol = "modern",
                credentials: bytes | None = None, on_challenge: ChallengeCallback | None = None,
                on_recording_signal: SignalCallback | None = None,
                response_host: str | None = None) -> ArchiveClient:
        """Connects to the archive listening on ``control_channel``/``control_stream_id``.

        ``aeron``: an AeronClient to use (not closed by this client). Otherwise one is created on
        ``aeron_dir`` (default: Aeron's default directory, ``$AERON_DIR`` or
        ``/dev/shm/aeron-<user>``) and closed with this client. A UDP ``response_channel`` with
        port 0 is told to the archive with the port the driver bound, and with its host replaced by
        ``response_host`` when given (the address the archive reaches this host at). Raises
        ArchiveTimeoutError when the archive cannot be reached.
        """
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol {protocol!r} is invalid: expected one of {PROTOCOLS}")
        if not timeout > 0:
            raise ValueError(f"timeout {timeout} is invalid: must be a positive number of seconds")
        owns_aeron = aeron is None
        if aeron is None:
            # Not the request timeout: the C client treats a driver silent for its driver
            # timeout as dead (and its default error handler ends the process), so keep Aeron's 10 s.
            aeron = AeronClient(aeron_dir or default_aeron_dir(), client_name="aeron-spark archive client",
                                timeout=max(timeout, AERON_DRIVER_TIMEOUT_S))
        try:
            transport = AeronControlTransport(
                aeron, control_channel=control_channel, control_stream_id=control_stream_id,
                response_channel=response_channel, response_stream_id=response_stream_id,
                timeout=timeout, response_host=response_host)
        except BaseException:
            if owns_aeron:
                aeron.close()
            raise
        return cls(transport, aeron=aeron, owns_aeron=owns_aeron, timeout=timeout,
                   protocol=protocol, credentials=credentials, on_challenge=on_challenge,
                   on_recording_signal=on_recording_signal)

    @classmethod
    def from_mark_file(cls, archive_dir: str | Path, **kw) -> ArchiveClient:
        """Connects to the archive running on ``archive_dir``, found through its mark file: its
        local control channel (IPC, preferred) or its control channel, and its Aeron directory.
        Keyword arguments of `connect` override what the mark file says; with an ``aeron`` or
        ``aeron_dir`` on another driver than the archive's, the (UDP) control channel is used."""
        from aeron_spark.archive.client.archive_location import MarkFileError, read_archive_location

        try:
            info = read_archive_location(archive_dir)
        except (MarkFileError, OSError) as error:
            raise ArchiveError(f"cannot find the archive of {archive_dir}: {error}") from None
        if not info.is_live():
            state = "stopped cleanly" if info.terminated else "not updated for " \
                f"{info.activity_age_ms() / 1000:.1f} s or its pid {info.pid} is gone"
            raise ArchiveError(f"no archive is running on {archive_dir}: its mark file {info.path} "
                               f"says it {state}")
        if "control_channel" not in kw:
            if info.local_control_channel and _same_driver(kw, info.aeron_dir):
                kw["control_channel"] = info.local_control_channel
                kw.setdefault("control_stream_id", info.local_control_stream_id)
            elif info.control_channel:
                kw["control_channel"] = info.control_channel
                kw.setdefault("control_stream_id", info.control_stream_id)
            else:
                raise ArchiveError(f"the mark file {info.path} names no control channel")
        if "response_channel" not in kw and kw["control_channel"].startswith("aeron:ipc"):
            kw["response_channel"] = "aeron:ipc"
        if kw.get("aeron") is None and kw.get("aeron_dir") is None and info.aeron_dir:
            kw["aeron_dir"] = info.aeron_dir
        return cls.connect(**kw)

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
            first = codecs.ConnectRequest(correlation_id, transport.response_stream_id,
                                          codecs.NULL_VERSION, transport.response_channel)
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
    def _encode(self, message: object, request: str) -> bytes:
        try:
            return codecs.encode(message, version=0 if self._legacy else codecs.SCHEMA_VERSION)
        except codecs.EncodeError as error:
            raise ArchiveError(f"cannot send {request}: {error}", request=request) from None

    def _send(self, message: object, request: str, correlation_id: int | None = None, *,
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
            idle = _idle(idle)

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

    def _await(self, expectation: Expectation, *, timeout: float | None = None,
               on_idle: Callable[[float], None] | None = None) -> object:
        """Polls responses until ``expectation`` completes; its value, or raises."""
        self._require_open()
        router = self._router
        router.begin(expectation)
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
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
                if on_idle is not None:
                    on_idle(now)
                idle = _idle(idle)
        finally:
            router.end()
        return expectation.result()

    def _timeout_message(self, expectation: Expectation, wait: float) -> str:
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

    def _call(self, build: Callable[[int, int], object],
              expectation_type: type[Expectation] = AwaitResponse, *,
              offer: Callable[[bytes], int] | None = None, **fields) -> object:
        """Sends ``build(controlSessionId, correlationId)`` (on the request publication, or with
        ``offer``) and waits for its answer on the response channel."""
        self._require_open()
        correlation_id = self._transport.next_correlation_id()
        message = build(self.control_session_id, correlation_id)
        request = type(message).__name__
        expectation = expectation_type(request, frozenset((correlation_id,)), **fields)
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

    # ------------------------------------------------------------------------------ listings
    def list_recordings(self, from_id: int = 0, count: int | None = None) -> list[RecordingDescriptor]:
        """Descriptors of recordings with id >= ``from_id``, at most ``count`` (None: all, fetched
        in pages of LIST_PAGE_SIZE)."""
        if count is not None:
            return self._call(lambda s, c: codecs.ListRecordingsRequest(s, c, from_id, count),
                              AwaitDescriptors, count=count)
        return self._all_pages(lambda start: self.list_recordings(start, LIST_PAGE_SIZE), from_id)

    def list_recordings_for_uri(self, from_id: int, count: int | None, channel_fragment: str,
                                stream_id: int) -> list[RecordingDescriptor]:
        """Descriptors of recordings of ``stream_id`` whose channel contains ``channel_fragment``."""
        if count is not None:
            return self._call(lambda s, c: codecs.ListRecordingsForUriRequest(
                s, c, from_id, count, stream_id, channel_fragment), AwaitDescriptors, count=count)
        return self._all_pages(
            lambda start: self.list_recordings_for_uri(start, LIST_PAGE_SIZE, channel_fragment,
                                                       stream_id), from_id)

    def list_recordings_page(self, from_id: int, count: int) -> ListingPage:
        """`list_recordings` of at most ``count``, with where the archive's scan ended (`ListingPage`)."""
        return self._call(lambda s, c: codecs.ListRecordingsRequest(s, c, from_id, count),
                          _AwaitListingPage, count=count)

    def list_recordings_for_uri_page(self, from_id: int, count: int, channel_fragment: str,
                                     stream_id: int) -> ListingPage:
        """`list_recordings_for_uri` of at most ``count``, with where the archive's scan ended, so
        that the next listing need not make the archive scan the same recordings again."""
        return self._call(lambda s, c: codecs.ListRecordingsForUriRequest(
            s, c, from_id, count, stream_id, channel_fragment), _AwaitListingPage, count=count)

    @staticmethod
    def _all_pages(page: Callable[[int], list[RecordingDescriptor]], from_id: int) -> list[RecordingDescriptor]:
        found: list[RecordingDescriptor] = []
        start = from_id
        while True:
            descriptors = page(start)
            found.extend(descriptors)
            if len(descriptors) < LIST_PAGE_SIZE:
                return found
            start = descriptors[-1].recording_id + 1

    def list_recording(self, recording_id: int) -> RecordingDescriptor | None:
        """The descriptor of ``recording_id``, or None when the archive does not know it."""
        found = self._call(lambda s, c: codecs.ListRecordingRequest(s, c, recording_id),
                           AwaitDescriptors, count=1)
        return found[0] if found else None

    def list_recording_subscriptions(self, pseudo_index: int, subscription_count: int,
                                     channel_fragment: str, stream_id: int,
                                     apply_stream_id: bool) -> list[RecordingSubscriptionDescriptor]:
        """The archive's active recording subscriptions (Aeron's listRecordingSubscriptions)."""
        self._require_modern("ListRecordingSubscriptionsRequest")
        return self._call(lambda s, c: codecs.ListRecordingSubscriptionsRequest(
            s, c, pseudo_index, subscription_count,
            BooleanType.TRUE if apply_stream_id else BooleanType.FALSE, stream_id, channel_fragment),
            AwaitSubscriptionDescriptors, count=subscription_count)

    def find_last_matching_recording(self, min_recording_id: int, channel_fragment: str,
                                     stream_id: int, session_id: int) -> int:
        """The newest recording id >= ``min_recording_id`` matching, or -1."""
        return self._call(lambda s, c: codecs.FindLastMatchingRecordingRequest(
            s, c, min_recording_id, session_id, stream_id, channel_fragment))

    # ------------------------------------------------------------------------------ positions
    def recording_position(self, recording_id: int) -> int:
        """The live recorded position, or -1 (NULL_POSITION) when the recording is not active."""
        return self._call(lambda s, c: codecs.RecordingPositionRequest(s, c, recording_id))

    def stop_position(self, recording_id: int) -> int:
        """The stop position, -1 while the recording is active."""
        return self._call(lambda s, c: codecs.StopPositionRequest(s, c, recording_id))

    def start_position(self, recording_id: int) -> int:
        if self._legacy:
            return self._require_descriptor(recording_id).start_position
        return self._call(lambda s, c: codecs.StartPositionRequest(s, c, recording_id))

    def max_recorded_position(self, recording_id: int) -> int:
        """The live position while recording, else the stop position (falls back to
        RecordingPosition + StopPosition on archives without MaxRecordedPositionRequest)."""
        if not self._legacy and self.archive_protocol_version >= ARCHIVE_ID_MIN_VERSION:
            return self._call(lambda s, c: codecs.MaxRecordedPositionRequest(s, c, recording_id))
        position = self.recording_position(recording_id)
        if position == NULL_POSITION:
            position = self.stop_position(recording_id)
            if position == NULL_POSITION:  # it became active again between the two requests
                position = self.recording_position(recording_id)
        return position

    def _require_descriptor(self, recording_id: int) -> RecordingDescriptor:
        descriptor = self.list_recording(recording_id)
        if descriptor is None:
            raise ArchiveError(f"unknown recording id {recording_id} at {self.description}",
                               code=codecs.ControlResponseCode.RECORDING_UNKNOWN,
                               error_code=codecs.ArchiveErrorCode.UNKNOWN_RECORDING,
                               request="ListRecordingRequest")
        return descriptor

    # ------------------------------------------------------------------------------ recording
    def start_recording(self, channel: str, stream_id: int,
                        source_location: SourceLocation = SourceLocation.REMOTE,
                        auto_stop: bool = False) -> int:
        """Starts recording ``channel``/``stream_id``; returns the recording subscription id.
        Each image on it becomes a recording (signal START when there are signals)."""
        location = SourceLocation(source_location)
        if auto_stop:
            self._require_modern("StartRecordingRequest2 (auto_stop)")
            return self._call(lambda s, c: codecs.StartRecordingRequest2(
                s, c, stream_id, location, BooleanType.TRUE, channel))
        return self._call(lambda s, c: codecs.StartRecordingRequest(s, c, stream_id, location, channel))

    def extend_recording(self, recording_id: int, channel: str, stream_id: int,
                         source_location: SourceLocation = SourceLocation.REMOTE,
                         auto_stop: bool = False) -> int:
        """Records a new image of ``channel``/``stream_id`` onto the end of ``recording_id``;
        returns the subscription id."""
        location = SourceLocation(source_location)
        if auto_stop:
            self._require_modern("ExtendRecordingRequest2 (auto_stop)")
            return self._call(lambda s, c: codecs.ExtendRecordingRequest2(
                s, c, recording_id, stream_id, location, BooleanType.TRUE, channel))
        return self._call(lambda s, c: codecs.ExtendRecordingRequest(
            s, c, recording_id, stream_id, location, channel))

    def stop_recording(self, channel: str, stream_id: int) -> None:
        """Stops the recording subscription of ``channel``/``stream_id`` (same key as started)."""
        self._call(lambda s, c: codecs.StopRecordingRequest(s, c, stream_id, channel))

    def stop_recording_subscription(self, subscription_id: int) -> None:
        self._call(lambda s, c: codecs.StopRecordingSubscriptionRequest(s, c, subscription_id))

    def stop_recording_by_identity(self, recording_id: int) -> bool:
        """Stops the active recording ``recording_id``; False when it was not active."""
        self._require_modern("StopRecordingByIdentityRequest")
        return self._call(lambda s, c: codecs.StopRecordingByIdentityRequest(s, c, recording_id)) != 0

    # ------------------------------------------------------------------------------ replay
    def start_replay(self, recording_id: int, position: int, length: int, replay_channel: str,
                     replay_stream_id: int, *, file_io_max_length: int | None = None,
                     subscription_registration_id: int | None = None) -> int:
        """Starts a replay; returns the replaySessionId (its low 32 bits are the replay image's
        session id). ``position`` -1 means from the start; ``length`` -1 follows a live recording
        (REPLAY_ALL_AND_FOLLOW), -2 stops at the current end (REPLAY_ALL_AND_STOP). A response
        ``replay_channel`` (``control-mode=response``) needs the registration id of the
        subscription the replay goes to (Aeron's ``ReplayParams.subscriptionRegistrationId``)."""
        io_max = -1 if file_io_max_length is None else file_io_max_length
        if io_max != -1:
            self._require_modern("ReplayRequest with file_io_max_length")
        build = lambda s, c, token: codecs.ReplayRequest(  # noqa: E731
            s, c, recording_id, position, length, replay_stream_id, io_max, token, replay_channel)
        return self._send_replay_request(recording_id, replay_channel, build, subscription_registration_id)

    def start_bounded_replay(self, recording_id: int, position: int, length: int,
                             limit_counter_id: int, replay_channel: str, replay_stream_id: int, *,
                             file_io_max_length: int | None = None,
                             subscription_registration_id: int | None = None) -> int:
        """As `start_replay`, never replaying past the value of counter ``limit_counter_id``."""
        self._require_modern("BoundedReplayRequest")
        io_max = -1 if file_io_max_length is None else file_io_max_length
        build = lambda s, c, token: codecs.BoundedReplayRequest(  # noqa: E731
            s, c, recording_id, position, length, limit_counter_id, replay_stream_id, io_max,
            token, replay_channel)
        return self._send_replay_request(recording_id, replay_channel, build, subscription_registration_id)

    def _send_replay_request(self, recording_id: int, replay_channel: str,
                             build: Callable[[int, int, int], object],
                             subscription_registration_id: int | None) -> int:
        """Sends ``build(controlSessionId, correlationId, replayToken)``: with a token over a request
        publication of its own to a response ``replay_channel``, else on the session; the
        replaySessionId."""
        if is_response_channel(replay_channel):
            session_id, publication = self._start_replay_over_response_channel(
                recording_id, build, subscription_registration_id)
            publication.close()
            return session_id
        return self._start_replay(lambda s, c: build(s, c, codecs.NULL_VALUE))

    def _start_replay(self, build: Callable[[int, int], object], *,
                      offer: Callable[[bytes], int] | None = None) -> int:
        correlation: list[int] = []

        def remembering(session_id: int, correlation_id: int) -> object:
            correlation.append(correlation_id)
            return build(session_id, correlation_id)
        replay_session_id = self._call(remembering, offer=offer)
        self._replay_correlations[replay_session_id] = correlation[0]
        if len(self._replay_correlations) > 1024:  # keep the newest; old replays are long done
            self._replay_correlations.pop(next(iter(self._replay_correlations)))
        return replay_session_id

    def _start_replay_over_response_channel(
            self, recording_id: int, build: Callable[[int, int, int], object],
            subscription_registration_id: int | None) -> tuple[int, RequestPublication]:
        """Aeron's replay over a response channel: a replay token from the session, then the
        request carrying it over a request publication of its own whose
        ``response-correlation-id`` names the replay subscription; the archive answers on this
        session. Returns (replaySessionId, that publication: the caller closes it)."""
        self._require_modern("a replay over a response channel (ReplayTokenRequest)")
        if subscription_registration_id is None:
            raise ArchiveError("a replay to a response channel (control-mode=response) needs "
                               "subscription_registration_id: the registration id of the subscription "
                               "the replay goes to", request="ReplayRequest")
        token = self._call(lambda s, c: codecs.ReplayTokenRequest(s, c, recording_id))
        publication = self._transport.open_request_publication(subscription_registration_id)
        try:
            replay_session_id = self._start_replay(lambda s, c: build(s, c, token), offer=publication.offer)
        except BaseException:
            publication.close()
            raise
        return replay_session_id, publication

    def stop_replay(self, replay_session_id: int) -> None:
        self._replay_correlations.pop(replay_session_id, None)
        self._call(lambda s, c: codecs.StopReplayRequest(s, c, replay_session_id))

    def stop_all_replays(self, recording_id: int = -1) -> None:
        """Stops every replay of ``recording_id`` (-1: of all recordings), of every session."""
        self._require_modern("StopAllReplaysRequest")
        self._call(lambda s, c: codecs.StopAllReplaysRequest(s, c, recording_id))

    @contextlib.contextmanager
    def replay(self, recording_id: int, position: int, length: int, replay_channel: str,
               replay_stream_id: int, *, file_io_max_length: int | None = None,
               timeout: float | None = None) -> Iterator[ReplaySubscription]:
        """Subscribes to ``replay_channel``, starts the replay and yields a `ReplaySubscription`
        holding the subscription and the replay Image (found by the low 32 bits of the replay
        session id). Leaving the block stops the replay and closes the subscription. A response
        ``replay_channel`` (``control-mode=response``) is replayed over the connection this client
        opens (see the module docstring)."""
        self._require_open()
        response_mode = is_response_channel(replay_channel)
        if response_mode:
            subscription, channel = self.aeron.add_subscription(replay_channel, replay_stream_id), replay_channel
        else:
            subscription, channel = subscribe_resolved(self.aeron, replay_channel, replay_stream_id,
                                                       self.timeout)
        replay_session_id: int | None = None
        replay: ReplaySubscription | None = None
        request_publication: RequestPublication | None = None
        try:
            if response_mode:
                io_max = -1 if file_io_max_length is None else file_io_max_length
                replay_session_id, request_publication = self._start_replay_over_response_channel(
                    recording_id, lambda s, c, token: codecs.ReplayRequest(
                        s, c, recording_id, position, length, replay_stream_id, io_max, token, channel),
                    subscription.registration_id)
            else:
                replay_session_id = self.start_replay(recording_id, position, length, channel,
                                                      replay_stream_id,
                                                      file_io_max_length=file_io_max_length)
            image = self._await_replay_image(subscription, replay_session_id, channel,
                                             replay_stream_id, timeout)
            if request_publication is not None:  # the replay is connected: its request is done
                request_publication.close()
                request_publication = None
            end = position + length if position >= 0 and length >= 0 else None
            replay = ReplaySubscription(
                subscription=subscription, image=image, recording_id=recording_id,
                replay_session_id=replay_session_id, end_position=end,
                check_errors=lambda: self.check_replay_error(replay_session_id))
            yield replay
        finally:
            if request_publication is not None:
                request_publication.close()
            if replay is not None:
                replay.close()
            if replay_session_id is not None and not self._closed:
                with contextlib.suppress(ArchiveError):
                    # The archive may have ended it already (1.15.x then answers UNKNOWN_REPLAY).
                    self.stop_replay(replay_session_id)
            subscription.close()

    def _await_replay_image(self, subscription, replay_session_id: int, channel: str,
                            stream_id: int, timeout: float | None):
        session_id = replay_image_session_id(replay_session_id)
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        idle = 0
        while True:
            image = subscription.image_by_session_id(session_id)
            if image is not None:
                return image
            self.check_replay_error(replay_session_id)
            if time.monotonic() > deadline:
                raise ArchiveTimeoutError(
                    f"the replay image of replaySessionId={replay_session_id} (session id "
                    f"{session_id}) did not appear on {channel} stream {stream_id} within {wait} s "
                    f"(can the archive at {self.description} reach that channel?)",
                    request="ReplayRequest")
            idle = _idle(idle)

    def check_replay_error(self, replay_session_id: int) -> None:
        """Raises the ArchiveError the archive sent later for this replay (e.g. it failed after
        its OK), if any; polls the response channel once."""
        correlation_id = self._replay_correlations.get(replay_session_id)
        if correlation_id is None or self._closed:
            return
        self._poll_once()
        response = self._router.take_error_response(correlation_id)
        if response is not None:
            raise ArchiveError.from_response(response, "ReplayRequest")

    # ------------------------------------------------------------------------------ maintenance
    def truncate_recording(self, recording_id: int, position: int) -> int:
        """Truncates a stopped recording at ``position``; the number of segment files deleted."""
        return self._call(lambda s, c: codecs.TruncateRecordingRequest(s, c, recording_id, position))

    def purge_recording(self, recording_id: int) -> int:
        """Deletes a stopped recording and its files; the number of segment files deleted."""
        self._require_modern("PurgeRecordingRequest")
        return self._call(lambda s, c: codecs.PurgeRecordingRequest(s, c, recording_id))

    def detach_segments(self, recording_id: int, new_start_position: int) -> None:
        self._require_modern("DetachSegmentsRequest")
        self._call(lambda s, c: codecs.DetachSegmentsRequest(s, c, recording_id, new_start_position))

    def delete_detached_segments(self, recording_id: int) -> int:
        self._require_modern("DeleteDetachedSegmentsRequest")
        return self._call(lambda s, c: codecs.DeleteDetachedSegmentsRequest(s, c, recording_id))

    def purge_segments(self, recording_id: int, new_start_position: int) -> int:
        self._require_modern("PurgeSegmentsRequest")
        return self._call(lambda s, c: codecs.PurgeSegmentsRequest(s, c, recording_id, new_start_position))

    def attach_segments(self, recording_id: int) -> int:
        self._require_modern("AttachSegmentsRequest")
        return self._call(lambda s, c: codecs.AttachSegmentsRequest(s, c, recording_id))

    def migrate_segments(self, src_recording_id: int, dst_recording_id: int) -> int:
        """Moves the segments of stopped ``src_recording_id`` onto the start or the end of
        ``dst_recording_id`` (Aeron's migrateSegments); the number of segment files moved."""
        self._require_modern("MigrateSegmentsRequest")
        return self._call(lambda s, c: codecs.MigrateSegmentsRequest(s, c, src_recording_id, dst_recording_id))

    def update_channel(self, recording_id: int, channel: str) -> None:
        """Stores ``channel`` (and its stripped form) as the recording's channel in the archive's
        catalog (Aeron 1.49+'s updateChannel; the archive answers OK, no signal). An unknown
        recording (the archive's RECORDING_UNKNOWN response) raises ArchiveError with
        ``error_code`` UNKNOWN_RECORDING."""
        self._require_modern("UpdateChannelRequest")
        try:
            self._call(lambda s, c: codecs.UpdateChannelRequest(s, c, recording_id, channel))
        except ArchiveError as error:
            if error.code != codecs.ControlResponseCode.RECORDING_UNKNOWN:
                raise
            raise ArchiveError(f"unknown recording id {recording_id} at {self.description}",
                               code=error.code, error_code=codecs.ArchiveErrorCode.UNKNOWN_RECORDING,
                               correlation_id=error.correlation_id,
                               request="UpdateChannelRequest") from None

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
            idle = _idle(idle)

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
            idle = _idle(idle)

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
        return (f"ArchiveClient({self.description}, {state}, archiveId={self.archive_id}, "
                f"protocol={'1.15.x' if self._legacy else 'modern'})")


def _same_driver(connect_options: dict, archive_aeron_dir: str | None) -> bool:
    """Whether the client would use the archive's own media driver (IPC reaches the archive)."""
    aeron = connect_options.get("aeron")
    chosen = aeron.aeron_dir if aeron is not None else connect_options.get("aeron_dir")
    if chosen is None or archive_aeron_dir is None:
        return True
    return os.path.realpath(chosen) == os.path.realpath(archive_aeron_dir)


def _offer_result_name(result: int) -> str:
    try:
        return OfferResult(result).name
    except ValueError:
        return str(result)


def _idle(count: int) -> int:
    """Back-off while nothing arrives: spin briefly, then sleep up to 1 ms."""
    if count < 10:
        pass
    elif count < 20:
        time.sleep(0)
    else:
        time.sleep(min(0.001, 0.00005 * (count - 19)))
    return count + 1
