"""The response channel a client tells the archive: IPC narrowed to a session of its own."""

from __future__ import annotations

from aeron_spark.archive.client.transport import (
    is_response_channel,
    isolated_response_channel,
    response_request_channel,
)
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


def test_response_channels_are_told_as_given():
    # The media driver matches a response channel's session: no session id of the client's own.
    for channel in ("aeron:ipc?control-mode=response", "aeron:udp?control-mode=response|control=h:8011"):
        assert isolated_response_channel(channel) == channel
        assert is_response_channel(channel)
    assert not is_response_channel("aeron:udp?endpoint=h:0") and not is_response_channel("aeron:ipc")


def test_a_request_channel_for_responses_names_the_subscription_and_no_session():
    channel = response_request_channel("aeron:udp?endpoint=archive:8010|session-id=5|term-id=3|init-term-id=3"
                                       "|term-offset=0|mtu=1408", 42, 65536)
    uri = ChannelUri.parse(channel)
    assert uri.get("response-correlation-id") == "42" and uri.get("term-length") == "65536"
    assert uri.get("mtu") == "1408" and uri.get("endpoint") == "archive:8010"
    for gone in ("session-id", "term-id", "init-term-id", "term-offset"):
        assert uri.get(gone) is None
    assert response_request_channel("aeron:ipc", 7) == "aeron:ipc?response-correlation-id=7"
