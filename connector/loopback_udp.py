"""Whether a UDP channel is this host's loopback, and the receive window ``auto`` gives it: the
rules ``replay.mtu``, ``replay.receiveWindow``, ``sink.mtu`` and ``sink.receiveWindow`` share.

Apart from connector/replay_endpoint.py (which uses them) because the sink's options parse them on
Spark's write-planning worker, which must not import the archive client and the Aeron binding that
the replay endpoint needs (connector/data_source.py's docstring).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from aeron_spark.driver_integration.channel_uri import ChannelUri

from aeron_spark.connector.options import (
    LOOPBACK_RECEIVE_WINDOW,
    RECEIVE_WINDOW_AUTO,
    RECEIVE_WINDOW_NONE,
    RMEM_MAX_PATH,
)

#: The channel params a receive window sets on a subscription (replay_endpoint.with_receive_window).
RECEIVE_WINDOW_PARAMS = ("rcv-wnd", "so-rcvbuf")


def is_loopback_udp(channel: ChannelUri | str) -> bool:
    """Whether ``channel`` is UDP to this host's loopback, where no link MTU splits a datagram and
    this host's socket limits are the receiver's: what ``auto`` of ``replay.mtu``, ``sink.mtu``,
    ``replay.receiveWindow`` and ``sink.receiveWindow`` asks (elsewhere each keeps Aeron's default:
    beyond 1472 bytes a datagram is IP-fragmented on a 1500-byte Ethernet, and losing one fragment
    loses the whole datagram). The one home of that rule."""
    uri = ChannelUri.parse(channel) if isinstance(channel, str) else channel
    return uri.is_udp and is_loopback_endpoint(uri.get("endpoint"))


def receive_window_for(setting: int | str, channel: str, rmem_max_path: str = RMEM_MAX_PATH) -> int | None:
    """The receive window to put on a receiving ``channel`` for a ``*.receiveWindow`` setting (a
    replay subscription's, ``replay.receiveWindow``; a sink channel's, ``sink.receiveWindow``), or
    None to leave it: IPC, a channel that sets its own ``rcv-wnd`` or ``so-rcvbuf``, ``none``, and
    ``auto`` where :func:`loopback_receive_window` gives none."""
    uri = ChannelUri.parse(channel)
    if not uri.is_udp or any(param in uri for param in RECEIVE_WINDOW_PARAMS) or setting == RECEIVE_WINDOW_NONE:
        return None
    if setting == RECEIVE_WINDOW_AUTO:
        return loopback_receive_window(uri, rmem_max_path)
    return int(setting)


def loopback_receive_window(channel: ChannelUri | str, rmem_max_path: str = RMEM_MAX_PATH) -> int | None:
    """The receive window ``auto`` picks for a UDP channel (``replay.receiveWindow``,
    ``sink.receiveWindow``): :data:`LOOPBACK_RECEIVE_WINDOW`, capped by ``net.core.rmem_max``, when
    its endpoint is this host's loopback; None elsewhere (the other host's limits are not known
    here) or when ``rmem_max`` cannot be read. The one home of that rule."""
    if not is_loopback_udp(channel):
        return None
    try:
        rmem_max = int(Path(rmem_max_path).read_text())
    except (OSError, ValueError):
        return None
    return min(LOOPBACK_RECEIVE_WINDOW, rmem_max)


def is_loopback_endpoint(endpoint: str | None) -> bool:
    """Whether a ``host:port`` endpoint names this host's loopback (``localhost``, 127/8, ::1)."""
    if endpoint is None:
        return False
    host = endpoint.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
