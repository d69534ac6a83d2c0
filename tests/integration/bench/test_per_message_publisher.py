"""The fair benchmark's per-message publisher (bench/per_message_publisher.py): the C loop and its
Python fallback publish the same messages, one offer each, and count back pressure."""

from __future__ import annotations

import struct
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.driver_streams import await_image, poll_messages

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))
import per_message_publisher  # noqa: E402 - bench/ is not a package
from per_message_publisher import OfferLoopUnavailable, PerMessagePublisher, build_offer_loop  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def expected_payload(index: int, size: int) -> bytes:
    pattern = bytearray((j * 7) & 0xFF for j in range(size))  # the Java bench client's payload
    if size >= 8:
        pattern[:8] = struct.pack("<q", index)
    return bytes(pattern)


@pytest.mark.parametrize("implementation", ["c", "python"])
@pytest.mark.parametrize("size", [32, 5, 1024])
def test_publishes_each_message_with_the_java_clients_payload(aeron_client, implementation, size):
    with aeron_client.add_subscription("aeron:ipc", 3101) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 3101) as publication:
        with await_image(subscription, publication.session_id):
            publisher = PerMessagePublisher(publication, size, implementation=implementation)
            assert publisher.implementation == implementation
            publisher.publish(200, time.monotonic() + 10)
            received = poll_messages(subscription, 200)
            assert publication.position == 200 * ((32 + size + 31) & ~31)
    assert [payload for payload, _ in received] == [expected_payload(i, size) for i in range(200)]


@pytest.mark.parametrize("implementation", ["c", "python"])
def test_counts_back_pressure_and_still_delivers_everything(aeron_client, implementation):
    messages = 20_000
    channel = "aeron:ipc?term-length=65536"  # a 32 KiB window: the publisher must wait for the reader
    with aeron_client.add_subscription(channel, 3102) as subscription, \
            aeron_client.add_exclusive_publication(channel, 3102) as publication:
        image = await_image(subscription, publication.session_id)
        end = messages * 128

        def read_slowly() -> None:  # 10 messages per 0.2 ms: slower than the publisher
            while image.position < end:
                image.poll(lambda *_: None, 10)
                time.sleep(0.0002)

        reader = threading.Thread(target=read_slowly)
        reader.start()
        publisher = PerMessagePublisher(publication, 96, implementation=implementation)
        publisher.publish(messages, time.monotonic() + 30)
        reader.join(30)
        assert not reader.is_alive()
        assert publication.position == end
        image.close()
    assert publisher.back_pressured > 0


def test_times_out_when_nobody_reads(aeron_client):
    with aeron_client.add_subscription("aeron:ipc?term-length=65536", 3103) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc?term-length=65536", 3103) as publication:
        with await_image(subscription, publication.session_id):
            publisher = PerMessagePublisher(publication, 1024)
            with pytest.raises(TimeoutError, match="back-pressured until the deadline"):
                publisher.publish(1_000, time.monotonic() + 0.2)


def test_without_a_compiler_the_build_fails_and_the_publisher_falls_back_to_python(
        tmp_path, monkeypatch, aeron_client):
    monkeypatch.setenv("CC", "/bin/false")
    with pytest.raises(OfferLoopUnavailable, match="failed"):
        build_offer_loop(cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())  # no partial build left behind

    def unavailable() -> object:
        raise OfferLoopUnavailable("no C compiler (cc, gcc or $CC) on PATH")

    monkeypatch.setattr(per_message_publisher, "_offer_loop_library", unavailable)
    with aeron_client.add_subscription("aeron:ipc", 3104) as subscription, \
            aeron_client.add_exclusive_publication("aeron:ipc", 3104) as publication:
        with await_image(subscription, publication.session_id):
            publisher = PerMessagePublisher(publication, 32)
            assert publisher.implementation == "python"
            assert publisher.fallback_reason == "no C compiler (cc, gcc or $CC) on PATH"
            publisher.publish(10, time.monotonic() + 10)
            assert [p for p, _ in poll_messages(subscription, 10)] == [expected_payload(i, 32) for i in range(10)]


def test_the_build_is_cached_by_the_sources_hash(tmp_path):
    first = build_offer_loop(cache_dir=tmp_path)
    built_at = first.stat().st_mtime_ns
    assert build_offer_loop(cache_dir=tmp_path) == first and first.stat().st_mtime_ns == built_at
