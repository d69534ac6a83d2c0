"""host_address: the local address toward a peer (routing table, no packet sent), a channel's
endpoint host, and whether an address is this host's (bind test)."""

from __future__ import annotations

import socket

import pytest

from aeron_spark.driver_integration.channel_uri import ChannelUriError
from aeron_spark.driver_integration.host_address import address_toward, endpoint_host_of, is_local_address


def _ipv6_loopback_works() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


needs_ipv6 = pytest.mark.skipif(not _ipv6_loopback_works(), reason="no IPv6 loopback on this host")


def _unresolvable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_args: object, **_kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)


def test_address_toward_loopback_and_localhost():
    assert address_toward("127.0.0.1", 40123) == "127.0.0.1"
    assert address_toward("localhost", 8010) == "127.0.0.1"  # names resolve IPv4 first, as in Aeron
    assert address_toward("127.0.0.1", 0) == "127.0.0.1"


@needs_ipv6
def test_address_toward_an_ipv6_host_is_bare():
    assert address_toward("::1", 40123) == "::1"
    assert address_toward("[::1]", 40123) == "::1"


def test_address_toward_a_remote_host_is_one_of_this_hosts_addresses():
    try:
        local = address_toward("198.51.100.7", 8010)  # TEST-NET-2: routed by the default route only
    except OSError as error:
        # A host without a default route: the failure is an OSError naming why (the connector turns
        # it into an error naming archive.controlChannel), never a wrong address.
        assert str(error)
        return
    assert is_local_address(local)
    assert not local.startswith("127.")


def test_address_toward_rejects_bad_input_and_names_an_unresolvable_host(monkeypatch):
    for port in (-1, 65536, "80", True):
        with pytest.raises(ValueError, match="port .* is invalid"):
            address_toward("127.0.0.1", port)
    with pytest.raises(ValueError, match="host '' is invalid"):
        address_toward("", 80)
    _unresolvable(monkeypatch)
    with pytest.raises(OSError, match="cannot resolve host 'archive.example'"):
        address_toward("archive.example", 8010)


@pytest.mark.parametrize(("channel", "expected"), [
    ("aeron:udp?endpoint=10.0.0.1:40123", ("10.0.0.1", 40123)),
    ("aeron:udp?mtu=1408|endpoint=archive-host:8010|alias=x", ("archive-host", 8010)),
    ("aeron:udp?endpoint=[::1]:40123", ("::1", 40123)),
    ("aeron:udp?endpoint=localhost:0", ("localhost", 0)),
    ("aeron-spy:aeron:udp?endpoint=h:1", ("h", 1)),
    ("aeron:ipc", None),
    ("aeron:ipc?alias=endpoint", None),
    ("aeron:udp?control=10.0.0.1:40124|control-mode=dynamic", None),
])
def test_endpoint_host_of(channel, expected):
    assert endpoint_host_of(channel) == expected


@pytest.mark.parametrize("channel", [
    "aeron:udp?endpoint=host", "aeron:udp?endpoint=:40123", "aeron:udp?endpoint=host:port",
    "aeron:udp?endpoint=host:99999", "aeron:udp?endpoint=::1:40123", "udp://host:1",
])
def test_endpoint_host_of_rejects_what_is_not_host_port(channel):
    with pytest.raises(ChannelUriError):
        endpoint_host_of(channel)


def test_is_local_address():
    assert is_local_address("127.0.0.1")
    assert is_local_address("localhost")
    assert is_local_address("0.0.0.0")  # the wildcard binds on any host
    assert not is_local_address("198.51.100.7")  # TEST-NET-2, nobody's address
    assert not is_local_address("")


@needs_ipv6
def test_is_local_address_ipv6():
    assert is_local_address("::1") and is_local_address("[::1]")
    assert not is_local_address("2001:db8::7")  # documentation prefix


def test_an_unresolvable_name_is_not_local(monkeypatch):
    _unresolvable(monkeypatch)
    assert not is_local_address("archive.example")
