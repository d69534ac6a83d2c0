"""The replayer agent: drives every :class:`ReplaySession` in its duty cycle.

Interface with the conductor (its own thread; see :mod:`aeron_spark.archive.agent_runner`):

* On a (Bounded)ReplayRequest the conductor checks MAX_REPLAYS and the recording, builds the
  limit it follows: for an active recording a
  :class:`~aeron_spark.archive.limit_counter.LimitCounterReader` on the recording's rec-pos
  counter id; for a bounded replay one on ``limitCounterId`` (ERROR GENERIC if that raises
  ``LimitCounterError``); ``None`` for a stopped recording. It calls
  :func:`~aeron_spark.archive.replay_session.plan_replay` (``ReplayRequestError.code`` ->
  ERROR response), opens the exclusive publication on
  :func:`~aeron_spark.archive.replay_session.replay_publication_channel`, and adds
  ``ReplaySession(replay_session_id=make_replay_session_id(next_replay_id, pub.session_id),
  recording=RecordingLayout.of(descriptor), plan=plan, publication=pub, archive_dir=...,
  limit=..., correlation_id=..., owner=..., file_io_max_length=..., listener=...)`` through
  :meth:`Replayer.add_session` (thread-safe).
* ``listener.on_replay_ready(session)``: send OK with relevantId = ``session.replay_session_id``.
  ``listener.on_replay_ended(session)``: the replay is DONE (the replayer closes or revokes
  its publication right after the callback); if ``session.error`` is set send ERROR ``(code, message)`` to
  ``session.correlation_id``; either way the active-replay count drops. Both are called on the
  replayer's thread: a conductor on another thread must only enqueue.
* StopReplay -> :meth:`Replayer.stop_replay` (replay session id); StopAllReplays ->
  :meth:`Replayer.stop_all_replays` (recording id, -1 = all). Both are thread-safe; the sessions
  abort at the next duty cycle and their publications are revoked.

Counters 108-110 (max read time, total read bytes, total read time) are published once per duty
cycle that did work; the replayer owns them and closes them in :meth:`Replayer.on_close`.
"""

from __future__ import annotations

import collections
import logging
import os
from typing import Any

from aeron_spark.archive import recording_position
from aeron_spark.archive.archive_counters import IoCounters, IoStats
from aeron_spark.archive.codecs.constants import ArchiveErrorCode
from aeron_spark.archive.limit_counter import FixedLimit, LimitCounterError, LimitCounterReader, ReplayLimit
from aeron_spark.archive.replay_session import (
    DEFAULT_CONNECT_TIMEOUT_NS, DEFAULT_REPLAY_BUFFER_LENGTH, RecordingLayout, ReplayRequestError,
    ReplaySession, make_replay_session_id, plan_replay)
from aeron_spark.driver_integration import channel_uri

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


DEFAULT_REPLAY_LINGER_NS = 5_000_000_000  # the driver's default publication linger


