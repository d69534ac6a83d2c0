"""Aeron channel URI parsing/building and the archive's derived channels."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_spark.driver_integration import channel_uri
from aeron_spark.driver_integration.channel_uri import (
    ChannelUri,
    ChannelUriError,
    recording_key,
    recording_subscription_channel,
    replay_channel,
    replay_mtu,
    spy_channel,
    strip_channel,
    with_initial_position,
)


# --- parse / build ---------------------------------------------------------------------------

def test_parse_udp_with_params():
    uri = ChannelUri.parse("aeron:udp?endpoint=localhost:40123|interface=192.168.1.0/24|control=h:1")
    assert uri.media == "udp" and uri.is_udp and not uri.is_ipc and not uri.is_spy
    assert uri.params == {
        "endpoint": "localhost:40123", "interface": "192.168.1.0/24", "control": "h:1"}
    assert uri.get("endpoint") == "localhost:40123"
    assert uri.get("mtu") is None and uri.get("mtu", "1408") == "1408"
    assert "interface" in uri and "ttl" not in uri


def test_parse_plain_ipc_and_spy():
    assert ChannelUri.parse("aeron:ipc").params == {}
    spy = ChannelUri.parse("aeron-spy:aeron:udp?endpoint=localhost:40123")
    assert spy.is_spy and spy.prefix == "aeron-spy" and spy.media == "udp"
    assert spy.build() == "aeron-spy:aeron:udp?endpoint=localhost:40123"


def test_values_may_contain_equals_signs_and_colons():
    uri = ChannelUri.parse("aeron:udp?alias=a=b|endpoint=[::1]:40123")
    assert uri.get("alias") == "a=b" and uri.get("endpoint") == "[::1]:40123"


def test_empty_value_is_allowed():
    assert ChannelUri.parse("aeron:ipc?alias=").get("alias") == ""


def test_repeated_key_keeps_last_value_in_first_position():
    uri = ChannelUri.parse("aeron:ipc?alias=a|term-length=64k|alias=b")
    assert uri.build() == "aeron:ipc?alias=b|term-length=64k"


def test_build_round_trips_exactly():
    text = "aeron:udp?endpoint=localhost:0|term-length=65536|mtu=8k|session-id=tag:7"
    assert str(ChannelUri.parse(text)) == text


def test_set_remove_and_copy():
    uri = ChannelUri.parse("aeron:udp?endpoint=h:1|mtu=1408")
    copy = uri.copy()
    assert uri.set("mtu", 8192).set("ttl", 4) is uri
    assert uri.build() == "aeron:udp?endpoint=h:1|mtu=8192|ttl=4"
    assert uri.remove("endpoint") == "h:1" and uri.remove("endpoint") is None
    assert uri.build() == "aeron:udp?mtu=8192|ttl=4"
    assert copy.build() == "aeron:udp?endpoint=h:1|mtu=1408"
    assert copy == ChannelUri("udp", {"endpoint": "h:1", "mtu": "1408"})


def test_set_rejects_values_that_would_break_the_uri():
    uri = ChannelUri.parse("aeron:ipc")
    with pytest.raises(ChannelUriError, match="cannot contain '|'"):
        uri.set("alias", "a|b")
    with pytest.raises(ChannelUriError, match="invalid channel param key"):
        uri.set("a=b", "1")
    with pytest.raises(ChannelUriError, match="invalid channel param key"):
        uri.set("", "1")


@pytest.mark.parametrize(
    ("uri", "complaint"),
    [
        ("udp?endpoint=h:1", "must start with 'aeron:'"),
        ("aeron-spy:udp", "must start with 'aeron:'"),
        ("aeron:", "unknown media ''"),
        ("aeron:tcp?endpoint=h:1", "unknown media 'tcp'"),
        ("aeron:udp:x?endpoint=h:1", "':' is not allowed in the media"),
        ("aeron:udp|x", "'|' is not allowed in the media"),
        ("aeron:udp?", "expected key=value after '?'"),
        ("aeron:udp?endpoint", "has no '='"),
        ("aeron:udp?endpoint=h:1|ttl", "param 'ttl' at index 23 has no '='"),
        ("aeron:udp?endpoint=h:1|", "a stray '|'"),
        ("aeron:udp?=h:1", "empty param key"),
        ("aeron:ipc?alias=" + "x" * 4090, "exceeds the maximum of 4095"),
    ],
)
def test_malformed_uris_name_the_uri_and_the_problem(uri, complaint):
    with pytest.raises(ChannelUriError, match=complaint) as raised:
        ChannelUri.parse(uri)
    assert isinstance(raised.value, ValueError)
    if len(uri) < 100:
        assert repr(uri) in str(raised.value)


def test_non_string_uri():
    with pytest.raises(ChannelUriError, match="must be a str"):
        ChannelUri.parse(None)


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
_values = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="|"),
    max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["udp", "ipc"]), st.dictionaries(_keys, _values, max_size=6), st.booleans())
def test_build_then_parse_is_identity(media, params, spy):
    uri = ChannelUri(media, params, spy=spy)
    assert ChannelUri.parse(uri.build()) == uri


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_parse_of_arbitrary_text_only_raises_channel_uri_error(text):
    for candidate in (text, "aeron:" + text, "aeron:udp?" + text):
        try:
            ChannelUri.parse(candidate)
        except ChannelUriError:
            pass


# --- stripped channel, recording key, spy ------------------------------------------------------

FULL = ("aeron-spy:aeron:udp?term-length=64k|endpoint=localhost:40123|mtu=1408|alias=rec"
        "|interface=eth0|linger=0|session-id=-77|tags=1,2|control=h:2|control-mode=dynamic"
        "|so-rcvbuf=128k|sparse=true|eos=false|rejoin=false|fc=min|cc=static|gtag=9"
        "|tether=true|group=true|rcv-wnd=64k|so-sndbuf=64k|ttl=8|stream-id=10"
        "|channel-snd-ts-offset=reserved|channel-rcv-ts-offset=0|media-rcv-ts-offset=8"
        "|response-correlation-id=12|response-endpoint=h:3|reliable=false|init-term-id=1")


def test_strip_channel_keeps_only_the_archive_params_in_builder_order():
    assert strip_channel(FULL) == (
        "aeron:udp?tags=1,2|endpoint=localhost:40123|interface=eth0|control=h:2"
        "|control-mode=dynamic|session-id=-77|ttl=8|alias=rec|cc=static|fc=min|gtag=9"
        "|tether=true|group=true|rejoin=false|so-sndbuf=64k|so-rcvbuf=128k|rcv-wnd=64k"
        "|media-rcv-ts-offset=8|channel-rcv-ts-offset=0|channel-snd-ts-offset=reserved"
        "|response-endpoint=h:3|response-correlation-id=12|stream-id=10")


def test_legacy_strip_channel_keeps_the_1_15_1_params():
    assert strip_channel(FULL, legacy=True) == (
        "aeron:udp?tags=1,2|endpoint=localhost:40123|interface=eth0|control=h:2"
        "|session-id=-77|alias=rec")


def test_strip_channel_of_plain_ipc():
    assert strip_channel("aeron:ipc?term-length=64k|mtu=8k") == "aeron:ipc"


def test_recording_key():
    assert recording_key(1001, FULL) == (
        "1001:udp?endpoint=localhost:40123|interface=eth0|control=h:2|session-id=-77|tags=1,2")
    assert recording_key(10, "aeron:ipc?term-length=64k") == "10:ipc"
    assert recording_key(10, "aeron:udp?alias=a|endpoint=h:1") == "10:udp?endpoint=h:1"
    # parameters outside the key do not make a different recording subscription
    assert recording_key(5, "aeron:udp?endpoint=h:1|mtu=1408") == recording_key(
        5, "aeron:udp?endpoint=h:1|alias=x")


def test_spy_channel():
    assert spy_channel("aeron:udp?endpoint=h:1") == "aeron-spy:aeron:udp?endpoint=h:1"
    assert spy_channel("aeron-spy:aeron:udp?endpoint=h:1") == "aeron-spy:aeron:udp?endpoint=h:1"


def test_recording_subscription_channel_spies_only_local_udp():
    udp = "aeron:udp?endpoint=h:1|mtu=1408"
    assert recording_subscription_channel(udp, local=True) == "aeron-spy:aeron:udp?endpoint=h:1"
    assert recording_subscription_channel(udp, local=False) == "aeron:udp?endpoint=h:1"
    assert recording_subscription_channel("aeron:ipc?alias=a", local=True) == "aeron:ipc?alias=a"


# --- initial position / replay channel ---------------------------------------------------------

def expected_term_id_and_offset(position: int, initial_term_id: int, term_length: int):
    """Computed inline (independently of driver_integration.position) from the spec: §5.2."""
    bits = term_length.bit_length() - 1
    term_id = ((((position >> bits) + initial_term_id) + (1 << 31)) % (1 << 32)) - (1 << 31)
    return term_id, position & (term_length - 1)


@pytest.mark.parametrize(
    ("position", "initial_term_id", "term_length"),
    [(0, 0, 65536), (65536 * 3 + 64, 5, 65536), (1 << 40, -100, 1 << 24),
     ((1 << 31) * 65536 - 32, 2_000_000_000, 65536)],
)
def test_with_initial_position(position, initial_term_id, term_length):
    term_id, term_offset = expected_term_id_and_offset(position, initial_term_id, term_length)
    result = ChannelUri.parse(with_initial_position(
        "aeron:udp?endpoint=h:1|term-length=1m", position, initial_term_id, term_length, 1408))
    assert result.params == {
        "endpoint": "h:1", "term-length": str(term_length), "mtu": "1408",
        "init-term-id": str(initial_term_id), "term-id": str(term_id),
        "term-offset": str(term_offset)}


def test_with_initial_position_without_mtu_leaves_mtu_alone():
    result = with_initial_position("aeron:ipc?mtu=8k", 0, 7, 65536)
    assert result == "aeron:ipc?mtu=8k|term-length=65536|init-term-id=7|term-id=7|term-offset=0"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ((-32, 0, 65536), "must be an int >= 0"),
        ((33, 0, 65536), "multiple of 32"),
        ((0, 0, 65537), "term length 65537 is invalid"),
        ((0, 0, 1 << 31), "term length .* is invalid"),
        ((0, 1 << 31, 65536), "does not fit int32"),
        ((0, 0, 65536, 1400), "mtu 1400 is invalid"),
        ((0, 0, 65536, 65536), "mtu 65536 is invalid"),
    ],
)
def test_with_initial_position_rejects_bad_values(args, complaint):
    with pytest.raises(ChannelUriError, match=complaint):
        with_initial_position("aeron:ipc", *args)


def test_replay_channel_matches_the_archive_rules():
    client = ("aeron:udp?endpoint=localhost:0|alias=replay|eos=false|sparse=true"
              "|term-length=1m|mtu=8k|init-term-id=99|foo=bar")
    assert replay_channel(client, 65536 + 96, -5, 65536, 1408, 5_000_000_000) == (
        "aeron:udp?endpoint=localhost:0|mtu=1408|term-length=65536|init-term-id=-5|term-id=-4"
        "|term-offset=96|linger=5000000000|alias=replay|sparse=true|eos=false")


def test_replay_channel_takes_a_requested_mtu_at_least_the_recordings():
    result = ChannelUri.parse(replay_channel(
        "aeron:udp?endpoint=localhost:0|mtu=8192", 0, 0, 65536, 1408, 5_000_000_000, requested_mtu=8192))
    assert result.get("mtu") == "8192" and result.get("term-length") == "65536"
    same = ChannelUri.parse(replay_channel("aeron:ipc", 0, 0, 65536, 1408, 1, requested_mtu=1408))
    assert same.get("mtu") == "1408"


def test_replay_mtu_rules():
    assert replay_mtu(8192, 1408, 65536) == 8192
    assert replay_mtu(65504, 1408, 1 << 20) == 65504
    with pytest.raises(ChannelUriError, match="smaller than the recording's mtu 1408"):
        replay_mtu(1024, 1408, 65536)
    with pytest.raises(ChannelUriError, match="term length 65536 / 8 = 8192"):
        replay_mtu(16384, 1408, 65536)
    for bad in (8200, 0, 65536):
        with pytest.raises(ChannelUriError, match="multiple of 32"):
            replay_mtu(bad, 1408, 1 << 20)


def test_replay_channel_keeps_the_client_linger_and_session_id():
    result = ChannelUri.parse(replay_channel(
        "aeron:ipc?linger=0|session-id=12", 0, 0, 65536, 1408, 5_000_000_000))
    assert result.get("linger") == "0" and result.get("session-id") == "12"
    assert "eos" not in result and "sparse" not in result


def test_is_tagged():
    assert channel_uri.is_tagged("tag:12") and not channel_uri.is_tagged("12")
