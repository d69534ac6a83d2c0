"""The modern Java interop peer: a current Aeron (``aeron-all`` 1.51.0 by default) archive, driver and
``AeronArchive`` client, run as processes for tests.

The twin of :mod:`tests.interop.peer.interop_peer` (Aeron 1.15.1). ``tests/interop/peer/modern-java``
holds the Java program; ``tests/interop/peer/fetch-modern-java-peer`` fetches the jar from Maven
Central with ``mvn`` and builds it with the machine's ``javac --release 17``. This module is test
code (never in the package), imported as ``tests.interop.peer.modern_peer`` from the repository root:

* :func:`ensure_modern_peer_built` -> :class:`ModernPeerInstallation` (command lines, ArchiveTool);
* :func:`start_modern_java_archive` / :func:`start_modern_java_driver` -> :class:`JavaServer`, stopped by PID;
* :func:`running_modern_java_archive` -> :class:`RunningModernJavaArchive` (archive + a client on its driver);
* :class:`ModernPeerClient` runs the client subcommands and parses their JSON lines.

Payloads, digests, ``JavaServer``, ``PeerError`` and the result classes are the 1.15.1 peer's.
See docs/interop.md, "Modern Java peer".
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tests.interop.peer.interop_peer import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    PEER_DIR,
    JavaServer,
    NumberedPublisher,
    PeerError,
    PublishResult,
    RecordResult,
    ReplayResult,
    default_cache_dir,
    expected_digest,
    fail_on_missing_build_tool,
    framed_length,
    parse_events,
    payloads,
    shm_tempdir,
    single_event,
    start_peer_server,
    stop_process,
)
from tests.support.ports import free_udp_port, udp_channel

__all__ = [
    "EXIT_FAILED", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_USAGE", "MAIN_CLASS", "MODERN_AERON_VERSION", "MODERN_JVM_OPTIONS",
    "ConnectResult", "JavaServer", "ModernArchiveEndpoint", "ModernPeerClient", "ModernPeerInstallation", "NumberedPublisher",
    "PeerError", "PublishResult", "RecordResult", "RecordingPositions", "ReplayMergeResult", "ReplayResult",
    "RunningModernJavaArchive", "ensure_modern_peer_built", "expected_digest", "fetch_script", "framed_length",
    "parse_events", "payloads", "running_modern_java_archive", "shm_tempdir", "start_modern_java_archive",
    "start_modern_java_driver", "stop_process",
]

MAIN_CLASS = "io.aeronspark.modern.ModernPeer"
ARCHIVE_TOOL_CLASS = "io.aeron.archive.ArchiveTool"
DEFAULT_CONTROL_STREAM_ID = 10
DEFAULT_RESPONSE_STREAM_ID = 20

# Java 17 + Aeron 1.5x: Agrona reaches jdk.internal.misc.Unsafe (without it every JVM fails at the
# first buffer with IllegalAccessError) and java.util.zip's CRC32 internals (the archive's crc32c
# record checksum and ArchiveTool's checksum verification fail without it). java.nio and sun.nio.ch
# are not needed by the self-check on 17.0.15, but Aeron documents them for Java 16+ (direct buffer
# and socket internals), so a path we do not test yet does not fail on them.
MODERN_JVM_OPTIONS: tuple[str, ...] = (
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "-XX:+UseSerialGC",  # fewer GC threads: the peer shares small machines with the Python side
    "-Djava.net.preferIPv4Stack=true",
)


def fetch_script() -> Path:
    return PEER_DIR / "fetch-modern-java-peer"


def _pinned_default_version() -> str:
    """The version pinned in the fetch script (its one home), without running it."""
    found = re.search(r'^default_aeron_version="([^"]+)"', fetch_script().read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no default_aeron_version=... line in {fetch_script()}")
    return found.group(1)


MODERN_AERON_VERSION: str = _pinned_default_version()


# ---------------------------------------------------------------------------------------------
# Fetching and building


@dataclass(frozen=True)
class ModernPeerInstallation:
    """Where the fetched jar and the built peer live, and how to run them."""

    java: Path
    aeron_jar: Path
    peer_jar: Path
    cache_dir: Path
    aeron_version: str = MODERN_AERON_VERSION

    @property
    def classpath(self) -> str:
        return f"{self.peer_jar}{os.pathsep}{self.aeron_jar}"

    def java_command(self, main_class: str, *args: str, jvm_options: Sequence[str] = ()) -> list[str]:
        """A command line running any ``main_class`` of the peer or the Aeron jar."""
        return [str(self.java), *MODERN_JVM_OPTIONS, *jvm_options, "-cp", self.classpath, main_class, *args]

    def command(self, *args: str, jvm_options: Sequence[str] = ()) -> list[str]:
        """The command line running the peer with ``args`` (a subcommand and its options)."""
        return self.java_command(MAIN_CLASS, *args, jvm_options=jvm_options)

    def archive_tool(self, archive_dir: Path, *args: str, input: str | None = None,
                     timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Runs Aeron's ``ArchiveTool <archive_dir> <args>`` (e.g. ``describe``, ``verify``,
        ``count-entries``); its answers to prompts come from ``input``. Does not check the exit code."""
        return subprocess.run(self.java_command(ARCHIVE_TOOL_CLASS, str(archive_dir), *args),
                              input=input, stdin=None if input is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)


