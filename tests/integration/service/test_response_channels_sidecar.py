"""Response channels (``control-mode=response``) between our client and the sidecar, over UDP.

The client runs on a media driver of its own (another host's, in effect) and gives only the
archive's control channel and a response channel naming a port *of the archive's host*
(``control-mode=response|control=localhost:<port>``): every connection is opened by the client.
Control requests, listings, replays (ReplayToken + the replay request over a request publication
of its own) and bounded replays are checked byte for byte against what was recorded.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.driver_integration import AeronClient, MediaDriver

from tests.support.ports import free_udp_port
from tests.support.sidecar_streams import (
    TIMEOUT,
    drain_until,
    expected,
    ipc_archive,
    payloads,
    record_ipc,
)

@pytest.fixture
def client_host_aeron():
    with MediaDriver(threading_mode="shared") as driver:
        client = AeronClient(driver.dir, client_name="response-channel client")
        try:
            yield client
        finally:
            client.close()


def response_channel(port: int) -> str:
    return f"aeron:udp?control-mode=response|control=localhost:{port}"


def test_a_client_with_a_response_channel_connects_lists_and_replays_byte_exact(
        sidecar, local_aeron, client_host_aeron):
    recorder = ipc_archive(local_aeron)
    recording_id, published, _ = record_ipc(recorder, payloads(400, seed=11))
    responses = response_channel(free_udp_port())
    with ArchiveClient.connect(control_channel=sidecar.control_channel, response_channel=responses,
                               aeron=client_host_aeron, timeout=TIMEOUT) as archive:
        assert archive.response_channel == responses  # told as given: no session-id, no endpoint
        assert archive.archive_id == recorder.archive_id
        [descriptor] = archive.list_recordings()
        assert descriptor.recording_id == recording_id and descriptor.stop_position == published.end
        assert archive.stop_position(recording_id) == published.end

        replays = response_channel(free_udp_port())
        with archive.replay(recording_id, 0, published.end, replays, 2001) as replay:
            received = [(m.position, m.payload) for m in replay.messages(idle_timeout=TIMEOUT)]
        assert received == expected(published)

        # A second replay of part of the recording, on the same session, from a later position.
        middle = published.starts[len(published.starts) // 2]
        with archive.replay(recording_id, middle, published.end - middle, replays, 2002) as replay:
            received = [(m.position, m.payload) for m in replay.messages(idle_timeout=TIMEOUT)]
        assert received == expected(published, middle)
    recorder.close()
    # The replays went out on response publications (the request Image's correlation id named).
    replay_lines = [line for line in sidecar.stderr_lines
                    if "replay_requests: replay" in line and " from " in line and "control-mode=response" in line]
    assert len(replay_lines) == 2 and all("response-correlation-id=" in line for line in replay_lines), \
        sidecar.log_tail()


def test_a_bounded_replay_over_a_response_channel_stops_at_its_limit(sidecar, local_aeron):
    recorder = ipc_archive(local_aeron)
    recording_id, published, _ = record_ipc(recorder, payloads(200, seed=12))
    limit_position = published.starts[120]
    limit = local_aeron.add_counter(2001, b"", "response channel test limit")
    limit.value = limit_position
    # On the archive's driver (a limit counter the archive can read), over UDP response channels.
    with ArchiveClient.connect(control_channel=sidecar.control_channel,
                               response_channel=response_channel(free_udp_port()),
                               aeron=local_aeron, timeout=TIMEOUT) as archive:
        replays = response_channel(free_udp_port())
        subscription = local_aeron.add_subscription(replays, 2003)
        replay_session_id = archive.start_bounded_replay(
            recording_id, 0, published.end, limit.counter_id, replays, 2003,
            subscription_registration_id=subscription.registration_id)
        image = _await_image(subscription, replay_session_id)
        received: list = []
        drain_until(SimpleNamespace(image=image), received, 120, "bounded replay over a response channel")
        assert received == expected(published, 0, limit_position)
        image.close()
        subscription.close()
    limit.close()
    recorder.close()


def test_a_replay_token_is_refused_for_another_recording_and_needs_a_subscription(sidecar, local_aeron,
                                                                                   client_host_aeron):
    recorder = ipc_archive(local_aeron)
    recording_id, _published, _ = record_ipc(recorder, payloads(20, seed=13))
    with ArchiveClient.connect(control_channel=sidecar.control_channel,
                               response_channel=response_channel(free_udp_port()),
                               aeron=client_host_aeron, timeout=TIMEOUT) as archive:
        replays = response_channel(free_udp_port())
        with pytest.raises(ArchiveError, match="subscription_registration_id"):
            archive.start_replay(recording_id, 0, -1, replays, 2004)
        # A token issued for one recording does not open another: the archive answers ERROR.
        token = archive._call(lambda s, c: codecs.ReplayTokenRequest(s, c, recording_id))
        subscription = client_host_aeron.add_subscription(replays, 2004)
        publication = archive._transport.open_request_publication(subscription.registration_id)
        try:
            with pytest.raises(ArchiveError, match="Unknown session or token timeout"):
                archive._call(lambda s, c: codecs.ReplayRequest(
                    s, c, recording_id + 1, 0, -1, 2004, -1, token, replays), offer=publication.offer)
        finally:
            publication.close()
            subscription.close()
        assert archive.list_recording(recording_id) is not None  # the session goes on
    recorder.close()


def _await_image(subscription, replay_session_id: int):
    deadline = time.monotonic() + TIMEOUT
    while True:
        image = subscription.image_by_session_id(replay_image_session_id(replay_session_id))
        if image is not None:
            return image
        assert time.monotonic() < deadline, "no replay image over the response channel"
        time.sleep(0.002)


def test_the_connector_on_another_driver_reads_over_response_channels(sidecar, local_aeron):
    """``archive.responseChannel`` with ``control-mode=response``: the connector's replays use the
    same response channel (no port of this worker is told to the archive) and are byte-exact."""
    from aeron_spark.connector.options import parse_connection
    from aeron_spark.connector.source.archive_access import open_archive

    recorder = ipc_archive(local_aeron)
    recording_id, published, _ = record_ipc(recorder, payloads(300, seed=14))
    responses = response_channel(free_udp_port())
    with MediaDriver(threading_mode="shared") as other_host_driver:
        access = open_archive(parse_connection({"archive.controlChannel": sidecar.control_channel,
                                                "archive.responseChannel": responses,
                                                "aeron.dir": other_host_driver.dir}))
        reference = open_archive(parse_connection({"archive.dir": str(sidecar.archive_dir)}))
        try:
            assert not access.replay_endpoints.shares_archive_driver
            assert access.replay_endpoints.base_channel(None) == responses
            for start in (0, published.starts[100]):
                got = _replayed(access, recording_id, start, published.end)
                assert len(got) == published.end - start
                assert got == _replayed(reference, recording_id, start, published.end)
        finally:
            access.close()
            reference.close()
    recorder.close()
    told = [line for line in sidecar.stderr_lines if "replay_requests: replay" in line and " from " in line]
    assert len(told) == 4 and sum("control-mode=response" in line for line in told) == 2, sidecar.log_tail()


def _replayed(access, recording_id: int, start: int, end: int) -> bytes:
    """The frames of a connector replay of [start, end), session ids zeroed (each replay has its own)."""
    from aeron_spark.connector.options import parse_replay

    with access.replay(recording_id, start, end, parse_replay({})) as replay:
        return _without_session_ids(b"".join(block for _position, block in replay))


def _without_session_ids(frames: bytes) -> bytes:
    import struct

    out = bytearray(frames)
    offset = 0
    while offset + 32 <= len(out):
        length = struct.unpack_from("<i", out, offset)[0]
        if length <= 0:
            break
        out[offset + 12:offset + 16] = bytes(4)
        offset += (length + 31) & ~31
    return bytes(out)


def test_ipc_response_channels_on_the_archives_driver(sidecar, local_aeron):
    """``aeron:ipc?control-mode=response`` (Aeron 1.49+): control and a replay over IPC."""
    recorder = ipc_archive(local_aeron)
    recording_id, published, _ = record_ipc(recorder, payloads(100, seed=15))
    with ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11,
                               response_channel="aeron:ipc?control-mode=response",
                               aeron=local_aeron, timeout=TIMEOUT) as archive:
        assert [d.recording_id for d in archive.list_recordings()] == [recording_id]
        with archive.replay(recording_id, 0, published.end, "aeron:ipc?control-mode=response", 2005) as replay:
            received = [(m.position, m.payload) for m in replay.messages(idle_timeout=TIMEOUT)]
        assert received == expected(published)
    recorder.close()
