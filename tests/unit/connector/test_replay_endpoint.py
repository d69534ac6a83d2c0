"""connector/replay_endpoint.py: which channel each replay uses, and what the archive is told."""

import pytest

from aeron_spark.connector.replay_endpoint import ReplayEndpoints, needs_port_resolution, with_param
from aeron_spark.driver_integration.channel_uri import ChannelUri


class FakeSubscription:
    def __init__(self, channel: str, stream_id: int, bound_port: int) -> None:
        self.channel, self.stream_id, self._port = channel, stream_id, bound_port
        self.closed = False

    @property
    def is_closed(self) -> bool:
        return self.closed

    def await_resolved_channel(self, _timeout_s: float) -> str:
        return self.channel.replace(":0", f":{self._port}", 1)

    def close(self) -> None:
        self.closed = True


class FakeAeron:
    def __init__(self) -> None:
        self.subscriptions: list[FakeSubscription] = []

    def add_subscription(self, channel: str, stream_id: int) -> FakeSubscription:
        subscription = FakeSubscription(channel, stream_id, 40_000 + len(self.subscriptions))
        self.subscriptions.append(subscription)
        return subscription


def test_on_the_archive_driver_replays_use_ipc():
    endpoints = ReplayEndpoints(FakeAeron(), True, None, 5.0)
    receiver = endpoints.subscribe(None, 77, 9)
    assert receiver.told == receiver.subscription.channel == "aeron:ipc?session-id=9" and not receiver.over_udp


def test_elsewhere_each_replay_binds_its_own_port_and_the_archive_is_told_the_reachable_host():
    aeron = FakeAeron()
    endpoints = ReplayEndpoints(aeron, False, ("10.0.0.5", "0.0.0.0"), 5.0, share_udp_subscription=False)
    first, second = endpoints.subscribe(None, 77, 1), endpoints.subscribe(None, 77, 2)
    assert first.subscription.channel == "aeron:udp?endpoint=0.0.0.0:0|session-id=1"
    assert first.told == "aeron:udp?endpoint=10.0.0.5:40000|session-id=1" and first.over_udp
    assert second.told == "aeron:udp?endpoint=10.0.0.5:40001|session-id=2"
    assert endpoints.base_channel(None) == "aeron:udp?endpoint=0.0.0.0:0"


def test_a_configured_channel_is_used_as_given_except_a_port_0():
    endpoints = ReplayEndpoints(FakeAeron(), False, ("10.0.0.5", "10.0.0.5"), 5.0, share_udp_subscription=False)
    fixed = endpoints.subscribe("aeron:udp?endpoint=10.0.0.5:40500", 77, 3)
    assert fixed.told == fixed.subscription.channel == "aeron:udp?endpoint=10.0.0.5:40500|session-id=3"
    wildcard = endpoints.subscribe("aeron:udp?endpoint=localhost:0|term-length=64k", 77, 4)
    assert wildcard.told.startswith("aeron:udp?endpoint=10.0.0.5:40001") and "term-length=64k" in wildcard.told
    ipc = endpoints.subscribe("aeron:ipc?term-length=64k", 77, 5)
    assert ipc.told == "aeron:ipc?term-length=64k|session-id=5" and not ipc.over_udp


def test_channel_helpers():
    assert with_param("aeron:ipc", "session-id", "3") == "aeron:ipc?session-id=3"
    assert needs_port_resolution("aeron:udp?endpoint=h:0") and not needs_port_resolution("aeron:udp?endpoint=h:7")
    assert not needs_port_resolution("aeron:ipc")


RESPONSE = "aeron:udp?control-mode=response|control=archive-host:8011"