_build_lock = threading.Lock()


def ensure_modern_peer_built(cache_dir: Path | None = None, *, timeout: float = 900.0) -> ModernPeerInstallation:
    """Fetches the jar (Maven Central, ``mvn``) and builds the peer if needed (idempotent, cached).

    ``cache_dir`` is the cache root shared with the 1.15.1 peer (default: its rule); the modern
    peer lives in its ``modern/`` folder. Raises ``PeerError`` when the script fails (Maven Central
    unreachable, a jar with another SHA-256); fails the calling test with one line naming the tool
    when ``mvn``, ``javac`` or a Java >= 17 is missing.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return _ensure_modern_peer_built(str(root), timeout)


@functools.cache
def _ensure_modern_peer_built(cache_root: str, timeout: float) -> ModernPeerInstallation:
    command = ["bash", str(fetch_script()), "--quiet", "--cache-dir", cache_root]
    with _build_lock:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL, check=False)
    fail_on_missing_build_tool(completed)
    if completed.returncode != 0:
        raise PeerError(
            f"fetch-modern-java-peer failed with exit code {completed.returncode}: "
            f"{completed.stderr.strip()[-2000:]}",
            command=command, exit_code=completed.returncode, error=None, stderr=completed.stderr)
    facts = json.loads((Path(cache_root) / "modern" / "modern-peer.json").read_text())
    return ModernPeerInstallation(
        java=Path(facts["java"]), aeron_jar=Path(facts["aeron_jar"]), peer_jar=Path(facts["peer_jar"]),
        cache_dir=Path(facts["cache_dir"]), aeron_version=facts["aeron_version"])


# ---------------------------------------------------------------------------------------------
# Servers


def recording_events_channel(port: int | None = None) -> str:
    """A recording-events channel on a free port (the archive publishes it as dynamic MDC)."""
    return f"aeron:udp?control-mode=dynamic|control=localhost:{free_udp_port() if port is None else port}"


def start_modern_java_archive(installation: ModernPeerInstallation, *, archive_dir: Path, aeron_dir: Path,
                              control_channel: str | None = None, control_stream_id: int = DEFAULT_CONTROL_STREAM_ID,
                              replication_channel: str | None = None,
                              threading: Literal["shared", "dedicated"] = "shared",
                              archive_id: int | None = None, segment_length: int | None = None,
                              record_checksum: Literal["crc32c", "crc32"] | None = None,
                              external_driver: bool = False, log_dir: Path | None = None,
                              recording_events: str | None = None, credentials: str | None = None,
                              challenge: str | None = None, startup_timeout: float = 60.0) -> JavaServer:
    """Starts a real modern Archive and returns once it printed ``ready`` (``server.ready`` has
    controlChannel, archiveId, ...). With ``external_driver`` it attaches to the driver already
    running in ``aeron_dir``; otherwise it launches its own (ArchivingMediaDriver) and wipes
    ``aeron_dir`` first. ``control_channel`` and the recording-events channel default to free ports;
    the replication channel to ``aeron:udp?endpoint=localhost:0``. ``credentials`` (``user:pass``)
    makes it authenticate with Aeron's ``SimpleAuthenticator``: only a connect request whose encoded
    credentials are exactly those UTF-8 bytes is accepted, any other (none included) is rejected,
    with no challenge. With ``challenge`` too, a connect with the principal (``user``) gets a
    Challenge carrying that text, and only the challenge response ``user:pass`` is accepted."""
    args = ["--archive-dir", str(archive_dir), "--aeron-dir", str(aeron_dir),
            "--control-channel", control_channel or udp_channel(free_udp_port()),
            "--control-stream-id", str(control_stream_id),
            "--recording-events-channel", recording_events or recording_events_channel(),
            "--threading", threading]
    if replication_channel is not None:
        args += ["--replication-channel", replication_channel]
    if archive_id is not None:
        args += ["--archive-id", str(archive_id)]
    if segment_length is not None:
        args += ["--segment-length", str(segment_length)]
    if record_checksum is not None:
        args += ["--record-checksum", record_checksum]
    if credentials is not None:
        args += ["--credentials", credentials]
    if challenge is not None:
        if credentials is None:
            raise ValueError("challenge needs credentials (user:pass)")
        args += ["--challenge", challenge]
    if external_driver:
        args.append("--external-driver")
    return start_peer_server(installation.command("archive", *args), "archive",
                             Path(log_dir or Path(archive_dir).parent), startup_timeout,
                             stderr_name="modern-java-archive.stderr")


def start_modern_java_driver(installation: ModernPeerInstallation, *, aeron_dir: Path,
                             threading: Literal["shared", "dedicated"] = "shared",
                             log_dir: Path | None = None, startup_timeout: float = 60.0) -> JavaServer:
    """Starts a plain modern Java media driver in ``aeron_dir`` (wiped first)."""
    return start_peer_server(installation.command("driver", "--aeron-dir", str(aeron_dir), "--threading", threading),
                             "driver", Path(log_dir or Path(aeron_dir).parent), startup_timeout,
                             stderr_name="modern-java-driver.stderr")


# ---------------------------------------------------------------------------------------------
# Clients


@dataclass(frozen=True)
class ModernArchiveEndpoint:
    """How a modern client reaches an archive, and which driver it uses.

    ``aeron_dir=None``: every command launches its own embedded Java driver (``--embedded-driver``).
    ``response_channel=None``: a fresh free UDP port per command, so a lingering response
    publication of one command's session never reaches the next. A response channel such as
    ``aeron:udp?control-mode=response|control=localhost:P`` is passed through as given.
    """

    control_channel: str
    control_stream_id: int = DEFAULT_CONTROL_STREAM_ID
    response_channel: str | None = None
    aeron_dir: Path | None = None
    response_stream_id: int = DEFAULT_RESPONSE_STREAM_ID

    def driver_options(self) -> list[str]:
        return ["--embedded-driver"] if self.aeron_dir is None else ["--aeron-dir", str(self.aeron_dir)]

    def options(self) -> list[str]:
        return [*self.driver_options(),
                "--control-channel", self.control_channel,
                "--control-stream-id", str(self.control_stream_id),
                "--response-channel", self.response_channel or udp_channel(free_udp_port()),
                "--response-stream-id", str(self.response_stream_id)]


@dataclass(frozen=True)
class ConnectResult:
    archive_id: int
    control_session_id: int
    archive_protocol_version: str | None
    fields: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class RecordingPositions:
    recording_id: int
    start_position: int
    stop_position: int
    recording_position: int
    max_recorded_position: int
    active: bool


@dataclass(frozen=True)
class ReplicateResult:
    """What ``replicate`` printed: the destination's replication id and new recording id, and every
    recording signal the destination sent (``signal``, ``recordingId``, ``position`` ...) in order."""

    replication_id: int
    dst_recording_id: int
    signals: list[dict[str, Any]]
    awaited: str
    awaited_position: int
    fields: dict[str, Any] = field(repr=False)

    @property
    def signal_names(self) -> list[str]:
        return [s["signal"] for s in self.signals]


@dataclass(frozen=True)
class ReplayMergeResult:
    recording_id: int
    merged: bool
    states: list[str]
    messages: int
    first_index: int
    last_index: int
    digest: str
    fields: dict[str, Any] = field(repr=False)


def _record_result(line: dict[str, Any]) -> RecordResult:
    return RecordResult(
        recording_id=line["recordingId"], start_position=line["startPosition"], stop_position=line["stopPosition"],
        publication_position=line["publicationPosition"], messages=line["messages"], size=line["size"],
        digest=line["digest"], session_id=line["sessionId"], fields=line)


class ModernPeerClient:
    """Runs the modern peer's client subcommands, each a short-lived JVM with the real AeronArchive."""

    def __init__(self, installation: ModernPeerInstallation, endpoint: ModernArchiveEndpoint, *,
                 credentials: str | None = None, hmac_credentials: str | None = None,
                 timeout: float = 120.0) -> None:
        """``credentials`` (``user:pass``) are sent as they are and as the answer to any challenge;
        ``hmac_credentials`` (``principal:secret``) send the principal and answer our sidecar's
        ``hmac-sha256:`` challenge with the HMAC (its shared-secret authenticator)."""
        self.installation = installation
        self.endpoint = endpoint
        self.credentials = credentials
        self.hmac_credentials = hmac_credentials
        self.timeout = timeout

    def run(self, subcommand: str, *args: str) -> list[dict[str, Any]]:
        """Runs one subcommand with exactly ``args``; returns its JSON lines, or raises ``PeerError``
        (exit code, parsed ``error`` line, stderr) on a non-zero exit."""
        command = self.installation.command(subcommand, *args)
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout,
                                       stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as timeout:  # subprocess.run has already killed it
            stderr = timeout.stderr.decode(errors="replace") if isinstance(timeout.stderr, bytes) else ""
            raise PeerError(f"modern peer {subcommand} did not finish within {self.timeout} s",
                            command=command, exit_code=None, error=None, stderr=stderr) from timeout
        events = parse_events(completed.stdout)
        if completed.returncode != EXIT_OK:
            error = next((e for e in events if e.get("event") == "error"), None)
            detail = error.get("message") if error else completed.stderr.strip()[-2000:]
            raise PeerError(f"modern peer {subcommand} exited with code {completed.returncode}: {detail}",
                            command=command, exit_code=completed.returncode, error=error, stderr=completed.stderr)
        return events

    def _archive_options(self) -> list[str]:
        credentials = ["--credentials", self.credentials] if self.credentials is not None else []
        if self.hmac_credentials is not None:
            credentials += ["--hmac-credentials", self.hmac_credentials]
        return [*self.endpoint.options(), *credentials]

    def _call(self, subcommand: str, event: str, *args: str) -> dict[str, Any]:
        return single_event(self.run(subcommand, *self._archive_options(), *args), event)

    def connect(self) -> ConnectResult:
        """Login (ConnectRequest, ArchiveIdRequest) and close: the archive's id and protocol version."""
        line = self._call("connect", "connected")
        return ConnectResult(archive_id=line["archiveId"], control_session_id=line["controlSessionId"],
                             archive_protocol_version=line["archiveProtocolVersion"], fields=line)

    def record(self, channel: str, stream_id: int, messages: int, size: int, *, fragmented: bool = False,
               first_index: int = 0, source_location: Literal["local", "remote"] | None = None,
               timeout_ms: int = 60_000) -> RecordResult:
        """Records ``messages`` deterministic payloads from a new exclusive publication on ``channel``
        (its session id added), waits until the archive has them all, stops, and waits for the catalog."""
        events = self._record_events(channel, stream_id, messages, size, fragmented=fragmented,
                                     first_index=first_index, source_location=source_location,
                                     timeout_ms=timeout_ms)
        return _record_result(single_event(events, "recorded"))

    def record_with_signals(self, channel: str, stream_id: int, messages: int, size: int, *,
                            first_index: int = 0, source_location: Literal["local", "remote"] | None = None,
                            timeout_ms: int = 60_000) -> tuple[RecordResult, list[dict[str, Any]]]:
        """:meth:`record` plus the RecordingSignalEvents the archive sent (``signal``: START, STOP, ...),
        in arrival order; it waits for the STOP signal of the recording."""
        events = self._record_events(channel, stream_id, messages, size, fragmented=False, first_index=first_index,
                                     source_location=source_location, timeout_ms=timeout_ms, signals=True)
        signals = [{k: v for k, v in e.items() if k != "event"} for e in events if e.get("event") == "signal"]
        return _record_result(single_event(events, "recorded")), signals

    def _record_events(self, channel: str, stream_id: int, messages: int, size: int, *, fragmented: bool,
                       first_index: int, source_location: Literal["local", "remote"] | None, timeout_ms: int,
                       signals: bool = False) -> list[dict[str, Any]]:
        args = ["--channel", channel, "--stream-id", str(stream_id), "--messages", str(messages),
                "--size", str(size), "--first-index", str(first_index), "--timeout-ms", str(timeout_ms)]
        if fragmented:
            args.append("--fragmented")
        if signals:
            args.append("--signals")
        if source_location is not None:
            args += ["--source-location", source_location]
        return self.run("record", *self._archive_options(), *args)

    def start_recording(self, channel: str, stream_id: int, *,
                        source_location: Literal["local", "remote"] | None = None) -> int:
        """Starts recording a stream someone else publishes; returns the subscription id."""
        args = ["--channel", channel, "--stream-id", str(stream_id)]
        if source_location is not None:
            args += ["--source-location", source_location]
        return int(self._call("start-recording", "recording-started", *args)["subscriptionId"])

    def stop_recording(self, channel: str | None = None, stream_id: int | None = None, *,
                       subscription_id: int | None = None, recording_id: int | None = None,
                       await_position: int | None = None, timeout_ms: int = 60_000) -> dict[str, Any]:
        """Stops by channel and stream, or by ``subscription_id``; with ``recording_id`` (and
        ``await_position``) waits for the recording first and returns its final positions."""
        args = ["--timeout-ms", str(timeout_ms)]
        if channel is not None:
            args += ["--channel", channel]
        if stream_id is not None:
            args += ["--stream-id", str(stream_id)]
        if subscription_id is not None:
            args += ["--subscription-id", str(subscription_id)]
        if recording_id is not None:
            args += ["--recording-id", str(recording_id)]
        if await_position is not None:
            args += ["--await-position", str(await_position)]
        return self._call("stop-recording", "recording-stopped", *args)

    def list_recordings(self, *, recording_id: int | None = None, from_recording_id: int = 0,
                        count: int | None = None) -> list[dict[str, Any]]:
        """Recording descriptors with Aeron's field names (``recordingId``, ``stopPosition``, ...)."""
        if recording_id is not None:
            args = ["--recording-id", str(recording_id)]
        else:
            args = ["--from-recording-id", str(from_recording_id)]
            if count is not None:
                args += ["--count", str(count)]
        events = self.run("list", *self._archive_options(), *args)
        return [{k: v for k, v in e.items() if k != "event"} for e in events if e.get("event") == "descriptor"]

    def replay(self, recording_id: int, *, replay_channel: str, replay_stream_id: int,
               position: int | None = None, length: int | None = None,
               limit_position: int | None = None, limit_counter_id: int | None = None,
               timeout_ms: int = 60_000) -> ReplayResult:
        """Replays and reads to the end (the stop position, or ``position + length``). A limit makes
        it a bounded replay: ``limit_position`` (a counter the peer allocates; needs the client on the
        archive's driver) or an existing ``limit_counter_id``; it then ends at the limit."""
        args = ["--recording-id", str(recording_id), "--replay-channel", replay_channel,
                "--replay-stream-id", str(replay_stream_id), "--timeout-ms", str(timeout_ms)]
        if position is not None:
            args += ["--position", str(position)]
        if length is not None:
            args += ["--length", str(length)]
        if limit_position is not None:
            args += ["--limit-position", str(limit_position)]
        if limit_counter_id is not None:
            args += ["--limit-counter-id", str(limit_counter_id)]
        line = self._call("replay", "replayed", *args)
        return ReplayResult(
            recording_id=line["recordingId"], position=line["position"], length=line["length"],
            first_position=line["firstPosition"], last_position=line["lastPosition"],
            messages=line["messages"], first_index=line["firstIndex"], last_index=line["lastIndex"],
            digest=line["digest"], fields=line)

    def publish(self, channel: str, stream_id: int, messages: int, size: int, *, fragmented: bool = False,
                first_index: int = 0, linger_ms: int | None = None, timeout_ms: int = 60_000) -> PublishResult:
        """A plain publication, no archive: feeds recordings started with :meth:`start_recording`."""
        args = [*self.endpoint.driver_options(), "--channel", channel, "--stream-id", str(stream_id),
                "--messages", str(messages), "--size", str(size), "--first-index", str(first_index),
                "--timeout-ms", str(timeout_ms)]
        if fragmented:
            args.append("--fragmented")
        if linger_ms is not None:
            args += ["--linger-ms", str(linger_ms)]
        line = single_event(self.run("publish", *args), "published")
        return PublishResult(session_id=line["sessionId"], position=line["position"],
                             messages=line["messages"], digest=line["digest"], fields=line)

    def truncate(self, recording_id: int, position: int) -> dict[str, Any]:
        """``truncateRecording``: ``deletedSegments`` (what the call returned) and the new ``stopPosition``."""
        return self._call("truncate", "truncated", "--recording-id", str(recording_id), "--position", str(position))

    def purge(self, recording_id: int) -> dict[str, Any]:
        """``purgeRecording``: ``deletedSegments`` and ``stillListed`` (False once it left the catalog)."""
        return self._call("purge", "purged", "--recording-id", str(recording_id))

    def extend(self, recording_id: int, channel: str, stream_id: int, messages: int, size: int, *,
               first_index: int = 0, source_location: Literal["local", "remote"] | None = None,
               auto_stop: bool = False, timeout_ms: int = 60_000) -> dict[str, Any]:
        """``extendRecording`` of a stopped recording with ``messages`` more: a publication that
        continues at the stop position; returns previousStopPosition/stopPosition/digest. With
        ``auto_stop`` (ExtendRecordingRequest2) the publication's close stops the recording."""
        args = ["--recording-id", str(recording_id), "--channel", channel, "--stream-id", str(stream_id),
                "--messages", str(messages), "--size", str(size), "--first-index", str(first_index),
                "--timeout-ms", str(timeout_ms)]
        if source_location is not None:
            args += ["--source-location", source_location]
        if auto_stop:
            args.append("--auto-stop")
        return self._call("extend", "extended", *args)

    def positions(self, recording_id: int) -> RecordingPositions:
        """``getStartPosition``/``getStopPosition``/``getRecordingPosition``/``getMaxRecordedPosition``."""
        line = self._call("positions", "positions", "--recording-id", str(recording_id))
        return RecordingPositions(
            recording_id=line["recordingId"], start_position=line["startPosition"],
            stop_position=line["stopPosition"], recording_position=line["recordingPosition"],
            max_recorded_position=line["maxRecordedPosition"], active=line["active"])

    def _segments(self, op: str, recording_id: int, *args: str) -> dict[str, Any]:
        return self._call("segments", "segments", "--op", op, "--recording-id", str(recording_id), *args)

    def detach_segments(self, recording_id: int, new_start_position: int) -> dict[str, Any]:
        return self._segments("detach", recording_id, "--new-start-position", str(new_start_position))

    def delete_detached_segments(self, recording_id: int) -> dict[str, Any]:
        """``count``: the segment files deleted."""
        return self._segments("delete-detached", recording_id)

    def purge_segments(self, recording_id: int, new_start_position: int) -> dict[str, Any]:
        return self._segments("purge", recording_id, "--new-start-position", str(new_start_position))

    def attach_segments(self, recording_id: int) -> dict[str, Any]:
        return self._segments("attach", recording_id)

    def migrate_segments(self, src_recording_id: int, dst_recording_id: int) -> dict[str, Any]:
        return self._segments("migrate", src_recording_id, "--dst-recording-id", str(dst_recording_id))

    def update_channel(self, recording_id: int, channel: str, *, message_timeout_ms: int | None = None,
                       active_channel: str | None = None, stream_id: int | None = None, messages: int = 0,
                       size: int = 0, timeout_ms: int = 60_000) -> dict[str, Any]:
        """``updateChannel`` (UpdateChannelRequest, 1.49+): ``ok``, or ``error`` (``exception``,
        ``code``, ``codeName``, ``message``; a client timeout has code None), and ``recordings``
        (every descriptor listed afterwards). ``message_timeout_ms`` bounds the wait for an answer
        (an archive that never answers). With ``active_channel`` the peer records ``messages`` of
        its own on that channel and ``stream_id`` and updates that recording while it is active
        (``recording_id`` is ignored); the line then has ``during`` and ``after`` (stopped)."""
        args = ["--recording-id", str(recording_id), "--channel", channel, "--timeout-ms", str(timeout_ms)]
        if message_timeout_ms is not None:
            args += ["--message-timeout-ms", str(message_timeout_ms)]
        if active_channel is not None:
            if stream_id is None:
                raise ValueError("active_channel needs stream_id")
            args += ["--active-channel", active_channel, "--stream-id", str(stream_id),
                     "--messages", str(messages), "--size", str(size)]
        return self._call("update-channel", "update-channel", *args)

    def scripted_session(self, channel: str, channel_b: str, stream_id: int, messages: int, size: int, *,
                         replay_channel: str, replay_stream_id: int, session_id: int,
                         with_unanswered: bool = False, timeout_ms: int = 60_000) -> list[dict[str, Any]]:
        """``scripted-session``: one AeronArchive connection running the fixed script of
        ScriptedSession.java; returns its lines (``step`` per step with ``result`` or ``error``,
        then ``signal`` lines and ``script-done``). ``channel``/``channel_b`` are plain UDP endpoint
        channels the archive records; the publications' session ids (``session_id`` ...), initial
        term id, term length and MTU are pinned by the script. ``with_unanswered`` adds two steps the
        Java archive never answers (each costs the client's 5 s message timeout there)."""
        flags = ["--with-unanswered"] if with_unanswered else []
        return self.run("scripted-session", *self._archive_options(), *flags,
                        "--channel", channel, "--channel-b", channel_b, "--stream-id", str(stream_id),
                        "--messages", str(messages), "--size", str(size), "--replay-channel", replay_channel,
                        "--replay-stream-id", str(replay_stream_id), "--session-id", str(session_id),
                        "--timeout-ms", str(timeout_ms))

    def replay_merge(self, live_channel: str, live_stream_id: int, messages: int, live_messages: int, size: int, *,
                     replay_channel: str | None = None, position: int | None = None,
                     timeout_ms: int = 60_000) -> ReplayMergeResult:
        """Publishes ``messages`` on the dynamic-MDC ``live_channel`` (``aeron:udp?control=H:P|control-mode=dynamic``)
        while the archive records them, then merges replay into live with ``ReplayMerge`` while
        ``live_messages`` more are published."""
        args = ["--live-channel", live_channel, "--live-stream-id", str(live_stream_id),
                "--messages", str(messages), "--live-messages", str(live_messages), "--size", str(size),
                "--timeout-ms", str(timeout_ms)]
        if replay_channel is not None:
            args += ["--replay-channel", replay_channel]
        if position is not None:
            args += ["--position", str(position)]
        line = self._call("replay-merge", "replay-merged", *args)
        return ReplayMergeResult(
            recording_id=line["recordingId"], merged=line["merged"], states=list(line["states"]),
            messages=line["messages"], first_index=line["firstIndex"], last_index=line["lastIndex"],
            digest=line["digest"], fields=line)


    def replicate(self, src_recording_id: int, src_control_channel: str, *,
                  src_control_stream_id: int = DEFAULT_CONTROL_STREAM_ID, dst_recording_id: int | None = None,
                  stop_position: int | None = None, replication_channel: str | None = None,
                  src_response_channel: str | None = None, await_signal: Literal["replicate-end", "sync"] = "replicate-end",
                  on_signal: Callable[[dict[str, Any]], None] | None = None,
                  timeout_ms: int = 60_000) -> ReplicateResult:
        """``AeronArchive.replicate(srcRecordingId, srcControlStreamId, srcControlChannel, ReplicationParams)``
        on THIS client's archive (the destination), which then replicates from the source archive at
        ``src_control_channel``. Waits for REPLICATE_END (or SYNC). ``on_signal`` is called with each
        signal line as the JVM prints it, while the replication runs (e.g. to publish more to a live
        source once EXTEND arrived). The JVM is killed by PID if it outlives ``self.timeout``."""
        args = ["--src-recording-id", str(src_recording_id), "--src-control-channel", src_control_channel,
                "--src-control-stream-id", str(src_control_stream_id), "--await", await_signal,
                "--timeout-ms", str(timeout_ms)]
        if dst_recording_id is not None:
            args += ["--dst-recording-id", str(dst_recording_id)]
        if stop_position is not None:
            args += ["--stop-position", str(stop_position)]
        if replication_channel is not None:
            args += ["--replication-channel", replication_channel]
        if src_response_channel is not None:
            args += ["--src-response-channel", src_response_channel]
        events = self._run_streaming("replicate", [*self._archive_options(), *args],
                                     lambda e: on_signal(e) if on_signal and e.get("event") == "signal" else None)
        line = single_event(events, "replicated")
        signals = [{k: v for k, v in e.items() if k != "event"} for e in events if e.get("event") == "signal"]
        return ReplicateResult(replication_id=line["replicationId"], dst_recording_id=line["dstRecordingId"],
                               signals=signals, awaited=line["awaited"], awaited_position=line["awaitedPosition"],
                               fields=line)

    def _run_streaming(self, subcommand: str, args: list[str],
                       on_event: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
        """:meth:`run`, but each JSON line is handed to ``on_event`` as soon as it is printed."""
        command = self.installation.command(subcommand, *args)
        with tempfile.TemporaryFile("w+") as stderr:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
                                       text=True)
            timer = threading.Timer(self.timeout, process.kill)
            timer.start()
            events: list[dict[str, Any]] = []
            try:
                assert process.stdout is not None
                for text in process.stdout:
                    parsed = parse_events(text)
                    events += parsed
                    for event in parsed:
                        on_event(event)
                returncode = process.wait()
            finally:
                timer.cancel()
                if process.poll() is None:
                    process.kill()  # by PID: this Popen's own JVM
                    process.wait()
                if process.stdout is not None:
                    process.stdout.close()
            stderr.seek(0)
            stderr_text = stderr.read()
        if returncode != EXIT_OK:
            error = next((e for e in events if e.get("event") == "error"), None)
            detail = error.get("message") if error else stderr_text.strip()[-2000:]
            raise PeerError(f"modern peer {subcommand} exited with code {returncode}: {detail}",
                            command=command, exit_code=returncode, error=error, stderr=stderr_text)
        return events


