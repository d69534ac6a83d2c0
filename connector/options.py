"""Option machinery the source and the sink share: the spec type (``OptionSpec``), the options
both accept (``CONNECTION_OPTION_SPECS``: where the archive is, how it replays), the error type,
their parsed forms (``ArchiveConnection``, ``ReplaySettings``) and the parsers of values.

The source's options are in ``source/options.py`` (``SourceOptions``), the sink's in
``sink/options.py`` (``SinkOptions``); both list ``CONNECTION_OPTION_SPECS`` among their specs and
parse them with ``parse_connection`` and ``parse_replay``. Parsers take the options canonicalised
by their side (camelCase names, stripped values) and raise ``OptionError`` naming the option and
what it accepts. See docs/options.md and docs/exactly-once.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

# The archive's own defaults (archive_connection takes DEFAULT_CONTROL_STREAM_ID from here too).
from aeron_spark.archive.client import DEFAULT_CONTROL_STREAM_ID, DEFAULT_RESPONSE_STREAM_ID
from aeron_spark.driver_integration.channel_uri import ChannelUriError
from aeron_spark.driver_integration.channel_uri import parse as parse_channel_uri

from aeron_spark.connector.credentials import (
    CREDENTIALS_ENCODING_OPTION,
    CREDENTIALS_ENCODINGS,
    CREDENTIALS_FILE_OPTION,
    CREDENTIALS_OPTION,
    ArchiveCredentials,
    CredentialsUnavailable,
)

class OptionError(ValueError):
    """An option is unknown, missing, malformed or not allowed together with another."""


class ReadMode(Enum):
    BATCH = "batch"    # spark.read (the sink: write)
    STREAM = "stream"  # spark.readStream (the sink: writeStream)


@dataclass(frozen=True)
class OptionSpec:
    """One option: its name, what it accepts and its default (as docs/options.md tells them), the
    modes it applies to (the source refuses it in others; the sink accepts its options in both)."""

    name: str
    accepted: str
    default: str | None
    modes: frozenset[ReadMode]
    help: str


BOTH_MODES = frozenset({ReadMode.BATCH, ReadMode.STREAM})

#: Wire ranges: stream ids are int32 in Aeron's frames and requests; recording ids and positions int64 >= 0.
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_REPLAY_IDLE_TIMEOUT_MS = 30_000
#: Replays to a client on the archive's own media driver; other clients get a UDP endpoint of
#: their own (``replay_endpoint.ReplayEndpoints``).
DEFAULT_REPLAY_CHANNEL = "aeron:ipc"
DRIVER_MODES = ("auto", "embedded", "external")
# Not 1001 or another id users pick for their own streams: a replay on a channel/stream the
# archive records would be recorded again (replays fail fast on that, see archive_reading).
DEFAULT_REPLAY_STREAM_ID = 1_977_101

#: ``replay.mtu`` values other than an int: the loopback default, or always the recording's mtu.
REPLAY_MTU_AUTO = "auto"
REPLAY_MTU_RECORDING = "recording"
REPLAY_MTU_MODES = (REPLAY_MTU_AUTO, REPLAY_MTU_RECORDING)
#: ``replay.mtu=auto`` over loopback: Aeron's largest (the largest UDP payload), 62 frames of a 1 KiB
#: message per datagram instead of 1; capped at each recording's term length / 8 (Aeron's limit).
#: Measured on the cluster layout beside 8192, both with the 2 MiB loopback receive window: 1 KiB
#: reads 1.83 vs 2.04 s median, 3.08 vs 3.82 core-s (docs/performance.md, "Beside Kafka: reads").
DEFAULT_LOOPBACK_REPLAY_MTU = 65504
REPLAY_MTU_RANGE = (32, 65504)

#: ``replay.receiveWindow`` / ``sink.receiveWindow`` values other than a size: the loopback
#: default, or the media driver's own (128 KiB).
RECEIVE_WINDOW_AUTO = "auto"
RECEIVE_WINDOW_NONE = "none"
RECEIVE_WINDOW_MODES = (RECEIVE_WINDOW_AUTO, RECEIVE_WINDOW_NONE)
#: ``auto`` towards a loopback address: the receiving subscription's ``rcv-wnd`` and ``so-rcvbuf``
#: (capped by the host's ``net.core.rmem_max``, which the driver will not exceed). The driver's
#: default 128 KiB window, not either end's work, bounds a UDP stream's rate there: the sender
#: waits a status-message round trip per 128 KiB.
LOOPBACK_RECEIVE_WINDOW = 2 << 20
RMEM_MAX_PATH = "/proc/sys/net/core/rmem_max"
#: The smallest window a size may give (a few of the largest frames).
MIN_RECEIVE_WINDOW = 4096

#: Options the source and the sink both accept: where the archive is and how it replays.
CONNECTION_OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("archive.dir", "a directory holding archive-mark.dat", None, BOTH_MODES,
               "Find the archive's control channel, control stream id and aeron dir from its mark "
               "file. `path` (the argument of load()) is an alias."),
    OptionSpec("path", "same as archive.dir", None, BOTH_MODES, "Alias of archive.dir (load(path))."),
    OptionSpec("archive.controlChannel", "an Aeron channel URI", None, BOTH_MODES,
               "Archive control request channel (overrides the mark file)."),
    OptionSpec("archive.controlStreamId", "an int", str(DEFAULT_CONTROL_STREAM_ID), BOTH_MODES,
               "Archive control request stream id (overrides the mark file)."),
    OptionSpec("archive.responseChannel", "an Aeron channel URI",
               "aeron:ipc when the control channel is IPC, else aeron:udp?endpoint=<aeron.bindAddress>:0 told to "
               "the archive as <aeron.host>:<bound port>", BOTH_MODES,
               "Channel the archive answers on."),
    OptionSpec("archive.responseStreamId", "an int", str(DEFAULT_RESPONSE_STREAM_ID), BOTH_MODES,
               "Stream id the archive answers on."),
    OptionSpec("archive.timeoutMs", "an int > 0 (milliseconds)", str(DEFAULT_TIMEOUT_MS), BOTH_MODES,
               "Timeout of each archive request."),
    OptionSpec("aeron.dir", "a media driver directory", "the mark file's, else Aeron's default ($AERON_DIR)", BOTH_MODES,
               "Media driver used by the driver-side and executor-side archive clients."),
    OptionSpec("aeron.driver", " | ".join(DRIVER_MODES), "auto", BOTH_MODES,
               "auto: use the media driver running at aeron.dir, else start one embedded in this Python process "
               "(one per process, reused by its tasks, removed at exit); embedded: always the process's own; "
               "external: only the one at aeron.dir (fail fast when none runs)."),
    OptionSpec("aeron.host", "a host name or IP address of this host", "the address that routes to the archive",
               BOTH_MODES, "Where the archive sends control responses and replays to this process (multi-homed hosts, "
               "NAT): every Spark host resolves its own."),
    OptionSpec("aeron.bindAddress", "a local IP address, or 0.0.0.0", "aeron.host", BOTH_MODES,
               "Address the response and replay endpoints bind when it differs from aeron.host (NAT, containers)."),
    OptionSpec("replay.channel", "an Aeron channel URI",
               "aeron:ipc on the archive's media driver, else aeron:udp?endpoint=<aeron.bindAddress>:0", BOTH_MODES,
               "Channel replays are sent on; each partition adds its own session-id to it, and a UDP port 0 "
               "is resolved to the port bound before the archive is told."),
    OptionSpec("replay.streamId", "an int", str(DEFAULT_REPLAY_STREAM_ID), BOTH_MODES,
               "Stream id replays are sent on. A replay fails at once if the archive records "
               "replay.channel on this stream id (each replay would become a new recording)."),
    OptionSpec("replay.mtu", " | ".join(REPLAY_MTU_MODES) + " | an int: a multiple of 32 in [32, 65504]",
               REPLAY_MTU_AUTO, BOTH_MODES,
               "The mtu a UDP replay is asked to be sent with (whole recorded frames packed into fewer, larger "
               f"datagrams). auto: {DEFAULT_LOOPBACK_REPLAY_MTU} when the replay goes to a loopback address "
               "(no IP fragmentation there), else the recording's; recording: always the recording's mtu; an int: "
               "that mtu, capped at the recording's term length / 8 (above ~1472 bytes means IP fragmentation on "
               "a 1500-byte Ethernet: only for jumbo-frame networks). Never below the recording's mtu; IPC replays "
               "and archives that replay at the recording's mtu (Java's) ignore it."),
    OptionSpec("replay.receiveWindow", " | ".join(RECEIVE_WINDOW_MODES) + " | a size (e.g. 2m), at least 4k",
               RECEIVE_WINDOW_AUTO, BOTH_MODES,
               "Receive window (rcv-wnd and so-rcvbuf) of the UDP replay subscription on this host. auto: "
               f"{LOOPBACK_RECEIVE_WINDOW >> 20}m (capped by net.core.rmem_max) when it binds a loopback address, "
               "else the media driver's default (128k); none: always the driver's default; a size: that window "
               "(the driver caps it at half the recording's term length, the kernel at net.core.rmem_max). Ignored "
               "when replay.channel sets rcv-wnd or so-rcvbuf, and for IPC and response-channel replays."),
    OptionSpec("replay.idleTimeoutMs", "an int > 0 (milliseconds)", str(DEFAULT_REPLAY_IDLE_TIMEOUT_MS), BOTH_MODES,
               "A partition fails when its replay makes no progress for this long (an error the "
               "archive reports for the replay fails it at once)."),
    OptionSpec(CREDENTIALS_OPTION, "principal:secret", None, BOTH_MODES,
               "For an archive with authentication: the client sends the principal and answers the archive's "
               "challenge with an HMAC of the secret. Never printed; exclusive with archive.credentialsFile."),
    OptionSpec(CREDENTIALS_FILE_OPTION, "a path or URI (file:, s3:, gs:, abfs:, hdfs:) of a file holding one "
               "line principal:secret", None, BOTH_MODES,
               "Like archive.credentials, read by each process when it connects: the secret stays off the "
               "query's options and plan."),
    OptionSpec(CREDENTIALS_ENCODING_OPTION, " | ".join(CREDENTIALS_ENCODINGS), "challenge", BOTH_MODES,
               "How archive.credentials(File) log in: challenge sends the principal and answers an hmac-sha256 "
               "challenge (the aeron-archive sidecar); plain sends principal:secret itself as the credentials "
               "bytes, as a Java archive with Aeron's SimpleAuthenticator expects (the secret crosses the wire)."),
)
CONNECTION_OPTIONS = tuple(spec.name for spec in CONNECTION_OPTION_SPECS)
# Options Spark itself adds to a data source's options (e.g. writeStream.queryName(...)).
SPARK_SUPPLIED_OPTIONS = frozenset({"queryname"})


@dataclass(frozen=True)
class ArchiveConnection:
    """How to reach the archive; picklable so executors can connect on their own."""

    archive_dir: str | None
    control_channel: str | None
    control_stream_id: int | None  # None: from the mark file, else the default
    response_channel: str | None   # None: derived from the control channel
    response_stream_id: int
    aeron_dir: str | None
    timeout_ms: int
    driver_mode: str = "auto"        # aeron.driver: which media driver this process uses
    host: str | None = None          # aeron.host: None: the address that routes to the archive
    bind_address: str | None = None  # aeron.bindAddress: None: aeron.host
    credentials: ArchiveCredentials | None = None  # its repr never shows a secret


@dataclass(frozen=True)
class ReplaySettings:
    channel: str | None  # None: aeron:ipc on the archive's driver, else a UDP endpoint of this host
    stream_id: int
    idle_timeout_ms: int
    #: ``replay.mtu``: "auto", "recording" or the mtu to ask for (see replay_endpoint.replay_mtu_to_ask)
    mtu: int | str = REPLAY_MTU_AUTO
    #: ``replay.receiveWindow``: "auto", "none" or a window in bytes (see replay_endpoint.replay_receive_window)
    receive_window: int | str = RECEIVE_WINDOW_AUTO


def parse_connection(raw: dict[str, str]) -> ArchiveConnection:
    archive_dir = raw.get("archive.dir")
    path = raw.get("path")
    if archive_dir is not None and path is not None and archive_dir != path:
        raise OptionError(f"archive.dir={archive_dir!r} and load(path={path!r}) disagree; give one of them")
    archive_dir = archive_dir or path
    control_channel = raw.get("archive.controlChannel")
    if archive_dir is None and control_channel is None:
        raise OptionError(
            "say where the archive is: set archive.dir (directory with archive-mark.dat, or load(path)) "
            "or archive.controlChannel (+ archive.controlStreamId, aeron.dir)")
    if control_channel is not None:
        check_channel("archive.controlChannel", control_channel)
    response_channel = raw.get("archive.responseChannel")
    if response_channel is not None:
        check_channel("archive.responseChannel", response_channel)
    return ArchiveConnection(
        archive_dir=archive_dir,
        control_channel=control_channel,
        control_stream_id=parse_stream_id(raw, "archive.controlStreamId", 0) if "archive.controlStreamId" in raw else None,
        response_channel=response_channel,
        response_stream_id=parse_stream_id(raw, "archive.responseStreamId", DEFAULT_RESPONSE_STREAM_ID),
        aeron_dir=raw.get("aeron.dir"),
        timeout_ms=parse_int(raw, "archive.timeoutMs", DEFAULT_TIMEOUT_MS, minimum=1),
        driver_mode=parse_choice(raw, "aeron.driver", DRIVER_MODES, "auto"),
        host=parse_host(raw, "aeron.host", wildcard_allowed=False),
        bind_address=parse_host(raw, "aeron.bindAddress", wildcard_allowed=True),
        credentials=parse_credentials(raw),
    )


def parse_credentials(raw: dict[str, str]) -> ArchiveCredentials | None:
    """``archive.credentials`` or ``archive.credentialsFile``; errors never quote the value."""
    text = raw.get(CREDENTIALS_OPTION)
    file = raw.get(CREDENTIALS_FILE_OPTION)
    encoding = parse_choice(raw, CREDENTIALS_ENCODING_OPTION, CREDENTIALS_ENCODINGS, "challenge")
    if raw.get(CREDENTIALS_ENCODING_OPTION) is not None and text is None and file is None:
        raise OptionError(f"option {CREDENTIALS_ENCODING_OPTION} needs {CREDENTIALS_OPTION} or {CREDENTIALS_FILE_OPTION}")
    if text is not None and file is not None:
        raise OptionError(f"options {CREDENTIALS_OPTION} and {CREDENTIALS_FILE_OPTION} are exclusive; set one "
                          "(credentialsFile keeps the secret out of the query's options)")
    if file is not None:
        if not file:
            raise OptionError(f"option {CREDENTIALS_FILE_OPTION} is empty; accepted: a path or URI of a file "
                              "holding one line principal:secret")
        return ArchiveCredentials(file=file, encoding=encoding)
    if text is None:
        return None
    try:
        return ArchiveCredentials(text=text, encoding=encoding)
    except CredentialsUnavailable as error:
        raise OptionError(str(error)) from None


def parse_replay(raw: dict[str, str]) -> ReplaySettings:
    channel = raw.get("replay.channel")
    if channel is not None:
        check_channel("replay.channel", channel)
    return ReplaySettings(
        channel=channel,
        stream_id=parse_stream_id(raw, "replay.streamId", DEFAULT_REPLAY_STREAM_ID),
        idle_timeout_ms=parse_int(raw, "replay.idleTimeoutMs", DEFAULT_REPLAY_IDLE_TIMEOUT_MS, minimum=1),
        mtu=parse_replay_mtu(raw),
        receive_window=parse_receive_window(raw, "replay.receiveWindow"),
    )


def parse_receive_window(raw: Mapping[str, str], name: str) -> int | str:
    """A ``*.receiveWindow`` option: one of :data:`RECEIVE_WINDOW_MODES` or a size of at least
    :data:`MIN_RECEIVE_WINDOW` (upper bounds depend on the term length: checked by the caller)."""
    text = raw.get(name, RECEIVE_WINDOW_AUTO).strip().lower()
    if text in RECEIVE_WINDOW_MODES:
        return text
    try:
        window = parse_size(name, text)
    except OptionError:
        window = -1
    if window < MIN_RECEIVE_WINDOW:
        raise OptionError(f"option {name}={raw.get(name)!r} is not valid; accepted: {' | '.join(RECEIVE_WINDOW_MODES)} "
                          f"| a size (e.g. 2m) of at least {MIN_RECEIVE_WINDOW // 1024}k")
    return window


def parse_replay_mtu(raw: dict[str, str]) -> int | str:
    """``replay.mtu``: one of :data:`REPLAY_MTU_MODES` or an Aeron mtu (a multiple of 32 in range)."""
    text = raw.get("replay.mtu")
    if text is None:
        return REPLAY_MTU_AUTO
    if text.lower() in REPLAY_MTU_MODES:
        return text.lower()
    low, high = REPLAY_MTU_RANGE
    if not re.fullmatch(r"\d+", text) or not low <= int(text) <= high or int(text) % 32:
        raise OptionError(f"option replay.mtu={text!r} is not valid; accepted: {' | '.join(REPLAY_MTU_MODES)} | "
                          f"an int: a multiple of 32 in [{low}, {high}]")
    return int(text)


#: Aeron's values of a channel's ``control-mode`` (``response``: a response channel, Aeron 1.45+).
CONTROL_MODES = ("manual", "dynamic", "response")


def check_channel(name: str, value: str) -> None:
    """An Aeron channel; a ``control-mode`` one of Aeron's, and a UDP response channel
    (``control-mode=response``) naming the archive's response endpoint with ``control=``."""
    if not value.startswith(("aeron:udp", "aeron:ipc", "aeron-spy:")):
        raise OptionError(f"option {name}={value!r} is not an Aeron channel; accepted: aeron:udp?... | aeron:ipc?...")
    try:
        uri = parse_channel_uri(value)
    except ChannelUriError as error:
        raise OptionError(f"option {name}={value!r} is not a valid Aeron channel: {error}") from None
    mode = uri.get("control-mode")
    if mode is None:
        return
    if mode not in CONTROL_MODES:
        raise OptionError(f"option {name}={value!r}: control-mode={mode} is not valid; accepted: "
                          f"{' | '.join(CONTROL_MODES)}")
    if mode == "response" and uri.is_udp and uri.get("control") is None:
        raise OptionError(f"option {name}={value!r}: a UDP response channel needs control=<archive host>:<port>, "
                          "a port of the archive's host it answers from (the archive opens no connection to this "
                          "host), e.g. aeron:udp?control-mode=response|control=archive-host:8011")


