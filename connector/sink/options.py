"""Options of the `aeron-archive` SINK (``write`` / ``writeStream``): names, defaults, checks.

Shares the connection options with the source (``connector/options.py``
``CONNECTION_OPTION_SPECS``: ``archive.dir``/``path``, ``archive.controlChannel``,
``archive.*StreamId``, ``archive.responseChannel``, ``archive.timeoutMs``, ``archive.credentials*``,
``aeron.*``, ``replay.*``) and adds its own (``SINK_OPTION_SPECS``: the sink channel and stream
id, the ``sink.*`` options). Parsed on the driver, before any task runs; a bad value is an
``OptionError`` naming the option and what it accepts. See docs/exactly-once.md.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field


from aeron_spark.connector.options import (
    BOTH_MODES,
    CONNECTION_OPTIONS,
    SPARK_SUPPLIED_OPTIONS,
    ArchiveConnection,
    OptionError,
    OptionSpec,
    ReplaySettings,
    parse_connection,
    parse_int,
    parse_stream_id,
    parse_optional,
    parse_replay,
    parse_receive_window,
    parse_size,
    RECEIVE_WINDOW_AUTO,
    RMEM_MAX_PATH,
)
from aeron_spark.connector.source_option_specs import OPTION_SPECS as SOURCE_OPTION_SPECS
from aeron_spark.connector.commit_markers import sink_alias
from aeron_spark.connector.replay_endpoint import is_loopback_udp, receive_window_for
from aeron_spark.connector.sink.staging import (
    ACCEPTED_STAGING_FORMS,
    StagingRootError,
    child_uri,
    normalize_staging_root,
    open_staging_root,
    redact,
)

SINK_PREFIX = "sink."
DEFAULT_TERM_LENGTH = 16 << 20
DEFAULT_IPC_MTU = 8192
DEFAULT_UDP_MTU = 1408
#: ``sink.mtu=auto`` (the default): 8192 for IPC and for a UDP sink channel to a loopback address
#: (replay_endpoint.is_loopback_udp, the rule ``replay.mtu=auto`` uses), else Aeron's UDP default.
#: Not a replay's 65504: a recording keeps its mtu, and no replay of it may use a smaller one.
SINK_MTU_AUTO = "auto"
LOOPBACK_SINK_MTU = 8192
#: ``sink.receiveWindow=auto`` (the default): for a UDP sink channel to a loopback address, the
#: archive's recording subscription gets ``rcv-wnd`` and ``so-rcvbuf`` of
#: replay_endpoint.loopback_receive_window (the rule ``replay.receiveWindow=auto`` uses), capped
#: by half the term: the media driver's default 128 KiB window, not the disk, bounds a commit's rate
#: there. Elsewhere the channel's own settings (the archive host's limits are not known here).
SINK_RECEIVE_WINDOW_AUTO = RECEIVE_WINDOW_AUTO
DEFAULT_COMMIT_TIMEOUT_MS = 60_000
STAGING_SUBDIR = "spark-sink-staging"  # under archive.dir
CHECKPOINT_STAGING_SUBDIR = "aeron-sink-staging"  # under checkpointLocation
SINK_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")
# Channel params the sink sets itself on the sink channel.
RESERVED_CHANNEL_PARAMS = ("alias", "session-id", "init-term-id", "term-id", "term-offset", "term-length", "mtu")

SINK_OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("channel", "aeron:ipc or aeron:udp?endpoint=host:port", None, BOTH_MODES,
               "Channel of the sink recording (the sink adds alias=aeron-spark-sink:<sink.id> and a session-id)."),
    OptionSpec("streamId", "an int", None, BOTH_MODES, "Stream id of the sink recording."),
    OptionSpec("sink.id", "1-128 of [A-Za-z0-9._-]", "the streaming query id; batch writes: derived from channel+streamId",
               BOTH_MODES, "Names the sink recording; one sink id = one recording = one writer at a time."),
    OptionSpec("sink.stagingDir",
               "a path, or a file:, s3: (s3a:), gs:, abfs: or hdfs: URI that the driver and every executor reach",
               "<checkpointLocation>/aeron-sink-staging (writeStream), else <archive.dir>/spark-sink-staging", BOTH_MODES,
               "Where tasks stage their rows until the driver commits them (opened with pyarrow.fs.FileSystem.from_uri)."),
    OptionSpec("sink.termLength", "a power of two between 64k and 1g", "16m", BOTH_MODES,
               "Term length of a new sink recording."),
    OptionSpec("sink.mtu", f"{SINK_MTU_AUTO} | an int: a multiple of 32 in [128, 65536], at most termLength/8",
               f"{SINK_MTU_AUTO}: {DEFAULT_IPC_MTU} (ipc), {DEFAULT_IPC_MTU} (udp to a loopback address), "
               f"{DEFAULT_UDP_MTU} (other udp)", BOTH_MODES,
               "MTU of a new sink recording (messages longer than mtu-32 are fragmented; a UDP commit sends up to "
               "mtu bytes of whole frames per datagram). auto: 8192 where no IP fragmentation can happen (IPC, "
               "loopback), else 1408. An existing sink recording keeps its mtu."),
    OptionSpec("sink.receiveWindow", f"{SINK_RECEIVE_WINDOW_AUTO} | none | a size (e.g. 2m), at most termLength/2",
               f"{SINK_RECEIVE_WINDOW_AUTO}: 2m for udp to a loopback address (at most net.core.rmem_max), else none",
               BOTH_MODES,
               "Receive window (rcv-wnd and so-rcvbuf) of the archive's recording subscription on a UDP sink "
               "channel; none: the media driver's default (128k). Ignored when channel sets rcv-wnd or so-rcvbuf."),
    OptionSpec("sink.sourceLocation", "local | remote", "local (ipc), remote (udp)", BOTH_MODES,
               "How the archive records the sink channel (local: IPC or spy on the shared media driver)."),
    OptionSpec("sink.commitTimeoutMs", "an int > 0 (milliseconds)", str(DEFAULT_COMMIT_TIMEOUT_MS), BOTH_MODES,
               "Longest wait for each step of a commit (recording start, back pressure, recorded position)."),
    OptionSpec("checkpointLocation", "a path or URI", None, BOTH_MODES,
               "The query's checkpoint (passed by Spark when set with .option); the default staging root is under it."),
)
_NAMES = tuple(spec.name for spec in SINK_OPTION_SPECS) + CONNECTION_OPTIONS
_BY_LOWER = {name.lower(): name for name in _NAMES}
#: Source options that make no sense for a sink (named in the error): the source's table minus the sink's.
SOURCE_ONLY_OPTIONS = tuple(spec.name for spec in SOURCE_OPTION_SPECS if spec.name.lower() not in _BY_LOWER)
_SOURCE_ONLY = {name.lower(): name for name in SOURCE_ONLY_OPTIONS}


def is_sink_option(name: str) -> bool:
    return name.lower().startswith(SINK_PREFIX)


def without_sink_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options minus ``sink.*`` (for the source's mode-independent checks)."""
    return {key: value for key, value in options.items() if not is_sink_option(key)}


