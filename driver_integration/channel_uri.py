"""Aeron channel URIs: parse, build, edit params; the archive's stripped channel and recording key.

Grammar (as Aeron's ``ChannelUri.parse``)::

    [aeron-spy:]aeron:<media>[?<key>=<value>[|<key>=<value>]...]

``media`` is ``udp`` or ``ipc``. Values run to the next ``|`` and may contain ``=``; a repeated
key keeps its first position and its last value. Pure string handling, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from aeron_spark.driver_integration.frame import FRAME_ALIGNMENT
from aeron_spark.driver_integration.position import (
    compute_term_id_from_position,
    compute_term_offset_from_position,
    position_bits_to_shift,
)

AERON_SCHEME = "aeron"
AERON_PREFIX = "aeron:"
SPY_QUALIFIER = "aeron-spy"
SPY_PREFIX = "aeron-spy:"
UDP_MEDIA = "udp"
IPC_MEDIA = "ipc"
MEDIA_TYPES = (UDP_MEDIA, IPC_MEDIA)
#: Aeron's ChannelUri.MAX_URI_LENGTH.
MAX_URI_LENGTH = 4095
TAG_PREFIX = "tag:"
MIN_MTU = 32
MAX_MTU = 65504

ENDPOINT = "endpoint"
INTERFACE = "interface"
CONTROL = "control"
CONTROL_MODE = "control-mode"
SESSION_ID = "session-id"
TAGS = "tags"
ALIAS = "alias"
MTU = "mtu"
TERM_LENGTH = "term-length"
INITIAL_TERM_ID = "init-term-id"
TERM_ID = "term-id"
TERM_OFFSET = "term-offset"
LINGER = "linger"
EOS = "eos"
SPARSE = "sparse"

#: What the modern archive keeps of a channel (ArchiveConductor.strippedChannelBuilder).
STRIPPED_PARAMS: frozenset[str] = frozenset({
    ENDPOINT, INTERFACE, CONTROL, CONTROL_MODE, TAGS, "rejoin", "group", "tether", "fc", "gtag",
    "cc", "so-rcvbuf", "so-sndbuf", "rcv-wnd", "channel-snd-ts-offset", "channel-rcv-ts-offset",
    "media-rcv-ts-offset", SESSION_ID, ALIAS, "response-correlation-id", "response-endpoint",
    "ttl", "stream-id",
})
#: What the 1.15.1 archive kept.
LEGACY_STRIPPED_PARAMS: frozenset[str] = frozenset(
    {ENDPOINT, INTERFACE, CONTROL, TAGS, ALIAS, SESSION_ID})
#: Params of the recording subscription key, in key order.
RECORDING_KEY_PARAMS: tuple[str, ...] = (ENDPOINT, INTERFACE, CONTROL, SESSION_ID, TAGS)

# The order in which Aeron's ChannelUriStringBuilder.build() writes params; the channels the
# archive derives (stripped, replay) are written in this order so they read like Java's.
_BUILDER_ORDER: tuple[str, ...] = (
    TAGS, ENDPOINT, INTERFACE, CONTROL, CONTROL_MODE, MTU, TERM_LENGTH, INITIAL_TERM_ID,
    TERM_ID, TERM_OFFSET, SESSION_ID, "ttl", "reliable", LINGER, ALIAS, "cc", "fc", "gtag",
    SPARSE, EOS, "tether", "group", "rejoin", "ssc", "so-sndbuf", "so-rcvbuf", "rcv-wnd",
    "media-rcv-ts-offset", "channel-rcv-ts-offset", "channel-snd-ts-offset",
    "response-endpoint", "response-correlation-id", "nak-delay",
    "untethered-window-limit-timeout", "untethered-linger-timeout",
    "untethered-resting-timeout", "max-resend", "stream-id", "pub-wnd",
)
_BUILDER_RANK = {name: rank for rank, name in enumerate(_BUILDER_ORDER)}


class ChannelUriError(ValueError):
    """A channel URI is malformed, or a value cannot be put into one."""


class ChannelUri:
    """A parsed channel: optional ``aeron-spy`` prefix, media, and ordered params (mutable)."""

    __slots__ = ("_prefix", "_media", "_params")

    def __init__(self, media: str, params: Mapping[str, str] | None = None, *, spy: bool = False):
        if media not in MEDIA_TYPES:
            raise ChannelUriError(f"unknown media {media!r}: expected one of {MEDIA_TYPES}")
        self._prefix = SPY_QUALIFIER if spy else ""
        self._media = media
        self._params: dict[str, str] = {}
        for key, value in (params or {}).items():
            self.set(key, value)

    @classmethod
    def parse(cls, uri: str) -> "ChannelUri":
        if not isinstance(uri, str):
            raise ChannelUriError(f"channel URI must be a str, got {type(uri).__name__}")
        if len(uri) > MAX_URI_LENGTH:
            raise ChannelUriError(
                f"channel URI of {len(uri)} characters exceeds the maximum of {MAX_URI_LENGTH}: "
                f"{uri[:80]!r}...")
        spy = uri.startswith(SPY_PREFIX)
        rest = uri[len(SPY_PREFIX):] if spy else uri
        if not rest.startswith(AERON_PREFIX):
            raise ChannelUriError(
                f"channel URI {uri!r} must start with {AERON_PREFIX!r} or "
                f"{SPY_PREFIX + AERON_PREFIX!r}")
        rest = rest[len(AERON_PREFIX):]
        media, question, query = rest.partition("?")
        for bad in ":|=":
            if bad in media:
                raise ChannelUriError(
                    f"channel URI {uri!r}: {bad!r} is not allowed in the media {media!r}")
        if media not in MEDIA_TYPES:
            raise ChannelUriError(
                f"channel URI {uri!r}: unknown media {media!r}, expected one of {MEDIA_TYPES}")
        channel = cls(media, spy=spy)
        if question:
            channel._params = _parse_params(uri, query)
        return channel

    # -- accessors --------------------------------------------------------------------------
    @property
    def media(self) -> str:
        return self._media

    @property
    def prefix(self) -> str:
        """``"aeron-spy"`` or ``""``."""
        return self._prefix

    @property
    def is_spy(self) -> bool:
        return self._prefix == SPY_QUALIFIER

    @property
    def is_udp(self) -> bool:
        return self._media == UDP_MEDIA

    @property
    def is_ipc(self) -> bool:
        return self._media == IPC_MEDIA

    @property
    def params(self) -> dict[str, str]:
        """A copy of the params, in URI order."""
        return dict(self._params)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._params.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._params

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    # -- edits ------------------------------------------------------------------------------
    def set(self, key: str, value: object) -> "ChannelUri":
        """Set ``key`` (kept in place if present, else appended); returns self for chaining."""
        text = str(value)
        if not isinstance(key, str) or not key or "=" in key or "|" in key:
            raise ChannelUriError(
                f"invalid channel param key {key!r}: must be a non-empty str without '=' or '|'")
        if "|" in text:
            raise ChannelUriError(f"channel param {key}={text!r}: values cannot contain '|'")
        self._params[key] = text
        return self

    def remove(self, key: str) -> str | None:
        """Remove ``key``; returns its value, or None if it was not set."""
        return self._params.pop(key, None)

    def set_spy(self, spy: bool) -> "ChannelUri":
        self._prefix = SPY_QUALIFIER if spy else ""
        return self

    def copy(self) -> "ChannelUri":
        return ChannelUri(self._media, self._params, spy=self.is_spy)

    # -- output -----------------------------------------------------------------------------
    def build(self) -> str:
        head = (SPY_PREFIX if self.is_spy else "") + AERON_PREFIX + self._media
        if not self._params:
            return head
        return head + "?" + "|".join(f"{key}={value}" for key, value in self._params.items())

    __str__ = build

    def __repr__(self) -> str:
        return f"ChannelUri({self.build()!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChannelUri):
            return NotImplemented
        return (self._prefix, self._media, self._params) == (
            other._prefix, other._media, other._params)

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable (object's hash would break ==)


def _parse_params(uri: str, query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    if not query:
        raise ChannelUriError(f"channel URI {uri!r}: expected key=value after '?'")
    index = len(uri) - len(query)
    for pair in query.split("|"):
        if not pair:
            raise ChannelUriError(
                f"channel URI {uri!r}: empty param at index {index} (a stray '|')")
        key, equals, value = pair.partition("=")
        if not equals:
            raise ChannelUriError(
                f"channel URI {uri!r}: param {pair!r} at index {index} has no '=' "
                f"(params are key=value separated by '|')")
        if not key:
            raise ChannelUriError(f"channel URI {uri!r}: empty param key at index {index}")
        params[key] = value
        index += len(pair) + 1
    return params


def _as_channel(uri: str | ChannelUri) -> ChannelUri:
    return uri if isinstance(uri, ChannelUri) else ChannelUri.parse(uri)


def _builder_ordered(media: str, params: Iterable[tuple[str, str]], *, spy: bool = False) -> str:
    ordered = sorted(params, key=lambda pair: _BUILDER_RANK.get(pair[0], len(_BUILDER_RANK)))
    return ChannelUri(media, dict(ordered), spy=spy).build()


def parse(uri: str) -> ChannelUri:
    """:meth:`ChannelUri.parse`."""
    return ChannelUri.parse(uri)


def is_tagged(value: str) -> bool:
    """Whether a param value refers to a tag (``tag:<n>``)."""
    return value.startswith(TAG_PREFIX)


# -- the archive's derived channels -------------------------------------------------------------

def strip_channel(uri: str | ChannelUri, *, legacy: bool = False) -> str:
    """The channel the archive records on and stores as ``strippedChannel``.

    Keeps media and only the params the modern archive keeps (:data:`STRIPPED_PARAMS`; with
    ``legacy=True`` the 1.15.1 set), written in Aeron's builder order; the spy prefix is dropped.
    Values are kept verbatim (Java re-parses and re-formats some, e.g. ``so-rcvbuf`` sizes).
    """
    channel = _as_channel(uri)
    keep = LEGACY_STRIPPED_PARAMS if legacy else STRIPPED_PARAMS
    return _builder_ordered(
        channel.media, [(k, v) for k, v in channel.params.items() if k in keep])


def recording_key(stream_id: int, uri: str | ChannelUri) -> str:
    """The archive's recording-subscription key:
    ``streamId:media?endpoint=…|interface=…|control=…|session-id=…|tags=…`` (params present
    only; ``"10:ipc"`` when none is)."""
    channel = _as_channel(uri)
    parts = [f"{key}={channel.get(key)}" for key in RECORDING_KEY_PARAMS if key in channel]
    key = f"{stream_id}:{channel.media}"
    return f"{key}?{'|'.join(parts)}" if parts else key


def spy_channel(uri: str | ChannelUri) -> str:
    """The same channel with the ``aeron-spy:`` prefix (unchanged if it already has it)."""
    return _as_channel(uri).copy().set_spy(True).build()


def recording_subscription_channel(uri: str | ChannelUri, *, local: bool) -> str:
    """What the archive subscribes to for StartRecording: the stripped channel, spied when the
    source is LOCAL and the media is UDP (IPC is always local)."""
    channel = _as_channel(uri)
    stripped = strip_channel(channel)
    return SPY_PREFIX + stripped if local and channel.is_udp else stripped


def with_initial_position(
    uri: str | ChannelUri,
    position: int,
    initial_term_id: int,
    term_length: int,
    mtu: int | None = None,
) -> str:
    """``uri`` with init-term-id, term-id, term-offset, term-length (and mtu if given) set so
    that a publication on it starts at ``position`` of a stream with those parameters
    (ChannelUriStringBuilder.initialPosition). Other params are kept."""
    channel = _as_channel(uri).copy()
    for key, value in initial_position_params(position, initial_term_id, term_length, mtu):
        channel.set(key, value)
    return channel.build()


def initial_position_params(
    position: int, initial_term_id: int, term_length: int, mtu: int | None = None
) -> list[tuple[str, str]]:
    """The (param, value) pairs :func:`with_initial_position` sets, in builder order."""
    if not isinstance(position, int) or position < 0:
        raise ChannelUriError(f"initial position {position!r} is invalid: must be an int >= 0")
    if position & (FRAME_ALIGNMENT - 1):
        raise ChannelUriError(
            f"initial position {position} is invalid: must be a multiple of {FRAME_ALIGNMENT}")
    try:
        bits = position_bits_to_shift(term_length)
    except (TypeError, ValueError) as error:
        raise ChannelUriError(str(error)) from None
    if not -(1 << 31) <= initial_term_id < (1 << 31):
        raise ChannelUriError(f"initial term id {initial_term_id} does not fit int32")
    pairs = []
    if mtu is not None:
        if not MIN_MTU <= mtu <= MAX_MTU or mtu % FRAME_ALIGNMENT:
            raise ChannelUriError(
                f"mtu {mtu} is invalid: must be a multiple of {FRAME_ALIGNMENT} in "
                f"{MIN_MTU}..{MAX_MTU}")
        pairs.append((MTU, str(mtu)))
    pairs += [
        (TERM_LENGTH, str(term_length)),
        (INITIAL_TERM_ID, str(initial_term_id)),
        (TERM_ID, str(compute_term_id_from_position(position, bits, initial_term_id))),
        (TERM_OFFSET, str(compute_term_offset_from_position(position, bits))),
    ]
    return pairs


def replay_channel(
    client_channel: str | ChannelUri,
    position: int,
    initial_term_id: int,
    term_length: int,
    mtu: int,
    default_linger_ns: int,
    *,
    requested_mtu: int | None = None,
) -> str:
    """The channel of a replay publication, as the modern archive builds it (§3.6): the client's
    replay channel stripped, plus the recording's initial position, term length and mtu, the
    client's ``eos``/``sparse`` if given, and ``linger`` (the client's, else the default).

    ``requested_mtu`` (the ``mtu`` of the client's channel, where the archive honours it) replaces
    the recording's mtu: see :func:`replay_mtu`. Java's archive always uses the recording's."""
    channel = _as_channel(client_channel)
    params = [(k, v) for k, v in channel.params.items() if k in STRIPPED_PARAMS]
    chosen_mtu = mtu if requested_mtu is None else replay_mtu(requested_mtu, mtu, term_length)
    params += initial_position_params(position, initial_term_id, term_length, chosen_mtu)
    for key in (EOS, SPARSE):
        value = channel.get(key)
        if value is not None:
            params.append((key, value))
    linger = channel.get(LINGER)
    params.append((LINGER, linger if linger is not None else str(default_linger_ns)))
    return _builder_ordered(channel.media, params)


def replay_mtu(requested: int, recording_mtu: int, term_length: int) -> int:
    """The mtu of a replay publication whose client asked for ``requested``.

    A replay sends the recorded frames whole, never split, so any mtu at least the recording's is
    valid; a larger one lets the sender pack several frames into one datagram (1 KiB messages at
    mtu 1408 travel one per datagram). Aeron caps an mtu at a term's max message length (term/8)."""
    if not MIN_MTU <= requested <= MAX_MTU or requested % FRAME_ALIGNMENT:
        raise ChannelUriError(f"mtu {requested} is invalid: must be a multiple of {FRAME_ALIGNMENT} in "
                              f"{MIN_MTU}..{MAX_MTU}")
    if requested < recording_mtu:
        raise ChannelUriError(f"mtu {requested} is smaller than the recording's mtu {recording_mtu}: frames "
                              f"are replayed whole, so a replay's mtu must be at least {recording_mtu}")
    if requested > term_length // 8:
        raise ChannelUriError(f"mtu {requested} is larger than the recording's term length {term_length} / 8 "
                              f"= {term_length // 8}, the most Aeron allows")
    return requested