def parse_choice(raw: dict[str, str], name: str, accepted: tuple[str, ...], default: str) -> str:
    text = raw.get(name)
    if text is None:
        return default
    if text.lower() not in accepted:
        raise OptionError(f"option {name}={text!r} is not valid; accepted: {' | '.join(accepted)}")
    return text.lower()


_WILDCARD_ADDRESSES = ("0.0.0.0", "::", "[::]")


def parse_host(raw: dict[str, str], name: str, *, wildcard_allowed: bool) -> str | None:
    """A host name or IP address (IPv6 with or without brackets), without a port."""
    text = raw.get(name)
    if text is None:
        return None
    host = text.strip("[]")
    if not re.fullmatch(r"[A-Za-z0-9._:%-]+", host) or text.count(":") == 1:  # one colon: host:port
        raise OptionError(f"option {name}={text!r} is not valid; accepted: a host name or IP address of this "
                          "host, without a port, e.g. 10.0.0.5 or executor-3.internal")
    if not wildcard_allowed and host in _WILDCARD_ADDRESSES:
        raise OptionError(f"option {name}={text!r} is not valid: the archive cannot send to a wildcard address; "
                          "accepted: an address of this host the archive can reach (to listen on every "
                          "interface, set aeron.bindAddress=0.0.0.0 instead)")
    return host


