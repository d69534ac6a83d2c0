"""How an `ArchiveClient` reaches the archive: a request publication and a response subscription.

`ControlTransport` is the small interface the client needs; `AeronControlTransport` implements
it over `driver_integration` (an exclusive publication on the control channel, as Aeron's
clients use, and a subscription on the response channel). Unit tests give the client a fake.

Response channels (``control-mode=response``, as Aeron's AeronArchive since 1.45): the response
channel names no endpoint of this host (e.g. ``aeron:udp?control-mode=response|control=<archive
host>:<port>``, a port of the archive's), and the request publication carries
``response-correlation-id=<the response subscription's registration id>``: the media drivers then
bring the archive's responses back over the connection this client opened, so no port of this
host need be reachable. No ``session-id`` is added in that mode (the driver matches the session).
A replay to such a client needs a request publication of its own (`open_request_publication`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import time
from collections.abc import Callable
from typing import Protocol

from aeron_spark.driver_integration import AeronClient, OfferResult
from aeron_spark.driver_integration.subscription import Subscription
from aeron_spark.driver_integration.channel_uri import ChannelUri

MessageHandler = Callable[[memoryview, object], object]


class ControlTransport(Protocol):
    """What the client needs to exchange control messages with one archive."""

    #: Where requests go, for error messages ("… from aeron:udp?endpoint=… stream 10").
    description: str
    #: The response channel and stream the archive must answer on (sent in the connect request).
    response_channel: str
    response_stream_id: int

    def offer(self, data: bytes) -> int:
        """Offer one request; a position (>= 0) or a negative Aeron offer result."""

    def poll(self, handler: MessageHandler, fragment_limit: int) -> int:
        """Deliver whole response messages to ``handler(payload, header)``; fragments read."""

    @property
    def is_request_connected(self) -> bool: ...

    @property
    def is_response_connected(self) -> bool: ...

    def next_correlation_id(self) -> int: ...

    @property
    def is_response_mode(self) -> bool:
        """Whether responses come over a response channel (``control-mode=response``)."""

    def open_request_publication(self, response_correlation_id: int) -> RequestPublication:
        """Another request publication to the archive's control channel whose answers come back
        to the subscription ``response_correlation_id`` (a replay over a response channel)."""

    def close(self) -> None: ...


class RequestPublication(Protocol):
    """A request publication of its own (see `ControlTransport.open_request_publication`)."""

    def offer(self, data: bytes) -> int: ...

    @property
    def is_connected(self) -> bool: ...

    def close(self) -> None: ...


CONTROL_MODE_RESPONSE = "response"
RESPONSE_CORRELATION_ID = "response-correlation-id"
#: The term length of a replay's request publication (Aeron's AeronArchive uses 64 KiB).
REPLAY_REQUEST_TERM_LENGTH = 64 * 1024


def is_response_channel(channel: str) -> bool:
    """Whether ``channel`` is a response channel (``control-mode=response``)."""
    return ChannelUri.parse(channel).get("control-mode") == CONTROL_MODE_RESPONSE


def check_response_channel(channel: str) -> None:
    """ValueError unless a response channel can work: over UDP it must name, with ``control=``, the
    archive's host and a port there that its response publications use (measured: without it the
    response publication never connects)."""
    uri = ChannelUri.parse(channel)
    if uri.is_udp and uri.get("control") is None:
        raise ValueError(f"response channel {channel!r} names no control=<archive host>:<port>: a UDP response "
                         "channel needs the archive's address and a port there it answers from")


def response_request_channel(control_channel: str, response_correlation_id: int,
                             term_length: int | None = None) -> str:
    """The control channel of a request publication whose answers come back over a response
    channel: ``response-correlation-id`` set, no ``session-id`` and no initial position (Aeron's
    AeronArchive builds it so); ``term_length`` when given."""
    uri = ChannelUri.parse(control_channel)
    for name in ("session-id", "init-term-id", "term-id", "term-offset"):
        uri.remove(name)
    uri.set(RESPONSE_CORRELATION_ID, str(response_correlation_id))
    if term_length is not None:
        uri.set("term-length", str(term_length))
    return uri.build()


def default_aeron_dir() -> str:
    """Aeron's default driver directory: ``$AERON_DIR``, else ``/dev/shm/aeron-<user>`` (Linux),
    else ``<tmp>/aeron-<user>`` - the same rule as the C client's ``aeron_default_path``."""
    explicit = os.environ.get("AERON_DIR")
    if explicit:
        return explicit
    try:
        user = os.getlogin()
    except OSError:
        user = os.environ.get("USER") or str(os.getuid())
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, f"aeron-{user}")


def isolated_response_channel(channel: str) -> str:
    """An IPC response channel narrowed to a session id of this client's own (as Aeron's clients
    do): the archive creates its response publication on the channel as told, and this client
    subscribes to that session only. Without it every IPC client on the driver holds an image of
    every session's responses, and IPC flow control makes them all wait for the slowest one.
    UDP channels (a port of their own), response channels (the driver matches their session) and
    channels naming a session id are returned unchanged."""
    uri = ChannelUri.parse(channel)
    if not uri.is_ipc or uri.get("session-id") is not None or uri.get("control-mode") == CONTROL_MODE_RESPONSE:
        return channel
    uri.set("session-id", str(secrets.randbits(32) - (1 << 31)))  # int32, unique per client in practice
    return uri.build()


#: The control request channel's term length when it names none, as Aeron's clients set it: the
#: archive's image of every session's requests is then 3 x 64 KiB on its driver, not 3 x the
#: driver's default term length (16 MiB), which a driver without sparse files allocates in full.
CONTROL_TERM_LENGTH = "64k"


