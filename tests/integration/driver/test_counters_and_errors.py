"""Counters shared between clients, error reporting and closed-resource behaviour."""

from __future__ import annotations

import struct

import pytest

from aeron_spark.driver_integration import AeronClient, AeronError, CounterState, ResourceClosedError

from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

TYPE_ID = 4242


def test_counter_written_by_one_client_is_read_by_another(aeron_client, new_aeron_client):
    key = struct.pack("<qi", 77, 5)
    writer = new_aeron_client(client_name="counter-writer")
    with writer.add_counter(TYPE_ID, key, "test counter: recording 77") as counter:
        counter.value = 123456789
        assert counter.value == 123456789
        reader = aeron_client.counters_reader
        counter_id = wait_until(lambda: reader.find_by_type_id_and_key_prefix(TYPE_ID, struct.pack("<q", 77)),
                                "the counter in another client")
        assert counter_id == counter.counter_id
        assert reader.value(counter_id) == 123456789
        counter.value = 42  # the cached address sees later writes
        assert reader.value(counter_id) == 42
        assert reader.type_id(counter_id) == TYPE_ID
        assert reader.key(counter_id) == key + bytes(112 - len(key))
        assert reader.label(counter_id) == "test counter: recording 77"
        assert reader.state(counter_id) is CounterState.ALLOCATED
        assert reader.registration_id(counter_id) == counter.registration_id
        assert reader.find(TYPE_ID, lambda k: k[8:12] == struct.pack("<i", 5)) == [counter_id]
        assert reader.find(TYPE_ID, lambda k: False) == []
        assert reader.find_by_type_id_and_key_prefix(TYPE_ID + 1, b"") is None
        assert reader.max_counter_id > counter_id
        assert not counter.is_closed
    assert counter.is_closed
    with pytest.raises(ResourceClosedError):
        counter.value  # noqa: B018
    wait_until(lambda: reader.state(counter_id) is not CounterState.ALLOCATED, "the counter freed")
    with pytest.raises(ValueError, match="out of range"):
        reader.value(reader.max_counter_id + 1)
    with pytest.raises(ValueError, match="at most 112"):
        aeron_client.add_counter(TYPE_ID, bytes(113), "too long a key")


def test_counter_columns_view_every_counter_with_numpy(aeron_client, new_aeron_client):
    writer = new_aeron_client(client_name="columns-writer")
    key = struct.pack("<qq", 901, 7)
    with writer.add_counter(TYPE_ID, key, "columns test") as counter:
        counter.value = 4096
        reader = aeron_client.counters_reader
        counter_id = wait_until(lambda: reader.find_by_type_id_and_key_prefix(TYPE_ID, key), "the counter")
        columns = reader.columns()
        assert columns.count == reader.max_counter_id + 1
        assert columns.values[counter_id] == 4096
        counter.value = 8192  # a view, not a copy
        assert columns.values[[counter_id]].tolist() == [8192]
        assert columns.registration_ids[counter_id] == counter.registration_id
        assert columns.states[counter_id] == CounterState.ALLOCATED
        assert columns.type_ids[counter_id] == TYPE_ID
        assert (columns.key_int64(0)[counter_id], columns.key_int64(8)[counter_id]) == (901, 7)
        assert reader.columns() is columns
        with pytest.raises(ValueError, match="read-only"):
            columns.values[counter_id] = 1
        with pytest.raises(ValueError, match="multiple of 8"):
            columns.key_int64(4)
    wait_until(lambda: columns.states[counter_id] != CounterState.ALLOCATED, "the counter freed")


def test_client_identity(aeron_client, new_aeron_client):
    other = new_aeron_client()
    assert other.client_id != aeron_client.client_id
    first = aeron_client.next_correlation_id()
    assert aeron_client.next_correlation_id() > first


def test_bad_channel_is_reported_with_aerons_text(aeron_client):
    with pytest.raises(AeronError) as caught:
        aeron_client.add_publication("aeron:udp?endpoint=", 1)
    assert caught.value.errmsg and "aeron:udp?endpoint=" in str(caught.value)
    with pytest.raises(AeronError, match="add_subscription"):
        aeron_client.add_subscription("not-a-channel", 1)


def test_closed_resources_raise_clear_errors(new_aeron_client):
    client = new_aeron_client()
    publication = client.add_exclusive_publication("aeron:ipc", 3001)
    subscription = client.add_subscription("aeron:ipc", 3001)
    image = wait_until(lambda: subscription.image_by_session_id(publication.session_id), "image")
    concurrent = client.add_publication("aeron:ipc", 3001)
    assert concurrent.uses_fast_offer
    concurrent.close()
    assert concurrent.is_closed
    with pytest.raises(ResourceClosedError, match="publication aeron:ipc stream 3001"):
        concurrent.offer(b"x")
    publication.close()
    publication.close()
    assert publication.is_closed and not publication.is_connected
    with pytest.raises(ResourceClosedError, match="exclusive publication aeron:ipc stream 3001"):
        publication.offer(b"x")
    with pytest.raises(ResourceClosedError):
        publication.append_padding(0)
    client.close()  # closes the subscription and releases the image too
    client.close()
    assert subscription.is_closed and image.is_closed
    with pytest.raises(ResourceClosedError, match="image session"):
        image.poll(lambda *_: None, 1)
    with pytest.raises(ResourceClosedError, match="subscription"):
        subscription.poll(lambda *_: None, 1)
    with pytest.raises(ResourceClosedError, match="Aeron client"):
        client.add_publication("aeron:ipc", 1)
    with pytest.raises(ResourceClosedError):
        client.counters_reader.value(0)
    with pytest.raises(ResourceClosedError):
        client.counters_reader.columns()


def test_handler_exceptions_surface_after_the_poll(aeron_client):
    with aeron_client.add_subscription("aeron:ipc", 3002) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 3002) as publication:
        image = wait_until(lambda: subscription.image_by_session_id(publication.session_id), "image")
        publication.offer_with_retry(b"one")
        end = publication.offer_with_retry(b"two")
        seen = []

        def failing(payload, header):
            seen.append(bytes(payload))
            raise RuntimeError("handler failed")

        with pytest.raises(RuntimeError, match="handler failed"):
            wait_until(lambda: image.poll(failing, 10), "a delivery")
        assert image.position == end or seen  # consumed, and every message was still delivered
        kept = []

        def keep_header(payload, header):
            kept.append(header)

        publication.offer_with_retry(b"three")
        wait_until(lambda: image.poll(keep_header, 10), "a delivery")
        with pytest.raises(AeronError, match="after its handler returned"):
            kept[0].position  # noqa: B018
        with pytest.raises(ZeroDivisionError):
            publication.offer_with_retry(b"four")
            wait_until(lambda: image.block_poll(lambda *_: 1 / 0, 1 << 16), "a block")
        image.close()


def test_connecting_to_a_missing_driver_times_out(tmp_path):
    with pytest.raises(AeronError, match="connect to the media driver"):
        AeronClient(str(tmp_path / "no-driver-here"), timeout=0.2)
