"""The options the source and the sink share (where the archive is, how it replays), their parsed
forms (``ArchiveConnection``, ``ReplaySettings``) and their parsers.

Every option's spec (name, sides, type, default, docs text) is in ``option_specs.json``, loaded by
``option_spec.py``, which also has the one canonicaliser and the parsers of each value type; this
module re-exports those names (``OptionError``, ``ReadMode``, ``OptionSpec``, the parsers) for the
source (``source/options.py``, ``SourceOptions``) and the sink (``sink/options.py``, ``SinkOptions``).
Parsers take the options canonicalised by their side (camelCase names, stripped values) and raise
``OptionError`` naming the option and what it accepts. See docs/options.md and docs/exactly-once.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from aeron_spark.connector.credentials import (
    CREDENTIALS_ENCODING_OPTION,
    CREDENTIALS_FILE_OPTION,
    CREDENTIALS_OPTION,
    ArchiveCredentials,
    CredentialsUnavailable,
)
from aeron_spark.connector.option_spec import (  # noqa: F401 - re-exported: the names source and sink use
    BOTH_MODES,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    SPARK_SUPPLIED_OPTIONS,
    OptionError,
    OptionSpec,
    ReadMode,
    bounds_of,
    check_channel,
    choices_of,
    default_int,
    default_str,
    id_list_of,
    option_spec,
    parse_bool,
    parse_channel,
    parse_duration_ms,
    parse_enum,
    parse_int,
    parse_optional_enum,
    parse_optional_int,
    parse_optional_size,
    parse_size,
    parse_stream_id,
    size_of,
    specs_for,
    stream_id_of,
)

#: Options the source and the sink both accept: where the archive is and how it replays.
CONNECTION_OPTION_SPECS: tuple[OptionSpec, ...] = tuple(
    spec for spec in specs_for("source") if spec.accepted_by("sink"))
CONNECTION_OPTIONS = tuple(spec.name for spec in CONNECTION_OPTION_SPECS)

# Defaults as names for the code that needs them; the values are the spec's.
DEFAULT_TIMEOUT_MS = default_int("archive.timeoutMs")
DEFAULT_REPLAY_IDLE_TIMEOUT_MS = default_int("replay.idleTimeoutMs")
# Not 1001 or another id users pick for their own streams: a replay on a channel/stream the
# archive records would be recorded again (replays fail fast on that, see archive_reading).
DEFAULT_REPLAY_STREAM_ID = default_int("replay.streamId")
DEFAULT_RESPONSE_STREAM_ID = default_int("archive.responseStreamId")
DRIVER_MODES = choices_of("aeron.driver")
DEFAULT_DRIVER_MODE = default_str("aeron.driver")

#: ``replay.mtu`` values other than an int: the loopback default, or always the recording's mtu.
REPLAY_MTU_AUTO = "auto"
REPLAY_MTU_RECORDING = "recording"
REPLAY_MTU_MODES = choices_of("replay.mtu")
#: ``replay.mtu=auto`` over loopback: Aeron's largest (the largest UDP payload), 62 frames of a 1 KiB
#: message per datagram instead of 1; capped at each recording's term length / 8 (Aeron's limit).
#: Measured on the cluster layout beside 8192, both with the 2 MiB loopback receive window: 1 KiB
#: reads 1.83 vs 2.04 s median, 3.08 vs 3.82 core-s (docs/performance.md, "Beside Kafka: reads").
DEFAULT_LOOPBACK_REPLAY_MTU = 65504

#: ``replay.receiveWindow`` / ``sink.receiveWindow`` values other than a size: the loopback
#: default, or the media driver's own (128 KiB).
RECEIVE_WINDOW_AUTO = "auto"
RECEIVE_WINDOW_NONE = "none"
RECEIVE_WINDOW_MODES = choices_of("replay.receiveWindow")
DEFAULT_REPLAY_MTU = default_str("replay.mtu")
DEFAULT_REPLAY_RECEIVE_WINDOW = default_str("replay.receiveWindow")
#: ``auto`` towards a loopback address: the receiving subscription's ``rcv-wnd`` and ``so-rcvbuf``
#: (capped by the host's ``net.core.rmem_max``, which the driver will not exceed). The driver's
#: default 128 KiB window, not either end's work, bounds a UDP stream's rate there: the sender
#: waits a status-message round trip per 128 KiB.
LOOPBACK_RECEIVE_WINDOW = 2 << 20
RMEM_MAX_PATH = "/proc/sys/net/core/rmem_max"


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
    driver_mode: str = DEFAULT_DRIVER_MODE  # aeron.driver: which media driver this process uses
    host: str | None = None          # aeron.host: None: the address that routes to the archive
    bind_address: str | None = None  # aeron.bindAddress: None: aeron.host
    credentials: ArchiveCredentials | None = None  # its repr never shows a secret


@dataclass(frozen=True)
class ReplaySettings:
    channel: str | None  # None: aeron:ipc on the archive's driver, else a UDP endpoint of this host
    stream_id: int
    idle_timeout_ms: int
    #: ``replay.mtu``: "auto", "recording" or the mtu to ask for (see replay_endpoint.replay_mtu_to_ask)
    mtu: int | str = DEFAULT_REPLAY_MTU
    #: ``replay.receiveWindow``: "auto", "none" or a window in bytes (see replay_endpoint.replay_receive_window)
    receive_window: int | str = DEFAULT_REPLAY_RECEIVE_WINDOW


def parse_connection(raw: Mapping[str, str]) -> ArchiveConnection:
    archive_dir = raw.get("archive.dir")
    path = raw.get("path")
    if archive_dir is not None and path is not None and archive_dir != path:
        raise OptionError(f"archive.dir={archive_dir!r} and load(path={path!r}) disagree; give one of them")
    archive_dir = archive_dir or path
    control_channel = parse_channel(raw, "archive.controlChannel")
    if archive_dir is None and control_channel is None:
        raise OptionError(
            "say where the archive is: set archive.dir (directory with archive-mark.dat, or load(path)) "
            "or archive.controlChannel (+ archive.controlStreamId, aeron.dir)")
    return ArchiveConnection(
        archive_dir=archive_dir,
        control_channel=control_channel,
        # Absent: the mark file's (archive.dir), else the spec's default (archive_connection).
        control_stream_id=parse_stream_id(raw, "archive.controlStreamId") if "archive.controlStreamId" in raw else None,
        response_channel=parse_channel(raw, "archive.responseChannel"),
        response_stream_id=parse_stream_id(raw, "archive.responseStreamId"),
        aeron_dir=raw.get("aeron.dir"),
        timeout_ms=parse_int(raw, "archive.timeoutMs"),
        driver_mode=parse_enum(raw, "aeron.driver"),
        host=parse_host(raw, "aeron.host", wildcard_allowed=False),
        bind_address=parse_host(raw, "aeron.bindAddress", wildcard_allowed=True),
        credentials=parse_credentials(raw),
    )


def parse_credentials(raw: Mapping[str, str]) -> ArchiveCredentials | None:
    """``archive.credentials`` or ``archive.credentialsFile``; errors never quote the value."""
    text = raw.get(CREDENTIALS_OPTION)
    file = raw.get(CREDENTIALS_FILE_OPTION)
    encoding = parse_enum(raw, CREDENTIALS_ENCODING_OPTION)
    if raw.get(CREDENTIALS_ENCODING_OPTION) is not None and text is None and file is None:
        raise OptionError(f"option {CREDENTIALS_ENCODING_OPTION} needs {CREDENTIALS_OPTION} or {CREDENTIALS_FILE_OPTION}")
    if text is not None and file is not None:
        raise OptionError(f"options {CREDENTIALS_OPTION} and {CREDENTIALS_FILE_OPTION} are exclusive; set one "
                          "(credentialsFile keeps the secret out of the query's options)")
    if file is not None:
        if not file:
            raise OptionError(f"option {CREDENTIALS_FILE_OPTION} is empty; accepted: "
                              f"{option_spec(CREDENTIALS_FILE_OPTION).accepted}")
        return ArchiveCredentials(file=file, encoding=encoding)
    if text is None:
        return None
    try:
        return ArchiveCredentials(text=text, encoding=encoding)
    except CredentialsUnavailable as error:
        raise OptionError(str(error)) from None


def parse_replay(raw: Mapping[str, str]) -> ReplaySettings:
    return ReplaySettings(
        channel=parse_channel(raw, "replay.channel"),
        stream_id=parse_stream_id(raw, "replay.streamId"),
        idle_timeout_ms=parse_int(raw, "replay.idleTimeoutMs"),
        mtu=parse_replay_mtu(raw),
        receive_window=parse_receive_window(raw, "replay.receiveWindow"),
    )


def parse_receive_window(raw: Mapping[str, str], name: str) -> int | str:
    """A ``*.receiveWindow`` option: one of its spec's choices or a size of at least its spec's
    ``min`` (upper bounds depend on the term length: checked by the caller)."""
    spec = option_spec(name)
    choices = spec.choices or ()
    minimum = spec.min or 0
    given = raw.get(name)
    text = (given if given is not None else str(spec.default)).strip().lower()
    if text in choices:
        return text
    try:
        window = size_of(name, text)
    except OptionError:
        window = -1
    if window < minimum:
        raise OptionError(f"option {name}={given!r} is not valid; accepted: {' | '.join(choices)} "
                          f"| a size (e.g. 2m) of at least {minimum // 1024}k")
    return window


def parse_replay_mtu(raw: Mapping[str, str]) -> int | str:
    """``replay.mtu``: one of its spec's choices or an Aeron mtu (a multiple of 32 in the spec's range)."""
    spec = option_spec("replay.mtu")
    choices = spec.choices or ()
    text = raw.get(spec.name)
    if text is None:
        return str(spec.default)
    if text.lower() in choices:
        return text.lower()
    low, high = bounds_of(spec.name)
    if not re.fullmatch(r"\d+", text) or not low <= int(text) <= high or int(text) % 32:
        raise OptionError(f"option replay.mtu={text!r} is not valid; accepted: {' | '.join(choices)} | "
                          f"an int: a multiple of 32 in [{low}, {high}]")
    return int(text)


_WILDCARD_ADDRESSES = ("0.0.0.0", "::", "[::]")


def parse_host(raw: Mapping[str, str], name: str, *, wildcard_allowed: bool) -> str | None:
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
