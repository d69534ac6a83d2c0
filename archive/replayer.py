"""The replayer agent: drives every :class:`ReplaySession` in its duty cycle.

Interface with the conductor (its own thread; see :mod:`aeron_spark.archive.agent_runner`):

* On a (Bounded)ReplayRequest the conductor checks MAX_REPLAYS and the recording, builds the
  limit the replay follows (a :class:`~aeron_spark.archive.limit_counter.LimitCounterReader` on
  the active recording's rec-pos counter id, or on a bounded replay's ``limitCounterId``; None
  for a stopped recording), calls :func:`~aeron_spark.archive.replay_session.plan_replay`
  (``ReplayRequestError.code`` -> ERROR), opens the exclusive publication on
  ``channel_uri.replay_channel(...)`` and adds ``ReplaySession(replay_session_id=
  make_replay_session_id(replay_id, publication.session_id), recording=RecordingLayout.of(
  descriptor), plan=..., publication=..., archive_dir=..., limit=..., correlation_id=...,
  owner=<control session>, file_io_max_length=..., connect_timeout_ns=..., listener=...)``
  through :meth:`Replayer.add_session` (thread-safe).
* ``listener.on_replay_ready(session)``: segment found and position checked: send OK with
  relevantId = ``session.replay_session_id``. ``listener.on_replay_ended(session)``: the replay
  is DONE (the replayer closes or revokes its publication right after the callback); if
  ``session.error`` is set send ERROR ``(code, message)`` to ``session.correlation_id``; either
  way the active-replay count drops. Both are called on the replayer's thread: a conductor on
  another thread must only enqueue.
* StopReplay -> :meth:`Replayer.stop_replay` (replay session id); StopAllReplays ->
  :meth:`Replayer.stop_all_replays` (recording id, -1 = all). Both are thread-safe; the sessions
  abort at the next duty cycle and their publications are revoked.

Counters 108-110 (max read time, total read bytes, total read time) are published once per duty
cycle that did work; the replayer owns them and closes them in :meth:`Replayer.on_close`.
"""

from __future__ import annotations

import collections
import logging

from aeron_spark.archive.archive_counters import IoCounters, IoStats
from aeron_spark.archive.replay_session import ReplaySession

log = logging.getLogger(__name__)

ALL_RECORDINGS = -1


class Replayer:
    role_name = "archive-replayer"

    def __init__(self, counters: IoCounters | None = None) -> None:
        self._counters = counters
        self.io_stats = IoStats()
        self._incoming: collections.deque[ReplaySession] = collections.deque()
        self._commands: collections.deque[tuple[str, int]] = collections.deque()
        self._sessions: list[ReplaySession] = []
        self._closed = False

    # -- any thread ---------------------------------------------------------------------------------
    def add_session(self, session: ReplaySession) -> None:
        if self._closed:
            raise RuntimeError(f"replayer is closed: cannot add replay {session.replay_session_id}")
        self._incoming.append(session)

    def stop_replay(self, replay_session_id: int) -> None:
        self._commands.append(("session", replay_session_id))

    def stop_all_replays(self, recording_id: int = ALL_RECORDINGS) -> None:
        self._commands.append(("recording", recording_id))

    @property
    def session_count(self) -> int:
        return len(self._sessions) + len(self._incoming)

    def has_replays(self, recording_id: int) -> bool:
        """Whether a replay of ``recording_id`` is queued or running (any thread; a snapshot)."""
        return any(s.recording_id == recording_id and not s.is_done
                   for s in (*list(self._incoming), *list(self._sessions)))

    # -- the agent's thread --------------------------------------------------------------------------
    def do_work(self) -> int:
        work = 0
        while self._incoming:
            session = self._incoming.popleft()
            session.io_stats = self.io_stats
            self._sessions.append(session)
            work += 1
        while self._commands:
            kind, ident = self._commands.popleft()
            for session in self._sessions:
                if kind == "session" and session.replay_session_id == ident:
                    session.abort("stop replay")
                elif kind == "recording" and ident in (ALL_RECORDINGS, session.recording_id):
                    session.abort("stop all replays")
            work += 1
        sessions = self._sessions
        for index in range(len(sessions) - 1, -1, -1):
            session = sessions[index]
            try:
                work += session.do_work()
            except Exception:  # noqa: BLE001 - a listener failure must not stop other replays
                log.exception("replay %d: duty cycle failed", session.replay_session_id)
            if session.is_done:
                sessions[index] = sessions[-1]
                sessions.pop()
                session.close()
        if work > 0 and self._counters is not None:
            self._counters.publish(self.io_stats)
        return work

    def on_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        while self._incoming:
            self._sessions.append(self._incoming.popleft())
        for session in self._sessions:
            session.abort("archive closing")
            try:
                session.do_work()
            except Exception:  # noqa: BLE001
                log.exception("replay %d: failed while closing", session.replay_session_id)
            session.close()
        self._sessions.clear()
        if self._counters is not None:
            self._counters.publish(self.io_stats)
            self._counters.close()

