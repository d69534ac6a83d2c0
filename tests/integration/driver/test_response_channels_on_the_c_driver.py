"""Response channels (``control-mode=response``) on the embedded Aeron 1.53 C media driver: what
the archive's control sessions and replays over response channels stand on.

Two drivers (two hosts, in effect). The client subscribes to a response channel naming only the
*server's* port (``control=``), and its request publication names that subscription
(``response-correlation-id=<registration id>``). The server learns the request Image's
correlation id from the message header (``Header.image_correlation_id``) and publishes back with
``response-correlation-id=<that id>``: the responses arrive although the client bound nothing the
server was told of.
"""

from __future__ import annotations

import time

import pytest
from aeron_spark.driver_integration import AeronClient, MediaDriver

from tests.support.ports import free_udp_port

TIMEOUT = 10.0


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_a_response_publication_answers_over_the_connection_the_request_opened():
    with MediaDriver(threading_mode="shared") as server_driver, MediaDriver(threading_mode="shared") as client_driver:
        server, client = AeronClient(server_driver.dir), AeronClient(client_driver.dir)
        try:
            request_port, response_port = free_udp_port(), free_udp_port()
            requests = server.add_subscription(f"aeron:udp?endpoint=localhost:{request_port}", 10)
            responses = client.add_subscription(
                f"aeron:udp?control-mode=response|control=localhost:{response_port}", 20)
            request = client.add_exclusive_publication(
                f"aeron:udp?endpoint=localhost:{request_port}|response-correlation-id={responses.registration_id}", 10)
            wait_for(lambda: request.is_connected, "request publication connected")

            received: list[tuple[bytes, int, int]] = []

            def on_request(payload, header) -> None:
                received.append((bytes(payload), header.image_correlation_id, header.session_id))

            def poll_request() -> bool:
                request.offer(b"connect")
                requests.poll(on_request, 10)
                return bool(received)
            wait_for(poll_request, "request received")
            payload, image_correlation_id, session_id = received[0]
            [image] = requests.images
            assert payload == b"connect" and session_id == request.session_id
            assert image_correlation_id == image.correlation_id
            image.close()

            response = server.add_exclusive_publication(
                f"aeron:udp?control-mode=response|control=localhost:{response_port}"
                f"|response-correlation-id={image_correlation_id}", 20)
            wait_for(lambda: response.is_connected, "response publication connected")
            answers: list[bytes] = []

            def poll_response() -> bool:
                response.offer(b"answer")
                responses.poll(lambda p, h: answers.append(bytes(p)), 10)
                return bool(answers)
            wait_for(poll_response, "response received")
            assert answers[0] == b"answer"
            assert responses.images[0].session_id == response.session_id
        finally:
            client.close()
            server.close()


def test_a_response_publication_naming_an_unknown_image_is_refused():
    with MediaDriver(threading_mode="shared") as driver, AeronClient(driver.dir) as aeron:
        with pytest.raises(Exception, match="not found|response"):
            aeron.add_exclusive_publication(
                f"aeron:udp?control-mode=response|control=localhost:{free_udp_port()}"
                "|response-correlation-id=987654321", 20)
