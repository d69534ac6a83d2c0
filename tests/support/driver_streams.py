"""Helpers for tests on the real media driver: wait for an image, offer a list of messages,
poll whole messages or blocks until enough arrived (bounded waits from ``waiting``)."""

from __future__ import annotations

from aeron_spark.driver_integration import Image, OfferResult, Subscription

from tests.support.waiting import wait_until


def await_image(subscription: Subscription, session_id: int) -> Image:
    return wait_until(lambda: subscription.image_by_session_id(session_id),  # type: ignore[return-value]
                      f"image of session {session_id} on {subscription.channel}")


def offer_all(publication, payloads: list[bytes], **kwargs: object) -> list[int]:
    return [publication.offer_with_retry(payload, **kwargs) for payload in payloads]


def poll_messages(poller, count: int) -> list[tuple[bytes, object]]:
    """``count`` whole messages from ``poller.poll`` as (payload copy, header snapshot)."""
    received: list[tuple[bytes, object]] = []

    def handler(payload, header) -> None:
        received.append((bytes(payload), header.snapshot()))

    wait_until(lambda: poller.poll(handler, 100) >= 0 and len(received) >= count,
               f"{count} messages (got {len(received)})")
    return received


def block_poll_bytes(image: Image, until_position: int, limit: int = 1 << 20) -> list[tuple[bytes, int, int, int]]:
    """Blocks (copied) from ``image.block_poll`` until the image reaches ``until_position``."""
    blocks: list[tuple[bytes, int, int, int]] = []

    def handler(block, position, session_id, term_id) -> None:
        blocks.append((bytes(block), position, session_id, term_id))

    wait_until(lambda: image.block_poll(handler, limit) >= 0 and image.position >= until_position,
               f"image position {until_position}")
    return blocks


RETRYABLE = {OfferResult.NOT_CONNECTED, OfferResult.BACK_PRESSURED, OfferResult.ADMIN_ACTION}