class ReplayFactory:
    """Turns a (Bounded)ReplayRequest into a running :class:`ReplaySession`; the conductor's
    ``replay_factory``. Called on the conductor's thread; returns the replaySessionId for the OK
    response or raises the conductor's ``ArchiveRequestError`` (code + message) for an ERROR.

    Errors the replay meets later (segment missing, not a frame, subscriber never connected,
    checksum mismatch) are sent by :meth:`on_replay_ended` as ``control_session.send_error``
    for the request's correlation id. That runs on the replayer's thread: with the agents on
    one thread (the simple set-up) that is the conductor's thread; otherwise it relies on the
    control session's outbox append being atomic.
    """

    def __init__(self, *, aeron: Any, replayer: Replayer, archive_dir: str | os.PathLike, archive_id: int,
                 counters_reader: Any = None, replay_buffer_length: int = DEFAULT_REPLAY_BUFFER_LENGTH,
                 connect_timeout_ns: int = DEFAULT_CONNECT_TIMEOUT_NS,
                 replay_linger_ns: int | None = None, checksum: Any = None,
                 max_concurrent_replays: int = 20, vectorized: bool = True) -> None:
        self.aeron = aeron
        self.replayer = replayer
        self.archive_dir = archive_dir
        self.archive_id = archive_id
        self.counters_reader = counters_reader if counters_reader is not None else aeron.counters_reader
        self.replay_buffer_length = replay_buffer_length
        self.connect_timeout_ns = connect_timeout_ns
        self.replay_linger_ns = DEFAULT_REPLAY_LINGER_NS if replay_linger_ns is None else replay_linger_ns
        self.checksum = checksum
        self.max_concurrent_replays = max_concurrent_replays
        self.vectorized = vectorized
        self._next_replay_id = 1

    def __call__(self, *, control_session: Any, request: Any, descriptor: Any,
                 live_position: int | None, limit_counter_id: int | None = None) -> int:
        try:
            return self._start(control_session, request, descriptor, live_position, limit_counter_id)
        except ReplayRequestError as error:
            raise _request_error(error.code, str(error)) from None

    def _start(self, control_session: Any, request: Any, descriptor: Any, live_position: int | None,
               limit_counter_id: int | None) -> int:
        if self.replayer.session_count >= self.max_concurrent_replays:
            raise ReplayRequestError(ArchiveErrorCode.MAX_REPLAYS,
                                     f"max concurrent replays reached {self.max_concurrent_replays}")
        recording = RecordingLayout.of(descriptor)
        limit = self._limit_for(recording, live_position, limit_counter_id)
        file_io_max_length = max(0, int(getattr(request, "file_io_max_length", 0) or 0))
        plan = plan_replay(recording, request.position, request.length,
                           limit_position=None if limit is None else limit.position(),
                           file_io_max_length=file_io_max_length,
                           replay_buffer_length=self.replay_buffer_length)
        try:
            channel = channel_uri.replay_channel(request.replay_channel, plan.replay_position,
                                                 recording.initial_term_id, recording.term_buffer_length,
                                                 recording.mtu_length, self.replay_linger_ns)
        except ValueError as error:
            raise ReplayRequestError(ArchiveErrorCode.GENERIC,
                                     f"failed to process replayChannel - {error}") from None
        publication = self.aeron.add_exclusive_publication(channel, request.replay_stream_id)
        replay_session_id = make_replay_session_id(self._next_replay_id, publication.session_id)
        self._next_replay_id += 1
        session = ReplaySession(
            replay_session_id=replay_session_id, recording=recording, plan=plan, publication=publication,
            archive_dir=self.archive_dir, limit=limit, correlation_id=request.correlation_id,
            owner=control_session, replay_buffer_length=self.replay_buffer_length,
            file_io_max_length=file_io_max_length, connect_timeout_ns=self.connect_timeout_ns,
            checksum=self.checksum, listener=self, vectorized=self.vectorized)
        self.replayer.add_session(session)
        return replay_session_id

    def _limit_for(self, recording: RecordingLayout, live_position: int | None,
                   limit_counter_id: int | None) -> ReplayLimit | None:
        if limit_counter_id is not None and limit_counter_id >= 0:
            try:
                return LimitCounterReader(self.counters_reader, limit_counter_id)
            except (LimitCounterError, ValueError) as error:
                raise ReplayRequestError(ArchiveErrorCode.GENERIC,
                                         f"unable to create replay limit counter id= {limit_counter_id} "
                                         f"because of: {error}") from None
        if live_position is None and recording.stop_position != -1:
            return None
        counter_id = recording_position.find_counter_id_by_recording(
            self.counters_reader, recording.recording_id, self.archive_id)
        if counter_id >= 0:
            try:
                return LimitCounterReader(self.counters_reader, counter_id)
            except LimitCounterError:
                pass
        # The recording stopped between the request and this lookup: its last position is final.
        return FixedLimit(live_position if live_position is not None else recording.start_position)

    # ReplayListener (replayer thread)
    def on_replay_ready(self, session: ReplaySession) -> None:
        """Nothing to send: the conductor answered OK when the session was created."""

    def on_replay_ended(self, session: ReplaySession) -> None:
        if session.error is not None and session.owner is not None:
            session.owner.send_error(session.correlation_id, session.error.message, session.error.code)


def _request_error(code: int, message: str) -> Exception:
    from aeron_spark.archive.conductor import ArchiveRequestError  # the conductor's error type
    return ArchiveRequestError(code, message)
