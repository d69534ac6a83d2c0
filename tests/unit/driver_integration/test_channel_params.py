"""driver_integration.channel_params: the values Aeron accepts, checked before the driver sees them."""

from __future__ import annotations

import pytest

from aeron_spark.driver_integration.channel_params import check_channel_params, parse_duration_ns, parse_size
from aeron_spark.driver_integration.channel_uri import ChannelUriError, parse


@pytest.mark.parametrize("channel", [
    "aeron:ipc",
    "aeron:udp?endpoint=localhost:40123",
    "aeron:udp?endpoint=[::1]:0|interface=192.168.0.0/24",
    "aeron:udp?endpoint=localhost:40123|term-length=64k|mtu=8k|ttl=16|linger=5ms|sparse=true",
    "aeron:ipc?term-length=1g|mtu=1408|session-id=-7|alias=x",
    "aeron:udp?control=host:40001|control-mode=dynamic|session-id=tag:12",
    "aeron:ipc?init-term-id=-5|term-id=3|term-offset=1024|term-length=65536",
    "aeron:udp?endpoint=h:1|so-rcvbuf=2m|rcv-wnd=128k|reliable=false|tether=true",
])
def test_channels_aeron_accepts_pass(channel):
    check_channel_params(parse(channel))


@pytest.mark.parametrize("channel, named", [
    ("aeron:ipc?term-length=3", "term-length='3' is not a power of two"),
    ("aeron:ipc?term-length=96k", "term-length='96k' is not a power of two"),
    ("aeron:ipc?term-length=2g", "term-length='2g' is not a power of two"),
    ("aeron:ipc?term-length=x", "term-length='x' is not a size"),
    ("aeron:ipc?mtu=7", "mtu='7' is not a multiple of 32"),
    ("aeron:ipc?mtu=64k", "mtu='64k' is not a multiple of 32 between 32 and 65504"),
    ("aeron:ipc?init-term-id=x|term-id=1|term-offset=0", "init-term-id='x' is not an int32"),
    ("aeron:ipc?init-term-id=1|term-id=1|term-offset=33", "term-offset='33' is not a multiple of 32"),
    ("aeron:ipc?init-term-id=1", "init-term-id given without the others"),
    ("aeron:ipc?session-id=99999999999", "session-id='99999999999' is not an int32"),
    ("aeron:ipc?session-id=tag:x", "session-id='tag:x' is not an int32 or tag:<number>"),
    ("aeron:udp?endpoint=localhost:-1", "endpoint='localhost:-1' is not <host>:<port>"),
    ("aeron:udp?endpoint=localhost:70000", "endpoint='localhost:70000' is not <host>:<port>"),
    ("aeron:udp?endpoint=:", "endpoint=':' is not <host>:<port>"),
    ("aeron:udp?control=nohostport", "control='nohostport' is not <host>:<port>"),
    ("aeron:udp?endpoint=h:1|ttl=256", "ttl='256' is not a time-to-live"),
    ("aeron:udp?endpoint=h:1|sparse=yes", "sparse='yes' is not true or false"),
    ("aeron:udp?endpoint=h:1|linger=5 minutes", "linger='5 minutes' is not a duration"),
    ("aeron:udp?endpoint=h:1|so-sndbuf=0", "so-sndbuf='0' must be greater than 0"),
])
def test_a_bad_value_is_refused_naming_the_parameter(channel, named):
    with pytest.raises(ChannelUriError, match=named.replace("[", r"\[").replace("?", r"\?")):
        check_channel_params(parse(channel))


def test_sizes_and_durations_read_as_aeron_writes_them():
    assert parse_size("x", "64k") == 65536 and parse_size("x", "1M") == 1 << 20 and parse_size("x", "12") == 12
    assert parse_duration_ns("x", "5ms") == 5_000_000 and parse_duration_ns("x", "7") == 7
    assert parse_duration_ns("x", "2s") == 2_000_000_000 and parse_duration_ns("x", "3us") == 3_000
