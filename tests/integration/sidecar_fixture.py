"""Runs `aeron-archive serve` as a real subprocess, plus a raw control-protocol test client.

`Sidecar` starts the command on a temporary archive directory with free UDP ports, waits for its
"aeron-archive ready:" line, and is always stopped by PID at teardown: SIGTERM, then SIGKILL after
a timeout (an embedded driver directory it leaves behind after a SIGKILL is removed).

`RawArchiveClient` speaks the archive protocol with `codecs` over `driver_integration` (it is
what tests use until `archive/client.py` exists): it connects (answering a challenge if asked),
sends any request (or raw bytes) and collects decoded responses.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aeron_spark.archive import codecs
from aeron_spark.archive.cli.serve_command import READY_PREFIX
from aeron_spark.driver_integration.client import AeronClient

STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
RESPONSE_TIMEOUT_S = 10.0


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def parse_ready_line(line: str) -> dict[str, str]:
    fields = {}
    for token in line[len(READY_PREFIX):].split():
        key, _, value = token.partition("=")
        fields[key] = value
    return fields


@dataclass
class Sidecar:
    """One `aeron-archive serve` process."""

    archive_dir: Path
    extra_args: list[str] = field(default_factory=list)
    aeron_dir: str | None = None  # attach to this driver; None = the sidecar's embedded driver
    control_port: int = field(default_factory=free_udp_port)
    process: subprocess.Popen | None = None
    ready: dict[str, str] = field(default_factory=dict)
    stderr_lines: list[str] = field(default_factory=list)
    stdout_lines: list[str] = field(default_factory=list)

    @property
    def control_channel(self) -> str:
        return f"aeron:udp?endpoint=localhost:{self.control_port}"

    @property
    def driver_dir(self) -> str:
        return self.ready["aeronDir"]

    @property
    def pid(self) -> int:
        return self.process.pid

    def command(self) -> list[str]:
        argv = [sys.executable, "-c", "import sys; from aeron_spark.archive.cli.main import main; "
                                      "sys.exit(main())",
                "serve", "--dir", str(self.archive_dir), "--control-channel", self.control_channel,
                "--segment-length", "64k", "--log-level", "DEBUG"]
        if self.aeron_dir is not None:
            argv += ["--aeron-dir", self.aeron_dir]
        return argv + self.extra_args

    def start(self) -> "Sidecar":
        self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, bufsize=1)
        ready = threading.Event()

        def read_stdout() -> None:
            for line in self.process.stdout:
                self.stdout_lines.append(line.rstrip("\n"))
                if line.startswith(READY_PREFIX):
                    self.ready = parse_ready_line(line.strip())
                    ready.set()

        def read_stderr() -> None:
            for line in self.process.stderr:
                self.stderr_lines.append(line.rstrip("\n"))

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not ready.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"aeron-archive serve did not become ready (exit code "
                                   f"{self.process.returncode}); stderr:\n" + self.log_tail())
        return self

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.stderr_lines[-lines:])

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL by PID, and remove an embedded driver directory it cannot clean up now."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT_S)
        embedded = self.ready.get("aeronDir")
        if self.aeron_dir is None and embedded and os.path.isdir(embedded):
            shutil.rmtree(embedded, ignore_errors=True)


@contextmanager
def running_sidecar(archive_dir: Path, extra_args: list[str] | None = None,
                    aeron_dir: str | None = None) -> Iterator[Sidecar]:
    sidecar = Sidecar(archive_dir, list(extra_args or []), aeron_dir)
    try:
        yield sidecar.start()
    finally:
        sidecar.terminate()
        sidecar.kill()


# ------------------------------------------------------------------------------------------------
# The raw client
# ------------------------------------------------------------------------------------------------

class ArchiveResponseTimeout(AssertionError):
    pass


class RawArchiveClient:
    """A minimal archive client: one request publication, one response subscription."""

    _ports = itertools.count()

    def __init__(self, aeron: AeronClient, request_channel: str, request_stream_id: int, *,
                 response_channel: str | None = None, response_stream_id: int = 20) -> None:
        self.aeron = aeron
        if response_channel is None:
            response_channel = ("aeron:ipc" if request_channel.startswith("aeron:ipc")
                                else f"aeron:udp?endpoint=localhost:{free_udp_port()}")
        self.response_channel = response_channel
        self.response_stream_id = response_stream_id
        self.responses = aeron.add_subscription(response_channel, response_stream_id)
        self.requests = aeron.add_exclusive_publication(request_channel, request_stream_id)
        self.control_session_id: int | None = None
        self.received: list[Any] = []
        self._correlation = itertools.count(1000)
        _wait_for(lambda: self.requests.is_connected, "request publication to connect")

    def next_correlation_id(self) -> int:
        return next(self._correlation)

    # -- sending -------------------------------------------------------------------------------
    def send_bytes(self, data: bytes) -> None:
        deadline = time.monotonic() + RESPONSE_TIMEOUT_S
        while (result := self.requests.offer(data)) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"request offer failed with {result}")
            time.sleep(0.001)

    def send(self, message: Any, version: int = codecs.SCHEMA_VERSION) -> None:
        self.send_bytes(codecs.encode(message, version=version))

    # -- receiving -----------------------------------------------------------------------------
    def poll(self) -> int:
        def on_message(payload: memoryview, header: Any) -> None:
            try:
                self.received.append(codecs.decode(bytes(payload)))
            except codecs.UnknownTemplateError:
                pass  # Ping and friends
        return self.responses.poll(on_message, 100)

    def await_message(self, predicate: Callable[[Any], bool], what: str,
                      timeout: float = RESPONSE_TIMEOUT_S) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for index, message in enumerate(self.received):
                if predicate(message):
                    del self.received[index]
                    return message
            if time.monotonic() > deadline:
                raise ArchiveResponseTimeout(f"no {what} within {timeout} s; got {self.received!r}")
            if self.poll() == 0:
                time.sleep(0.001)

    def await_response(self, correlation_id: int, timeout: float = RESPONSE_TIMEOUT_S) -> codecs.ControlResponse:
        return self.await_message(
            lambda m: isinstance(m, codecs.ControlResponse) and m.correlation_id == correlation_id,
            f"ControlResponse for correlationId={correlation_id}", timeout)

    def await_signal(self, signal_type: codecs.RecordingSignal, recording_id: int | None = None,
                     timeout: float = RESPONSE_TIMEOUT_S) -> codecs.RecordingSignalEvent:
        return self.await_message(
            lambda m: isinstance(m, codecs.RecordingSignalEvent) and m.signal == signal_type
            and (recording_id is None or m.recording_id == recording_id),
            f"{signal_type.name} signal", timeout)

    def drain(self, seconds: float = 0.3) -> list[Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.poll() == 0:
                time.sleep(0.005)
        drained, self.received = self.received, []
        return drained

    # -- protocol --------------------------------------------------------------------------------
    def connect(self, credentials: bytes = b"",
                on_challenge: Callable[[bytes], bytes] | None = None,
                legacy: bool = False) -> codecs.ControlResponse:
        """Connects; returns the final connect response (OK or ERROR)."""
        correlation_id = self.next_correlation_id()
        if legacy:
            self.send(codecs.ConnectRequest(correlation_id, self.response_stream_id, 0,
                                            self.response_channel), version=0)
        else:
            self.send(codecs.AuthConnectRequest(
                correlation_id, self.response_stream_id, codecs.PROTOCOL_SEMANTIC_VERSION,
                self.response_channel, credentials, "name=raw-test-client"))
        message = self.await_message(
            lambda m: getattr(m, "correlation_id", None) == correlation_id
            and isinstance(m, (codecs.ControlResponse, codecs.Challenge)), "connect response")
        if isinstance(message, codecs.Challenge):
            if on_challenge is None:
                raise AssertionError(f"unexpected challenge {message.encoded_challenge!r}")
            answer_correlation = self.next_correlation_id()
            self.send(codecs.ChallengeResponse(message.control_session_id, answer_correlation,
                                               on_challenge(message.encoded_challenge)))
            message = self.await_response(answer_correlation)
        if message.code == codecs.ControlResponseCode.OK:
            self.control_session_id = message.control_session_id
        return message

    def request(self, factory: Callable[[int, int], Any], version: int = codecs.SCHEMA_VERSION) -> int:
        """Sends ``factory(controlSessionId, correlationId)``; returns the correlation id."""
        correlation_id = self.next_correlation_id()
        self.send(factory(self.control_session_id, correlation_id), version=version)
        return correlation_id

    def call(self, factory: Callable[[int, int], Any]) -> codecs.ControlResponse:
        return self.await_response(self.request(factory))

    def list_recordings(self, from_id: int = 0, count: int = 100) -> tuple[list[Any], Any]:
        correlation_id = self.request(lambda s, c: codecs.ListRecordingsRequest(s, c, from_id, count))
        descriptors = []
        while True:
            message = self.await_message(
                lambda m: getattr(m, "correlation_id", None) == correlation_id
                and isinstance(m, (codecs.RecordingDescriptorMessage, codecs.ControlResponse)),
                "listing")
            if isinstance(message, codecs.ControlResponse):
                return descriptors, message
            descriptors.append(message)
            if len(descriptors) == count:
                return descriptors, None

    def close_session(self) -> None:
        if self.control_session_id is not None:
            self.send(codecs.CloseSessionRequest(self.control_session_id))

    def close(self) -> None:
        for resource in (self.requests, self.responses):
            try:
                resource.close()
            except Exception:  # noqa: BLE001 - best effort in teardown
                pass


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = RESPONSE_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


wait_for = _wait_for
