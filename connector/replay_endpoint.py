"""Where the archive sends a replay: IPC on the archive's own media driver, otherwise a UDP
endpoint on this worker's host.

A client on another media driver (another host) cannot receive ``aeron:ipc`` replays, and port 0
means nothing to the archive. So each replay subscribes to ``<aeron.bindAddress>:0`` with its own
``session-id``, the port the driver bound is resolved, and the archive is told
``<aeron.host>:<port>``. One ephemeral port per replay: the C driver matches receive endpoints by
the channel as subscribed, so a second subscription naming an already-resolved port would try to
bind it again (measured: EADDRINUSE), and a shared wildcard subscription would bind a new port
anyway. So the port is bound once per connection: one subscription without a ``session-id``
(:class:`SharedReplaySubscriptions`), lent to every replay, each of which tells the archive its own
``session-id`` and reads only the Image of that session. Partitions of one worker therefore never
see each other's replays, and a replay does not pay for a subscription and a port of its own.

A client connected over a response channel (``archive.responseChannel`` with
``control-mode=response``: the worker has no port the archive can reach) gets its replays over a
response channel too: the same channel (``control=`` names the archive's response port), with no
``session-id`` added (the media driver matches the replay's session to the subscription) and
started the response-channel way (a replay token, then the request over a publication of the
worker's own: ``ArchiveClient.start_replay(..., subscription_registration_id=...)``).

A UDP replay may ask for a larger ``mtu`` than the recording's (``replay.mtu``,
:func:`replay_mtu_to_ask`): the archive replays whole frames, and the driver's sender packs as many
as fit in one datagram, so 1 KiB messages recorded at mtu 1408 arrive 62 to a datagram at 65504
instead of one each. By default only towards a loopback address: beyond the link's MTU (1500 on
Ethernet) a datagram is IP-fragmented, and losing one fragment loses the whole datagram.

A UDP replay subscription gets a wider receive window (``replay.receiveWindow``,
:func:`receive_window_for`; by default 2 MiB where it binds a loopback address): the archive's
sender may have only the window in flight per status-message round trip, and the driver's default
128 KiB made that round trip, not either end's work, bound a replay's rate.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from aeron_spark.archive.client.transport import is_response_channel, subscribe_resolved, with_endpoint_host
from aeron_spark.driver_integration import AeronClient, Subscription
from aeron_spark.driver_integration.channel_uri import MTU, ChannelUri

from aeron_spark.connector.loopback_udp import (  # noqa: F401 - the loopback rules, re-exported
    RECEIVE_WINDOW_PARAMS,
    is_loopback_endpoint,
    is_loopback_udp,
    loopback_receive_window,
    receive_window_for,
)
from aeron_spark.connector.options import (
    DEFAULT_LOOPBACK_REPLAY_MTU,
    RECEIVE_WINDOW_NONE,
    REPLAY_MTU_AUTO,
    REPLAY_MTU_RECORDING,
)

IPC = "aeron:ipc"
#: Replays to a port-0 UDP channel share one subscription per connection
#: (:class:`SharedReplaySubscriptions`); off (the constructor's argument): each replay binds a port
#: of its own, as before (measured on the cluster layout: 11 -> 6 ms per live partition read).
SHARE_UDP_SUBSCRIPTION = True


@dataclass
class ReplayReceiver:
    """One replay's subscription and the channel the archive is told to send it on."""

    subscription: Subscription
    told: str
    over_udp: bool
    #: a response channel: the replay starts with the subscription's registration id, and its
    #: Image's session id is the replay's (low 32 bits of the replaySessionId), not one chosen here
    response_mode: bool = False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.subscription.close()


def with_param(channel: str, name: str, value: str) -> str:
    separator = "|" if "?" in channel else "?"
    return f"{channel}{separator}{name}={value}"


def needs_port_resolution(channel: str) -> bool:
    uri = ChannelUri.parse(channel)
    endpoint = uri.get("endpoint")
    return uri.is_udp and endpoint is not None and endpoint.rpartition(":")[2] == "0"


