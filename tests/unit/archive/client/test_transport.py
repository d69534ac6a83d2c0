"""The response channel a client tells the archive: IPC narrowed to a session of its own."""

from __future__ import annotations

from aeron_spark.archive.client.transport import isolated_response_channel
from aeron_spark.driver_integration.channel_uri import ChannelUri


def test_ipc_response_channels_get_a_random_int32_session_id():
    told = {isolated_response_channel("aeron:ipc") for _ in range(50)}
    assert len(told) == 50  # one per client
    for channel in told:
        uri = ChannelUri.parse(channel)
        assert uri.is_ipc and -(1 << 31) <= int(uri.get("session-id")) < (1 << 31)


def test_other_params_are_kept_and_an_explicit_session_id_wins():
    uri = ChannelUri.parse(isolated_response_channel("aeron:ipc?term-length=65536"))
    assert uri.get("term-length") == "65536" and uri.get("session-id") is not None
    assert isolated_response_channel("aeron:ipc?session-id=7") == "aeron:ipc?session-id=7"


def test_udp_response_channels_are_unchanged():
    # Each UDP client has a port of its own already.
    assert isolated_response_channel("aeron:udp?endpoint=localhost:0") == "aeron:udp?endpoint=localhost:0"
