"""This host's addresses as seen by a UDP peer: which local address reaches a remote endpoint, and
whether an address is this host's.

A subscription on another host can only be reached at an address of this host that routes to it
(not 0.0.0.0 or localhost), so a channel given to a remote publisher (e.g. an archive replaying to
us) must carry that address.
"""

from __future__ import annotations

import socket

from .channel_uri import ChannelUri, ChannelUriError


def _bare(host: str) -> str:
    """``[::1]`` -> ``::1`` (Aeron writes IPv6 hosts in brackets; sockets want them bare)."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _resolve(host: str, port: int) -> list[tuple[int, tuple]]:
    infos = socket.getaddrinfo(_bare(host), port, type=socket.SOCK_DGRAM)
    found = [(family, sockaddr) for family, _, _, _, sockaddr in infos
             if family in (socket.AF_INET, socket.AF_INET6)]
    # IPv4 first, as Aeron resolves host names (IPv6 only as bracketed literals).
    return sorted(found, key=lambda info: info[0] != socket.AF_INET)


def address_toward(host: str, port: int) -> str:
    """The local IP address this host sends from to reach ``host:port`` (bare, no brackets).

    Asks the kernel's routing table by connecting a UDP socket: no packet is sent.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port {port!r} is invalid: must be an int from 0 to 65535")
    if not isinstance(host, str) or not _bare(host):
        raise ValueError(f"host {host!r} is invalid: must be a non-empty host name or IP address")
    try:
        candidates = _resolve(host, port)
    except (socket.gaierror, UnicodeError) as error:
        raise OSError(f"cannot resolve host {host!r}: {error}") from error
    failure: OSError | None = None
    for family, sockaddr in candidates:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect(sockaddr)
                return probe.getsockname()[0]
            except OSError as error:
                failure = error
    raise OSError(f"no local address routes to {host}:{port}: {failure or 'no IPv4/IPv6 address'}")


def endpoint_host_of(channel: str) -> tuple[str, int] | None:
    """(host, port) of a UDP channel's ``endpoint`` (host bare: ``[::1]`` -> ``::1``); None for IPC
    or a UDP channel without an endpoint. ChannelUriError for an endpoint that is not host:port."""
    uri = ChannelUri.parse(channel)
    endpoint = uri.get("endpoint") if uri.is_udp else None
    if endpoint is None:
        return None
    host, separator, port = endpoint.rpartition(":")
    if not separator or not host or not port.isdigit() or int(port) > 65535 or (":" in host and host[0] != "["):
        raise ChannelUriError(f"endpoint {endpoint!r} of channel {channel!r} is not host:port "
                              f"(IPv6 hosts in brackets, port 0-65535)")
    return _bare(host), int(port)


def is_local_address(address: str) -> bool:
    """Whether ``address`` (an IP, bracketed IPv6 or host name) is one of this host's: a UDP socket
    can bind to it. Wildcards (0.0.0.0, ::) count as local; unresolvable names do not."""
    if not isinstance(address, str) or not _bare(address):
        return False
    try:
        candidates = _resolve(address, 0)
    except (socket.gaierror, UnicodeError):
        return False
    for family, sockaddr in candidates:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind(sockaddr)
                return True
            except OSError:
                continue
    return False
