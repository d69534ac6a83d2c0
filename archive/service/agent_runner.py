"""Runs duty-cycle agents (``do_work() -> int``) on a thread with a back-off idle strategy.

An agent is anything with ``do_work() -> int`` (work done this cycle, 0 = idle) and optionally
``on_close()`` and ``role_name``. One :class:`AgentRunner` runs one or more agents in turn on
one thread (Aeron's SHARED/DEDICATED threading modes are one runner for all agents, or one per
agent). :class:`BackoffIdleStrategy` spins a few times, then yields, then sleeps with a doubling
park time capped at 1 ms, and resets as soon as an agent does work.

An exception from ``do_work`` is logged and counted (``error_count``), passed to the runner's
``error_handler`` if it has one (the archive service's records it in the mark file's error log,
`error_log.MarkFileErrorLog`), and the loop carries on, like Aeron's AgentRunner with an error
handler; :meth:`AgentRunner.close` stops the thread and then calls each agent's ``on_close`` on
the runner's thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

log = logging.getLogger(__name__)


class Agent(Protocol):
    def do_work(self) -> int: ...


class BackoffIdleStrategy:
    """Spin, then yield, then park for min_park_ns doubling up to max_park_ns."""

    def __init__(self, max_spins: int = 10, max_yields: int = 5, min_park_ns: int = 1_000,
                 max_park_ns: int = 1_000_000) -> None:
        if max_spins < 0 or max_yields < 0 or not 0 < min_park_ns <= max_park_ns:
            raise ValueError(f"invalid back-off: spins={max_spins}, yields={max_yields}, "
                             f"park {min_park_ns}..{max_park_ns} ns (need >= 0, >= 0, 0 < min <= max)")
        self.max_spins = max_spins
        self.max_yields = max_yields
        self.min_park_ns = min_park_ns
        self.max_park_ns = max_park_ns
        self.reset()

    def reset(self) -> None:
        self._spins = 0
        self._yields = 0
        self._park_ns = self.min_park_ns

    def idle(self, work_count: int) -> None:
        if work_count > 0:
            self.reset()
            return
        if self._spins < self.max_spins:
            self._spins += 1
        elif self._yields < self.max_yields:
            self._yields += 1
            os.sched_yield()
        else:
            time.sleep(self._park_ns / 1e9)
            self._park_ns = min(self._park_ns * 2, self.max_park_ns)


class AgentRunner:
    """One thread running ``agents`` round-robin until :meth:`close`."""

    def __init__(self, agents: Sequence[Agent], *, name: str = "archive-agents",
                 idle_strategy: BackoffIdleStrategy | None = None,
                 error_handler: Callable[[BaseException], None] | None = None) -> None:
        if not agents:
            raise ValueError("an AgentRunner needs at least one agent")
        self.agents = list(agents)
        self.name = name
        self.idle_strategy = idle_strategy or BackoffIdleStrategy()
        self.error_handler = error_handler
        self.error_count = 0
        self._running = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def start(self) -> "AgentRunner":
        if self._thread is not None:
            raise RuntimeError(f"agent runner {self.name} already started")
        self._running.set()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def do_work(self) -> int:
        """One duty cycle of every agent (also usable without a thread, e.g. in tests)."""
        work = 0
        for agent in self.agents:
            try:
                work += agent.do_work()
            except Exception as error:  # noqa: BLE001
                self.error_count += 1
                log.exception("agent %s failed in do_work", getattr(agent, "role_name", agent))
                self._handle_error(error)
        return work

    def _handle_error(self, error: BaseException) -> None:
        if self.error_handler is None:
            return
        try:
            self.error_handler(error)
        except Exception:  # noqa: BLE001 - the error handler must not stop the loop either
            log.exception("agent runner %s: the error handler failed", self.name)

    def _run(self) -> None:
        idle = self.idle_strategy
        try:
            while self._running.is_set():
                idle.idle(self.do_work())
        finally:
            self._close_agents()

    def _close_agents(self) -> None:
        for agent in self.agents:
            on_close = getattr(agent, "on_close", None)
            if on_close is None:
                continue
            try:
                on_close()
            except Exception:  # noqa: BLE001
                log.exception("agent %s failed in on_close", getattr(agent, "role_name", agent))

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the loop and close the agents (on the runner thread if it was started)."""
        if self._closed:
            return
        self._closed = True
        self._running.clear()
        if self._thread is None:
            self._close_agents()
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"agent runner {self.name} did not stop within {timeout} s")

    def __enter__(self) -> "AgentRunner":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()