def control_request_channel(channel: str) -> str:
    """``channel`` with ``term-length=64k`` unless it names a term length (Aeron's AeronArchive
    does the same to its control channels)."""
    uri = ChannelUri.parse(channel)
    if uri.get("term-length") is not None:
        return channel
    uri.set("term-length", CONTROL_TERM_LENGTH)
    return uri.build()


def subscribe_resolved(aeron: AeronClient, channel: str, stream_id: int, timeout: float,
                       advertised_host: str | None = None) -> tuple[Subscription, str]:
    """A subscription on ``channel`` and the channel to tell the archive to send to.

    A UDP wildcard port (``endpoint=host:0``) is resolved to the port the driver bound: a port 0
    on the wire means nothing to the archive. ``advertised_host`` replaces the endpoint's host in
    the told channel (bind one address, be reached at another, as behind NAT). Other channels are
    told unchanged.
    """
    subscription = aeron.add_subscription(channel, stream_id)
    try:
        uri = ChannelUri.parse(channel)
        endpoint = uri.get("endpoint")
        if not uri.is_udp or endpoint is None:
            return subscription, channel
        told = channel
        if endpoint.rpartition(":")[2] == "0":
            told = subscription.await_resolved_channel(timeout)
        return subscription, with_endpoint_host(told, advertised_host)
    except BaseException:
        subscription.close()
        raise


def with_endpoint_host(channel: str, host: str | None) -> str:
    """``channel`` with its UDP endpoint's host replaced by ``host`` (None: unchanged)."""
    if host is None:
        return channel
    uri = ChannelUri.parse(channel)
    endpoint = uri.get("endpoint")
    if not uri.is_udp or endpoint is None:
        return channel
    port = endpoint.rpartition(":")[2]
    uri.set("endpoint", f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return uri.build()


def endpoint_host(channel: str) -> str | None:
    """The host of a UDP channel's endpoint (brackets of IPv6 removed), None for other channels."""
    uri = ChannelUri.parse(channel)
    endpoint = uri.get("endpoint")
    if not uri.is_udp or endpoint is None:
        return None
    return endpoint.rpartition(":")[0].strip("[]")


class AeronControlTransport:
    """Request publication + response subscription on one `AeronClient` (closed with it or by
    `close`). The constructor waits until the request publication is connected."""

    def __init__(self, aeron: AeronClient, *, control_channel: str, control_stream_id: int,
                 response_channel: str, response_stream_id: int, timeout: float,
                 response_host: str | None = None) -> None:
        self.aeron = aeron
        self.control_channel = control_channel
        self.description = f"{control_channel} stream {control_stream_id}"
        #: Where responses are received: the channel subscribed to (its host is the bind address).
        self.response_bind_channel = response_channel
        self.response_stream_id = response_stream_id
        self.control_stream_id = control_stream_id
        self._response_mode = is_response_channel(response_channel)
        if self._response_mode:
            check_response_channel(response_channel)
        response_channel = isolated_response_channel(response_channel)
        self._subscription, self.response_channel = subscribe_resolved(
            aeron, response_channel, response_stream_id, timeout,
            None if self._response_mode else response_host)
        if self._response_mode:
            self.request_channel = response_request_channel(control_request_channel(control_channel),
                                                            self._subscription.registration_id)
        else:
            self.request_channel = control_request_channel(control_channel)
        try:
            self._publication = aeron.add_exclusive_publication(self.request_channel, control_stream_id)
        except BaseException:
            self._subscription.close()
            raise
        self._closed = False
        try:
            self._await_request_connected(timeout)
        except BaseException:
            self.close()
            raise

    def _await_request_connected(self, timeout: float) -> None:
        from aeron_spark.archive.client.response_routing import ArchiveTimeoutError

        deadline = time.monotonic() + timeout
        pause = 0.0001
        while not self._publication.is_connected:
            if time.monotonic() > deadline:
                raise ArchiveTimeoutError(
                    f"the archive's control request channel {self.description} did not connect "
                    f"within {timeout} s (is an archive listening there, on a driver this one "
                    f"can reach?)", request="connect")
            time.sleep(pause)
            pause = min(pause * 2, 0.005)

    def offer(self, data: bytes) -> int:
        return int(self._publication.offer(data))

    def poll(self, handler: MessageHandler, fragment_limit: int) -> int:
        return self._subscription.poll(handler, fragment_limit)

    @property
    def is_request_connected(self) -> bool:
        return self._publication.is_connected

    @property
    def is_response_connected(self) -> bool:
        """An image of the archive's response publication that has not ended: once the archive
        closes the session, the image reaches end of stream when read to its end (it may linger)."""
        if self._subscription.is_closed or not self._subscription.is_connected:
            return False
        return not all(image.is_end_of_stream for image in self._subscription.images)

    def next_correlation_id(self) -> int:
        return self.aeron.next_correlation_id()

    @property
    def is_response_mode(self) -> bool:
        return self._response_mode

    def open_request_publication(self, response_correlation_id: int) -> RequestPublication:
        channel = response_request_channel(self.control_channel, response_correlation_id,
                                           REPLAY_REQUEST_TERM_LENGTH)
        return self.aeron.add_exclusive_publication(channel, self.control_stream_id)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for resource in (self._publication, self._subscription):
            with contextlib.suppress(Exception):  # its AeronClient may already be closed
                resource.close()


RETRYABLE_OFFER_RESULTS = frozenset(
    (OfferResult.NOT_CONNECTED, OfferResult.BACK_PRESSURED, OfferResult.ADMIN_ACTION))
