"""`aeron-archive serve`: run the archive sidecar until SIGTERM or SIGINT.

``configure`` adds its options and ``run`` runs it (the command table in
`aeron_spark.archive.cli.main` names them). When the archive is up it prints one line to stdout
and flushes it::

    aeron-archive ready: pid=… archiveId=… dir=… aeronDir=… control=<channel> controlStreamId=10
        localControl=<channel> localControlStreamId=11 events=<channel|off> eventsStreamId=30
        threadingMode=dedicated|shared

(one line; wrapped here)

and logs to stderr. SIGTERM/SIGINT stop it cleanly (active recordings stopped with their stop
positions stored, catalog synced, mark file marked terminated, embedded driver closed); the exit
code is 0 then, 2 for bad options, 1 when the archive cannot start.

Authentication (off by default): ``--auth-credentials-file FILE`` with ``principal:secret``
lines enables the shared-secret authenticator (HMAC-SHA256 challenge, or plain
``principal:secret`` credentials unless ``--auth-challenge-only``); see `aeron_spark.archive.service.authenticator`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.cli.output import EXIT_OK, Output, ToolError
from aeron_spark.archive.configuration import byte_length_text as _length
from aeron_spark.archive.service.agent_runner import IDLE_STRATEGIES, idle_strategy_name, threading_mode_name
from aeron_spark.archive.service.archive_service import ArchiveService, ArchiveServiceOptions

READY_PREFIX = "aeron-archive ready:"
CHECKSUMS = {"none": None, "crc32c": "CRC-32C", "crc32": "CRC-32"}

log = logging.getLogger(__name__)


_LENGTH_UNITS = {"k": defaults.KIB, "m": defaults.MIB, "g": defaults.GIB}


def _udp_channel(text: str) -> str:
    """A UDP channel URI (replication crosses hosts: IPC cannot carry it)."""
    if not text.startswith("aeron:udp"):
        raise argparse.ArgumentTypeError(f"expected a UDP channel aeron:udp?endpoint=<host>:<port>, got {text!r}")
    return text


def _power_of_two_length(text: str) -> int:
    number, unit = text.lower(), 1
    if number[-1:] in _LENGTH_UNITS:
        number, unit = number[:-1], _LENGTH_UNITS[number[-1]]
    try:
        value = int(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a byte length such as 1048576, 64k, 128m or 1g, "
                                         f"got {text!r}") from None
    if value <= 0 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"length {text} must be a power of two")
    return value


def _stream_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"stream id must be an integer, got {text!r}") from None


def _idle_strategy(text: str) -> str:
    try:
        return idle_strategy_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _threading_mode(text: str) -> str:
    try:
        return threading_mode_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _byte_count(text: str) -> int:
    """A byte count >= 0: 1048576, or with a k/m/g suffix (1024-based, as the other length options)."""
    number, unit = text.strip().lower(), 1
    if number[-1:] in _LENGTH_UNITS:
        number, unit = number[:-1], _LENGTH_UNITS[number[-1]]
    try:
        value = int(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a byte count such as 134217728, 512k, 128m or 1g, "
                                         f"got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"byte count {text} must be >= 0")
    return value


_DURATION_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def _duration_ns(text: str) -> int:
    """A duration as Aeron's properties take it (SystemUtil.parseDuration): a number of ns, or with a
    unit ns, us, ms or s; more than 0."""
    lowered = text.strip().lower()
    number, unit = lowered, 1
    for suffix in ("ns", "us", "ms", "s"):
        if lowered.endswith(suffix):
            number, unit = lowered[:-len(suffix)], _DURATION_UNITS_NS[suffix]
            break
    try:
        value = int(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration such as 100ms, 500us, 1s or 2000000 (ns), "
                                         f"got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"duration {text} must be more than 0")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, required=True, metavar="DIR",
                        help="archive directory (created if missing)")
    parser.add_argument("--aeron-dir", metavar="DIR",
                        help="attach to the media driver in DIR (default: start an embedded C driver)")
    parser.add_argument("--control-channel", default=defaults.DEFAULT_CONTROL_CHANNEL,
                        help=f"control request channel, 'off' for none (default {defaults.DEFAULT_CONTROL_CHANNEL})")
    parser.add_argument("--control-stream-id", type=_stream_id, default=defaults.DEFAULT_CONTROL_STREAM_ID,
                        help=f"control stream id (default {defaults.DEFAULT_CONTROL_STREAM_ID})")
    parser.add_argument("--local-control-channel", default=defaults.DEFAULT_LOCAL_CONTROL_CHANNEL,
                        help=f"control channel of clients on this media driver "
                             f"(default {defaults.DEFAULT_LOCAL_CONTROL_CHANNEL})")
    parser.add_argument("--local-control-stream-id", type=_stream_id,
                        default=defaults.DEFAULT_LOCAL_CONTROL_STREAM_ID,
                        help=f"local control stream id (default {defaults.DEFAULT_LOCAL_CONTROL_STREAM_ID})")
    parser.add_argument("--recording-events-channel", default=None,
                        help="publish RecordingStarted/Progress/Stopped on this channel (default off)")
    parser.add_argument("--recording-events-stream-id", type=_stream_id,
                        default=defaults.DEFAULT_RECORDING_EVENTS_STREAM_ID,
                        help=f"recording events stream id (default {defaults.DEFAULT_RECORDING_EVENTS_STREAM_ID})")
    parser.add_argument("--replication-channel", type=_udp_channel, default=defaults.DEFAULT_REPLICATION_CHANNEL,
                        help="where a source archive replays to when this archive replicates from it and the request "
                             "names no replication channel; a source on another host must reach it: give this host's "
                             f"address (default {defaults.DEFAULT_REPLICATION_CHANNEL})")
    parser.add_argument("--replication-response-channel", type=_udp_channel,
                        default=defaults.DEFAULT_REPLICATION_RESPONSE_CHANNEL,
                        help="where a source archive answers this archive's control requests while it replicates "
                             f"(same rule; default {defaults.DEFAULT_REPLICATION_RESPONSE_CHANNEL})")
    parser.add_argument("--archive-id", type=int, default=None,
                        help="archive id (default: the Aeron client id)")
    parser.add_argument("--segment-length", type=_power_of_two_length, default=defaults.DEFAULT_SEGMENT_LENGTH,
                        help=f"segment file length, a power of two in [{_length(defaults.MIN_SEGMENT_LENGTH)}, "
                             f"{_length(defaults.MAX_SEGMENT_LENGTH)}] "
                             f"(default {_length(defaults.DEFAULT_SEGMENT_LENGTH)})")
    parser.add_argument("--file-sync", type=int, choices=defaults.FILE_SYNC_LEVELS, default=defaults.DEFAULT_FILE_SYNC,
                        help="0 none, 1 fdatasync data, 2 fsync data and metadata (segments and catalog; "
                             f"default {defaults.DEFAULT_FILE_SYNC})")
    parser.add_argument("--segment-direct-io", action=argparse.BooleanOptionalAction,
                        default=defaults.DEFAULT_SEGMENT_DIRECT_IO,
                        help="write segment files with O_DIRECT through a page-aligned buffer where "
                             "the file system supports it (default off: buffered writes through the page "
                             "cache, as Aeron; on pays for archives that record large blocks, e.g. a Spark "
                             "sink's, see docs/performance.md)")
    parser.add_argument("--checksum", choices=sorted(CHECKSUMS), default="none",
                        help="record checksum stamped into each frame's session-id field")
    parser.add_argument("--replay-checksum", choices=sorted(CHECKSUMS), default="none",
                        help="verify each frame's stored checksum before replaying it (recordings "
                             "made with the same --checksum); a mismatch ends the replay with an error")
    parser.add_argument("--replay-buffer-length", type=_power_of_two_length,
                        default=defaults.DEFAULT_REPLAY_BUFFER_LENGTH,
                        help=f"bytes a replay reads at a time, a power of two "
                             f"(default {_length(defaults.DEFAULT_REPLAY_BUFFER_LENGTH)})")
    parser.add_argument("--max-concurrent-recordings", type=int, default=defaults.DEFAULT_MAX_CONCURRENT_RECORDINGS,
                        help=f"default {defaults.DEFAULT_MAX_CONCURRENT_RECORDINGS}")
    parser.add_argument("--max-concurrent-replays", type=int, default=defaults.DEFAULT_MAX_CONCURRENT_REPLAYS,
                        help=f"default {defaults.DEFAULT_MAX_CONCURRENT_REPLAYS}")
    parser.add_argument("--connect-timeout-ms", type=int, default=defaults.DEFAULT_CONNECT_TIMEOUT_MS,
                        help=f"how long a session, recording or replay may take to connect "
                             f"(default {defaults.DEFAULT_CONNECT_TIMEOUT_MS})")
    parser.add_argument("--session-idle-timeout-ms", type=int, default=defaults.DEFAULT_SESSION_IDLE_TIMEOUT_MS,
                        help=f"end control sessions without a request for this long "
                             f"(default {defaults.DEFAULT_SESSION_IDLE_TIMEOUT_MS} = never)")
    parser.add_argument("--idle-strategy", type=_idle_strategy,
                        default=os.environ.get("AERON_ARCHIVE_IDLE_STRATEGY", defaults.DEFAULT_IDLE_STRATEGY),
                        help=f"what an agent does after a duty cycle without work: {', '.join(IDLE_STRATEGIES)} "
                             f"(Aeron's aeron.archive.idle.strategy; default $AERON_ARCHIVE_IDLE_STRATEGY or "
                             f"{defaults.DEFAULT_IDLE_STRATEGY}: parks doubling from 100 us to Aeron's 1 ms)")
    parser.add_argument("--recorder-idle-strategy", type=_idle_strategy,
                        default=os.environ.get("AERON_ARCHIVE_RECORDER_IDLE_STRATEGY"),
                        help="the recorder's idle strategy while it records (default "
                             "$AERON_ARCHIVE_RECORDER_IDLE_STRATEGY or --idle-strategy)")
    parser.add_argument("--replayer-idle-strategy", type=_idle_strategy,
                        default=os.environ.get("AERON_ARCHIVE_REPLAYER_IDLE_STRATEGY"),
                        help="the replayer's idle strategy while it replays (default "
                             "$AERON_ARCHIVE_REPLAYER_IDLE_STRATEGY or --idle-strategy)")
    parser.add_argument("--threading-mode", type=_threading_mode, metavar="{" + ",".join(defaults.THREADING_MODES) + "}",
                        default=defaults.DEFAULT_THREADING_MODE,
                        help=f"{' or '.join(defaults.THREADING_MODES)} (Aeron's aeron.archive.threading.mode; "
                             f"Aeron's invoker is not supported): dedicated runs the conductor, recorder and "
                             f"replayer on a thread each, shared runs the three on one thread with "
                             f"--idle-strategy (the recorder/replayer idle strategies then do not apply); "
                             f"written in the mark file (default {defaults.DEFAULT_THREADING_MODE})")
    parser.add_argument("--low-storage-threshold", type=_byte_count, default=defaults.DEFAULT_LOW_STORAGE_THRESHOLD,
                        metavar="BYTES",
                        help="refuse StartRecording and ExtendRecording (so also replication into this "
                             "archive) with STORAGE_SPACE while the archive directory's file system has "
                             "this many usable bytes or fewer; k/m/g suffixes accepted (Aeron's "
                             "aeron.archive.low.storage.space.threshold; default the segment length)")
    for agent, default_ns in (("conductor", defaults.DEFAULT_CONDUCTOR_CYCLE_THRESHOLD_NS),
                              ("recorder", defaults.DEFAULT_RECORDER_CYCLE_THRESHOLD_NS),
                              ("replayer", defaults.DEFAULT_REPLAYER_CYCLE_THRESHOLD_NS)):
        parser.add_argument(f"--{agent}-cycle-threshold", type=_duration_ns, default=default_ns, metavar="DURATION",
                            help=f"count the {agent}'s duty cycles longer than this in its 'work cycle time "
                                 f"exceeded' counter (Aeron's aeron.archive.{agent}.cycle.threshold; e.g. 100ms, "
                                 f"500us, 1s; default {default_ns // 1_000_000}ms)")
    parser.add_argument("--auth-credentials-file", type=Path, default=None,
                        help="require authentication against 'principal:secret' lines in this file")
    parser.add_argument("--auth-challenge-only", action="store_true",
                        help="with --auth-credentials-file: refuse plain 'principal:secret' credentials")
    parser.add_argument("--log-level", default="INFO",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def options_from_args(args: argparse.Namespace) -> ArchiveServiceOptions:
    from aeron_spark.archive.service.authenticator import CredentialsFileError, SecretAuthenticator

    if not defaults.MIN_SEGMENT_LENGTH <= args.segment_length <= defaults.MAX_SEGMENT_LENGTH:
        raise ToolError(f"--segment-length {args.segment_length} must be in "
                        f"[{_length(defaults.MIN_SEGMENT_LENGTH)}, {_length(defaults.MAX_SEGMENT_LENGTH)}]")
    if args.auth_challenge_only and args.auth_credentials_file is None:
        raise ToolError("--auth-challenge-only needs --auth-credentials-file")
    authenticator = None
    if args.auth_credentials_file is not None:
        try:
            authenticator = SecretAuthenticator.from_file(args.auth_credentials_file,
                                                          allow_plain=not args.auth_challenge_only)
        except CredentialsFileError as error:
            raise ToolError(str(error)) from None
    control = None if args.control_channel.lower() == "off" else args.control_channel
    return ArchiveServiceOptions(
        archive_dir=args.dir, aeron_dir=args.aeron_dir, control_channel=control,
        control_stream_id=args.control_stream_id, local_control_channel=args.local_control_channel,
        local_control_stream_id=args.local_control_stream_id,
        recording_events_channel=args.recording_events_channel,
        recording_events_stream_id=args.recording_events_stream_id, archive_id=args.archive_id,
        segment_file_length=args.segment_length, file_sync=args.file_sync,
        segment_direct_io=args.segment_direct_io, catalog_file_sync=args.file_sync, checksum=CHECKSUMS[args.checksum],
        replay_checksum=CHECKSUMS[args.replay_checksum],
        replay_buffer_length=args.replay_buffer_length,
        max_concurrent_recordings=args.max_concurrent_recordings,
        max_concurrent_replays=args.max_concurrent_replays,
        connect_timeout_ms=args.connect_timeout_ms,
        session_idle_timeout_ms=args.session_idle_timeout_ms, authenticator=authenticator,
        idle_strategy=args.idle_strategy, recorder_idle_strategy=args.recorder_idle_strategy,
        replayer_idle_strategy=args.replayer_idle_strategy,
        threading_mode=args.threading_mode, low_storage_threshold=args.low_storage_threshold,
        conductor_cycle_threshold_ns=args.conductor_cycle_threshold,
        recorder_cycle_threshold_ns=args.recorder_cycle_threshold,
        replayer_cycle_threshold_ns=args.replayer_cycle_threshold,
        replication_channel=args.replication_channel,
        replication_response_channel=args.replication_response_channel)


def ready_line(service: ArchiveService) -> str:
    o = service.options
    return (f"{READY_PREFIX} pid={os.getpid()} archiveId={service.archive_id} dir={o.archive_dir} "
            f"aeronDir={service.aeron_dir} control={o.control_channel or 'off'} "
            f"controlStreamId={o.control_stream_id} localControl={o.local_control_channel} "
            f"localControlStreamId={o.local_control_stream_id} "
            f"events={o.recording_events_channel or 'off'} eventsStreamId={o.recording_events_stream_id} "
            f"threadingMode={o.threading_mode}")


def _memory_debug_hook() -> None:
    """``AERON_ARCHIVE_TRACEMALLOC=1``: trace Python allocations; each SIGUSR2 logs the 15 sites
    that grew most since the previous SIGUSR2 (a debugging aid for memory growth, off by default)."""
    if os.environ.get("AERON_ARCHIVE_TRACEMALLOC") != "1":
        return
    import tracemalloc
    tracemalloc.start(8)
    last = [tracemalloc.take_snapshot()]

    def dump(*_: object) -> None:
        snapshot = tracemalloc.take_snapshot()
        for stat in snapshot.compare_to(last[0], "traceback")[:15]:
            log.warning("tracemalloc: %s\n%s", stat, "\n".join(stat.traceback.format()))
        last[0] = snapshot
    signal.signal(signal.SIGUSR2, dump)


def run(args: argparse.Namespace, output: Output) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    options = options_from_args(args)
    _memory_debug_hook()
    stop = threading.Event()
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.signal(signum, lambda *_: stop.set())
    try:
        service = ArchiveService(options)
        try:
            service.start()
        except Exception as error:  # noqa: BLE001 - reported as the command's failure
            log.error("archive failed to start: %s", error, exc_info=log.isEnabledFor(logging.DEBUG))
            output.error(f"archive failed to start: {error}")
            return 1
        try:
            output.line(ready_line(service))
            output.out.flush()
            while not stop.wait(0.5):
                pass
            log.info("signal received: shutting down")
        finally:
            service.close()
        log.info("archive stopped cleanly")
        return EXIT_OK
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

