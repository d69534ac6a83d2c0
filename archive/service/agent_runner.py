"""Runs duty-cycle agents (``do_work() -> int``) on a thread with an idle strategy.

An agent is anything with ``do_work() -> int`` (work done this cycle, 0 = idle) and optionally
``on_close()`` and ``role_name``. One :class:`AgentRunner` runs one or more agents in turn on
one thread (Aeron's SHARED/DEDICATED threading modes are one runner for all agents, or one per
agent). After a cycle without work the runner calls its idle strategy, as Aeron's AgentRunner
does; the strategies are Agrona's, by the names Aeron's C driver gives them (:data:`IDLE_STRATEGIES`;
Java class names are accepted too): ``backoff`` (the default: no spin or yield, parks doubling
from 100 us to 1 ms, reset as soon as an agent does work; see :class:`BackoffIdleStrategy`
for why not Aeron's 10 / 20 / 1 us), ``yield``, ``spin`` and ``sleep`` (1 ms).

**Threading modes** (:func:`threading_mode_name`, Aeron's ``aeron.archive.threading.mode``): the
archive service runs its conductor, recorder and replayer either on one runner each
(``dedicated``, Aeron's default) or on one runner for all three (``shared``: one thread, the
conductor's idle strategy, as Aeron's SHARED). Aeron's INVOKER is refused: a sidecar has no
embedding application to call the duty cycle.

**Dormant agents.** An agent that can say it has nothing to look after (``is_dormant``: the
recorder and the replayer with no session) and can be woken (``set_wake_signal(event)``, set when
work is handed to it) is not polled while dormant: the runner waits on the wake signal instead
(up to :data:`DORMANT_WAIT_S`). An idle sidecar's recorder and replayer then cost nothing, and
a new session starts at once instead of after the idle strategy's next park. A runner dozes only
when every one of its agents can: a shared runner also runs the conductor, which is never dormant,
so it polls its recorder and replayer every cycle (cheap when they have no session) and idles with
its idle strategy, and hand-offs need no wake signal since they come from the same thread.

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
from typing import Protocol, runtime_checkable

from aeron_spark.archive.configuration import THREADING_MODES

log = logging.getLogger(__name__)


class Agent(Protocol):
    def do_work(self) -> int: ...


@runtime_checkable
class DormantAgent(Agent, Protocol):
    """An agent that says when it has nothing to do and wakes its runner when that changes
    (`session_agent.SessionAgent`)."""

    @property
    def is_dormant(self) -> bool: ...

    def set_wake_signal(self, wake: threading.Event) -> None: ...


class IdleStrategy(Protocol):
    def idle(self, work_count: int) -> None: ...

    def reset(self) -> None: ...


class BackoffIdleStrategy:
    """Spin, then yield, then park for min_park_ns doubling up to max_park_ns (Agrona's
    BackoffIdleStrategy).

    The defaults are not Aeron's (``Configuration.IDLE_*``: 10 spins, 20 yields, parks from 1 us):
    a "spin" here is a whole Python duty cycle (10-50 us, what Java's whole spin phase costs), and
    a park shorter than ~50 us sleeps ~50 us anyway (the kernel's timer slack). With Aeron's values
    every message that ends an idle spell cost ~40 duty cycles: at 1,000 msg/s the conductor,
    recorder and replayer took 80 % of a core between them doing nothing, which a co-located
    Spark driver's planning then waited for (docs/realtime.md, "Idle strategies"). The longest park
    (what a message can wait in one agent) is Aeron's, 1 ms."""

    name = "backoff"

    def __init__(self, max_spins: int = 0, max_yields: int = 0, min_park_ns: int = 100_000,
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


class YieldingIdleStrategy:
    """``sched_yield()`` after every cycle without work: lowest latency short of spinning, a core
    while a session is idle (Agrona's YieldingIdleStrategy)."""

    name = "yield"

    def reset(self) -> None:
        pass

    def idle(self, work_count: int) -> None:
        if work_count <= 0:
            os.sched_yield()


class BusySpinIdleStrategy:
    """Never gives the CPU up (Agrona's BusySpinIdleStrategy): for a dedicated core only."""

    name = "spin"

    def reset(self) -> None:
        pass

    def idle(self, work_count: int) -> None:
        pass


class SleepingIdleStrategy:
    """Sleep ``period_ns`` after every cycle without work (Agrona's SleepingIdleStrategy)."""

    name = "sleep"

    def __init__(self, period_ns: int = 1_000_000) -> None:
        if period_ns <= 0:
            raise ValueError(f"sleep period must be > 0 ns, got {period_ns}")
        self.period_s = period_ns / 1e9

    def reset(self) -> None:
        pass

    def idle(self, work_count: int) -> None:
        if work_count <= 0:
            time.sleep(self.period_s)


#: The idle strategies by name (Aeron's C driver names), and by the Java class names
#: ``aeron.archive.idle.strategy`` takes.
IDLE_STRATEGIES: dict[str, Callable[[], IdleStrategy]] = {
    "backoff": BackoffIdleStrategy,
    "yield": YieldingIdleStrategy,
    "spin": BusySpinIdleStrategy,
    "sleep": SleepingIdleStrategy,
}
_JAVA_IDLE_STRATEGIES = {
    "org.agrona.concurrent.BackoffIdleStrategy": "backoff",
    "org.agrona.concurrent.YieldingIdleStrategy": "yield",
    "org.agrona.concurrent.BusySpinIdleStrategy": "spin",
    "org.agrona.concurrent.SleepingMillisIdleStrategy": "sleep",
}

#: How long a dormant agent's runner waits on its wake signal before looking again (a safety
#: net: every hand-off sets the signal).
DORMANT_WAIT_S = 1.0


def idle_strategy_name(text: str) -> str:
    """The canonical name of an idle strategy given by name or Java class name; ValueError naming
    the accepted values otherwise."""
    name = _JAVA_IDLE_STRATEGIES.get(text.strip(), text.strip().lower())
    if name not in IDLE_STRATEGIES:
        raise ValueError(f"unknown idle strategy {text!r}: expected one of {', '.join(IDLE_STRATEGIES)} "
                         f"(or {', '.join(_JAVA_IDLE_STRATEGIES)})")
    return name


def threading_mode_name(text: str) -> str:
    """The threading mode given by name, any case (Aeron's enum names DEDICATED and SHARED too);
    ValueError naming the accepted values otherwise."""
    name = text.strip().lower()
    if name in THREADING_MODES:
        return name
    accepted = " or ".join(THREADING_MODES)
    if name == "invoker":
        raise ValueError(f"threading mode {text!r} (Aeron's INVOKER, the embedding application calls the "
                         f"duty cycle) is not supported by the sidecar: expected {accepted}")
    raise ValueError(f"unknown threading mode {text!r}: expected {accepted}")


def new_idle_strategy(text: str) -> IdleStrategy:
    return IDLE_STRATEGIES[idle_strategy_name(text)]()


class AgentRunner:
    """One thread running ``agents`` round-robin until :meth:`close`."""

    def __init__(self, agents: Sequence[Agent], *, name: str = "archive-agents",
                 idle_strategy: IdleStrategy | None = None,
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
        # Dormancy needs every agent of this runner to say when it is dormant and to take the signal.
        self._wake = threading.Event()
        self._dormant_agents = [a for a in self.agents if isinstance(a, DormantAgent)]
        self._can_doze = len(self._dormant_agents) == len(self.agents)
        if self._can_doze:
            for agent in self._dormant_agents:
                agent.set_wake_signal(self._wake)

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
                work = self.do_work()
                if work == 0 and self._can_doze and self.wait_while_dormant():
                    idle.reset()
                    continue
                idle.idle(work)
        finally:
            self._close_agents()

    def wait_while_dormant(self, timeout_s: float = DORMANT_WAIT_S) -> bool:
        """If every agent is dormant, wait until one is woken (or ``timeout_s``); whether it waited.
        The signal is cleared before the agents are asked, so a hand-off in between is not lost."""
        self._wake.clear()
        if not self._can_doze or not all(agent.is_dormant for agent in self._dormant_agents) \
                or not self._running.is_set():
            return False
        self._wake.wait(timeout_s)
        return True

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
        self._wake.set()
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
