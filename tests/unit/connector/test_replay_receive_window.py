"""``replay.receiveWindow``: its parse and the window a UDP replay subscription gets (replay_endpoint;
that the archive is never told it: tests/unit/connector/test_replay_endpoint.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeron_spark.connector.options import CONNECTION_OPTION_SPECS, OptionError, parse_replay
from aeron_spark.connector.replay_endpoint import (
    loopback_receive_window,
    receive_window_for,
    with_receive_window,
    without_receive_window,
)
from aeron_spark.driver_integration.channel_uri import ChannelUri


@pytest.fixture
def rmem_max(tmp_path: Path) -> str:
    path = tmp_path / "rmem_max"
    path.write_text("4194304\n")
    return str(path)


def test_the_default_is_auto_as_the_spec_tells() -> None:
    [spec] = [spec for spec in CONNECTION_OPTION_SPECS if spec.name == "replay.receiveWindow"]
    assert spec.default == "auto" == parse_replay({}).receive_window


@pytest.mark.parametrize("text, parsed", [("auto", "auto"), ("AUTO", "auto"), ("none", "none"), ("2m", 2 << 20),
                                          ("4k", 4096), ("1048576", 1 << 20)])
def test_accepted_values(text: str, parsed: int | str) -> None:
    assert parse_replay({"replay.receiveWindow": text}).receive_window == parsed


@pytest.mark.parametrize("text", ["1k", "0", "-1", "big", "", "2q"])
def test_a_bad_value_names_the_option_and_what_it_accepts(text: str) -> None:
    with pytest.raises(OptionError, match=r"replay.receiveWindow=.*accepted: auto \| none \| a size"):
        parse_replay({"replay.receiveWindow": text})


@pytest.mark.parametrize("setting, channel, window", [
    ("auto", "aeron:udp?endpoint=127.0.0.1:0", 2 << 20),  # a loopback replay: this host's rmem_max is known
    ("auto", "aeron:udp?endpoint=localhost:0", 2 << 20),
    ("auto", "aeron:udp?endpoint=10.1.2.3:0", None),  # another address: the driver's default
    ("none", "aeron:udp?endpoint=127.0.0.1:0", None),
    (1 << 20, "aeron:udp?endpoint=10.1.2.3:0", 1 << 20),
    (1 << 20, "aeron:udp?endpoint=127.0.0.1:0|rcv-wnd=64k", None),  # the channel's own setting wins
    ("auto", "aeron:udp?endpoint=127.0.0.1:0|so-rcvbuf=1m", None),
    (1 << 20, "aeron:ipc", None),
])
def test_the_window_a_replay_subscription_gets(setting: int | str, channel: str, window: int | None,
                                              rmem_max: str) -> None:
    assert receive_window_for(setting, channel, rmem_max) == window


def test_auto_stays_within_rmem_max(tmp_path: Path) -> None:
    small = tmp_path / "rmem_max"
    small.write_text("212992\n")
    assert loopback_receive_window("aeron:udp?endpoint=127.0.0.1:0", str(small)) == 212992
    assert loopback_receive_window("aeron:udp?endpoint=127.0.0.1:0", str(tmp_path / "missing")) is None


def test_the_window_is_added_and_removed_as_channel_params() -> None:
    channel = with_receive_window("aeron:udp?endpoint=127.0.0.1:0", 2 << 20)
    assert ChannelUri.parse(channel).get("rcv-wnd") == ChannelUri.parse(channel).get("so-rcvbuf") == str(2 << 20)
    assert with_receive_window("aeron:udp?endpoint=127.0.0.1:0", None) == "aeron:udp?endpoint=127.0.0.1:0"
    told = without_receive_window(channel + "|session-id=7")
    assert ChannelUri.parse(told).get("session-id") == "7"
    assert "rcv-wnd" not in ChannelUri.parse(told) and "so-rcvbuf" not in ChannelUri.parse(told)
