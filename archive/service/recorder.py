"""The recorder agent: drives every active :class:`RecordingSession` in its duty cycle.

Interface with the conductor (the conductor runs on its own thread; the recorder may share that
thread or run on its own, see :mod:`aeron_spark.archive.service.agent_runner`):

* The conductor (:mod:`~aeron_spark.archive.service.recording_requests`), on an available Image
  of a recording subscription (callback on the Aeron client thread -> its event queue -> its
  thread), adds the catalog entry, allocates the rec-pos counter
  (:func:`aeron_spark.archive.codecs.recording_position.allocate`, value = join position), builds a
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
The "Archive Recording Sessions" counter (111) holds the sessions it drives, and in DEDICATED
threading its duty cycles are tracked (103/104): see :mod:`~aeron_spark.archive.service.session_agent`.
"""

from __future__ import annotations

from aeron_spark.archive.service.recording_session import RecordingSession
from aeron_spark.archive.service.session_agent import SessionAgent

STOP = "stop"
ALL_RECORDINGS = -1


class Recorder(SessionAgent[RecordingSession]):
    """Agent: ``do_work()`` returns the amount of work done (0 = idle); see SessionAgent."""

    role_name = "archive-recorder"

    def stop_recording(self, recording_id: int) -> None:
        """Abort the session recording ``recording_id`` (if any) at the next duty cycle."""
        self._enqueue(STOP, recording_id)

    def stop_all(self) -> None:
        self._enqueue(STOP, ALL_RECORDINGS)

    def _describe(self, session: RecordingSession) -> str:
        return f"recording {session.recording_id}"

    def _apply(self, command: str, recording_id: int, session: RecordingSession) -> None:
        if recording_id in (ALL_RECORDINGS, session.recording_id):
            session.abort("stop recording")

    def _retire(self, session: RecordingSession) -> None:
        if session.listener is None:  # otherwise the listener closes it once the catalog is updated
            session.close()