class ReplayEndpoints:
    """Chooses each replay's channel for one archive connection.

    ``replay.channel`` unset: ``aeron:ipc`` when this client shares the archive's media driver,
    else the client's response channel when that is a response channel (``response_channel``),
    else a UDP endpoint bound at the bind host and told at the advertised host. A UDP
    ``replay.channel`` with port 0 is bound as it says and told at the advertised host; a response
    channel is subscribed as it is; any other channel is used as given.
    """

    def __init__(self, aeron: AeronClient, shares_archive_driver: bool, hosts: tuple[str, str] | None, timeout_s: float,
                 response_channel: str | None = None, share_udp_subscription: bool = SHARE_UDP_SUBSCRIPTION) -> None:
        self._aeron = aeron
        #: replays to a port-0 UDP channel share one subscription (see SharedReplaySubscriptions)
        self.shared = SharedReplaySubscriptions(aeron, timeout_s) if share_udp_subscription else None
        self.shares_archive_driver = shares_archive_driver
        #: the client's response channel if it is one (control-mode=response), else None
        self.response_channel = response_channel if response_channel and is_response_channel(response_channel) \
            else None
        self.advertised_host, self.bind_host = hosts or ("127.0.0.1", "127.0.0.1")
        self._timeout_s = timeout_s

    def base_channel(self, configured: str | None) -> str:
        """The replay channel before its session-id and port resolution."""
        if configured is not None:
            return configured
        if self.shares_archive_driver:
            return IPC
        return self.response_channel or _udp_channel(self.bind_host)

    def subscribe(self, configured: str | None, stream_id: int, session_id: int,
                  receive_window: int | str = RECEIVE_WINDOW_NONE) -> ReplayReceiver:
        """The replay's subscription; ``receive_window`` is ``replay.receiveWindow``, put on a UDP
        subscription this side binds (never on the channel told to the archive)."""
        base = self.base_channel(configured)
        if is_response_channel(base):
            subscription = self._aeron.add_subscription(base, stream_id)
            return ReplayReceiver(subscription, base, over_udp=ChannelUri.parse(base).is_udp, response_mode=True)
        base = with_receive_window(base, receive_window_for(receive_window, base))
        if self.shared is not None and needs_port_resolution(base):
            lent, resolved = self.shared.lend(base, stream_id)
            told = with_param(self._told(resolved), "session-id", str(session_id))
            return ReplayReceiver(lent, told, over_udp=True)
        channel = with_param(base, "session-id", str(session_id))
        if needs_port_resolution(channel):
            subscription, resolved = subscribe_resolved(self._aeron, channel, stream_id, self._timeout_s)
            return ReplayReceiver(subscription, self._told(resolved), over_udp=True)
        subscription = self._aeron.add_subscription(channel, stream_id)
        return ReplayReceiver(subscription, without_receive_window(channel), over_udp=ChannelUri.parse(channel).is_udp)

    def _told(self, resolved: str) -> str:
        """What the archive is told to send to: the resolved endpoint at the advertised host, without
        the receiving side's window (a publication has no use for it)."""
        return without_receive_window(with_endpoint_host(resolved, self.advertised_host))


class _LentSubscription(Subscription):
    """A shared replay subscription as one replay holds it: the same subscription (its state is the
    shared one's), except that ``close`` ends only the loan: the replay's code closes what it was
    given, and the shared subscription stays for the next replay."""

    def __init__(self, shared: Subscription) -> None:
        self.__dict__.update(shared.__dict__)  # the shared one's state: not a second subscription

    def close(self) -> None:
        pass


class SharedReplaySubscriptions:
    """One subscription per (port-0 UDP channel, stream id), bound once and lent to every replay.

    Each replay still has a session of its own: the archive is told ``session-id=<its own>`` and
    the replay reads the Image of that session (``image_by_session_id``), so replays in flight at
    once on the same port never mix, and an Image of an earlier replay (ended, lingering) is never
    read. What it saves per replay is the subscription and its port: adding a subscription, the
    driver binding a socket and resolving the port (~2 ms on the cluster layout,
    bench/replay_setup_cost.py), and closing them, and on the archive's side a new send endpoint
    per replay. Closed with the Aeron client that owns it (the connection's), or by ``close``."""

    def __init__(self, aeron: AeronClient, timeout_s: float) -> None:
        self._aeron = aeron
        self._timeout_s = timeout_s
        self._subscriptions: dict[tuple[str, int], tuple[Subscription, str]] = {}

    def lend(self, channel: str, stream_id: int) -> tuple[Subscription, str]:
        """(the shared subscription as a loan, its resolved channel); a closed one is replaced."""
        key = (channel, stream_id)
        held = self._subscriptions.get(key)
        if held is None or held[0].is_closed:
            held = self._subscriptions[key] = subscribe_resolved(self._aeron, channel, stream_id, self._timeout_s)
        return _LentSubscription(held[0]), held[1]

    def close(self) -> None:
        subscriptions, self._subscriptions = self._subscriptions, {}
        for subscription, _ in subscriptions.values():
            with contextlib.suppress(Exception):
                subscription.close()


def _udp_channel(host: str) -> str:
    return "aeron:udp?endpoint=" + (f"[{host}]:0" if ":" in host else f"{host}:0")


def replay_mtu_to_ask(setting: int | str, told: str, recording_mtu: int, term_length: int) -> int | None:
    """The ``mtu`` to put on the replay channel ``told`` to the archive, or None to leave the
    recording's. ``setting`` is ``replay.mtu``; a channel that names its own mtu keeps it. The
    mtu is capped at term length / 8 (Aeron's limit), and one not above the recording's is not asked
    (an archive refuses one below it)."""
    uri = ChannelUri.parse(told)
    if not uri.is_udp or MTU in uri or setting == REPLAY_MTU_RECORDING:
        return None
    if setting == REPLAY_MTU_AUTO:
        if not is_loopback_udp(uri):
            return None
        wanted = DEFAULT_LOOPBACK_REPLAY_MTU
    else:
        wanted = int(setting)
    wanted = min(wanted, term_length // 8)
    return wanted if wanted > recording_mtu else None


def with_receive_window(channel: str, window: int | None) -> str:
    """``channel`` with ``rcv-wnd`` and ``so-rcvbuf`` of ``window`` (None: unchanged)."""
    if window is None:
        return channel
    for param in RECEIVE_WINDOW_PARAMS:
        channel = with_param(channel, param, str(window))
    return channel


def without_receive_window(channel: str) -> str:
    uri = ChannelUri.parse(channel)
    if not any(param in uri for param in RECEIVE_WINDOW_PARAMS):
        return channel
    for param in RECEIVE_WINDOW_PARAMS:
        uri.remove(param)
    return uri.build()
