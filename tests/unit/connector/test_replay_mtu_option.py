"""``replay.mtu``: its parse, and the mtu a UDP replay asks the archive for (replay_endpoint)."""

import pytest

from aeron_spark.connector.options import CONNECTION_OPTION_SPECS, OptionError, parse_replay, parse_replay_mtu
from aeron_spark.connector.replay_endpoint import is_loopback_endpoint, replay_mtu_to_ask

LOOPBACK = "aeron:udp?endpoint=127.0.0.1:40125|session-id=9"
LAN = "aeron:udp?endpoint=10.0.0.7:40125|session-id=9"


def test_the_default_is_auto_as_the_spec_tells():
    [spec] = [spec for spec in CONNECTION_OPTION_SPECS if spec.name == "replay.mtu"]
    assert spec.default == "auto" == parse_replay({}).mtu


@pytest.mark.parametrize("text, parsed", [("auto", "auto"), ("AUTO", "auto"), ("recording", "recording"),
                                          ("8192", 8192), ("32", 32), ("65504", 65504)])
def test_accepted_values(text, parsed):
    assert parse_replay_mtu({"replay.mtu": text}) == parsed


@pytest.mark.parametrize("text", ["8100", "0", "65536", "-32", "8k", "large", ""])
def test_a_bad_value_names_the_option_and_what_it_accepts(text):
    with pytest.raises(OptionError, match=r"replay.mtu=.*accepted: auto \| recording \| an int: a multiple of 32"):
        parse_replay_mtu({"replay.mtu": text})


def test_auto_asks_the_largest_towards_loopback_only_within_the_term():
    assert replay_mtu_to_ask("auto", LOOPBACK, 1408, 16 << 20) == 65504
    assert replay_mtu_to_ask("auto", "aeron:udp?endpoint=localhost:40125", 1408, 1 << 20) == 65504
    assert replay_mtu_to_ask("auto", "aeron:udp?endpoint=[::1]:40125", 1408, 1 << 20) == 65504
    assert replay_mtu_to_ask("auto", LOOPBACK, 1408, 65536) == 8192  # term length / 8
    assert replay_mtu_to_ask("auto", LAN, 1408, 1 << 20) is None


def test_an_int_is_asked_on_any_udp_replay_capped_at_term_length_over_8():
    assert replay_mtu_to_ask(16384, LAN, 1408, 1 << 20) == 16384
    assert replay_mtu_to_ask(65504, LAN, 1408, 65536) == 8192


def test_nothing_is_asked_when_not_above_the_recordings_mtu_or_not_wanted():
    assert replay_mtu_to_ask(1408, LAN, 1408, 1 << 20) is None
    assert replay_mtu_to_ask("auto", LOOPBACK, 65504, 1 << 20) is None  # a recording at the largest keeps its own
    assert replay_mtu_to_ask("recording", LOOPBACK, 1408, 1 << 20) is None
    assert replay_mtu_to_ask(8192, "aeron:ipc?session-id=9", 1408, 1 << 20) is None
    assert replay_mtu_to_ask(16384, LOOPBACK + "|mtu=4096", 1408, 1 << 20) is None  # the channel's own mtu stays


@pytest.mark.parametrize("endpoint, loopback", [
    ("127.0.0.1:1", True), ("127.1.2.3:0", True), ("localhost:9", True), ("[::1]:5", True),
    ("192.168.1.4:5", False), ("[fe80::1]:5", False), ("myhost:5", False), (None, False)])
def test_is_loopback_endpoint(endpoint, loopback):
    assert is_loopback_endpoint(endpoint) is loopback
