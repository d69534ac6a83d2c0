"""Where the archive sends a replay: IPC on the archive's own media driver, otherwise a UDP
endpoint on this worker's host.

A client on another media driver (another host) cannot receive ``aeron:ipc`` replays, and port 0
means nothing to the archive. So each replay subscribes to ``<aeron.bindAddress>:0`` with its own
``session-id``, the port the driver bound is resolved, and the archive is told
``<aeron.host>:<port>``. One ephemeral port per replay: the C driver matches receive endpoints by
the channel as subscribed, so a second subscription naming an already-resolved port would try to
bind it again (measured: EADDRINUSE), and a shared wildcard subscription would bind a new port
anyway. Partitions of one worker therefore never see each other's replays.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from aeron_spark.archive.client.transport import subscribe_resolved, with_endpoint_host
from aeron_spark.driver_integration.channel_uri import ChannelUri

IPC = "aeron:ipc"


@dataclass
class ReplayReceiver:
    """One replay's subscription and the channel the archive is told to send it on."""

    subscription: object
    told: str
    over_udp: bool

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
    else a UDP endpoint bound at the bind host and told at the advertised host. A UDP
    ``replay.channel`` with port 0 is bound as it says and told at the advertised host; any other
    channel is used as given.
    """

    def __init__(self, aeron, shares_archive_driver: bool, hosts: tuple[str, str] | None, timeout_s: float) -> None:
        self._aeron = aeron
        self.shares_archive_driver = shares_archive_driver
        self.advertised_host, self.bind_host = hosts or ("127.0.0.1", "127.0.0.1")
        self._timeout_s = timeout_s

    def base_channel(self, configured: str | None) -> str:
        """The replay channel before its session-id and port resolution."""
        if configured is not None:
            return configured
        return IPC if self.shares_archive_driver else _udp_channel(self.bind_host)

    def subscribe(self, configured: str | None, stream_id: int, session_id: int) -> ReplayReceiver:
        channel = with_param(self.base_channel(configured), "session-id", str(session_id))
        if needs_port_resolution(channel):
            subscription, resolved = subscribe_resolved(self._aeron, channel, stream_id, self._timeout_s)
            return ReplayReceiver(subscription, with_endpoint_host(resolved, self.advertised_host), over_udp=True)
        subscription = self._aeron.add_subscription(channel, stream_id)
        return ReplayReceiver(subscription, channel, over_udp=ChannelUri.parse(channel).is_udp)


def _udp_channel(host: str) -> str:
    return "aeron:udp?endpoint=" + (f"[{host}]:0" if ":" in host else f"{host}:0")
