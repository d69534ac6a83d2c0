"""``AeronClient.async_add_counter`` and ``PendingAdd.discard``: the adds without waiting that the
archive's conductor uses for a connect (its session's counter and response publication), and how an
add nobody wants any more is settled and closed (driver_integration/pending_adds.py)."""

from __future__ import annotations

import time

import pytest

from aeron_spark.driver_integration.pending_adds import PendingAdd

from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def answer(pending: PendingAdd, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        resource = pending.poll()
        if resource is not None:
            return resource
        time.sleep(0.0005)
    raise AssertionError(f"{pending!r} got no answer within {timeout_s} s")


def test_a_counter_arrives_through_polls_writable_and_visible_to_readers(aeron_client):
    pending = aeron_client.async_add_counter(4242, b"key-bytes", "an async counter")
    counter = answer(pending)
    assert pending.is_done and pending.poll() is counter
    counter.value = 77
    reader = aeron_client.counters_reader
    assert reader.find(4242, lambda key: key.startswith(b"key-bytes")) == [counter.counter_id]
    counter.close()


def test_a_discarded_add_is_settled_and_what_arrives_is_closed(aeron_client):
    with aeron_client.add_subscription("aeron:ipc", 3201) as subscription:
        pending = aeron_client.async_add_exclusive_publication("aeron:ipc", 3201)
        wait_until(pending.discard, "the discarded add to settle")
        assert pending.discard()  # settled: nothing more to do, however often asked
        wait_until(lambda: subscription.image_count == 0, "the publication that arrived to be closed", 15.0)
    counter_pending = aeron_client.async_add_counter(4243, b"", "discarded")
    wait_until(counter_pending.discard, "the discarded counter to settle")
    time.sleep(0.2)
    assert aeron_client.counters_reader.find(4243, lambda key: True) == []


def test_a_discarded_refused_add_settles_without_raising(aeron_client):
    pending = aeron_client.async_add_exclusive_publication("aeron:udp?endpoint=localhost:99999", 3202)
    wait_until(pending.discard, "the refused add to settle")


def test_a_subscription_added_without_waiting_knows_its_registration_id_at_once(aeron_client):
    pending = aeron_client.async_add_subscription("aeron:ipc", 3203)
    registration_id = pending.registration_id
    subscription = answer(pending)
    assert subscription.registration_id == registration_id
    subscription.close()
