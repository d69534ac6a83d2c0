"""`aeron-archive recordings | replay | stat`: talk to a running archive (ours or a real Aeron one).

Each command is a ``run(args, output)`` with its ``configure(parser)``; the command table in
`aeron_spark.archive.cli.main` names them.

* ``recordings``: one JSON object per recording descriptor, Aeron's camelCase field names.
* ``replay ID``: one JSON object per replayed message: ``position`` (where it starts: pass it to
  ``--position`` to replay from it), ``nextPosition``, ``length`` and the base64 ``payload``.
* ``stat``: the archive's counters from the media driver's counters file, AeronStat-style
  (``id: value - type - label``), or JSON lines with ``--json``.

The archive is found by ``--dir`` (its mark file: local IPC control channel and Aeron directory)
or by ``--control-channel``/``--control-stream-id`` (defaults: `aeron_spark.archive.configuration`).
``--legacy`` speaks Aeron 1.15.x.

The media driver (``--aeron-driver``, as the connector's ``aeron.driver``): ``auto`` uses the
driver running at ``--aeron-dir`` (default Aeron's directory) and, where none runs (a Spark host
talking to a remote archive), embeds one in this process for the command's duration; ``embedded``
always embeds one; ``external`` requires a running one. A remote archive answers at the address
of this host that routes to its control endpoint (``--response-host`` overrides it, behind NAT;
``--bind-address`` is the local address bound), found as the connector finds it
(`aeron_spark.archive.client.local_endpoints`), never ``localhost``.

Exit codes: 0 ok, 1 the archive reported an error or the recording is unknown, 2 bad usage,
3 the archive did not answer in time.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aeron_spark.archive.cli.output import EXIT_OK, Output, ToolError
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.client.local_endpoints import default_response_channel, local_hosts
from aeron_spark.archive.client.replay_subscription import ReplayError
from aeron_spark.archive.client.transport import default_aeron_dir
from aeron_spark.archive.codecs import recording_position
from aeron_spark.archive.configuration import (
    AERON_DRIVER_TIMEOUT_S,
    DEFAULT_CONTROL_CHANNEL,
    DEFAULT_CONTROL_STREAM_ID,
    DEFAULT_DRIVER_MODE,
    DEFAULT_REPLAY_STREAM_ID,
    DEFAULT_RESPONSE_CHANNEL,
    DEFAULT_RESPONSE_STREAM_ID,
    DEFAULT_TIMEOUT_S,
    IPC_CHANNEL,
)
from aeron_spark.driver_integration import AeronError
from aeron_spark.driver_integration.process_driver import (
    DRIVER_MODES,
    close_process_driver,
    driver_dir_for_process,
    is_driver_active,
    process_embedded_driver,
)

EXIT_ARCHIVE_ERROR = 1
EXIT_TIMEOUT = 3
#: Aeron's archive counters: rec-pos (100) and the archive's own counters (101-113).
ARCHIVE_COUNTER_TYPE_IDS = range(100, 114)


def integer_argument(text: str) -> int:
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


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("archive connection")
    group.add_argument("--dir", type=Path, metavar="DIR",
                       help="archive directory: find the archive through its mark file "
                            "(its local IPC control channel and Aeron directory)")
    group.add_argument("--control-channel", metavar="URI",
                       help=f"archive control channel (default {DEFAULT_CONTROL_CHANNEL}, or the "
                            f"mark file's with --dir)")
    group.add_argument("--control-stream-id", type=integer_argument, metavar="N",
                       help=f"control stream id (default {DEFAULT_CONTROL_STREAM_ID})")
    group.add_argument("--response-channel", metavar="URI",
                       help="channel the archive answers on (default: a free UDP port on the address "
                            "of this host that routes to the control endpoint, e.g. "
                            f"{DEFAULT_RESPONSE_CHANNEL.replace('localhost', '<that address>')}; "
                            f"{IPC_CHANNEL} with an IPC control channel)")
    group.add_argument("--response-stream-id", type=integer_argument, default=DEFAULT_RESPONSE_STREAM_ID,
                       metavar="N", help=f"response stream id (default {DEFAULT_RESPONSE_STREAM_ID})")
    group.add_argument("--response-host", metavar="HOST",
                       help="address of this host the archive sends responses and replays to (default: "
                            "the local address that routes to the control endpoint; set it behind NAT)")
    group.add_argument("--bind-address", metavar="HOST",
                       help="local address the response and replay endpoints bind (default: --response-host)")
    _driver_arguments(group)
    group.add_argument("--legacy", action="store_true",
                       help="speak the Aeron 1.15.x archive protocol (a real 1.15.1 archive)")
    group.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                       help=f"seconds to wait for each answer (default {DEFAULT_TIMEOUT_S})")


def _driver_arguments(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    group.add_argument("--aeron-dir", metavar="DIR",
                       help="media driver directory (default: the mark file's with --dir, else "
                            "$AERON_DIR or /dev/shm/aeron-<user>)")
    group.add_argument("--aeron-driver", choices=DRIVER_MODES, default=None,
                       help="auto: the driver running at --aeron-dir, else one embedded in this command "
                            "(a host without a driver talking to a remote archive); embedded: always embed "
                            "one; external: require a running one (default: the driver of --aeron-dir or "
                            f"--dir when given or with an IPC control channel, else {DEFAULT_DRIVER_MODE})")


def driver_dir(args: argparse.Namespace, aeron_dir: str | None, control_channel: str | None) -> str | None:
    """The Aeron directory of the driver this command uses (``--aeron-driver``): ``aeron_dir``'s
    (None: Aeron's default) when a driver runs there, else one this process embeds. Without
    ``--aeron-driver`` a named directory (``--aeron-dir``, the mark file's) and an IPC control
    channel (IPC reaches only an archive on that driver) take ``aeron_dir`` as it is."""
    mode = args.aeron_driver
    if mode is None:
        if aeron_dir is not None or control_channel is None or control_channel.startswith(IPC_CHANNEL):
            return aeron_dir
        mode = DEFAULT_DRIVER_MODE
    if mode == "external" and not is_driver_active(aeron_dir or default_aeron_dir()):
        raise ToolError(f"--aeron-driver external: no live media driver in {aeron_dir or default_aeron_dir()} "
                        f"(--aeron-dir); start one there, or use --aeron-driver auto or embedded to run one "
                        f"in this command")
    return driver_dir_for_process(mode, aeron_dir)


def open_client(args: argparse.Namespace) -> ArchiveClient:
    """The ArchiveClient the connection arguments describe (close it, then `release_driver`)."""
    options: dict[str, Any] = {"timeout": args.timeout, "protocol": "legacy" if args.legacy else "modern",
                               "response_stream_id": args.response_stream_id}
    if args.control_stream_id is not None:
        options["control_stream_id"] = args.control_stream_id
    if args.response_channel is not None:
        options["response_channel"] = args.response_channel
    if args.response_host is not None:
        options["response_host"] = args.response_host
    if args.dir is not None:
        if args.control_channel is not None:
            options["control_channel"] = args.control_channel
        if args.aeron_dir is not None or args.aeron_driver is not None:
            options["aeron_dir"] = driver_dir(args, args.aeron_dir or _mark_file_aeron_dir(args.dir), None)
        return ArchiveClient.from_mark_file(args.dir, **options)
    control = args.control_channel or DEFAULT_CONTROL_CHANNEL
    options["control_channel"] = control
    aeron_dir = driver_dir(args, args.aeron_dir, control)
    if aeron_dir is not None:
        options["aeron_dir"] = aeron_dir
    if "response_channel" not in options:
        if control.startswith(IPC_CHANNEL):
            options["response_channel"] = IPC_CHANNEL
        else:
            advertised, bind = hosts_from_arguments(args, control)
            options["response_channel"] = default_response_channel(control, bind)
            options["response_host"] = advertised
    return ArchiveClient.connect(**options)


@contextlib.contextmanager
def connected_client(args: argparse.Namespace) -> Iterator[ArchiveClient]:
    """`open_client`'s client, closed on leaving, with the driver this command embedded (if any):
    its directory is removed before the command returns."""
    try:
        with open_client(args) as client:
            yield client
    finally:
        release_driver()


def release_driver() -> None:
    """Closes the driver this process embedded, if any, and removes its directory."""
    if process_embedded_driver() is not None:
        close_process_driver()


def hosts_from_arguments(args: argparse.Namespace, control_channel: str) -> tuple[str, str]:
    try:
        return local_hosts(control_channel, args.response_host, args.bind_address)
    except OSError as error:
        raise ToolError(f"--control-channel {control_channel}: no address of this host routes to the "
                        f"archive's control endpoint ({error}); give an endpoint this host can reach, or "
                        f"--response-host with the address of this host the archive reaches") from None


def _mark_file_aeron_dir(archive_dir: Path) -> str | None:
    from aeron_spark.archive.client.archive_location import MarkFileError, read_archive_location
    try:
        return read_archive_location(archive_dir).aeron_dir
    except (MarkFileError, OSError):
        return None  # from_mark_file says what is wrong with the directory


def reporting_failures(run: Callable[[argparse.Namespace, Output], int]) -> Callable[[argparse.Namespace, Output], int]:
    """Runs a command, turning archive and driver failures into a message and an exit code."""
    @functools.wraps(run)
    def wrapped(args: argparse.Namespace, output: Output) -> int:
        try:
            return run(args, output)
        except ArchiveTimeoutError as error:
            output.error(f"{error}{_timeout_hint(args)}")
            return EXIT_TIMEOUT
        except (ArchiveError, ReplayError, AeronError) as error:
            output.error(str(error))
            return EXIT_ARCHIVE_ERROR
        except BrokenPipeError:  # e.g. piped into `head`: the reader has what it wanted
            with contextlib.suppress(Exception):
                output.out.close()
            return EXIT_OK
    return wrapped


def _timeout_hint(args: argparse.Namespace) -> str:
    """What to check when the archive did not answer, naming the options involved."""
    if getattr(args, "control_channel", None) is None and getattr(args, "dir", None) is not None:
        return ""
    control = getattr(args, "control_channel", None) or DEFAULT_CONTROL_CHANNEL
    if control.startswith(IPC_CHANNEL):
        return ""
    return (f" (option --control-channel {control}; the archive answers at this host's address "
            f"given by --response-host, by default the one that routes to it)")


# ------------------------------------------------------------------------------------ recordings

def configure_recordings(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--recording-id", type=integer_argument, metavar="ID", help="only this recording")
    parser.add_argument("--from-id", type=integer_argument, default=0, metavar="ID",
                        help="first recording id (default 0)")
    parser.add_argument("--count", type=integer_argument, metavar="N", help="at most N descriptors (default all)")
    parser.add_argument("--channel-fragment", metavar="TEXT",
                        help="only recordings whose channel contains TEXT (needs --stream-id)")
    parser.add_argument("--stream-id", type=integer_argument, metavar="N", help="only recordings of this stream")


@reporting_failures
def recordings(args: argparse.Namespace, output: Output) -> int:
    if args.count is not None and args.count < 0:
        raise ToolError(f"--count {args.count} is invalid: must be >= 0")
    if args.channel_fragment is not None and args.stream_id is None:
        raise ToolError("--channel-fragment needs --stream-id (Aeron matches both)")
    with connected_client(args) as client:
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
    parser.add_argument("recording_id", type=integer_argument, metavar="ID", help="recording id")
    parser.add_argument("--position", type=integer_argument, metavar="P",
                        help="where to start: a message start position (default: the recording's start)")
    parser.add_argument("--length", type=integer_argument, metavar="L",
                        help="bytes of stream to replay (default: up to the stop position, or for an "
                             "active recording up to what is recorded now)")
    parser.add_argument("--follow", action="store_true",
                        help="keep replaying an active recording as it grows (until it stops)")
    parser.add_argument("--replay-channel", metavar="URI",
                        help=f"channel to replay on (default {IPC_CHANNEL} with an IPC control channel, "
                             "else a free UDP port on the response channel's address)")
    parser.add_argument("--replay-stream-id", type=integer_argument, default=DEFAULT_REPLAY_STREAM_ID, metavar="N",
                        help=f"replay stream id (default {DEFAULT_REPLAY_STREAM_ID})")
    parser.add_argument("--idle-timeout", type=_positive_seconds, metavar="S",
                        help="fail when the replay brings nothing for S seconds (default: --timeout)")
    add_connection_arguments(parser)


@reporting_failures
def replay(args: argparse.Namespace, output: Output) -> int:
    if args.follow and args.length is not None:
        raise ToolError("--follow and --length exclude each other")
    if args.length is not None and args.length < 0:
        raise ToolError(f"--length {args.length} is invalid: must be >= 0 (use --follow)")
    with connected_client(args) as client:
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
        hosts = client.response_hosts
        advertised: str | None = None
        if args.replay_channel is not None:
            channel = args.replay_channel
        elif client.description.startswith(IPC_CHANNEL) or hosts is None:
            channel = IPC_CHANNEL if client.description.startswith(IPC_CHANNEL) else DEFAULT_RESPONSE_CHANNEL
        else:  # where the responses come: the archive reaches it
            advertised, bind = hosts
            channel = default_response_channel(client.control_channel, bind)
        idle_timeout = args.idle_timeout or args.timeout
        with client.replay(args.recording_id, position, length, channel,
                           args.replay_stream_id, advertised_host=advertised) as replaying:
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
    parser.add_argument("--archive-id", type=integer_argument, metavar="ID",
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
        raise ToolError(f"Aeron directory {aeron_dir} does not exist (is the media driver running?); "
                        f"stat reads the counters of the archive's own media driver: run it on the archive's host")
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

