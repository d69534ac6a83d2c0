"""Subscription.resolved_channel: a wildcard endpoint port (``endpoint=host:0``) comes back as the
port the driver bound, and a publisher on that channel reaches the subscription."""

from __future__ import annotations

import socket
import time

import pytest

from aeron_spark.driver_integration import AeronError, ResourceClosedError
from aeron_spark.driver_integration.channel_uri import ChannelUri

from tests.support.driver_streams import await_image, offer_all, poll_messages

pytestmark = pytest.mark.timeout(60)


def _endpoint(channel: str) -> tuple[str, int]:
    host, _, port = ChannelUri.parse(channel).get("endpoint").rpartition(":")
    return host, int(port)


def _ipv6_loopback_works() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_wildcard_port_resolves_and_a_publication_on_the_resolved_channel_delivers(aeron_client):
    with aeron_client.add_subscription("aeron:udp?endpoint=127.0.0.1:0", 5001) as subscription:
        resolved = subscription.await_resolved_channel(5.0)
        host, port = _endpoint(resolved)
        assert host == "127.0.0.1" and 0 < port < 65536
        assert subscription.resolved_channel() == resolved
        assert subscription.channel == "aeron:udp?endpoint=127.0.0.1:0"
        with aeron_client.add_publication(resolved, 5001) as publication:
            await_image(subscription, publication.session_id).close()
            assert publication.is_connected
            offer_all(publication, [b"to the bound port"])
            assert [p for p, _ in poll_messages(subscription, 1)] == [b"to the bound port"]


def test_resolution_keeps_the_other_params_and_resolves_a_host_name(aeron_client):
    alias = "a" * 3000  # a long channel still fits the buffer
    channel = f"aeron:udp?mtu=1408|endpoint=localhost:0|alias={alias}"
    with aeron_client.add_subscription(channel, 5002) as subscription:
        resolved = ChannelUri.parse(subscription.await_resolved_channel(5.0))
    assert resolved.media == "udp" and not resolved.is_spy
    host, port = resolved.get("endpoint").rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert {k: v for k, v in resolved.params.items() if k != "endpoint"} == {"mtu": "1408", "alias": alias}


@pytest.mark.skipif(not _ipv6_loopback_works(), reason="no IPv6 loopback on this host")
def test_ipv6_wildcard_port_resolves(aeron_client):
    with aeron_client.add_subscription("aeron:udp?endpoint=[::1]:0", 5003) as subscription:
        host, port = _endpoint(subscription.await_resolved_channel(5.0))
    assert host == "[::1]" and port > 0


def test_channels_without_a_wildcard_port_come_back_unchanged(aeron_client, free_udp_port):
    concrete = f"aeron:udp?mtu=1408|endpoint=127.0.0.1:{free_udp_port}|alias=kept-in-order"
    long_concrete = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port}|alias={'b' * 4000}"
    channels = ["aeron:ipc", "aeron:ipc?term-length=65536|alias=x", concrete, f"aeron-spy:{concrete}",
                "aeron:udp?control-mode=manual"]
    for stream_id, channel in enumerate(channels, start=5010):
        with aeron_client.add_subscription(channel, stream_id) as subscription:
            assert subscription.resolved_channel() == channel
            assert subscription.await_resolved_channel(0) == channel
    with aeron_client.add_subscription(long_concrete, 5020) as subscription:
        assert subscription.resolved_channel() == long_concrete  # Aeron copies it whole: no overflow


def test_await_resolved_channel_times_out_naming_the_channel(aeron_client, monkeypatch):
    with aeron_client.add_subscription("aeron:udp?endpoint=127.0.0.1:0", 5004) as subscription:
        monkeypatch.setattr(subscription, "resolved_channel", lambda: None)  # the driver never binds
        started = time.monotonic()
        with pytest.raises(AeronError, match=r"aeron:udp\?endpoint=127\.0\.0\.1:0 \(stream 5004\) within 0\.2s"):
            subscription.await_resolved_channel(0.2)
        assert 0.2 <= time.monotonic() - started < 2
        with pytest.raises(ValueError, match="timeout_s -1 is invalid"):
            subscription.await_resolved_channel(-1)


def test_resolved_channel_of_a_closed_subscription_raises(aeron_client):
    subscription = aeron_client.add_subscription("aeron:udp?endpoint=127.0.0.1:0", 5005)
    subscription.close()
    with pytest.raises(ResourceClosedError):
        subscription.resolved_channel()
