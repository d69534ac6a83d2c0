"""`aeron-archive serve`: run the archive sidecar until SIGTERM or SIGINT.

``configure`` adds its options and ``run`` runs it (the command table in
`aeron_spark.archive.cli.main` names them). When the archive is up it prints one line to stdout
and flushes it::

    aeron-archive ready: pid=… archiveId=… dir=… aeronDir=… control=<channel> controlStreamId=10
        localControl=<channel> localControlStreamId=11 events=<channel|off> eventsStreamId=30

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

from aeron_spark.archive.cli.output import EXIT_OK, Output, ToolError
from aeron_spark.archive.service.agent_runner import IDLE_STRATEGIES, idle_strategy_name
from aeron_spark.archive.service.archive_service import (
    DEFAULT_CONTROL_CHANNEL,
    DEFAULT_CONTROL_STREAM_ID,
    DEFAULT_LOCAL_CONTROL_CHANNEL,
    DEFAULT_LOCAL_CONTROL_STREAM_ID,
    DEFAULT_RECORDING_EVENTS_STREAM_ID,
    ArchiveService,
    ArchiveServiceOptions,
)

READY_PREFIX = "aeron-archive ready:"
CHECKSUMS = {"none": None, "crc32c": "CRC-32C", "crc32": "CRC-32"}

log = logging.getLogger(__name__)


def _power_of_two_length(text: str) -> int:
    try:
        value = int(text.lower().removesuffix("k").removesuffix("m")) * (
            1024 if text.lower().endswith("k") else 1024 * 1024 if text.lower().endswith("m") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a byte length such as 1048576, 64k or 128m, "
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


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, required=True, metavar="DIR",
                        help="archive directory (created if missing)")
    parser.add_argument("--aeron-dir", metavar="DIR",
                        help="attach to the media driver in DIR (default: start an embedded C driver)")
    parser.add_argument("--control-channel", default=DEFAULT_CONTROL_CHANNEL,
                        help=f"control request channel, 'off' for none (default {DEFAULT_CONTROL_CHANNEL})")
    parser.add_argument("--control-stream-id", type=_stream_id, default=DEFAULT_CONTROL_STREAM_ID)
    parser.add_argument("--local-control-channel", default=DEFAULT_LOCAL_CONTROL_CHANNEL)
    parser.add_argument("--local-control-stream-id", type=_stream_id,
                        default=DEFAULT_LOCAL_CONTROL_STREAM_ID)
    parser.add_argument("--recording-events-channel", default=None,
                        help="publish RecordingStarted/Progress/Stopped on this channel (default off)")
    parser.add_argument("--recording-events-stream-id", type=_stream_id,
                        default=DEFAULT_RECORDING_EVENTS_STREAM_ID)
    parser.add_argument("--archive-id", type=int, default=None,
                        help="archive id (default: the Aeron client id)")
    parser.add_argument("--segment-length", type=_power_of_two_length, default=128 * 1024 * 1024,
                        help="segment file length, a power of two in [64k, 1g] (default 128m)")
    parser.add_argument("--file-sync", type=int, choices=(0, 1, 2), default=0,
                        help="0 none, 1 fdatasync data, 2 fsync data and metadata (segments and catalog)")
    parser.add_argument("--segment-direct-io", action=argparse.BooleanOptionalAction, default=False,
                        help="write segment files with O_DIRECT through a page-aligned buffer where "
                             "the file system supports it (default off: buffered writes through the page "
                             "cache, as Aeron; on pays for archives that record large blocks, e.g. a Spark "
                             "sink's, see docs/performance.md)")
    parser.add_argument("--checksum", choices=sorted(CHECKSUMS), default="none",
                        help="record checksum stamped into each frame's session-id field")
    parser.add_argument("--replay-checksum", choices=sorted(CHECKSUMS), default="none",
                        help="verify each frame's stored checksum before replaying it (recordings "
                             "made with the same --checksum); a mismatch ends the replay with an error")
    parser.add_argument("--replay-buffer-length", type=_power_of_two_length, default=1024 * 1024)
    parser.add_argument("--max-concurrent-recordings", type=int, default=20)
    parser.add_argument("--max-concurrent-replays", type=int, default=20)
    parser.add_argument("--connect-timeout-ms", type=int, default=5_000)
    parser.add_argument("--session-idle-timeout-ms", type=int, default=0,
                        help="end control sessions without a request for this long (default 0 = never)")
    parser.add_argument("--idle-strategy", type=_idle_strategy,
                        default=os.environ.get("AERON_ARCHIVE_IDLE_STRATEGY", "backoff"),
                        help=f"what an agent does after a duty cycle without work: {', '.join(IDLE_STRATEGIES)} "
                             "(Aeron's aeron.archive.idle.strategy; default $AERON_ARCHIVE_IDLE_STRATEGY or "
                             "backoff: spin, yield, then park up to 1 ms, as Aeron 1.15.1)")
    parser.add_argument("--recorder-idle-strategy", type=_idle_strategy,
                        default=os.environ.get("AERON_ARCHIVE_RECORDER_IDLE_STRATEGY"),
                        help="the recorder's idle strategy while it records (default "
                             "$AERON_ARCHIVE_RECORDER_IDLE_STRATEGY or --idle-strategy)")
    parser.add_argument("--replayer-idle-strategy", type=_idle_strategy,
                        default=os.environ.get("AERON_ARCHIVE_REPLAYER_IDLE_STRATEGY"),
                        help="the replayer's idle strategy while it replays (default "
                             "$AERON_ARCHIVE_REPLAYER_IDLE_STRATEGY or --idle-strategy)")
    parser.add_argument("--auth-credentials-file", type=Path, default=None,
                        help="require authentication against 'principal:secret' lines in this file")
    parser.add_argument("--auth-challenge-only", action="store_true",
                        help="with --auth-credentials-file: refuse plain 'principal:secret' credentials")
    parser.add_argument("--log-level", default="INFO",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def options_from_args(args: argparse.Namespace) -> ArchiveServiceOptions:
    from aeron_spark.archive.service.authenticator import CredentialsFileError, SecretAuthenticator

    if not 64 * 1024 <= args.segment_length <= 1024 ** 3:
        raise ToolError(f"--segment-length {args.segment_length} must be in [64k, 1g]")
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
        replayer_idle_strategy=args.replayer_idle_strategy)


def ready_line(service: ArchiveService) -> str:
    o = service.options
    return (f"{READY_PREFIX} pid={os.getpid()} archiveId={service.archive_id} dir={o.archive_dir} "
            f"aeronDir={service.aeron_dir} control={o.control_channel or 'off'} "
            f"controlStreamId={o.control_stream_id} localControl={o.local_control_channel} "
            f"localControlStreamId={o.local_control_stream_id} "
            f"events={o.recording_events_channel or 'off'} eventsStreamId={o.recording_events_stream_id}")


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

