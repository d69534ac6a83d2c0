"""Where an archive reaches a client: the response channel a client asks for by default, and
the address of this host the archive is told.

Shared by every client that may run on another host than the archive (the connector's source and
sink, the ``aeron-archive`` client commands): an archive on another host can answer only at an
address of this host that routes to it, never ``localhost``. Callers name their own options in
the errors they raise from these.
"""

from __future__ import annotations

from aeron_spark.archive.configuration import IPC_CHANNEL
from aeron_spark.driver_integration.host_address import address_toward, endpoint_host_of

#: Told when the control channel has no endpoint to route towards (e.g. IPC: the same host).
LOOPBACK_HOST = "127.0.0.1"


def local_hosts(control_channel: str, host: str | None = None,
                bind_address: str | None = None) -> tuple[str, str]:
    """(address the archive reaches this host at, address to bind) for response and replay
    endpoints: ``host`` / ``bind_address`` when given, else the local address that routes to the
    control channel's endpoint. OSError when no local address routes there; ChannelUriError for
    a control endpoint that is not host:port."""
    advertised = host
    if advertised is None:
        target = endpoint_host_of(control_channel)
        advertised = address_toward(*target) if target is not None else LOOPBACK_HOST
    return advertised, bind_address or advertised


def default_response_channel(control_channel: str, bind_host: str) -> str:
    """IPC when the control channel is IPC (the client adds a session-id of its own to it:
    ``transport.isolated_response_channel``, so clients never share an image), else a free UDP
    port on ``bind_host``."""
    if control_channel.startswith(IPC_CHANNEL):
        return IPC_CHANNEL
    return "aeron:udp?endpoint=" + (f"[{bind_host}]:0" if ":" in bind_host else f"{bind_host}:0")
