"""The recorder agent: drives every active :class:`RecordingSession` in its duty cycle.

Interface with the conductor (the conductor runs on its own thread; the recorder may share that
thread or run on its own, see :mod:`aeron_spark.archive.agent_runner`):

* The conductor, on an available Image of a recording subscription (callback on the Aeron client
  thread -> its own queue -> its thread), adds the catalog entry, allocates the rec-pos counter
  (:func:`aeron_spark.archive.recording_position.allocate`, value = join position), builds a
  ``RecordingSession(recording_id=..., image=..., writer_factory=..., position_counter=...,
  correlation_id=..., owner=<its bookkeeping>, listener=<its listener>)`` and calls
  :meth:`Recorder.add_session` (thread-safe).
* A stop request: :meth:`Recorder.stop_recording` (by recording id) or ``session.abort()``
  (thread-safe); :meth:`Recorder.stop_all` on shutdown.
* Completion and progress come back through the session's ``RecordingListener``, called on the
  recorder's thread: ``on_recording_started(session)`` (send the RecordingStarted event),
  ``on_recording_progress(session, position)`` (RecordingProgress; return False when
  back-pressured to be offered the same progress again), ``on_recording_stopped(session)``:
  ``session.stop_position`` is final, ``session.error`` is None or a ``RecordingError(code,
  message)`` to send as an ERROR response to ``session.correlation_id``. The listener then
  updates the catalog stop position, sends STOP / RecordingStopped, and finally calls
  ``session.close()`` (closes the rec-pos counter: replays following it read its final value).
  A session without a listener is closed by the recorder itself.

Counters 105-107 (max write time, total write bytes, total write time) are published once per
duty cycle that did work; the recorder owns them from construction and closes them in
:meth:`Recorder.on_close`.
"""

from __future__ import annotations

import collections
import logging

from aeron_spark.archive.archive_counters import IoCounters, IoStats
from aeron_spark.archive.recording_session import RecordingSession

log = logging.getLogger(__name__)


class Recorder:
    """Agent: ``do_work()`` returns the amount of work done (0 = idle)."""

    role_name = "archive-recorder"

    def __init__(self, counters: IoCounters | None = None) -> None:
        self._counters = counters
        self.io_stats = IoStats()
        self._incoming: collections.deque[RecordingSession] = collections.deque()  # thread-safe appends
        self._commands: collections.deque[tuple[str, int]] = collections.deque()
        self._sessions: list[RecordingSession] = []
        self._closed = False

    # -- any thread ---------------------------------------------------------------------------------
    def add_session(self, session: RecordingSession) -> None:
        if self._closed:
            raise RuntimeError(f"recorder is closed: cannot add recording {session.recording_id}")
        self._incoming.append(session)

    def stop_recording(self, recording_id: int) -> None:
        """Abort the session recording ``recording_id`` (if any) at the next duty cycle."""
        self._commands.append(("stop", recording_id))

    def stop_all(self) -> None:
        self._commands.append(("stop", -1))

    @property
    def session_count(self) -> int:
        return len(self._sessions) + len(self._incoming)

    # -- the agent's thread --------------------------------------------------------------------------
    def do_work(self) -> int:
        work = 0
        while self._incoming:
            session = self._incoming.popleft()
            session.io_stats = self.io_stats
            self._sessions.append(session)
            work += 1
        while self._commands:
            _, recording_id = self._commands.popleft()
            for session in self._sessions:
                if recording_id == -1 or session.recording_id == recording_id:
                    session.abort("stop recording")
            work += 1
        sessions = self._sessions
        for index in range(len(sessions) - 1, -1, -1):
            session = sessions[index]
            try:
                work += session.do_work()
            except Exception:  # noqa: BLE001 - a listener failure must not stop other recordings
                log.exception("recording %d: duty cycle failed", session.recording_id)
            if session.is_done:
                sessions[index] = sessions[-1]
                sessions.pop()
                if session.listener is None:
                    session.close()
        if work > 0 and self._counters is not None:
            self._counters.publish(self.io_stats)
        return work

    def on_close(self) -> None:
        """Stop every session (each reports on_recording_stopped), then release the counters."""
        if self._closed:
            return
        self._closed = True
        while self._incoming:
            self._sessions.append(self._incoming.popleft())
        for session in self._sessions:
            session.abort("archive closing")
            try:
                session.do_work()  # an aborted session stops within one cycle
            except Exception:  # noqa: BLE001
                log.exception("recording %d: failed while closing", session.recording_id)
            if session.listener is None:
                session.close()
        self._sessions.clear()
        if self._counters is not None:
            self._counters.publish(self.io_stats)
            self._counters.close()
