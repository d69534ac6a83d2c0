"""The values Aeron accepts for a channel's parameters, checked before a channel reaches the driver.

The media driver refuses a bad value only when the channel is added, with an error stack of its
own, and a subscription silently ignores publication-only parameters (``term-length=3`` on a
recording subscription is accepted and means nothing). An archive that records or replays on a
client's channel checks the values first so the client hears which parameter is wrong and why.

The rules are Aeron's (``ChannelUri`` / ``SystemUtil.parseSize`` / ``parseDuration`` and the log
buffer descriptor's checks). Parameters not listed here are left to the driver. Pure string
handling, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aeron_spark.driver_integration.channel_uri import (
    CONTROL,
    ENDPOINT,
    INITIAL_TERM_ID,
    LINGER,
    MAX_MTU,
    MIN_MTU,
    MTU,
    SESSION_ID,
    TAG_PREFIX,
    TERM_ID,
    TERM_LENGTH,
    TERM_OFFSET,
    ChannelUri,
    ChannelUriError,
)
from aeron_spark.driver_integration.frame import FRAME_ALIGNMENT

MIN_TERM_LENGTH = 64 * 1024
MAX_TERM_LENGTH = 1024 * 1024 * 1024
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_DURATION_UNITS = {"": 1, "ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_SIZE = re.compile(r"(\d{1,19})([kKmMgG]?)")
_DURATION = re.compile(r"(\d{1,19})(ns|us|ms|s)?", re.IGNORECASE)
_INTEGER = re.compile(r"-?\d{1,19}")
_ENDPOINT = re.compile(r"(?:\[[0-9A-Fa-f:.%\w]+\]|[^:\[\]]+):(\d{1,5})")
_BOOLEAN_PARAMS = ("reliable", "sparse", "tether", "rejoin", "group", "eos", "ssc")


def parse_size(name: str, text: str) -> int:
    """A size as Aeron writes it: digits with an optional k, m or g (binary) suffix."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ChannelUriError(f"{name}={text!r} is not a size (digits with an optional k, m or g suffix)")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if value > INT64_MAX:
        raise ChannelUriError(f"{name}={text!r} is too large")
    return value


def parse_duration_ns(name: str, text: str) -> int:
    """A duration as Aeron writes it: digits (nanoseconds) or digits with ns, us, ms or s."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ChannelUriError(f"{name}={text!r} is not a duration (digits with an optional ns, us, ms or s suffix)")
    value = int(match.group(1)) * _DURATION_UNITS[(match.group(2) or "").lower()]
    if value > INT64_MAX:
        raise ChannelUriError(f"{name}={text!r} is too long")
    return value


def _int32(name: str, text: str) -> int:
    if _INTEGER.fullmatch(text) is None or not INT32_MIN <= int(text) <= INT32_MAX:
        raise ChannelUriError(f"{name}={text!r} is not an int32 ({INT32_MIN}..{INT32_MAX})")
    return int(text)


def _check_term_length(name: str, text: str) -> None:
    value = parse_size(name, text)
    if not MIN_TERM_LENGTH <= value <= MAX_TERM_LENGTH or value & (value - 1):
        raise ChannelUriError(f"{name}={text!r} is not a power of two between {MIN_TERM_LENGTH} and {MAX_TERM_LENGTH}")


def _check_mtu(name: str, text: str) -> None:
    value = parse_size(name, text)
    if not MIN_MTU <= value <= MAX_MTU or value % FRAME_ALIGNMENT:
        raise ChannelUriError(f"{name}={text!r} is not a multiple of {FRAME_ALIGNMENT} between {MIN_MTU} and {MAX_MTU}")


def _check_term_offset(name: str, text: str) -> None:
    if _INTEGER.fullmatch(text) is None or not 0 <= int(text) <= MAX_TERM_LENGTH or int(text) % FRAME_ALIGNMENT:
        raise ChannelUriError(f"{name}={text!r} is not a multiple of {FRAME_ALIGNMENT} between 0 and {MAX_TERM_LENGTH}")


def _check_session_id(name: str, text: str) -> None:
    if text.startswith(TAG_PREFIX):
        if _INTEGER.fullmatch(text[len(TAG_PREFIX):]) is None:
            raise ChannelUriError(f"{name}={text!r} is not an int32 or tag:<number>")
        return
    _int32(name, text)


def _check_endpoint(name: str, text: str) -> None:
    match = _ENDPOINT.fullmatch(text)
    if match is None or int(match.group(1)) > 65535:
        raise ChannelUriError(f"{name}={text!r} is not <host>:<port> with a port 0..65535")


def _check_boolean(name: str, text: str) -> None:
    if text not in ("true", "false"):
        raise ChannelUriError(f"{name}={text!r} is not true or false")


def _check_ttl(name: str, text: str) -> None:
    if not text.isdigit() or int(text) > 255:
        raise ChannelUriError(f"{name}={text!r} is not a time-to-live 0..255")


def _check_buffer_size(name: str, text: str) -> None:
    if parse_size(name, text) <= 0:
        raise ChannelUriError(f"{name}={text!r} must be greater than 0")


_CHECKS: dict[str, Callable[[str, str], object]] = {
    TERM_LENGTH: _check_term_length,
    MTU: _check_mtu,
    INITIAL_TERM_ID: _int32,
    TERM_ID: _int32,
    TERM_OFFSET: _check_term_offset,
    SESSION_ID: _check_session_id,
    ENDPOINT: _check_endpoint,
    CONTROL: _check_endpoint,
    LINGER: parse_duration_ns,
    "ttl": _check_ttl,
    "so-sndbuf": _check_buffer_size,
    "so-rcvbuf": _check_buffer_size,
    "rcv-wnd": _check_buffer_size,
    "stream-id": _int32,
    **{name: _check_boolean for name in _BOOLEAN_PARAMS},
}


def check_channel_params(channel: ChannelUri) -> None:
    """Raises `ChannelUriError` naming the first parameter whose value Aeron would not accept."""
    for name, value in channel.params.items():
        check = _CHECKS.get(name)
        if check is not None:
            check(name, value)
    present = [name for name in (INITIAL_TERM_ID, TERM_ID, TERM_OFFSET) if name in channel]
    if present and len(present) != 3:
        raise ChannelUriError(f"{', '.join(present)} given without the others: Aeron needs "
                              f"{INITIAL_TERM_ID}, {TERM_ID} and {TERM_OFFSET} together")
