"""Options of the `aeron-archive` SINK (``write`` / ``writeStream``): parsing and checks.

Each option's spec is an entry of ``connector/option_specs.json`` with side ``sink``: the
connection options it shares with the source (``archive.dir``/``path``, ``archive.controlChannel``,
``archive.*StreamId``, ``archive.responseChannel``, ``archive.timeoutMs``, ``archive.credentials*``,
``aeron.*``, ``replay.*``, parsed by ``connector/options.py``) and its own (the sink channel and
stream id, the ``sink.*`` options). Parsed on the driver, before any task runs; a bad value is an
``OptionError`` naming the option and what it accepts. See docs/exactly-once.md.

Every Spark Python worker imports this module (``data_source`` does), most only to tell sink options
from source ones, so what a parse or a commit alone needs (the Aeron binding, the commit markers,
the staging root's pyarrow.fs) is imported where it is used (docs/reliability.md: a first batch
starts five Python workers).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field


from aeron_spark.connector.options import (
    RMEM_MAX_PATH,
    ArchiveConnection,
    OptionError,
    OptionSpec,
    ReplaySettings,
    bounds_of,
    default_int,
    default_str,
    option_spec,
    parse_connection,
    parse_int,
    parse_optional_enum,
    parse_receive_window,
    parse_replay,
    parse_size,
    parse_stream_id,
    specs_for,
)
from aeron_spark.connector.option_spec import canonical_options

SIDE = "sink"
SINK_PREFIX = "sink."
#: The sink's options, in option_specs.json's order.
SINK_OPTION_SPECS: tuple[OptionSpec, ...] = specs_for(SIDE)
_SOURCE_NAMES = {spec.name.lower(): spec.name for spec in specs_for("source")}
_SINK_NAMES = {spec.name.lower(): spec.name for spec in SINK_OPTION_SPECS}
#: Source options that make no sense for a sink (named in the error): the source's table minus the sink's.
SOURCE_ONLY_OPTIONS = tuple(name for lower, name in _SOURCE_NAMES.items() if lower not in _SINK_NAMES)
_STREAM_ID = option_spec("streamId", SIDE)
DEFAULT_TERM_LENGTH = default_int("sink.termLength")
DEFAULT_COMMIT_TIMEOUT_MS = default_int("sink.commitTimeoutMs")
DEFAULT_IPC_MTU = 8192
DEFAULT_UDP_MTU = 1408
#: ``sink.mtu=auto`` (the default): 8192 for IPC and for a UDP sink channel to a loopback address
#: (loopback_udp.is_loopback_udp, the rule ``replay.mtu=auto`` uses), else Aeron's UDP default.
#: Not a replay's 65504: a recording keeps its mtu, and no replay of it may use a smaller one.
SINK_MTU_AUTO = "auto"
LOOPBACK_SINK_MTU = 8192
#: ``sink.receiveWindow=auto`` (the default): for a UDP sink channel to a loopback address, the
#: archive's recording subscription gets ``rcv-wnd`` and ``so-rcvbuf`` of
#: loopback_udp.loopback_receive_window (the rule ``replay.receiveWindow=auto`` uses), capped
#: by half the term: the media driver's default 128 KiB window, not the disk, bounds a commit's rate
#: there. Elsewhere the channel's own settings (the archive host's limits are not known here).
SINK_RECEIVE_WINDOW_AUTO = default_str("sink.receiveWindow")
STAGING_SUBDIR = "spark-sink-staging"  # under archive.dir
CHECKPOINT_STAGING_SUBDIR = "aeron-sink-staging"  # under checkpointLocation
SINK_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")
# Channel params the sink sets itself on the sink channel.
RESERVED_CHANNEL_PARAMS = ("alias", "session-id", "init-term-id", "term-id", "term-offset", "term-length", "mtu")


def is_sink_option(name: str) -> bool:
    return name.lower().startswith(SINK_PREFIX)


def without_sink_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options minus ``sink.*`` (for the source's mode-independent checks)."""
    return {key: value for key, value in options.items() if not is_sink_option(key)}


def reject_sink_options_on_read(options: Mapping[str, str]) -> None:
    for key in options:
        if is_sink_option(key):
            raise OptionError(f"option {_SINK_NAMES.get(key.lower(), key)} only applies to write / writeStream, "
                              "not to read / readStream")