def reject_sink_options_on_read(options: Mapping[str, str]) -> None:
    for key in options:
        if is_sink_option(key):
            raise OptionError(f"option {_BY_LOWER.get(key.lower(), key)} only applies to write / writeStream, "
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
        stream_id = parse_stream_id(raw, "streamId", 0)
        connection = parse_connection(raw)
        sink_id = raw.get("sink.id")
        if sink_id is not None:
            check_sink_id(sink_id)
        elif not streaming:
            sink_id = "batch-" + hashlib.sha256(f"{channel}|{stream_id}".encode()).hexdigest()[:16]
        staging = parse_staging_root(raw, connection.archive_dir, streaming=streaming)
        term_length = parse_optional(raw, "sink.termLength", parse_size) or DEFAULT_TERM_LENGTH
        if term_length & (term_length - 1) or not 64 << 10 <= term_length <= 1 << 30:
            raise OptionError(f"option sink.termLength={raw.get('sink.termLength')} must be a power of two "
                              "between 64k and 1g")
        is_ipc = channel.startswith("aeron:ipc")
        mtu = parse_sink_mtu(raw, channel, term_length)
        location = raw.get("sink.sourceLocation", "local" if is_ipc else "remote").lower()
        if location not in ("local", "remote"):
            raise OptionError(f"option sink.sourceLocation={location!r} is not valid; accepted: local | remote")
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
            commit_timeout_ms=parse_int(raw, "sink.commitTimeoutMs", DEFAULT_COMMIT_TIMEOUT_MS, minimum=1),
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
    window = receive_window_for(setting, channel, rmem_max_path)
    return None if window is None else min(window, term_length // 2)


def parse_sink_mtu(raw: Mapping[str, str], channel: str, term_length: int) -> int:
    """``sink.mtu``: ``auto`` (see :data:`SINK_MTU_AUTO`) or an mtu Aeron accepts for ``term_length``."""
    text = raw.get("sink.mtu", SINK_MTU_AUTO)
    if text.lower() == SINK_MTU_AUTO:
        if channel.startswith("aeron:ipc"):
            return DEFAULT_IPC_MTU
        return min(LOOPBACK_SINK_MTU if is_loopback_udp(channel) else DEFAULT_UDP_MTU, term_length // 8)
    if not re.fullmatch(r"\d+", text):
        raise OptionError(f"option sink.mtu={text!r} is not valid; accepted: {SINK_MTU_AUTO} | a multiple of 32 "
                          f"in [128, 65536], at most sink.termLength / 8 = {term_length // 8}")
    mtu = int(text)
    if mtu % 32 or not 128 <= mtu <= 65536 or mtu > term_length // 8:
        raise OptionError(f"option sink.mtu={mtu} must be a multiple of 32 in [128, 65536] and at most "
                          f"sink.termLength / 8 = {term_length // 8} (or {SINK_MTU_AUTO})")
    return mtu


def parse_staging_root(raw: Mapping[str, str], archive_dir: str | None, *, streaming: bool) -> str:
    """The staging root, normalized and opened once here on the driver (so a bad one fails before any
    task runs): sink.stagingDir; else, for writeStream, <checkpointLocation>/aeron-sink-staging (Spark
    passes checkpointLocation to the sink when the query sets it with .option); else
    <archive.dir>/spark-sink-staging; else an error."""
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
    canonical: dict[str, str] = {}
    for key, value in options.items():
        if key.lower() in SPARK_SUPPLIED_OPTIONS:
            continue
        name = _BY_LOWER.get(key.lower())
        if name is None:
            source_only = _SOURCE_ONLY.get(key.lower())
            if source_only is not None:
                raise OptionError(f"option {source_only} only applies to read / readStream, not to the "
                                  "aeron-archive sink")
            close = difflib.get_close_matches(key.lower(), list(_BY_LOWER), n=3, cutoff=0.6)
            hint = (" Did you mean " + " or ".join(repr(_BY_LOWER[c]) for c in close) + "?") if close else ""
            raise OptionError(f"unknown option {key!r} for the aeron-archive sink.{hint} Accepted options: "
                              f"{', '.join(_NAMES)}")
        if value is not None:
            canonical[name] = str(value).strip()
    return canonical
