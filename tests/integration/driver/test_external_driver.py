"""A client in this process attached to a media driver running in another process, and an
embedded driver owned by its client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from aeron_spark.driver_integration import AeronClient, MediaDriver

from tests.support.driver_streams import await_image, offer_all, poll_messages
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def test_client_attaches_to_a_driver_in_another_process(tmp_path):
    aeron_dir = str(tmp_path / "external-driver")
    driver = subprocess.Popen(
        [sys.executable, "-m", "aeron_spark.driver_integration.media_driver", "--dir", aeron_dir],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert driver.stdout is not None
        assert driver.stdout.readline().strip() == aeron_dir  # printed once the driver runs
        with AeronClient(aeron_dir, client_name="attached") as client:
            with client.add_subscription("aeron:ipc", 4001) as subscription, \
                    client.add_publication("aeron:ipc", 4001) as publication:
                await_image(subscription, publication.session_id).close()
                offer_all(publication, [b"across", b"processes"])
                assert [p for p, _ in poll_messages(subscription, 2)] == [b"across", b"processes"]
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=20) == 0
        assert not os.path.exists(aeron_dir)  # dir_delete_on_shutdown
    finally:
        if driver.poll() is None:
            os.kill(driver.pid, signal.SIGKILL)
            driver.wait(timeout=10)


def test_with_embedded_driver_owns_and_stops_the_driver():
    client = AeronClient.with_embedded_driver(client_name="owner", ipc_term_buffer_length=64 * 1024)
    try:
        driver = client.driver
        assert isinstance(driver, MediaDriver) and os.path.isdir(driver.dir)
        with client.add_exclusive_publication("aeron:ipc", 4002) as publication:
            assert publication.term_buffer_length == 64 * 1024
    finally:
        client.close()
    assert driver.is_closed and not os.path.exists(driver.dir)
    driver.close()  # harmless twice


def test_media_driver_applies_options_and_removes_its_directory(free_udp_port):
    with MediaDriver(ipc_term_buffer_length=128 * 1024, ipc_mtu_length=4096, mtu_length=2048,
                     term_buffer_sparse_file=True,
                     spies_simulate_connection=True, client_liveness_timeout_ns=5_000_000_000,
                     image_liveness_timeout_ns=5_000_000_000, driver_timeout_ms=5_000,
                     publication_linger_timeout_ns=100_000_000) as driver:
        assert driver.dir.startswith("/dev/shm/") or not os.path.isdir("/dev/shm")
        assert "running" in repr(driver)
        with AeronClient(driver.dir) as client, client.add_publication("aeron:ipc", 4003) as publication:
            assert publication.term_buffer_length == 128 * 1024 and publication.mtu_length == 4096
        with AeronClient(driver.dir) as client, client.add_publication(
                f"aeron:udp?endpoint=localhost:{free_udp_port}", 4003) as udp:
            assert udp.mtu_length == 2048
        driver.ensure_open()
    assert not os.path.exists(driver.dir)
    with pytest.raises(Exception, match="media driver .* is closed"):
        driver.ensure_open()


def test_spies_simulate_connection_lets_a_udp_publication_connect_to_a_spy(free_udp_port):
    with MediaDriver(spies_simulate_connection=True, dir_delete_on_start=True) as driver, \
            AeronClient(driver.dir) as client:
        channel = f"aeron:udp?endpoint=localhost:{free_udp_port}"
        with client.add_subscription(f"aeron-spy:{channel}", 4004) as spy, \
                client.add_publication(channel, 4004) as publication:
            wait_until(lambda: publication.is_connected, "a connection through the spy alone")
            await_image(spy, publication.session_id).close()
