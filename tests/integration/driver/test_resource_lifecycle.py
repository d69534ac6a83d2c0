"""Every driver resource is a context manager whose second close is harmless; images report their
source identity (``aeron:ipc``, the UDP sender's address) and join position."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from aeron_spark.driver_integration import AeronClient, MediaDriver
from aeron_spark.driver_integration.errors import ResourceClosedError

pytestmark = pytest.mark.timeout(120)


def test_every_resource_is_a_context_manager_and_closing_twice_is_harmless(tmp_path: Path):
    with MediaDriver(dir_delete_on_start=True) as driver:
        driver_dir = driver.dir
        with AeronClient(driver.dir, client_name="acceptance-resources") as client:
            with client.add_subscription("aeron:ipc", 4001) as subscription, \
                    client.add_exclusive_publication("aeron:ipc", 4001) as exclusive, \
                    client.add_publication("aeron:ipc", 4002) as concurrent, \
                    client.add_counter(4003, b"k", "acceptance counter") as counter:
                deadline = time.monotonic() + 10
                while (image := subscription.image_by_session_id(exclusive.session_id)) is None:
                    assert time.monotonic() < deadline, "no image"
                    time.sleep(0.002)
                with image:
                    assert image.source_identity == "aeron:ipc"
                    assert image.join_position == 0
                assert image.is_closed
                image.close()
                counter.value = 7
            for resource in (subscription, exclusive, concurrent, counter):
                assert resource.is_closed
                resource.close()  # a second close does nothing
            with pytest.raises(ResourceClosedError):
                exclusive.offer(b"after close")
        assert client.is_closed
        client.close()
    assert not os.path.exists(driver_dir)  # the embedded driver removed its directory
    driver.close()


def test_udp_image_reports_its_source_identity_and_join_position(aeron_client: AeronClient, free_udp_port: int):
    """The image of a UDP stream names the publisher's address as its source identity."""
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port}"
    with aeron_client.add_exclusive_publication(channel, 4010) as publication:
        with aeron_client.add_subscription(channel, 4010) as first:
            deadline = time.monotonic() + 10
            while not publication.is_connected:
                assert time.monotonic() < deadline
                time.sleep(0.002)
            for index in range(10):
                publication.offer_with_retry(b"early message %d" % index, timeout=10)
            while first.image_by_session_id(publication.session_id) is None:
                time.sleep(0.002)
            first_image = first.image_by_session_id(publication.session_id)
            assert re.fullmatch(r"127\.0\.0\.1:\d+", first_image.source_identity), first_image.source_identity
            assert first_image.join_position == 0
            first_image.close()
