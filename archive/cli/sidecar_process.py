"""`aeron-archive serve` as a child process: start it, wait for its ready line, stop it by PID.

The one implementation behind the examples, the benchmarks and the tests that need a real
sidecar. The child's stdout is read on a thread until it ends (so the pipe never fills); its
ready line (serve_command.READY_PREFIX, ``key=value`` tokens) says where it listens and which
media driver directory it uses. ``stop()`` sends SIGTERM (the sidecar stores stop positions and
exits) and SIGKILL when it does not exit within the grace period.

``start()`` launches and waits for the ready line; ``launch()`` + ``wait_ready()`` are the same in
two steps, for a caller that must hold the process (to inspect or kill it) even when it never
becomes ready. ``free_udp_port()`` picks a port for a UDP control channel (or any other channel).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from aeron_spark.archive.cli.serve_command import READY_PREFIX
from aeron_spark.archive.configuration import DEFAULT_SIDECAR_START_TIMEOUT_S, DEFAULT_SIDECAR_STOP_GRACE_S

READER_JOIN_TIMEOUT_S = 5.0
CAPTURE = "capture"  # stderr=CAPTURE keeps the child's stderr lines in ``stderr_lines``


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A localhost UDP port nothing is bound to right now (the OS picks; another process may take
    it before it is used - fine for examples and tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def parse_ready_line(line: str) -> dict[str, str]:
    """The ``key=value`` fields of a ready line."""
    return dict(token.partition("=")[::2] for token in line[len(READY_PREFIX):].split() if "=" in token)


def serve_command(archive_dir: str | os.PathLike, *serve_args: str) -> list[str]:
    return [sys.executable, "-m", "aeron_spark.archive.cli.main", "serve", "--dir", str(archive_dir), *serve_args]


@dataclass
class SidecarProcess:
    process: subprocess.Popen
    archive_dir: Path
    ready: dict[str, str] = field(default_factory=dict)
    ready_line: str = ""
    stdout_lines: list[str] = field(default_factory=list)
    stderr_lines: list[str] = field(default_factory=list)
    _ready_event: threading.Event = field(default_factory=threading.Event, repr=False)
    _readers: list[threading.Thread] = field(default_factory=list, repr=False)

    @classmethod
    def start(cls, archive_dir: str | os.PathLike, *serve_args: str, stderr: IO | str | None = None,
              timeout_s: float = DEFAULT_SIDECAR_START_TIMEOUT_S, terminate_with_parent: bool = False) -> SidecarProcess:
        """Starts ``aeron-archive serve --dir archive_dir *serve_args`` and waits until it is ready.

        ``stderr``: None inherits it, a file object receives it, CAPTURE keeps its lines.
        ``terminate_with_parent``: the child gets SIGTERM when this process dies, even by SIGKILL
        (Linux); only safe to ask for before this process starts threads of its own.
        """
        sidecar = cls.launch(archive_dir, *serve_args, stderr=stderr, terminate_with_parent=terminate_with_parent)
        return sidecar.wait_ready(timeout_s)

    @classmethod
    def launch(cls, archive_dir: str | os.PathLike, *serve_args: str, stderr: IO | str | None = None,
               terminate_with_parent: bool = False) -> SidecarProcess:
        """Starts the process as ``start()`` does but returns at once; call ``wait_ready()`` next."""
        capture = stderr == CAPTURE
        if isinstance(stderr, str) and not capture:
            raise ValueError(f"stderr {stderr!r} is invalid: expected None, a file object or {CAPTURE!r}")
        child_stderr = subprocess.PIPE if capture or isinstance(stderr, str) else stderr
        process = subprocess.Popen(
            serve_command(archive_dir, *serve_args), stdout=subprocess.PIPE,
            stderr=child_stderr, text=True, bufsize=1,
            preexec_fn=_sigterm_when_parent_dies if terminate_with_parent else None)  # noqa: PLW1509
        sidecar = cls(process, Path(archive_dir))
        ready = sidecar._ready_event

        stdout, captured_stderr = process.stdout, process.stderr  # pipes: set by Popen

        def read_stdout() -> None:
            for line in stdout or ():
                sidecar.stdout_lines.append(line.rstrip("\n"))
                if line.startswith(READY_PREFIX) and not ready.is_set():
                    sidecar.ready_line = line.strip()
                    sidecar.ready = parse_ready_line(sidecar.ready_line)
                    ready.set()

        def read_stderr() -> None:
            for line in captured_stderr or ():
                sidecar.stderr_lines.append(line.rstrip("\n"))

        sidecar._readers.append(threading.Thread(target=read_stdout, name=f"sidecar-{process.pid}-stdout", daemon=True))
        if capture:
            sidecar._readers.append(threading.Thread(target=read_stderr, name=f"sidecar-{process.pid}-stderr",
                                                     daemon=True))
        for reader in sidecar._readers:
            reader.start()
        return sidecar

    def wait_ready(self, timeout_s: float = DEFAULT_SIDECAR_START_TIMEOUT_S) -> SidecarProcess:
        """Waits for the ready line. When the process exits first or ``timeout_s`` passes, it is
        killed (by PID) and RuntimeError says why, with the stderr tail when it was captured."""
        deadline = time.monotonic() + timeout_s
        while not self._ready_event.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                for reader in self._readers:  # the pipes end with the process: keep its last words
                    reader.join(READER_JOIN_TIMEOUT_S)
                tail = self.log_tail(40)
                raise RuntimeError(f"aeron-archive serve (pid {self.process.pid}) did not become ready within "
                                   f"{timeout_s:.0f} s (exit code {self.process.returncode})"
                                   + (f"; stderr:\n{tail}" if tail else ""))
        return self

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` captured stderr lines (empty unless started with stderr=CAPTURE)."""
        return "\n".join(self.stderr_lines[-lines:])

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def aeron_dir(self) -> str:
        return self.ready["aeronDir"]

    @property
    def control_channel(self) -> str:
        return self.ready["control"]

    def stop(self, grace_s: float = DEFAULT_SIDECAR_STOP_GRACE_S) -> int:
        """SIGTERM by PID and wait; SIGKILL if it has not exited after ``grace_s``. The exit code."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def kill(self, *, remove_embedded_driver_dir: bool = False) -> None:
        """SIGKILL by PID. The embedded driver's directory outlives a killed sidecar: remove it
        when asked (only when the sidecar ran its own driver)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(DEFAULT_SIDECAR_STOP_GRACE_S)
        embedded = self.ready.get("aeronDir")
        if remove_embedded_driver_dir and embedded and os.path.isdir(embedded):
            shutil.rmtree(embedded, ignore_errors=True)

    def __enter__(self) -> SidecarProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _sigterm_when_parent_dies() -> None:
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
