"""`aeron-archive replicate`: ask an archive (the destination, ``--control-channel``/``--dir``) to
replicate a recording from another archive (the source, ``--src-control-channel``), and follow it.

The destination does the work (Aeron's replication: it connects to the source, which replays the
recording to the destination's replication channel); this command sends the request
(ReplicateRequest2), then prints on stdout one JSON line per recording signal of the replication
(``{"event": "signal", "signal": "EXTEND", "recordingId": ..., "position": ...}``) and a last
``replicated`` line, and every ``--progress-interval`` seconds a progress line on stderr: bytes
copied, the destination's position against the source's (read from the source archive with a
control session of its own; left out when the source cannot be reached from here) and the rate.

It ends when the replication does (REPLICATE_END, and the STOP of the replica's recording that the
Java archive sends after it), or at SYNC / MERGE with ``--until``. Ctrl-C
(SIGINT) stops the replication in the destination (StopReplication), waits for its REPLICATE_END
and exits 130, leaving a valid prefix that a later ``replicate --dst-recording-id`` extends.

Connection options and the media driver (``--aeron-driver auto`` embeds one on a host without a
driver) are those of the other client commands (`client_commands`). Exit codes: 0 done, 1 the
archive reported an error (the replication failed), 2 bad usage, 3 no answer in time, 130 stopped
by SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

from aeron_spark.archive.cli.client_commands import (
    add_connection_arguments,
    integer_argument,
    hosts_from_arguments,
    connected_client,
    reporting_failures,
)
from aeron_spark.archive.cli.output import EXIT_OK, Output, ToolError
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.client.local_endpoints import default_response_channel
from aeron_spark.archive.codecs import RecordingSignal, RecordingSignalEvent
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.configuration import DEFAULT_CONTROL_STREAM_ID

#: The shell's code for a command ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
#: ``--until``: the signal after which the command returns (REPLICATE_END always ends it).
UNTIL_SIGNALS: dict[str, RecordingSignal] = {
    "end": RecordingSignal.REPLICATE_END, "sync": RecordingSignal.SYNC, "merge": RecordingSignal.MERGE}
DEFAULT_PROGRESS_INTERVAL_S = defaults.DEFAULT_REPLICATE_PROGRESS_INTERVAL_S
#: Between two reads of the destination's signals (a replication lasts seconds to hours).
POLL_PAUSE_S = 0.01
MIB = 1024 * 1024


def _non_negative_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src-control-channel", required=True, metavar="URI",
                        help="the source archive's control channel, as the DESTINATION archive reaches it "
                             "(e.g. aeron:udp?endpoint=source-host:8010)")
    parser.add_argument("--src-control-stream-id", type=integer_argument, default=DEFAULT_CONTROL_STREAM_ID, metavar="N",
                        help=f"the source archive's control stream id (default {DEFAULT_CONTROL_STREAM_ID})")
    parser.add_argument("--recording-id", type=integer_argument, required=True, metavar="ID",
                        help="the recording to replicate, its id in the SOURCE archive")
    parser.add_argument("--dst-recording-id", type=integer_argument, default=-1, metavar="ID",
                        help="a recording of the destination to extend (a replica stopped earlier); "
                             "default: a new recording")
    parser.add_argument("--stop-position", type=integer_argument, default=NULL_POSITION, metavar="P",
                        help="stop replicating at this position; default: follow the source recording "
                             "for as long as it records")
    parser.add_argument("--live-destination", metavar="URI",
                        help="once caught up, merge into the live stream at this destination (signal MERGE) "
                             "and go on recording it")
    parser.add_argument("--replication-channel", metavar="URI",
                        help="channel the source replays to (default: the destination archive's configured "
                             "replication channel)")
    parser.add_argument("--replication-session-id", type=integer_argument, default=-1, metavar="N",
                        help="session id of the replica (default: the source recording's)")
    parser.add_argument("--file-io-max-length", type=integer_argument, default=-1, metavar="BYTES",
                        help="largest file read of the source's replay (default: the source's own)")
    parser.add_argument("--src-credentials-env", metavar="VAR",
                        help="environment variable holding the credentials the replica logs in to the source "
                             "with (ReplicateRequest2's encodedCredentials, UTF-8, sent as they are: Aeron's "
                             "SimpleAuthenticator form, e.g. user:password); kept off the command line")
    parser.add_argument("--until", choices=tuple(UNTIL_SIGNALS), default="end",
                        help="return at this signal: end (REPLICATE_END, the default), sync (the replica "
                             "caught up with the source's stop position) or merge (joined the live stream)")
    parser.add_argument("--progress-interval", type=_non_negative_seconds,
                        default=DEFAULT_PROGRESS_INTERVAL_S, metavar="S",
                        help=f"seconds between progress lines on stderr (default {DEFAULT_PROGRESS_INTERVAL_S}; "
                             f"0: none)")
    add_connection_arguments(parser)


# ------------------------------------------------------------------------------------ progress

@dataclass(frozen=True)
class ReplicationProgress:
    """One progress reading: the destination's recorded position against the source's."""

    replication_id: int
    dst_recording_id: int
    position: int  # the destination recording's position (-1 before it exists)
    start_position: int  # where this replication started copying
    source_position: int | None  # the source recording's, None when unknown
    rate_bytes_per_s: float

    @property
    def bytes_copied(self) -> int:
        return max(0, self.position - self.start_position) if self.position >= 0 else 0


def format_progress(progress: ReplicationProgress) -> str:
    """A progress line: ``replication 7 -> recording 3: 1.50 MiB copied, position 1572864 of
    2097152 (75.0%), 12.34 MiB/s``."""
    head = f"replication {progress.replication_id}"
    if progress.dst_recording_id >= 0:
        head += f" -> recording {progress.dst_recording_id}"
    text = f"{head}: {progress.bytes_copied / MIB:.2f} MiB copied, position {max(progress.position, 0)}"
    if progress.source_position is None:
        text += " (source position unknown)"
    else:
        text += f" of {progress.source_position}"
        remaining = progress.source_position - progress.start_position
        if remaining > 0:
            text += f" ({min(100.0, 100.0 * progress.bytes_copied / remaining):.1f}%)"
    return f"{text}, {progress.rate_bytes_per_s / MIB:.2f} MiB/s"


def signal_line(event: RecordingSignalEvent) -> str:
    """A signal as the JSON line this command prints (Aeron's field names)."""
    return json.dumps({"event": "signal", "signal": _signal_name(event.signal),
                       "correlationId": event.correlation_id, "recordingId": event.recording_id,
                       "subscriptionId": event.subscription_id, "position": event.position})


def _signal_name(value: RecordingSignal | int) -> str:
    return value.name if isinstance(value, RecordingSignal) else str(value)


class ProgressMeter:
    """Reads the destination's and the source's positions and turns them into `ReplicationProgress`."""

    def __init__(self, replication_id: int, destination: ArchiveClient, source: ArchiveClient | None,
                 src_recording_id: int, dst_recording_id: int) -> None:
        self.replication_id = replication_id
        self.destination = destination
        self.source = source
        self.src_recording_id = src_recording_id
        self.dst_recording_id = dst_recording_id
        self.start_position = NULL_POSITION
        self.position = NULL_POSITION
        self._last: tuple[float, int] | None = None

    def on_signal(self, event: RecordingSignalEvent) -> None:
        if event.signal in (RecordingSignal.REPLICATE, RecordingSignal.EXTEND):
            self.dst_recording_id = event.recording_id
            if self.start_position == NULL_POSITION:
                self.start_position = event.position  # the source's start, or where the replica resumes
        if event.position >= 0 and event.signal in (RecordingSignal.SYNC, RecordingSignal.MERGE, RecordingSignal.STOP):
            self.position = max(self.position, event.position)

    def read(self, now: float) -> ReplicationProgress:
        if self.dst_recording_id >= 0:
            with contextlib.suppress(ArchiveError):  # between signals the recording may be starting or stopping
                self.position = max(self.position, self.destination.max_recorded_position(self.dst_recording_id))
        if self.start_position == NULL_POSITION and self.position >= 0:
            self.start_position = self.position
        source_position = None
        if self.source is not None:
            try:
                source_position = self.source.max_recorded_position(self.src_recording_id)
            except ArchiveError:
                source_position = None
        rate = 0.0
        if self._last is not None and now > self._last[0] and self.position >= 0:
            rate = max(0, self.position - self._last[1]) / (now - self._last[0])
        self._last = (now, max(self.position, 0))
        return ReplicationProgress(self.replication_id, self.dst_recording_id, self.position,
                                   max(self.start_position, 0), source_position, rate)


# ------------------------------------------------------------------------------------ the command

@contextlib.contextmanager
def _interrupt_flag() -> Iterator[list[bool]]:
    """A flag set by SIGINT while the block runs (so the replication is stopped between two reads,
    never in the middle of a request); the previous handler is restored after."""
    flag = [False]

    def on_sigint(_number: int, _frame: FrameType | None) -> None:
        flag[0] = True
    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: Ctrl-C is not this command's to handle
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _src_credentials(args: argparse.Namespace) -> bytes | None:
    return None if args.src_credentials_env is None else os.environ[args.src_credentials_env].encode("utf-8")


def _source_client(args: argparse.Namespace, destination: ArchiveClient, output: Output) -> ArchiveClient | None:
    """A control session with the source archive, to read its position for the progress lines;
    None (said once on stderr) when it cannot be reached from this host."""
    if args.progress_interval == 0:
        return None
    control = args.src_control_channel
    try:
        advertised, bind = hosts_from_arguments(args, control)
        return ArchiveClient.connect(
            control_channel=control, control_stream_id=args.src_control_stream_id, aeron=destination.aeron,
            response_channel=default_response_channel(control, bind), response_host=advertised,
            timeout=args.timeout, credentials=_src_credentials(args))
    except (ArchiveError, ToolError, OSError, ValueError) as error:
        output.err.write(f"replicate: the source archive at {control} does not answer this host ({error}); "
                         f"progress shows the destination only\n")
        return None


def _check(args: argparse.Namespace) -> None:
    if args.recording_id < 0:
        raise ToolError(f"--recording-id {args.recording_id} is invalid: expected a recording id >= 0")
    if args.dst_recording_id < -1:
        raise ToolError(f"--dst-recording-id {args.dst_recording_id} is invalid: expected a recording id "
                        f">= 0 (or leave it out for a new recording)")
    if args.stop_position < NULL_POSITION:
        raise ToolError(f"--stop-position {args.stop_position} is invalid: expected a position >= 0")
    if args.file_io_max_length != -1 and args.file_io_max_length <= 0:
        raise ToolError(f"--file-io-max-length {args.file_io_max_length} is invalid: expected a positive "
                        f"number of bytes")
    if not args.src_control_channel.startswith("aeron:"):
        raise ToolError(f"--src-control-channel {args.src_control_channel!r} is invalid: expected an aeron: "
                        f"URI such as aeron:udp?endpoint=source-host:8010")
    if args.src_credentials_env is not None and not os.environ.get(args.src_credentials_env):
        raise ToolError(f"--src-credentials-env {args.src_credentials_env}: that environment variable is not set "
                        f"or empty; export the source archive's credentials in it")
    if args.until == "merge" and args.live_destination is None:
        raise ToolError("--until merge needs --live-destination (only a replication that merges into the "
                        "live stream signals MERGE)")


@reporting_failures
def run(args: argparse.Namespace, output: Output) -> int:
    _check(args)
    until = UNTIL_SIGNALS[args.until]
    with connected_client(args) as client, _interrupt_flag() as interrupted:
        replication_id = client.replicate(
            args.recording_id, args.src_control_channel, args.src_control_stream_id,
            dst_recording_id=args.dst_recording_id, stop_position=args.stop_position,
            live_destination=args.live_destination, replication_channel=args.replication_channel,
            file_io_max_length=args.file_io_max_length, replication_session_id=args.replication_session_id,
            src_credentials=_src_credentials(args))
        output.line(json.dumps({"event": "replication-started", "replicationId": replication_id,
                                "srcRecordingId": args.recording_id}))
        source = _source_client(args, client, output)
        try:
            meter = ProgressMeter(replication_id, client, source, args.recording_id, args.dst_recording_id)
            return _follow(args, output, client, meter, until, interrupted)
        finally:
            if source is not None:
                source.close()


def _follow(args: argparse.Namespace, output: Output, client: ArchiveClient, meter: ProgressMeter,
            until: RecordingSignal, interrupted: list[bool]) -> int:
    """Prints the replication's signals (and progress) until ``until`` or REPLICATE_END; on SIGINT
    stops the replication and waits for its end."""
    replication_id = meter.replication_id
    seen: list[str] = []
    next_progress = time.monotonic() + args.progress_interval
    stopping_since: float | None = None
    ended: tuple[RecordingSignalEvent, float] | None = None  # REPLICATE_END and when it came
    while True:
        for event in client.poll_replication(replication_id):
            meter.on_signal(event)
            seen.append(_signal_name(event.signal))
            output.line(signal_line(event))
            if event.signal == RecordingSignal.REPLICATE_END:
                ended = (event, time.monotonic())
            elif event.signal == until and stopping_since is None:
                return _finish(output, meter, seen, event, stopped=False)
        now = time.monotonic()
        if ended is not None:
            # Java stops the replica's recording (STOP, its final position) after REPLICATE_END.
            awaits_stop = "EXTEND" in seen and "STOP" not in seen
            if not awaits_stop or now - ended[1] > args.timeout:
                client.poll_replication(replication_id)  # raises the replication's ERROR, read before its end
                return _finish(output, meter, seen, ended[0], stopped=stopping_since is not None)
        elif interrupted[0] and stopping_since is None:
            stopping_since = now
            output.err.write(f"replicate: interrupted: stopping replication {replication_id}\n")
            if not client.try_stop_replication(replication_id):
                return _finish(output, meter, seen, None, stopped=True)  # it had just ended
        elif stopping_since is not None and now - stopping_since > args.timeout:
            output.error(f"replication {replication_id} did not end within {args.timeout} s of "
                         f"StopReplication (--timeout)")
            return EXIT_INTERRUPTED
        if args.progress_interval > 0 and now >= next_progress and ended is None:
            output.err.write(format_progress(meter.read(now)) + "\n")
            output.err.flush()
            next_progress = now + args.progress_interval
        time.sleep(POLL_PAUSE_S)


def _finish(output: Output, meter: ProgressMeter, seen: list[str], last: RecordingSignalEvent | None, *,
            stopped: bool) -> int:
    progress = meter.read(time.monotonic())
    output.line(json.dumps({
        "event": "replicated", "replicationId": meter.replication_id, "dstRecordingId": meter.dst_recording_id,
        "signals": seen, "endedWith": None if last is None else _signal_name(last.signal),
        "position": progress.position, "sourcePosition": progress.source_position, "stopped": stopped}))
    return EXIT_INTERRUPTED if stopped else EXIT_OK

