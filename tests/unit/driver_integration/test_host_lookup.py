"""host_lookup: which channel hosts are looked up off the driver, how the channel is rewritten, and
how the pending add behaves around the lookup (issue 33)."""

from __future__ import annotations

import time

import pytest
from aeron_spark.driver_integration.errors import AeronError
from aeron_spark.driver_integration.host_lookup import PendingAfterLookup, host_names, with_addresses


@pytest.mark.parametrize(("channel", "names"), [
    ("aeron:ipc", []),
    ("aeron:udp?endpoint=127.0.0.1:40123", []),
    ("aeron:udp?endpoint=[::1]:40123", []),
    ("aeron:udp?endpoint=localhost:40123", ["localhost"]),
    ("aeron:udp?control-mode=response|control=archive.example:8010", ["archive.example"]),
    ("aeron:udp?endpoint=a.example:1|control=b.example:2", ["a.example", "b.example"]),
    ("aeron:udp?endpoint=a.example:1|control=a.example:2", ["a.example"]),
    ("aeron:udp?endpoint=no-port", []),  # the driver refuses it itself
    ("not a channel", []),
])
def test_only_udp_host_names_are_looked_up(channel: str, names: list[str]) -> None:
    assert host_names(channel) == names


def test_the_looked_up_address_replaces_the_name_and_keeps_the_port_and_other_params() -> None:
    rewritten = with_addresses("aeron:udp?endpoint=a.example:40123|term-length=64k|control=b.example:8010",
                               {"a.example": "10.0.0.7", "b.example": "[fd00::1]"})
    assert rewritten == "aeron:udp?endpoint=10.0.0.7:40123|term-length=64k|control=[fd00::1]:8010"


class FakeAdd:
    is_done = True

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.discarded = False

    def poll(self) -> str:
        return f"publication on {self.channel}"

    def discard(self) -> bool:
        self.discarded = True
        return True


def settle(pending: PendingAfterLookup[str], seconds: float = 10.0) -> str:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        result = pending.poll()
        if result is not None:
            return result
        time.sleep(0.01)
    raise AssertionError(f"{pending} did not settle")


def test_the_add_is_made_with_the_address_once_the_name_resolved() -> None:
    started: list[FakeAdd] = []

    def start(channel: str) -> FakeAdd:
        started.append(FakeAdd(channel))
        return started[-1]

    pending: PendingAfterLookup[str] = PendingAfterLookup(
        "aeron:udp?endpoint=localhost:40123", ["localhost"], start, "add(localhost)", 10.0)
    assert settle(pending) == "publication on aeron:udp?endpoint=127.0.0.1:40123"
    assert len(started) == 1
    assert pending.discard() and started[0].discarded


def test_a_name_that_does_not_resolve_fails_the_add_naming_host_and_channel_and_nothing_is_added() -> None:
    started: list[str] = []
    channel = "aeron:udp?endpoint=no-such-host.invalid:40123"
    pending: PendingAfterLookup[str] = PendingAfterLookup(
        channel, ["no-such-host.invalid"], lambda c: started.append(c) or FakeAdd(c), "add", 30.0)
    with pytest.raises(AeronError, match=r"cannot resolve host 'no-such-host.invalid' of channel"):
        settle(pending, 30.0)
    with pytest.raises(AeronError):  # the failure stays
        pending.poll()
    assert started == [] and pending.discard()