@dataclass(frozen=True)
class SinkOptions:
    streaming: bool
    sink_id: str | None  # None: the streaming query id (known on executors only)
    channel: str
    stream_id: int
    connection: ArchiveConnection
    replay: ReplaySettings
    # Normalized (staging.normalize_staging_root); tasks open it themselves. Not in repr: an S3 URI may
    # hold credentials.
    staging_root: str = field(repr=False)
    term_length: int
    mtu: int
    source_location_local: bool
    commit_timeout_ms: int
    receive_window: int | None = None  # rcv-wnd / so-rcvbuf added to a UDP sink channel (None: the channel's)

    @property
    def is_ipc(self) -> bool:
        return self.channel.startswith("aeron:ipc")

    def resolve_sink_id(self, query_id: str | None) -> str:
        sink_id = self.sink_id or query_id
        if not sink_id:
            raise OptionError("option sink.id is required: the streaming query id is not known here "
                              "(set sink.id to a stable name for this sink)")
        return check_sink_id(sink_id)

    def sink_channel(self, sink_id: str, session_id: int | None = None) -> str:
        """The channel a commit publishes on and the archive records (alias names the sink)."""
        from aeron_spark.connector.commit_markers import sink_alias  # here: see the module docstring
        separator = "|" if "?" in self.channel else "?"
        channel = f"{self.channel}{separator}alias={sink_alias(sink_id)}"
        if self.receive_window is not None:
            channel += f"|rcv-wnd={self.receive_window}|so-rcvbuf={self.receive_window}"
        return channel if session_id is None else f"{channel}|session-id={session_id}"

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
        raw = _canonical(options)
        channel = raw.get("channel")
        if channel is None or "streamId" not in raw:
            raise OptionError("the aeron-archive sink needs channel (aeron:ipc or aeron:udp?endpoint=host:port) "
                              "and streamId: the sink recording is addressed by them")
        _check_sink_channel(channel)
        stream_id = parse_stream_id(raw, _STREAM_ID)
        connection = parse_connection(raw)
        sink_id = raw.get("sink.id")
        if sink_id is not None:
            check_sink_id(sink_id)
        elif not streaming:
            sink_id = "batch-" + hashlib.sha256(f"{channel}|{stream_id}".encode()).hexdigest()[:16]
        staging = parse_staging_root(raw, connection.archive_dir, streaming=streaming)
        term_length = parse_size(raw, "sink.termLength")
        if term_length & (term_length - 1):  # the bounds: parse_size, from the spec
            raise OptionError(f"option sink.termLength={raw.get('sink.termLength')} must be "
                              f"{option_spec('sink.termLength').accepted}")
        is_ipc = channel.startswith("aeron:ipc")
        mtu = parse_sink_mtu(raw, channel, term_length)
        # Absent: local (IPC or spy on the shared media driver) for IPC, else remote (its defaultText).
        location = parse_optional_enum(raw, "sink.sourceLocation") or ("local" if is_ipc else "remote")
        return cls(
            streaming=streaming,
            sink_id=sink_id,
            channel=channel,
            stream_id=stream_id,
            connection=connection,
            replay=parse_replay(raw),
            staging_root=staging,
            term_length=term_length,
            mtu=mtu,
            source_location_local=location == "local",
            commit_timeout_ms=parse_int(raw, "sink.commitTimeoutMs"),
            receive_window=parse_sink_receive_window(raw, channel, term_length),
        )


