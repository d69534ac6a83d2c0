"""What the recorder and the replayer agents share: a set of sessions driven in one duty cycle.

Sessions arrive from the conductor's thread (``add_session``, a thread-safe deque append), stop
commands likewise (``_enqueue``); the agent's thread moves both in at the start of each
``do_work``, in the order they were sent: a command applies to the sessions added before it only
(a stop of a recording's replays, sent by a truncate, must not abort the replay asked next). It
then runs every session's ``do_work`` (a session whose cycle raises is logged, passed to the
``error_handler`` if any, and aborted: it must not stop the others, nor keep failing every cycle),
retires the sessions that are done, and publishes the I/O counters once per cycle that did work.
``on_close`` aborts every session, gives each one more cycle to stop, retires it and closes the
counters. Subclasses say how a command aborts sessions and how a session is retired.

Two more counters, both written on the agent's thread only (plain stores): ``session_count``, the
sessions the agent holds (the recorder's is Aeron's "Archive Recording Sessions", 111, the
replayer's "Archive Replay Sessions", 112), stored when it changes; and ``cycle_tracker`` (Aeron's
per-agent max cycle time and threshold-exceeded counters, 103/104, DEDICATED threading only),
measured at the start of every ``do_work``. A cycle that follows a dormant wait restarts the
measurement instead (`duty_cycle_tracker`): the wait is not a duty cycle.

With no session, queued session or command the agent is dormant (``is_dormant``): its runner
waits on the wake signal it gave (``set_wake_signal``), which ``add_session`` and every command set,
instead of polling an empty duty cycle (see :mod:`~aeron_spark.archive.service.agent_runner`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from aeron_spark.archive.codecs.counter_layout import WritableCounter
from aeron_spark.archive.service.counters import IoCounters, IoStats
from aeron_spark.archive.service.duty_cycle_tracker import CycleTracker
from aeron_spark.archive.service.failure_log import FailureLog

log = logging.getLogger(__name__)

#: A session whose duty cycle raises is aborted; if aborting cannot stop it (it raises again in
#: its stopping cycles), it is retired by force after this many failed cycles.
MAX_FAILED_CYCLES = 3


class Session(Protocol):
    io_stats: IoStats

    @property
    def is_done(self) -> bool: ...

    def do_work(self) -> int: ...

    def abort(self, reason: str = ...) -> None: ...


class SessionAgent[S: Session]:
    """Agent: ``do_work()`` returns the amount of work done (0 = idle)."""

    role_name = "archive-sessions"

    def __init__(self, counters: IoCounters | None = None, *,
                 error_handler: Callable[[BaseException], None] | None = None,
                 session_count: WritableCounter | None = None,
                 cycle_tracker: CycleTracker | None = None) -> None:
        self._counters = counters
        self._session_count = session_count
        self._published_session_count = 0
        self._cycle_tracker = cycle_tracker
        self._was_dormant = True  # the first cycle starts the measurement
        self.error_handler = error_handler  # also told of a failing session (after the log)
        self.io_stats = IoStats()
        self.failures = FailureLog(log)  # a session failing every cycle is logged once per 10 s
        self._incoming: collections.deque[S] = collections.deque()  # thread-safe appends
        # (command, ident, how many sessions had been added when it was sent)
        self._commands: collections.deque[tuple[str, int, int]] = collections.deque()
        self._sent_lock = threading.Lock()  # producers (the conductor) number sessions and commands
        self._sessions_sent = 0
        self._sessions_admitted = 0  # the agent's thread: moved from _incoming into _sessions
        self._sessions: list[S] = []
        self._failed_cycles: dict[int, int] = {}  # id(session) -> duty cycles that raised
        self._closed = False
        self._wake: threading.Event | None = None

    # -- to be said by each agent -------------------------------------------------------------------
    def _describe(self, session: S) -> str:
        raise NotImplementedError

    def _apply(self, command: str, ident: int, session: S) -> None:
        """Abort ``session`` if the queued ``command`` about ``ident`` concerns it."""
        raise NotImplementedError

    def _retire(self, session: S) -> None:
        """A session that is done has left the duty cycle (e.g. close it)."""
        raise NotImplementedError

    # -- any thread ---------------------------------------------------------------------------------
    def add_session(self, session: S) -> None:
        if self._closed:
            raise RuntimeError(f"{self.role_name} is closed: cannot add {self._describe(session)}")
        with self._sent_lock:
            self._incoming.append(session)
            self._sessions_sent += 1
        self._wake_up()

    def _enqueue(self, command: str, ident: int) -> None:
        with self._sent_lock:
            self._commands.append((command, ident, self._sessions_sent))
        self._wake_up()

    def _wake_up(self) -> None:
        wake = self._wake
        if wake is not None:
            wake.set()  # after the append: the runner clears it before looking at the queues

    def set_wake_signal(self, wake: threading.Event) -> None:
        """The event this agent's runner waits on while the agent is dormant."""
        self._wake = wake

    @property
    def session_count(self) -> int:
        return len(self._sessions) + len(self._incoming)

    @property
    def is_dormant(self) -> bool:
        """Nothing to drive: no session, none queued, no command (a snapshot, any thread)."""
        return not (self._sessions or self._incoming or self._commands)

    # -- the agent's thread --------------------------------------------------------------------------
    def do_work(self) -> int:
        tracker = self._cycle_tracker
        if tracker is not None:
            if self._was_dormant:
                tracker.update(time.monotonic_ns())
            else:
                tracker.measure_and_update(time.monotonic_ns())
        work = 0
        while self._incoming or self._commands:
            if self._commands and (not self._incoming or self._commands[0][2] <= self._sessions_admitted):
                command, ident, _ = self._commands.popleft()
                for session in self._sessions:
                    self._apply(command, ident, session)
            else:
                session = self._incoming.popleft()
                session.io_stats = self.io_stats
                self._sessions.append(session)
                self._sessions_admitted += 1
            work += 1
        sessions = self._sessions
        for index in range(len(sessions) - 1, -1, -1):
            session = sessions[index]
            try:
                work += session.do_work()
            except Exception as error:  # a listener failure must not stop the other sessions
                work += 1
                if self._on_session_failure(session, error):
                    sessions[index] = sessions[-1]
                    sessions.pop()
                    continue
            if session.is_done:
                sessions[index] = sessions[-1]
                sessions.pop()
                self._failed_cycles.pop(id(session), None)
                self._retire(session)
        if work > 0 and self._counters is not None:
            self._counters.publish(self.io_stats)
        if self._session_count is not None and len(sessions) != self._published_session_count:
            self._publish_session_count(len(sessions))
        if tracker is not None:
            self._was_dormant = work == 0 and self.is_dormant
        return work

    def _publish_session_count(self, count: int) -> None:
        self._published_session_count = count
        if self._session_count is not None:
            try:
                self._session_count.value = count
            except Exception:  # noqa: BLE001 - closed at shutdown: the count no longer matters
                log.debug("%s: session count not updated", self.role_name, exc_info=True)

    def _on_session_failure(self, session: S, error: Exception) -> bool:
        """A session's duty cycle raised: it is aborted (it stops and tells its listener at its
        next cycle); one that still raises `MAX_FAILED_CYCLES` times is retired by force.
        Returns whether it was retired."""
        failed_cycles = self._failed_cycles.get(id(session), 0) + 1
        self._failed_cycles[id(session)] = failed_cycles
        description = self._describe(session)
        self.failures.failed((type(self).__name__, type(error).__name__),
                             "%s: duty cycle failed (%d): %s: %s; the session is stopped", description,
                             failed_cycles, type(error).__name__, error, level=logging.ERROR, exc_info=True)
        if self.error_handler is not None:
            self.error_handler(error)
        session.abort(f"archive failure: {type(error).__name__}: {error}")
        if failed_cycles < MAX_FAILED_CYCLES and not session.is_done:
            return False
        del self._failed_cycles[id(session)]
        log.error("%s: retired after %d failed duty cycles", description, failed_cycles)
        try:
            self._retire(session)
        except Exception:  # noqa: BLE001 - what could be released has been
            log.exception("%s: failed while retiring", description)
        return True

    def on_close(self) -> None:
        """Stop every session (each reports its end to its listener), then release the counters."""
        if self._closed:
            return
        self._closed = True
        while self._incoming:
            self._sessions.append(self._incoming.popleft())
        for session in self._sessions:
            session.abort("archive closing")
            try:
                session.do_work()  # an aborted session stops within one cycle
            except Exception:
                log.exception("%s: failed while closing", self._describe(session))
            self._retire(session)
        self._sessions.clear()
        if self._session_count is not None:
            self._publish_session_count(0)
        if self._counters is not None:
            self._counters.publish(self.io_stats)
            self._counters.close()
