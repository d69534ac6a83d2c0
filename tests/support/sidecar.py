"""The test sidecar: `aeron-archive serve` as a real subprocess, on
``aeron_spark.archive.cli.sidecar_process.SidecarProcess``.

``Sidecar`` holds what a test chooses (archive directory, extra ``serve`` options, a driver to
attach to, the UDP control port: a free one by default) and adds the test defaults: 64 KiB
segments, DEBUG logging, stderr captured (``stderr_lines``, ``log_tail()``). ``start()`` waits for
the ready line; a sidecar that never gets ready is killed and RuntimeError raised, and the
process stays inspectable (``process.returncode``, ``stderr_lines``).

``threading_mode`` (``--threading-mode``) defaults to :data:`test_threading_mode`'s current value:
None (serve's own default) unless a test runs inside :func:`sidecars_in_threading_mode`, as the
integration tests of tests/integration/conftest.py's ``BOTH_THREADING_MODES`` modules do, once per mode.

Every sidecar a test starts is stopped by that test, by PID: ``running_sidecar`` does it on exit,
also on failure (SIGTERM, SIGKILL after a timeout); code that calls ``start()`` itself calls
``terminate()`` and/or ``kill()`` in a ``finally``. ``kill()`` also removes the directory of the
sidecar's embedded driver, which a SIGKILLed sidecar leaves behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from aeron_spark.archive.cli.sidecar_process import CAPTURE, SidecarProcess

from tests.support.ports import free_udp_port, udp_channel

STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
TEST_SERVE_ARGS = ("--segment-length", "64k", "--log-level", "DEBUG")

#: The threading mode new test sidecars get (None: serve's default, dedicated).
test_threading_mode: ContextVar[str | None] = ContextVar("test_threading_mode", default=None)


@contextmanager
def sidecars_in_threading_mode(mode: str | None) -> Iterator[None]:
    """Sidecars made in this block run ``serve --threading-mode mode`` (unless a test gives its own)."""
    token = test_threading_mode.set(mode)
    try:
        yield
    finally:
        test_threading_mode.reset(token)


@dataclass
class Sidecar:
    """One `aeron-archive serve` process for a test (not started until ``start()``)."""

    archive_dir: Path
    extra_args: list[str] = field(default_factory=list)  # after the defaults, so they override them
    aeron_dir: str | None = None  # attach to this driver; None = the sidecar's embedded driver
    control_port: int = field(default_factory=free_udp_port)
    running: SidecarProcess | None = None
    threading_mode: str | None = field(default_factory=test_threading_mode.get)

    @property
    def control_channel(self) -> str:
        return udp_channel(self.control_port)

    def serve_args(self) -> list[str]:
        """The ``serve`` options after ``--dir``."""
        args = ["--control-channel", self.control_channel, *TEST_SERVE_ARGS]
        if self.threading_mode is not None:
            args += ["--threading-mode", self.threading_mode]
        if self.aeron_dir is not None:
            args += ["--aeron-dir", self.aeron_dir]
        return args + self.extra_args

    def start(self) -> Sidecar:
        self.running = SidecarProcess.launch(self.archive_dir, *self.serve_args(), stderr=CAPTURE)
        self.running.wait_ready(STARTUP_TIMEOUT_S)
        if self.threading_mode is not None and self.ready.get("threadingMode") != self.threading_mode:
            raise RuntimeError(f"sidecar asked for --threading-mode {self.threading_mode} serves in "
                               f"{self.ready.get('threadingMode')!r}")
        return self

    # -- the running process -------------------------------------------------------------------
    @property
    def process(self):  # subprocess.Popen
        return self._running().process

    @property
    def pid(self) -> int:
        return self._running().pid

    @property
    def ready(self) -> dict[str, str]:
        """The ready line's fields (``pid``, ``archiveId``, ``aeronDir``, ``control`` ...)."""
        return self.running.ready if self.running is not None else {}

    @property
    def driver_dir(self) -> str:
        return self.ready["aeronDir"]

    @property
    def stderr_lines(self) -> list[str]:
        return self.running.stderr_lines if self.running is not None else []

    @property
    def stdout_lines(self) -> list[str]:
        return self.running.stdout_lines if self.running is not None else []

    def log_tail(self, lines: int = 60) -> str:
        return self.running.log_tail(lines) if self.running is not None else ""

    # -- stopping, by PID --------------------------------------------------------------------------
    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        return self.running.stop(timeout) if self.running is not None else 0

    def kill(self) -> None:
        """SIGKILL (if still running), and remove the embedded driver's directory it left behind."""
        if self.running is not None:
            self.running.kill(remove_embedded_driver_dir=self.aeron_dir is None)

    def _running(self) -> SidecarProcess:
        if self.running is None:
            raise RuntimeError(f"the sidecar on {self.archive_dir} was never started")
        return self.running


@contextmanager
def running_sidecar(archive_dir: Path, extra_args: list[str] | None = None,
                    aeron_dir: str | None = None) -> Iterator[Sidecar]:
    """A started sidecar, stopped by PID on exit (SIGTERM, then SIGKILL), also when the test fails."""
    sidecar = Sidecar(archive_dir, list(extra_args or []), aeron_dir)
    try:
        yield sidecar.start()
    finally:
        sidecar.terminate()
        sidecar.kill()
