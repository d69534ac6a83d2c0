"""Publications and subscriptions against the real embedded driver: IPC, UDP, spy, fragments,
try_claim, reserved values, image lifecycle and notifications."""

from __future__ import annotations

import threading

import pytest

from aeron_spark.driver_integration import BufferClaim, Image, OfferResult
from aeron_spark.driver_integration.frame import BEGIN_FRAG_FLAG, END_FRAG_FLAG, UNFRAGMENTED, walk_frames
from aeron_spark.driver_integration.position import compute_position, position_bits_to_shift

from tests.support.driver_streams import await_image, offer_all, poll_messages
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

PAYLOADS = [b"", b"a", b"hello aeron", bytes(range(256)) * 4, b"z" * 1376]


def _check_round_trip(publication, subscription) -> None:
    image = await_image(subscription, publication.session_id)
    with image:
        positions = offer_all(publication, PAYLOADS)
        received = poll_messages(subscription, len(PAYLOADS))
    assert [payload for payload, _ in received] == PAYLOADS
    bits = position_bits_to_shift(publication.term_buffer_length)
    for (payload, header), position in zip(received, positions, strict=True):
        assert header.position == position
        assert header.session_id == publication.session_id
        assert header.stream_id == publication.stream_id
        assert header.flags == UNFRAGMENTED
        assert header.frame_length == len(payload) + 32
        assert header.initial_term_id == publication.initial_term_id
        start = compute_position(header.term_id, header.term_offset, bits, publication.initial_term_id)
        assert start + ((header.frame_length + 31) & ~31) == header.position


@pytest.mark.parametrize("fast_offer", [True, False], ids=["pyaeron-offer", "cffi-offer"])
def test_ipc_concurrent_publication_round_trip(new_aeron_client, fast_offer):
    client = new_aeron_client(fast_offer=fast_offer)
    with client.add_subscription("aeron:ipc", 1001) as subscription, \
            client.add_publication("aeron:ipc", 1001) as publication:
        assert publication.uses_fast_offer is fast_offer
        _check_round_trip(publication, subscription)
        assert subscription.is_connected and publication.is_connected
        assert not publication.is_closed and not subscription.is_closed
        assert publication.position > 0
        assert subscription.image_count == 1


def test_udp_exclusive_publication_round_trip(aeron_client, free_udp_port):
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port}"
    with aeron_client.add_subscription(channel, 1002) as subscription, \
            aeron_client.add_exclusive_publication(channel, 1002) as publication:
        _check_round_trip(publication, subscription)
        assert publication.is_connected and not publication.is_closed
        image = await_image(subscription, publication.session_id)
        assert image.source_identity.startswith("127.0.0.1:")
        image.close()


def test_spy_subscription_sees_udp_publication(aeron_client, free_udp_port):
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port}"
    with aeron_client.add_subscription(channel, 1003) as network, \
            aeron_client.add_subscription(f"aeron-spy:{channel}", 1003) as spy, \
            aeron_client.add_publication(channel, 1003) as publication:
        await_image(network, publication.session_id).close()
        spy_image = await_image(spy, publication.session_id)
        offer_all(publication, [b"one", b"two"])
        assert [p for p, _ in poll_messages(spy, 2)] == [b"one", b"two"]
        assert [p for p, _ in poll_messages(network, 2)] == [b"one", b"two"]
        assert spy_image.source_identity == "aeron:ipc" or spy_image.source_identity
        spy_image.close()


def test_fragmented_message_is_reassembled_by_poll_and_split_in_blocks(aeron_client):
    with aeron_client.add_subscription("aeron:ipc", 1004) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 1004) as publication:
        image = await_image(subscription, publication.session_id)
        big = bytes(i % 251 for i in range(publication.max_payload_length * 3 + 100))
        end = publication.offer_with_retry(big, reserved_value=7)
        messages = poll_messages(image, 1)
        assert messages[0][0] == big
        header = messages[0][1]
        assert header.position == end and header.frame_length == len(big) + 32
        assert header.flags == BEGIN_FRAG_FLAG | END_FRAG_FLAG and header.reserved_value == 7
        assert header.term_offset == 0

    with aeron_client.add_subscription("aeron:ipc", 1005) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 1005) as publication:
        image = await_image(subscription, publication.session_id)
        end = publication.offer_with_retry(big)
        blocks = []
        wait_until(lambda: image.block_poll(lambda b, *rest: blocks.append(bytes(b)), 1 << 20) >= 0
                   and image.position >= end, "the fragmented message in blocks")
        frames = [header for block in blocks for _, header in walk_frames(block)]
        assert [f.flags for f in frames] == [BEGIN_FRAG_FLAG, 0, 0, END_FRAG_FLAG]
        assert sum(f.payload_length for f in frames) == len(big)
        image.close()


