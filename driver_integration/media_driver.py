"""Embedded Aeron C media driver (``aeron_driver_*`` from aeronmd.h).

The driver runs on its own C threads once started; this object only owns its lifetime. By
default each driver gets a fresh unique directory (under /dev/shm when it exists: the log
buffers are memory mapped there, and tmpfs is much faster than disk) that is removed on close.

Run ``python -m aeron_spark.driver_integration.media_driver --dir DIR`` for a standalone driver
process (it runs until SIGTERM/SIGINT).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, fields
from typing import Literal

from ._capi import ffi, lib
from .errors import AeronError, check, closed_error
from .frame import FRAME_ALIGNMENT

ThreadingMode = Literal["dedicated", "shared_network", "shared"]

_THREADING_MODES: dict[str, int] = {
    "dedicated": lib.AERON_THREADING_MODE_DEDICATED,
    "shared_network": lib.AERON_THREADING_MODE_SHARED_NETWORK,
    "shared": lib.AERON_THREADING_MODE_SHARED,
}
#: The driver's conductor gets a thread of its own (Aeron's SHARED_NETWORK: conductor; sender and
#: receiver; native resource agent). In "shared" mode one thread runs all of them, and the native
#: resource agent's work blocks: resolving a channel's host name (a DNS server that does not answer
#: costs two 5 s tries), creating, mapping and deleting log buffer files. The conductor stamps the
#: keepalive clients check against their 10 s driver timeout, so one such lookup made every client
#: of the driver declare it dead (issue 33; docs/reliability.md, "A driver that stops ticking").
DEFAULT_THREADING_MODE: ThreadingMode = "shared_network"
#: The back-off every agent thread of an embedded driver idles with, as the C driver's init args
#: (max spins - max yields - min park - max park). Aeron's (10-20-1us-1ms) wake a thread ~40 times
#: after every message, each wake a duty cycle with socket syscalls: the network thread took half a
#: core at 5,000 msg/s beside a Spark driver, which then planned each real-time batch late
#: (docs/realtime.md, "Idle strategies"). These cost ~a half of that; a message still waits at most
#: Aeron's 1 ms park. AERON_<AGENT>_IDLE_STRATEGY[_INIT_ARGS] in the environment replaces it.
DEFAULT_IDLE_BACKOFF = "1-2-50us-1ms"
# The agents of each threading mode, by the C driver's setter and environment names.
_IDLE_AGENTS: dict[str, tuple[str, ...]] = {
    "dedicated": ("conductor", "sender", "receiver"),
    "shared_network": ("conductor", "sharednetwork"),
    "shared": ("shared",),
}
MIN_TERM_LENGTH = 64 * 1024
MAX_TERM_LENGTH = 1024 * 1024 * 1024
MIN_MTU_LENGTH = 64
MAX_MTU_LENGTH = 65504  # largest UDP payload Aeron allows


@dataclass(frozen=True, slots=True)
class MediaDriverOptions:
    """Settings of an embedded media driver; ``None`` keeps Aeron's default.

    Timeouts are in nanoseconds except ``driver_timeout_ms``.
    """

    dir: str | None = None
    threading_mode: ThreadingMode = DEFAULT_THREADING_MODE
    term_buffer_length: int | None = None
    ipc_term_buffer_length: int | None = None
    mtu_length: int | None = None
    ipc_mtu_length: int | None = None
    term_buffer_sparse_file: bool | None = None
    spies_simulate_connection: bool | None = None
    dir_delete_on_start: bool = True
    dir_delete_on_shutdown: bool = True
    publication_linger_timeout_ns: int | None = None
    client_liveness_timeout_ns: int | None = None
    image_liveness_timeout_ns: int | None = None
    driver_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError/TypeError naming the first invalid option and its accepted values."""
        if self.threading_mode not in _THREADING_MODES:
            raise ValueError(f"threading_mode {self.threading_mode!r} is invalid: accepted values are "
                             f"{', '.join(repr(m) for m in _THREADING_MODES)}")
        for name in ("term_buffer_length", "ipc_term_buffer_length"):
            value = getattr(self, name)
            if value is None:
                continue
            _require_int(name, value)
            if not (MIN_TERM_LENGTH <= value <= MAX_TERM_LENGTH) or value & (value - 1):
                raise ValueError(f"{name} {value} is invalid: must be a power of two from "
                                 f"{MIN_TERM_LENGTH} (64 KiB) to {MAX_TERM_LENGTH} (1 GiB)")
        for name in ("mtu_length", "ipc_mtu_length"):
            value = getattr(self, name)
            if value is None:
                continue
            _require_int(name, value)
            if not MIN_MTU_LENGTH <= value <= MAX_MTU_LENGTH or value % FRAME_ALIGNMENT:
                raise ValueError(f"{name} {value} is invalid: must be a multiple of {FRAME_ALIGNMENT} "
                                 f"from {MIN_MTU_LENGTH} to {MAX_MTU_LENGTH}")
        for name in ("publication_linger_timeout_ns", "client_liveness_timeout_ns",
                     "image_liveness_timeout_ns", "driver_timeout_ms"):
            value = getattr(self, name)
            if value is None:
                continue
            _require_int(name, value)
            if value <= 0:
                raise ValueError(f"{name} {value} is invalid: must be a positive integer")
        for name in ("term_buffer_sparse_file", "spies_simulate_connection", "dir_delete_on_start",
                     "dir_delete_on_shutdown"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"{name} must be True, False or None, got {value!r}")
        if self.dir is not None and not isinstance(self.dir, str):
            raise TypeError(f"dir must be a str path or None, got {type(self.dir).__name__}")

    def with_overrides(self, **overrides: object) -> MediaDriverOptions:
        """A copy with ``overrides`` applied; unknown names raise TypeError listing the valid ones."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(f"unknown media driver option(s) {', '.join(unknown)}: accepted options are "
                            f"{', '.join(sorted(known))}")
        return dataclasses.replace(self, **overrides)  # type: ignore[arg-type]  # checked by __post_init__


def _set_idle_backoff(context: object, agent: str) -> None:
    """:data:`DEFAULT_IDLE_BACKOFF` for ``agent`` unless the environment names its idle strategy."""
    variable = f"AERON_{agent.upper()}_IDLE_STRATEGY"
    if os.environ.get(variable) or os.environ.get(f"{variable}_INIT_ARGS"):
        return
    check(getattr(lib, f"aeron_driver_context_set_{agent}_idle_strategy_init_args")(
        context, DEFAULT_IDLE_BACKOFF.encode()), f"set {agent} idle strategy init args")
    check(getattr(lib, f"aeron_driver_context_set_{agent}_idle_strategy")(context, b"backoff"),
          f"set {agent} idle strategy")


def _require_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")


def default_base_directory() -> str:
    """/dev/shm when it exists (tmpfs: fast mapped log buffers), else the temp directory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class MediaDriver:
    """An embedded C media driver, started on construction and stopped by ``close()``.

    >>> with MediaDriver(term_buffer_length=64 * 1024) as driver:
    ...     client = AeronClient(driver.dir)
    """

    def __init__(self, options: MediaDriverOptions | None = None, **overrides: object) -> None:
        base = options if options is not None else MediaDriverOptions()
        self.options = base.with_overrides(**overrides) if overrides else base
        self._owns_dir = self.options.dir is None
        self._dir: str = (tempfile.mkdtemp(prefix="aeron-spark-", dir=default_base_directory())
                          if self.options.dir is None else os.path.abspath(self.options.dir))
        self._lock = threading.Lock()
        self._driver = ffi.NULL
        self._context = ffi.NULL
        try:
            self._start()
        except BaseException:
            self._release()
            raise

    def _start(self) -> None:
        opts = self.options
        context_p = ffi.new("aeron_driver_context_t **")
        check(lib.aeron_driver_context_init(context_p), "aeron_driver_context_init")
        self._context = context = context_p[0]
        check(lib.aeron_driver_context_set_dir(context, self._dir.encode()), "set driver dir")
        check(lib.aeron_driver_context_set_threading_mode(context, _THREADING_MODES[opts.threading_mode]),
              "set threading_mode")
        check(lib.aeron_driver_context_set_dir_delete_on_start(context, opts.dir_delete_on_start),
              "set dir_delete_on_start")
        check(lib.aeron_driver_context_set_dir_delete_on_shutdown(context, opts.dir_delete_on_shutdown),
              "set dir_delete_on_shutdown")
        for agent in _IDLE_AGENTS[opts.threading_mode]:
            _set_idle_backoff(context, agent)
        setters = {
            "term_buffer_length": lib.aeron_driver_context_set_term_buffer_length,
            "ipc_term_buffer_length": lib.aeron_driver_context_set_ipc_term_buffer_length,
            "mtu_length": lib.aeron_driver_context_set_mtu_length,
            "ipc_mtu_length": lib.aeron_driver_context_set_ipc_mtu_length,
            "term_buffer_sparse_file": lib.aeron_driver_context_set_term_buffer_sparse_file,
            "spies_simulate_connection": lib.aeron_driver_context_set_spies_simulate_connection,
            "publication_linger_timeout_ns": lib.aeron_driver_context_set_publication_linger_timeout_ns,
            "client_liveness_timeout_ns": lib.aeron_driver_context_set_client_liveness_timeout_ns,
            "image_liveness_timeout_ns": lib.aeron_driver_context_set_image_liveness_timeout_ns,
            "driver_timeout_ms": lib.aeron_driver_context_set_driver_timeout_ms,
        }
        for name, setter in setters.items():
            value = getattr(opts, name)
            if value is not None:
                check(setter(context, value), f"set {name}={value}")
        driver_p = ffi.new("aeron_driver_t **")
        check(lib.aeron_driver_init(driver_p, context), f"aeron_driver_init (dir {self._dir})")
        self._driver = driver_p[0]
        check(lib.aeron_driver_start(self._driver, False), "aeron_driver_start")

    @property
    def dir(self) -> str:
        """The Aeron directory clients connect to (``AeronClient(driver.dir)``)."""
        return self._dir

    @property
    def is_closed(self) -> bool:
        return self._context == ffi.NULL

    def ensure_open(self) -> None:
        if self.is_closed:
            raise closed_error(f"media driver ({self._dir})")

    def idle_strategy_init_args(self, agent: str) -> str | None:
        """The back-off ``agent`` (conductor, sender, receiver, sharednetwork, shared) idles with, as
        the C driver's init args, or None where the environment chose its idle strategy."""
        self.ensure_open()
        agents = dict.fromkeys(agent for names in _IDLE_AGENTS.values() for agent in names)
        if agent not in agents:
            raise ValueError(f"unknown driver agent {agent!r}: expected one of {', '.join(agents)}")
        value = getattr(lib, f"aeron_driver_context_get_{agent}_idle_strategy_init_args")(self._context)
        return None if value == ffi.NULL else ffi.string(value).decode()

    def close(self) -> None:
        """Stop the driver threads and remove an owned directory; harmless when repeated."""
        with self._lock:
            self._release()

    def _release(self) -> None:
        errors: list[str] = []
        if self._driver != ffi.NULL:
            if lib.aeron_driver_close(self._driver) < 0:
                errors.append(ffi.string(lib.aeron_errmsg()).decode("utf-8", "replace"))
            self._driver = ffi.NULL
        if self._context != ffi.NULL:
            lib.aeron_driver_context_close(self._context)
            self._context = ffi.NULL
        if self._owns_dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        if errors:
            raise AeronError(f"aeron_driver_close failed: {errors[0]}", errmsg=errors[0])

    def __enter__(self) -> MediaDriver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "running"
        return f"MediaDriver(dir={self._dir!r}, {state})"


def main(argv: list[str] | None = None) -> int:
    """Run a standalone media driver until SIGTERM or SIGINT; prints its directory on stdout."""
    parser = argparse.ArgumentParser(description="Run an embedded Aeron C media driver.")
    parser.add_argument("--dir", help="Aeron directory (default: a fresh one under /dev/shm)")
    parser.add_argument("--term-buffer-length", type=int)
    parser.add_argument("--threading-mode", default=DEFAULT_THREADING_MODE, choices=sorted(_THREADING_MODES))
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with MediaDriver(dir=args.dir, term_buffer_length=args.term_buffer_length,
                     threading_mode=args.threading_mode) as driver:
        print(driver.dir, flush=True)
        while not stop.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
