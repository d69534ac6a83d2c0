"""A lost media driver is reported through the client's error handler, never by exiting.

Aeron's default C error handler calls exit(); the sidecar and Spark workers must survive a
driver that goes away and report it instead.
"""

from __future__ import annotations

import time

from aeron_spark.driver_integration import AeronClient, MediaDriver


def test_short_request_timeout_does_not_shorten_the_driver_timeout(media_driver):
    with AeronClient(media_driver.dir, timeout=0.3) as client:
        time.sleep(1.5)  # well past the request timeout: the client must still be healthy
        assert client.last_async_error is None
        assert client.next_correlation_id() > 0


def test_driver_gone_is_reported_to_the_error_handler_and_the_process_lives():
    driver = MediaDriver(threading_mode="shared")
    client = AeronClient(driver.dir, driver_timeout=1.0)
    try:
        driver.close()
        deadline = time.monotonic() + 10.0
        while client.last_async_error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.last_async_error is not None
        errcode, message = client.last_async_error
        assert message
    finally:
        client.close()
        driver.close()
