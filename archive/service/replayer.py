"""The replayer agent: drives every :class:`ReplaySession` in its duty cycle.

Interface with the conductor (its own thread; see :mod:`aeron_spark.archive.service.agent_runner`):

* On a (Bounded)ReplayRequest the conductor
  (:mod:`~aeron_spark.archive.service.replay_requests`) checks MAX_REPLAYS and the recording, builds the
  limit the replay follows (a :class:`~aeron_spark.archive.service.limit_counter.LimitCounterReader` on
  the active recording's rec-pos counter id, or on a bounded replay's ``limitCounterId``; None
  for a stopped recording), calls :func:`~aeron_spark.archive.service.replay_plan.plan_replay`
  (``ReplayRequestError.code`` -> ERROR), asks the driver for the exclusive publication on
  ``channel_uri.replay_channel(...)`` without waiting, and once a later duty cycle finds it added
  adds ``ReplaySession(replay_session_id=
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
The "Archive Replay Sessions" counter (112) holds the sessions it drives, and in DEDICATED
threading its duty cycles are tracked (103/104): see :mod:`~aeron_spark.archive.service.session_agent`.
"""

from __future__ import annotations

from aeron_spark.archive.service.replay_session import ReplaySession
from aeron_spark.archive.service.session_agent import SessionAgent

ALL_RECORDINGS = -1
STOP_SESSION = "session"
STOP_RECORDING = "recording"


class Replayer(SessionAgent[ReplaySession]):
    """Agent: ``do_work()`` returns the amount of work done (0 = idle); see SessionAgent."""

    role_name = "archive-replayer"

    def stop_replay(self, replay_session_id: int) -> None:
        self._enqueue(STOP_SESSION, replay_session_id)

    def stop_all_replays(self, recording_id: int = ALL_RECORDINGS) -> None:
        self._enqueue(STOP_RECORDING, recording_id)

    def has_replays(self, recording_id: int) -> bool:
        """Whether a replay of ``recording_id`` is queued or running (any thread; a snapshot)."""
        return any(s.recording_id == recording_id and not s.is_done
                   for s in (*list(self._incoming), *list(self._sessions)))

    def lowest_replay_position(self, recording_id: int) -> int | None:
        """The lowest position a queued or running replay of ``recording_id`` is at, None when there
        is none (any thread; a snapshot). A detach must not pass it (Aeron's isValidDetach)."""
        positions = [s.replay_position for s in (*list(self._incoming), *list(self._sessions))
                     if s.recording_id == recording_id and not s.is_done]
        return min(positions) if positions else None

    def _describe(self, session: ReplaySession) -> str:
        return f"replay {session.replay_session_id}"

    def _apply(self, command: str, ident: int, session: ReplaySession) -> None:
        if command == STOP_SESSION and session.replay_session_id == ident:
            session.abort("stop replay")
        elif command == STOP_RECORDING and ident in (ALL_RECORDINGS, session.recording_id):
            session.abort("stop all replays")

    def _retire(self, session: ReplaySession) -> None:
        session.close()