@pytest.mark.parametrize("exclusive", [False, True], ids=["concurrent", "exclusive"])
def test_try_claim_commit_abort_and_reserved_value(aeron_client, exclusive):
    add = aeron_client.add_exclusive_publication if exclusive else aeron_client.add_publication
    with aeron_client.add_subscription("aeron:ipc", 1006) as subscription, \
            add("aeron:ipc", 1006) as publication:
        image = await_image(subscription, publication.session_id)
        aborted = wait_until(lambda: _claim(publication, 8), "a claim")
        aborted.buffer[:] = b"DISCARD!"
        aborted.abort()
        with pytest.raises(Exception, match="already committed or aborted"):
            aborted.commit()
        with wait_until(lambda: _claim(publication, 5), "a claim") as claim:
            claim.buffer[:] = b"kept!"
            claim.reserved_value = -99
            assert claim.reserved_value == -99 and claim.length == 5
        messages = poll_messages(image, 1)
        assert messages[0][0] == b"kept!"
        assert messages[0][1].reserved_value == -99
        with pytest.raises(ValueError, match="max_payload_length"):
            publication.try_claim(publication.max_payload_length + 1)
        image.close()


def _claim(publication, length: int) -> BufferClaim | None:
    claim = publication.try_claim(length)
    return claim if isinstance(claim, BufferClaim) else None


def test_image_notifications_arrive_on_conductor_thread(aeron_client):
    available: list[Image] = []
    unavailable: list[Image] = []
    threads: set[int] = set()

    def on_available(image: Image) -> None:
        threads.add(threading.get_ident())
        available.append(image)

    def on_unavailable(image: Image) -> None:
        threads.add(threading.get_ident())
        unavailable.append(image)

    with aeron_client.add_subscription("aeron:ipc", 1007, on_available_image=on_available,
                                       on_unavailable_image=on_unavailable) as subscription:
        publication = aeron_client.add_exclusive_publication("aeron:ipc", 1007)
        wait_until(lambda: available, "on_available_image")
        image = available[0]
        assert image.session_id == publication.session_id and not image.is_closed
        assert image.stream_id == 1007 and image.join_position == 0
        final = publication.offer_with_retry(b"last words")
        publication.close()
        received: list[bytes] = []
        # An IPC publication drains to its subscribers before it goes away: keep polling.
        wait_until(lambda: image.poll(lambda p, h: received.append(bytes(p)), 10) >= 0 and unavailable,
                   "on_unavailable_image")
        assert received == [b"last words"]
        gone = unavailable[0]
        assert gone.correlation_id == image.correlation_id and gone.is_closed
        assert gone.session_id == image.session_id
        with pytest.raises(Exception, match="closed"):
            gone.position  # noqa: B018 - a snapshot has no live image behind it
        # The retained image is still valid memory after it went unavailable.
        assert image.position == final
        assert threading.get_ident() not in threads
        assert subscription.image_count == 0
    assert image.is_closed  # released with its subscription


def test_end_of_stream_is_visible_on_a_retained_image(aeron_client):
    with aeron_client.add_subscription("aeron:ipc", 1008) as subscription:
        publication = aeron_client.add_exclusive_publication("aeron:ipc", 1008)
        image = await_image(subscription, publication.session_id)
        assert not image.is_end_of_stream
        assert image.end_of_stream_position == (1 << 63) - 1
        end = publication.offer_with_retry(b"bye")
        assert image.poll(lambda *_: None, 10) >= 0
        publication.close()
        wait_until(lambda: image.is_end_of_stream or image.poll(lambda *_: None, 10) < 0,
                   "end of stream")
        assert image.end_of_stream_position == end
        image.close()
        image.close()  # harmless twice


def test_subscription_images_listing(aeron_client):
    with aeron_client.add_subscription("aeron:ipc", 1009) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 1009) as first, \
            aeron_client.add_exclusive_publication("aeron:ipc", 1009) as second:
        wait_until(lambda: subscription.image_count == 2, "two images")
        images = subscription.images
        assert sorted(i.session_id for i in images) == sorted([first.session_id, second.session_id])
        assert subscription.image_by_session_id(12345) is None
        for image in images:
            image.close()
        assert "Image(" in repr(images[0]) and "closed" in repr(images[0])


def test_offer_codes_and_retry_timeout(aeron_client, free_udp_port):
    # A UDP publication with nobody subscribed is NOT_CONNECTED.
    with aeron_client.add_publication(f"aeron:udp?endpoint=localhost:{free_udp_port}", 1010) as lonely:
        assert not lonely.is_connected
        assert lonely.offer(b"x") == OfferResult.NOT_CONNECTED
        assert OfferResult.NOT_CONNECTED.is_retryable and not OfferResult.CLOSED.is_retryable
        with pytest.raises(Exception, match="timed out after 0.05s: still NOT_CONNECTED"):
            lonely.offer_with_retry(b"x", timeout=0.05)
