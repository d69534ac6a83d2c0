"""Replication is not served by our sidecar yet (an archive as a replication destination is its own
issue): each replicate request gets the one answer docs/interop.md lists for it, the session stays
usable, and nothing is recorded. Our sidecar as a replication SOURCE for the Java archive is proven in
tests/interop/modern."""

from __future__ import annotations

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode
from aeron_spark.driver_integration import AeronClient

from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.timeout(60)

SOURCE = "aeron:udp?endpoint=localhost:18010"


@pytest.mark.parametrize("request_name, factory", [
    ("ReplicateRequest", lambda s, c: codecs.ReplicateRequest(s, c, 0, -1, 10, SOURCE, "")),
    ("TaggedReplicateRequest", lambda s, c: codecs.TaggedReplicateRequest(s, c, 0, -1, -1, -1, 10, SOURCE, "")),
    ("ReplicateRequest2", lambda s, c: codecs.ReplicateRequest2(s, c, 0, -1, -1, -1, -1, 10, -1, -1, SOURCE, "",
                                                                 "", b"", "")),
])
def test_replicate_requests_are_refused_by_name(sidecar: Sidecar, local_aeron: AeronClient, request_name: str,
                                                factory) -> None:
    client = RawArchiveClient(local_aeron, sidecar.control_channel, 10)
    try:
        assert client.connect().code == ControlResponseCode.OK
        answer = client.call(factory)
        assert answer.code == ControlResponseCode.ERROR
        assert answer.relevant_id == ArchiveErrorCode.GENERIC
        assert answer.error_message == f"{request_name} is not supported by this archive"
        descriptors, _ = client.list_recordings()
        assert descriptors == []  # the session still answers; nothing was recorded
    finally:
        client.close()


def test_stop_replication_of_an_unknown_replication_is_unknown_replication(sidecar: Sidecar,
                                                                            local_aeron: AeronClient) -> None:
    client = RawArchiveClient(local_aeron, sidecar.control_channel, 10)
    try:
        assert client.connect().code == ControlResponseCode.OK
        answer = client.call(lambda s, c: codecs.StopReplicationRequest(s, c, 42))
        assert (answer.code, answer.relevant_id) == (ControlResponseCode.ERROR, ArchiveErrorCode.UNKNOWN_REPLICATION)
    finally:
        client.close()
