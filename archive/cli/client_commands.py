"""`aeron-archive recordings | replay | stat`: talk to a running archive (ours or a real Aeron one).

Each command is a ``run(args, output)`` with its ``configure(parser)``; the command table in
`aeron_spark.archive.cli.main` names them.

* ``recordings``: one JSON object per recording descriptor, Aeron's camelCase field names.
* ``replay ID``: one JSON object per replayed message: ``position`` (where it starts: pass it to
  ``--position`` to replay from it), ``nextPosition``, ``length`` and the base64 ``payload``.
* ``stat``: the archive's counters from the media driver's counters file, AeronStat-style
  (``id: value - type - label``), or JSON lines with ``--json``.

The archive is found by ``--dir`` (its mark file: local IPC control channel and Aeron directory)
or by ``--control-channel``/``--control-stream-id`` (default ``aeron:udp?endpoint=localhost:8010``
stream 10) through the driver in ``--aeron-dir``. ``--legacy`` speaks Aeron 1.15.x.

Exit codes: 0 ok, 1 the archive reported an error or the recording is unknown, 2 bad usage,
3 the archive did not answer in time.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import json
from pathlib import Path

from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.cli.output import EXIT_OK, Output, ToolError
from aeron_spark.archive.client.archive_client import (
    AERON_DRIVER_TIMEOUT_S,
    DEFAULT_CONTROL_CHANNEL,
    DEFAULT_CONTROL_STREAM_ID,
    DEFAULT_RESPONSE_STREAM_ID,
    DEFAULT_TIMEOUT_S,
    ArchiveClient,
    ArchiveError,
    ArchiveTimeoutError,
)
from aeron_spark.archive.client.transport import default_aeron_dir
from aeron_spark.archive.client.replay_subscription import ReplayError
from aeron_spark.driver_integration import AeronError

EXIT_ARCHIVE_ERROR = 1
EXIT_TIMEOUT = 3
DEFAULT_REPLAY_STREAM_ID = 2001
#: Aeron's archive counters: rec-pos (100) and the archive's own counters (101-113).
ARCHIVE_COUNTER_TYPE_IDS = range(100, 114)


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("archive connection")
    group.add_argument("--dir", type=Path, metavar="DIR",
                       help="archive directory: find the archive through its mark file "
                            "(its local IPC control channel and Aeron directory)")
    group.add_argument("--control-channel", metavar="URI",
                       help=f"archive control channel (default {DEFAULT_CONTROL_CHANNEL}, or the "
                            f"mark file's with --dir)")
    group.add_argument("--control-stream-id", type=_int, metavar="N",
                       help=f"control stream id (default {DEFAULT_CONTROL_STREAM_ID})")
    group.add_argument("--response-channel", metavar="URI",
                       help="channel the archive answers on (default aeron:udp?endpoint=localhost:0 "
                            "= a free port; aeron:ipc with an IPC control channel)")
    group.add_argument("--response-stream-id", type=_int, default=DEFAULT_RESPONSE_STREAM_ID,
                       metavar="N", help=f"response stream id (default {DEFAULT_RESPONSE_STREAM_ID})")
    group.add_argument("--aeron-dir", metavar="DIR",
                       help="media driver directory (default: the mark file's with --dir, else "
                            "$AERON_DIR or /dev/shm/aeron-<user>)")
    group.add_argument("--legacy", action="store_true",
                       help="speak the Aeron 1.15.x archive protocol (a real 1.15.1 archive)")
    group.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                       help=f"seconds to wait for each answer (default {DEFAULT_TIMEOUT_S})")


def open_client(args: argparse.Namespace) -> ArchiveClient:
    """The ArchiveClient the connection arguments describe."""
    options: dict = {"timeout": args.timeout, "protocol": "legacy" if args.legacy else "modern",
                     "response_stream_id": args.response_stream_id}
    if args.control_channel is not None:
        options["control_channel"] = args.control_channel
    if args.control_stream_id is not None:
        options["control_stream_id"] = args.control_stream_id
    if args.response_channel is not None:
        options["response_channel"] = args.response_channel
    if args.aeron_dir is not None:
        options["aeron_dir"] = args.aeron_dir
    if args.dir is not None:
        return ArchiveClient.from_mark_file(args.dir, **options)
    control = options.get("control_channel", DEFAULT_CONTROL_CHANNEL)
    if "response_channel" not in options and control.startswith("aeron:ipc"):
        options["response_channel"] = "aeron:ipc"
    return ArchiveClient.connect(**options)


def reporting_failures(run):
    """Runs a command, turning archive and driver failures into a message and an exit code."""
    @functools.wraps(run)
    def wrapped(args: argparse.Namespace, output: Output) -> int:
        try:
            return run(args, output)
        except ArchiveTimeoutError as error:
            output.error(str(error))
            return EXIT_TIMEOUT
        except (ArchiveError, ReplayError, AeronError) as error:
            output.error(str(error))
            return EXIT_ARCHIVE_ERROR
        except BrokenPipeError:  # e.g. piped into `head`: the reader has what it wanted
            with contextlib.suppress(Exception):
                output.out.close()
            return EXIT_OK
    return wrapped


# ------------------------------------------------------------------------------------ recordings

def configure_recordings(parser: argparse.ArgumentParser) -> None:
    _connection_arguments(parser)
    parser.add_argument("--recording-id", type=_int, metavar="ID", help="only this recording")
    parser.add_argument("--from-id", type=_int, default=0, metavar="ID",
                        help="first recording id (default 0)")
    parser.add_argument("--count", type=_int, metavar="N", help="at most N descriptors (default all)")
    parser.add_argument("--channel-fragment", metavar="TEXT",
                        help="only recordings whose channel contains TEXT (needs --stream-id)")
    parser.add_argument("--stream-id", type=_int, metavar="N", help="only recordings of this stream")


@reporting_failures
def recordings(args: argparse.Namespace, output: Output) -> int:
    if args.count is not None and args.count < 0:
        raise ToolError(f"--count {args.count} is invalid: must be >= 0")
    if args.channel_fragment is not None and args.stream_id is None:
        raise ToolError("--channel-fragment needs --stream-id (Aeron matches both)")
    with open_client(args) as client:
        if args.recording_id is not None:
            descriptor = client.list_recording(args.recording_id)
            if descriptor is None:
                output.error(f"recording {args.recording_id} is not in the archive at "
                             f"{client.description}")
                return EXIT_ARCHIVE_ERROR
            found = [descriptor]
        elif args.stream_id is not None:
            found = client.list_recordings_for_uri(args.from_id, args.count,
                                                   args.channel_fragment or "", args.stream_id)
        else:
            found = client.list_recordings(args.from_id, args.count)
    for descriptor in found:
        output.line(json.dumps(descriptor.to_aeron_dict()))
    return EXIT_OK


# ------------------------------------------------------------------------------------ replay

def configure_replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", type=_int, metavar="ID", help="recording id")
    parser.add_argument("--position", type=_int, metavar="P",
                        help="where to start: a message start position (default: the recording's start)")
    parser.add_argument("--length", type=_int, metavar="L",
                        help="bytes of stream to replay (default: up to the stop position, or for an "
                             "active recording up to what is recorded now)")
    parser.add_argument("--follow", action="store_true",
                        help="keep replaying an active recording as it grows (until it stops)")
    parser.add_argument("--replay-channel", metavar="URI",
                        help="channel to replay on (default aeron:ipc with an IPC control channel, "
                             "else aeron:udp?endpoint=localhost:0 = a free port)")
    parser.add_argument("--replay-stream-id", type=_int, default=DEFAULT_REPLAY_STREAM_ID, metavar="N",
                        help=f"replay stream id (default {DEFAULT_REPLAY_STREAM_ID})")
    parser.add_argument("--idle-timeout", type=_positive_seconds, metavar="S",
                        help="fail when the replay brings nothing for S seconds (default: --timeout)")
    _connection_arguments(parser)


@reporting_failures
def replay(args: argparse.Namespace, output: Output) -> int:
    if args.follow and args.length is not None:
        raise ToolError("--follow and --length exclude each other")
    if args.length is not None and args.length < 0:
        raise ToolError(f"--length {args.length} is invalid: must be >= 0 (use --follow)")
    with open_client(args) as client:
        descriptor = client.list_recording(args.recording_id)
        if descriptor is None:
            output.error(f"recording {args.recording_id} is not in the archive at {client.description}")
            return EXIT_ARCHIVE_ERROR
        position = descriptor.start_position if args.position is None else args.position
        if args.follow:
            length = -1
        elif args.length is not None:
            length = args.length
        else:
            end = descriptor.stop_position
            if descriptor.is_active:
                end = client.recording_position(args.recording_id)
                if end < 0:  # stopped meanwhile
                    end = client.stop_position(args.recording_id)
            length = max(0, end - position)
        if length == 0:
            return EXIT_OK  # nothing to replay (an archive would refuse an empty replay)
        channel = args.replay_channel or (
            "aeron:ipc" if client.description.startswith("aeron:ipc") else "aeron:udp?endpoint=localhost:0")
        idle_timeout = args.idle_timeout or args.timeout
        with client.replay(args.recording_id, position, length, channel,
                           args.replay_stream_id) as replaying:
            for message in replaying.messages(idle_timeout=idle_timeout):
                output.line(json.dumps({
                    "position": message.position, "nextPosition": message.next_position,
                    "length": len(message.payload),
                    "payload": base64.b64encode(message.payload).decode("ascii")}))
    return EXIT_OK


# ------------------------------------------------------------------------------------ stat

def configure_stat(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, metavar="DIR",
                        help="archive directory: use the Aeron directory its mark file names")
    parser.add_argument("--aeron-dir", metavar="DIR",
                        help="media driver directory (default: the mark file's with --dir, else "
                             "$AERON_DIR or /dev/shm/aeron-<user>)")
    parser.add_argument("--all", action="store_true", help="every counter of the driver, not only "
                                                           "the archive's (type ids 100-113)")
    parser.add_argument("--archive-id", type=_int, metavar="ID",
                        help="only the counters of this archive (several archives may share a driver)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of AeronStat lines")
    parser.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds to wait for the media driver (default {DEFAULT_TIMEOUT_S})")


@reporting_failures
def stat(args: argparse.Namespace, output: Output) -> int:
    from aeron_spark.archive.client.archive_location import read_archive_location
    from aeron_spark.driver_integration import AeronClient, CounterState

    aeron_dir = args.aeron_dir
    if aeron_dir is None and args.dir is not None:
        aeron_dir = read_archive_location(args.dir).aeron_dir
        if aeron_dir is None:
            raise ToolError(f"the mark file in {args.dir} names no Aeron directory: give --aeron-dir")
    aeron_dir = aeron_dir or default_aeron_dir()
    if not Path(aeron_dir).is_dir():
        raise ToolError(f"Aeron directory {aeron_dir} does not exist (is the media driver running?)")
    rows = []
    with AeronClient(aeron_dir, client_name="aeron-archive stat",
                     timeout=max(args.timeout, AERON_DRIVER_TIMEOUT_S)) as aeron:
        reader = aeron.counters_reader
        for counter_id in range(reader.max_counter_id + 1):
            state = reader.state(counter_id)
            if state == CounterState.UNUSED:
                break  # Aeron allocates from the bottom: nothing follows the first unused record
            if state != CounterState.ALLOCATED:
                continue
            type_id = reader.type_id(counter_id)
            if not args.all and type_id not in ARCHIVE_COUNTER_TYPE_IDS:
                continue
            if args.archive_id is not None and \
                    _counter_archive_id(type_id, reader.key(counter_id)) != args.archive_id:
                continue
            rows.append((counter_id, reader.value(counter_id), type_id, reader.label(counter_id)))
    for counter_id, value, type_id, label in rows:
        if args.json:
            output.line(json.dumps({"counterId": counter_id, "value": value, "typeId": type_id,
                                    "label": label}))
        else:
            output.line(f"{counter_id:3d}: {value:>20,} - type {type_id:3d} - {label}")
    return EXIT_OK


def _counter_archive_id(type_id: int, key: bytes) -> int | None:
    """The archive id in an archive counter's key (rec-pos: after the source identity; the
    others: the first 8 bytes), None for other counters or a 1.15.x key without it."""
    if type_id == recording_position.RECORDING_POSITION_TYPE_ID:
        try:
            return recording_position.decode_key(key).archive_id
        except ValueError:
            return None
    if type_id in ARCHIVE_COUNTER_TYPE_IDS and len(key) >= 8:
        return int.from_bytes(key[:8], "little", signed=True)
    return None