def parse_int(raw: dict[str, str], name: str, default: int, *, minimum: int | None = None,
              maximum: int = INT64_MAX) -> int:
    text = raw.get(name)
    if text is None:
        return default
    if not re.fullmatch(r"-?\d+", text):
        raise OptionError(f"option {name}={text!r} is not an integer")
    value = int(text)
    if not INT32_MIN <= value <= maximum:
        raise OptionError(f"option {name}={value} is out of range; accepted: {INT32_MIN}..{maximum}")
    if minimum is not None and value < minimum:
        raise OptionError(f"option {name}={value} must be >= {minimum}")
    return value


def parse_stream_id(raw: dict[str, str], name: str, default: int) -> int:
    """A stream id: an int32 on the wire, so rejected here (naming the option) rather than failing
    later in an encoder or the driver."""
    text = raw.get(name)
    if text is None:
        return default
    if not re.fullmatch(r"-?\d+", text):
        raise OptionError(f"option {name}={text!r} is not an integer; accepted: a stream id, an int32 "
                          f"({INT32_MIN}..{INT32_MAX})")
    value = int(text)
    if not INT32_MIN <= value <= INT32_MAX:
        raise OptionError(f"option {name}={value} is out of range for a stream id; accepted: an int32 "
                          f"({INT32_MIN}..{INT32_MAX})")
    return value


def parse_bool(raw: dict[str, str], name: str, default: bool) -> bool:
    text = raw.get(name)
    if text is None:
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise OptionError(f"option {name}={text!r} is not valid; accepted: true | false")


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
               "tib": 1 << 40}


def parse_size(name: str, text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", text)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise OptionError(f"option {name}={text!r} is not a size; accepted: bytes, or a number with k, m, g, t "
                          "(binary units), e.g. 268435456 or 256m")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if value <= 0:
        raise OptionError(f"option {name}={text!r} must be > 0")
    return value


_DURATION_UNITS = {"": 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(raw: dict[str, str], name: str, default: int) -> int:
    text = raw.get(name)
    if text is None:
        return default
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", text)
    if not match or match.group(2).lower() not in _DURATION_UNITS:
        raise OptionError(f"option {name}={text!r} is not a duration; accepted: e.g. 500ms, 30s, 15m, 1h, "
                          "or a number of milliseconds")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]


def parse_optional(raw: dict[str, str], name: str, parse: Callable[[str, str], int]) -> int | None:
    text = raw.get(name)
    return None if text is None else parse(name, text)