def parse_sink_receive_window(raw: Mapping[str, str], channel: str, term_length: int,
                              rmem_max_path: str = RMEM_MAX_PATH) -> int | None:
    """``sink.receiveWindow`` (see :data:`SINK_RECEIVE_WINDOW_AUTO`): the window to put on the sink
    channel, or None to leave the channel (and the media driver's default) alone."""
    setting = parse_receive_window(raw, "sink.receiveWindow")
    if isinstance(setting, int) and setting > term_length // 2:
        raise OptionError(f"option sink.receiveWindow={raw.get('sink.receiveWindow')!r} is not valid; accepted: "
                          f"{SINK_RECEIVE_WINDOW_AUTO} | none | a size from 4k to termLength/2 ({term_length // 2})")
    from aeron_spark.connector.loopback_udp import receive_window_for  # here: see the module docstring
    window = receive_window_for(setting, channel, rmem_max_path)
    return None if window is None else min(window, term_length // 2)


def parse_sink_mtu(raw: Mapping[str, str], channel: str, term_length: int) -> int:
    """``sink.mtu``: ``auto`` (see :data:`SINK_MTU_AUTO`) or an mtu Aeron accepts for ``term_length``."""
    text = raw.get("sink.mtu", default_str("sink.mtu"))
    if text.lower() == SINK_MTU_AUTO:
        if channel.startswith("aeron:ipc"):
            return DEFAULT_IPC_MTU
        from aeron_spark.connector.loopback_udp import is_loopback_udp  # here: see the module docstring
        return min(LOOPBACK_SINK_MTU if is_loopback_udp(channel) else DEFAULT_UDP_MTU, term_length // 8)
    low, high = bounds_of("sink.mtu")
    if not re.fullmatch(r"\d+", text):
        raise OptionError(f"option sink.mtu={text!r} is not valid; accepted: {SINK_MTU_AUTO} | a multiple of 32 "
                          f"in [{low}, {high}], at most sink.termLength / 8 = {term_length // 8}")
    mtu = int(text)
    if mtu % 32 or not low <= mtu <= high or mtu > term_length // 8:
        raise OptionError(f"option sink.mtu={mtu} must be a multiple of 32 in [{low}, {high}] and at most "
                          f"sink.termLength / 8 = {term_length // 8} (or {SINK_MTU_AUTO})")
    return mtu


def parse_staging_root(raw: Mapping[str, str], archive_dir: str | None, *, streaming: bool) -> str:
    """The staging root, normalized and opened once here on the driver (so a bad one fails before any
    task runs): sink.stagingDir; else, for writeStream, <checkpointLocation>/aeron-sink-staging (Spark
    passes checkpointLocation to the sink when the query sets it with .option); else
    <archive.dir>/spark-sink-staging; else an error."""
    from aeron_spark.connector.sink.staging import (  # here: see the module docstring (pyarrow.fs)
        ACCEPTED_STAGING_FORMS,
        StagingRootError,
        child_uri,
        normalize_staging_root,
        open_staging_root,
        redact,
    )
    given = raw.get("sink.stagingDir")
    checkpoint = raw.get("checkpointLocation") if streaming else None
    if given is not None:
        text, origin = given, f"option sink.stagingDir={redact(given)!r}"
    elif checkpoint:
        text = child_uri(checkpoint, CHECKPOINT_STAGING_SUBDIR)
        origin = (f"the default staging root {redact(text)!r} (under checkpointLocation; set option "
                  "sink.stagingDir to stage elsewhere)")
    elif archive_dir is not None:
        text = f"{archive_dir.rstrip('/')}/{STAGING_SUBDIR}"
        origin = f"the default staging root {text!r} (under archive.dir; set option sink.stagingDir to stage elsewhere)"
    else:
        raise OptionError("option sink.stagingDir is required when neither checkpointLocation (writeStream) nor "
                          "archive.dir is set: where tasks stage rows until the driver commits them, shared by the "
                          f"driver and every executor; accepted: {ACCEPTED_STAGING_FORMS}")
    try:
        root = normalize_staging_root(text)
        open_staging_root(root)
    except StagingRootError as error:
        raise OptionError(f"{origin} {error}; option sink.stagingDir accepts {ACCEPTED_STAGING_FORMS}") from None
    return root


def check_sink_id(sink_id: str) -> str:
    if not SINK_ID_PATTERN.fullmatch(sink_id):
        raise OptionError(f"option sink.id={sink_id!r} is not valid; accepted: 1-128 characters of "
                          "[A-Za-z0-9._-] (it becomes part of a channel alias and of file names)")
    return sink_id


def _check_sink_channel(channel: str) -> None:
    if not channel.startswith(("aeron:ipc", "aeron:udp")):
        raise OptionError(f"option channel={channel!r} is not a sink channel; accepted: aeron:ipc or "
                          "aeron:udp?endpoint=host:port")
    _, _, params = channel.partition("?")
    for param in filter(None, params.split("|")):
        key = param.partition("=")[0]
        if key in RESERVED_CHANNEL_PARAMS:
            raise OptionError(f"option channel={channel!r} sets {key}, which the sink sets itself; remove it "
                              f"(the sink sets {', '.join(RESERVED_CHANNEL_PARAMS)})")


def _canonical(options: Mapping[str, str]) -> dict[str, str]:
    return canonical_options(options, SIDE)