def test_a_client_on_a_response_channel_gets_its_replays_over_that_response_channel():
    aeron = FakeAeron()
    endpoints = ReplayEndpoints(aeron, False, ("10.0.0.5", "0.0.0.0"), 5.0, response_channel=RESPONSE)
    assert endpoints.base_channel(None) == RESPONSE
    receiver = endpoints.subscribe(None, 77, 9)
    # No session id (the driver matches the replay's session) and no port of this host is told.
    assert receiver.told == receiver.subscription.channel == RESPONSE
    assert receiver.response_mode and receiver.over_udp
    explicit = "aeron:udp?control-mode=response|control=archive-host:8012"
    assert endpoints.subscribe(explicit, 77, 9).told == explicit
    # On the archive's driver IPC still wins; other response channels are ignored.
    assert ReplayEndpoints(aeron, True, None, 5.0, response_channel=RESPONSE).base_channel(None) == "aeron:ipc"
    plain = ReplayEndpoints(aeron, False, ("10.0.0.5", "0.0.0.0"), 5.0, response_channel="aeron:udp?endpoint=h:1")
    assert plain.response_channel is None and not plain.subscribe(None, 77, 1).response_mode


def test_by_default_replays_share_one_subscription_and_port_each_with_its_own_session():
    aeron = FakeAeron()
    endpoints = ReplayEndpoints(aeron, False, ("10.0.0.5", "0.0.0.0"), 5.0)
    first, second = endpoints.subscribe(None, 77, 1), endpoints.subscribe(None, 77, 2)
    assert len(aeron.subscriptions) == 1  # bound once, no session-id: it receives every replay's session
    assert aeron.subscriptions[0].channel == "aeron:udp?endpoint=0.0.0.0:0"
    assert first.told == "aeron:udp?endpoint=10.0.0.5:40000|session-id=1" and first.over_udp
    assert second.told == "aeron:udp?endpoint=10.0.0.5:40000|session-id=2"
    first.subscription.close()  # a replay closes what it was lent: the shared one stays open
    assert not aeron.subscriptions[0].closed
    assert endpoints.subscribe(None, 78, 3).told == "aeron:udp?endpoint=10.0.0.5:40001|session-id=3"  # per stream


def test_a_shared_subscription_found_closed_is_bound_again():
    aeron = FakeAeron()
    endpoints = ReplayEndpoints(aeron, False, ("10.0.0.5", "0.0.0.0"), 5.0)
    endpoints.subscribe(None, 77, 1)
    aeron.subscriptions[0].closed = True  # e.g. the driver dropped it
    assert endpoints.subscribe(None, 77, 2).told == "aeron:udp?endpoint=10.0.0.5:40001|session-id=2"
    assert endpoints.shared is not None
    endpoints.shared.close()
    assert aeron.subscriptions[1].closed


def test_only_port_0_udp_replays_are_shared():
    aeron = FakeAeron()
    endpoints = ReplayEndpoints(aeron, False, ("10.0.0.5", "10.0.0.5"), 5.0)
    fixed = endpoints.subscribe("aeron:udp?endpoint=10.0.0.5:40500", 77, 3)
    assert fixed.told == fixed.subscription.channel == "aeron:udp?endpoint=10.0.0.5:40500|session-id=3"
    endpoints.subscribe(None, 77, 4), endpoints.subscribe(None, 77, 5)
    assert len(aeron.subscriptions) == 2  # the fixed port's, and one shared by the default channel's replays
    assert ReplayEndpoints(aeron, True, None, 5.0).subscribe(None, 77, 6).told == "aeron:ipc?session-id=6"


@pytest.mark.parametrize("shared", [True, False], ids=["shared-subscription", "own-subscription"])
def test_the_subscription_has_the_receive_window_and_the_archive_is_told_none(shared: bool) -> None:
    """``replay.receiveWindow`` (tests/unit/connector/test_replay_receive_window.py) on the subscription only."""
    aeron = FakeAeron()
    endpoints = ReplayEndpoints(aeron, shares_archive_driver=False, hosts=("127.0.0.1", "127.0.0.1"),  # type: ignore[arg-type]
                                timeout_s=1.0, share_udp_subscription=shared)
    receiver = endpoints.subscribe(None, 1977101, 99, 1 << 20)
    [subscribed] = [subscription.channel for subscription in aeron.subscriptions]
    assert ChannelUri.parse(subscribed).get("rcv-wnd") == str(1 << 20)
    told = ChannelUri.parse(receiver.told)
    assert told.get("endpoint") == "127.0.0.1:40000" and told.get("session-id") == "99"
    assert "rcv-wnd" not in told and "so-rcvbuf" not in told
