"""``AeronClient.async_add_exclusive_publication``: the add without waiting that the archive's
conductor polls from its duty cycle (replay publications)."""

from __future__ import annotations

import time

import pytest

from aeron_spark.driver_integration import AeronError, InitialPosition
from aeron_spark.driver_integration.publication import PendingExclusivePublication

from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def answer(pending: PendingExclusivePublication, timeout_s: float = 20.0):
    """Polls as a duty cycle would, until the driver answered (the publication or its refusal)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        publication = pending.poll()
        if publication is not None:
            return publication
        time.sleep(0.0005)
    raise AssertionError(f"{pending!r} got no answer within {timeout_s} s")


def test_the_publication_arrives_through_polls_and_is_the_clients_own(aeron_client):
    pending = aeron_client.async_add_exclusive_publication(
        "aeron:ipc", 3101, initial_position=InitialPosition(4096, 7, 64 * 1024))
    publication = answer(pending)
    assert pending.is_done and pending.poll() is publication  # later polls hand back the same one
    assert (publication.stream_id, publication.initial_term_id, publication.position) == (3101, 7, 4096)
    with aeron_client.add_subscription("aeron:ipc", 3101) as subscription:
        image = wait_until(lambda: subscription.image_by_session_id(publication.session_id), "the image")
        end = publication.offer_with_retry(b"through an async add")
        received = []
        wait_until(lambda: image.poll(lambda payload, _header: received.append(bytes(payload)), 10), "a message")
        assert received == [b"through an async add"] and end > 4096
    publication.close()
    assert publication.is_closed


def test_a_channel_the_driver_refuses_raises_its_reason_on_poll_every_time(aeron_client):
    pending = aeron_client.async_add_exclusive_publication("aeron:udp?endpoint=localhost:99999", 3102)
    with pytest.raises(AeronError) as refused:
        answer(pending)
    assert "add_exclusive_publication('aeron:udp?endpoint=localhost:99999', 3102)" in str(refused.value)
    assert refused.value.errmsg  # the driver's own text
    assert pending.is_done
    with pytest.raises(AeronError) as again:
        pending.poll()
    assert again.value is refused.value


def test_a_closed_client_refuses_the_add_at_once(new_aeron_client):
    client = new_aeron_client()
    client.close()
    with pytest.raises(AeronError, match="Aeron client"):
        client.async_add_exclusive_publication("aeron:ipc", 3103)
