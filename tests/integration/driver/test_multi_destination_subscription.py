"""A multi-destination subscription (``control-mode=manual``) on the real C driver: destinations added
and removed by hand, the port the driver bound for a ``:0`` destination, and two transports of one
session merging into one Image (``active_transport_count`` 2) with every message delivered once,
which is what ReplayMerge relies on."""

from __future__ import annotations

import time

import pytest

from aeron_spark.driver_integration import AeronError, DestinationRequest, InitialPosition
from aeron_spark.driver_integration.channel_uri import ChannelUri

from tests.support.driver_streams import await_image, offer_all, poll_messages
from tests.support.ports import free_udp_port, udp_channel

pytestmark = pytest.mark.timeout(60)

MDS_CHANNEL = "aeron:udp?control-mode=manual"
TERM_LENGTH = 64 * 1024


def wait_for(condition, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_a_destination_added_with_port_zero_binds_a_port_a_publisher_reaches(aeron_client):
    with aeron_client.add_subscription(MDS_CHANNEL, 7101) as subscription:
        assert subscription.resolved_endpoint() is None  # no destination: nothing bound
        subscription.add_destination("aeron:udp?endpoint=localhost:0")
        endpoint = wait_for(subscription.resolved_endpoint, "the destination's bound address")
        host, _, port = endpoint.rpartition(":")
        assert host == "127.0.0.1" and 0 < int(port) < 65536
        with aeron_client.add_publication(udp_channel(int(port)), 7101) as publication:
            image = await_image(subscription, publication.session_id)
            offer_all(publication, [b"one", b"two"])
            assert [p for p, _ in poll_messages(subscription, 2)] == [b"one", b"two"]
            # The driver publishes the count from its periodic liveness check, not on each datagram.
            wait_for(lambda: image.active_transport_count == 1, "one active transport")
            image.close()


def test_two_transports_of_one_session_merge_into_one_image_each_message_once(aeron_client):
    """Two exclusive publications with the same session id and initial position send identical
    frames through two destinations: one Image, two active transports, each message once; after the
    first destination is removed the second alone carries on."""
    first, second = free_udp_port(), free_udp_port()
    destinations = [udp_channel(first), udp_channel(second)]
    start = InitialPosition(0, initial_term_id=7, term_length=TERM_LENGTH)
    with aeron_client.add_subscription(MDS_CHANNEL, 7102) as subscription:
        requests = [subscription.add_destination_async(d) for d in destinations]
        assert all(isinstance(r, DestinationRequest) for r in requests)
        wait_for(lambda: all(r.poll() for r in requests), "both destinations added")
        assert requests[0].poll() is True  # an answered request keeps its answer
        publications = [aeron_client.add_exclusive_publication(f"{udp_channel(port)}|session-id=4242", 7102,
                                                               initial_position=start)
                        for port in (first, second)]
        try:
            image = await_image(subscription, 4242)
            payloads = [f"message {i}".encode() for i in range(50)]
            for payload in payloads:
                for publication in publications:
                    offer_all(publication, [payload])
            received = [p for p, _ in poll_messages(subscription, len(payloads))]
            assert received == payloads
            wait_for(lambda: image.active_transport_count == 2, "two active transports")
            assert subscription.image_count == 1

            subscription.remove_destination(destinations[0])
            publications[0].close()
            later = [f"later {i}".encode() for i in range(10)]
            offer_all(publications[1], later)
            assert [p for p, _ in poll_messages(subscription, len(later))] == later
            assert image.position == publications[1].position
            image.close()
        finally:
            for publication in publications:
                publication.close()


def test_destinations_refused_with_a_clear_error(aeron_client):
    with aeron_client.add_subscription(udp_channel(), 7103) as plain:
        with pytest.raises(ValueError, match=r"not a multi-destination subscription.*control-mode=manual"):
            plain.add_destination("aeron:udp?endpoint=localhost:0")
        with pytest.raises(ValueError, match="remove destination"):
            plain.remove_destination_async("aeron:udp?endpoint=localhost:0")
    with aeron_client.add_subscription(MDS_CHANNEL, 7104) as subscription:
        # The driver refuses a destination without an endpoint; the request reports it.
        with pytest.raises(AeronError, match="add destination 'aeron:udp' to subscription"):
            subscription.add_destination("aeron:udp")
        request = subscription.add_destination_async("aeron:udp?endpoint=localhost:0")
        request.wait(5.0)
        assert "done" in repr(request)
        assert ChannelUri.parse(subscription.channel).get("control-mode") == "manual"
