"""Shared fixtures: a real embedded Aeron media driver and clients on it, always closed.

* ``media_driver`` (session): one embedded C driver in a fresh /dev/shm directory.
* ``aeron_client`` (session): an AeronClient on that driver.
* ``new_aeron_client`` (function): a factory for extra clients, closed after the test.
* ``free_udp_port``: a localhost UDP port that was free a moment ago.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support import ports

if TYPE_CHECKING:
    from aeron_spark.driver_integration import AeronClient, MediaDriver


@pytest.fixture(scope="session")
def media_driver() -> Iterator[MediaDriver]:
    from aeron_spark.driver_integration import MediaDriver

    # Short linger: closed publications leave quickly, so lifecycle tests stay fast.
    driver = MediaDriver(threading_mode="shared", term_buffer_length=1024 * 1024,
                         ipc_term_buffer_length=1024 * 1024,
                         publication_linger_timeout_ns=100_000_000)
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture(scope="session")
def aeron_client(media_driver: MediaDriver) -> Iterator[AeronClient]:
    from aeron_spark.driver_integration import AeronClient

    client = AeronClient(media_driver.dir, client_name="pytest-session")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def new_aeron_client(media_driver: MediaDriver) -> Iterator[Callable[..., AeronClient]]:
    from aeron_spark.driver_integration import AeronClient

    made: list[AeronClient] = []

    def make(**kwargs: object) -> AeronClient:
        client = AeronClient(media_driver.dir, **kwargs)  # type: ignore[arg-type]
        made.append(client)
        return client

    try:
        yield make
    finally:
        for client in made:
            client.close()


@pytest.fixture
def free_udp_port() -> int:
    return ports.free_udp_port()