# ---------------------------------------------------------------------------------------------
# An archive with a client, for fixtures


@dataclass(frozen=True)
class RunningModernJavaArchive:
    """A started modern Java archive plus a client attached to the archive's own driver."""

    server: JavaServer
    archive_dir: Path
    aeron_dir: Path
    control_channel: str
    control_stream_id: int
    archive_id: int
    endpoint: ModernArchiveEndpoint
    client: ModernPeerClient


@contextlib.contextmanager
def running_modern_java_archive(installation: ModernPeerInstallation, work_dir: Path, *,
                                client_timeout: float = 120.0, **archive_options: Any) -> Iterator[RunningModernJavaArchive]:
    """Starts a modern Java archive on free ports under ``work_dir`` (``archive_options`` go to
    :func:`start_modern_java_archive`); always stops it by PID and removes its driver directory."""
    aeron_dir = Path(archive_options.pop("aeron_dir", None) or shm_tempdir("aeron-modern-archive-"))
    archive_dir = Path(archive_options.pop("archive_dir", None) or Path(work_dir) / "modern-java-archive")
    control_channel = archive_options.pop("control_channel", None) or udp_channel(free_udp_port())
    control_stream_id = archive_options.pop("control_stream_id", DEFAULT_CONTROL_STREAM_ID)
    archive_options.setdefault("log_dir", Path(work_dir))
    server: JavaServer | None = None
    try:
        server = start_modern_java_archive(installation, archive_dir=archive_dir, aeron_dir=aeron_dir,
                                           control_channel=control_channel, control_stream_id=control_stream_id,
                                           **archive_options)
        endpoint = ModernArchiveEndpoint(control_channel=control_channel, control_stream_id=control_stream_id,
                                         aeron_dir=aeron_dir)
        yield RunningModernJavaArchive(
            server=server, archive_dir=archive_dir, aeron_dir=aeron_dir, control_channel=control_channel,
            control_stream_id=control_stream_id, archive_id=int(server.ready["archiveId"]), endpoint=endpoint,
            client=ModernPeerClient(installation, endpoint, timeout=client_timeout))
    finally:
        if server is not None:
            server.stop()
        if not archive_options.get("external_driver"):
            shutil.rmtree(aeron_dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.interop.peer.modern_peer build`` (from the repository root)."""
    import sys
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["build"]:
        installation = ensure_modern_peer_built()
        print(json.dumps({"java": str(installation.java), "aeron_jar": str(installation.aeron_jar),
                          "peer_jar": str(installation.peer_jar), "aeron_version": installation.aeron_version},
                         indent=2))
        return 0
    print("usage: python -m tests.interop.peer.modern_peer build", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
