"""Replay requests: Replay and BoundedReplay set-up, StopReplay, StopAllReplays.

A (Bounded)ReplayRequest is checked here (MAX_REPLAYS, the recording exists, the limit it follows:
a bounded replay's limit counter or an active recording's ``rec-pos`` counter), planned by
`plan_replay` (the request rules, docs/protocol.md), then a `ReplaySession` is built on an
exclusive publication that starts at the replay position with the recording's initial term id,
term length and mtu (or the larger ``mtu`` the replay channel asks for: whole frames packed into
fewer datagrams; Java's archive ignores it; a smaller one is an ERROR), and handed to the
`Replayer`. The OK carries the replaySessionId ``(replayId << 32) | publication sessionId`` and
is sent when the replayer reports the replay ready (the start checked against the segment files);
the replay's ERROR, if any, when it ends.
A replay that ends before it was ready (stopped by StopReplay/StopAllReplays while starting, or
failing) is answered then with its ERROR, or ERROR GENERIC "replay ... stopped before it started":
every replay request gets exactly one OK or ERROR (`_unanswered`).
"""

from __future__ import annotations

import logging

from aeron_spark.archive.codecs import ArchiveErrorCode
from aeron_spark.archive.codecs.messages import (
    BoundedReplayRequest,
    ReplayRequest,
    StopAllReplaysRequest,
    StopReplayRequest,
)
from aeron_spark.archive.service.aeron_port import AeronPort, close_quietly
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.limit_counter import CountersView, LimitCounterError, LimitCounterReader
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.replay_plan import (
    RecordingLayout, ReplayRequestError, make_replay_session_id, plan_replay)
from aeron_spark.archive.service.replay_session import ReplayListener, ReplaySession
from aeron_spark.archive.service.request_errors import ArchiveRequestError, known_recording
from aeron_spark.archive.service.request_ports import ReplayerPort
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.driver_integration import channel_uri
from aeron_spark.driver_integration.channel_params import check_channel_params, parse_size

log = logging.getLogger(__name__)


class ReplayRequests:
    """See the module docstring. ``replayer`` is None in an archive that serves no replays;
    ``listener`` receives the replayer's callbacks (the conductor, which enqueues them)."""

    def __init__(self, *, aeron: AeronPort, catalog: Catalog, settings: ConductorSettings,
                 replayer: ReplayerPort | None, recordings: RecordingRequests,
                 counters_reader: CountersView | None,
                 listener: ReplayListener) -> None:
        self.aeron = aeron
        self.catalog = catalog
        self.settings = settings
        self.replayer = replayer
        self.recordings = recordings
        self.counters_reader = counters_reader
        self.listener = listener
        self._replays: dict[int, int] = {}  # replaySessionId -> recordingId
        self._unanswered: set[int] = set()  # replaySessionIds whose request has no answer yet
        self._replay_id = 0

    def has_replays(self, recording_id: int) -> bool:
        return recording_id in self._replays.values()

    def stop_all_replays_of(self, recording_id: int) -> None:
        if self.replayer is not None:
            self.replayer.stop_all_replays(recording_id)

    def replay(self, session: ControlSession, message: ReplayRequest | BoundedReplayRequest) -> None:
        if self.replayer is None:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, "replay is not available in this archive")
        if len(self._replays) >= self.settings.max_concurrent_replays:
            raise ArchiveRequestError(ArchiveErrorCode.MAX_REPLAYS,
                                      f"max concurrent replays reached {self.settings.max_concurrent_replays}")
        descriptor = known_recording(self.catalog, message.recording_id)
        limit = None
        try:
            if isinstance(message, BoundedReplayRequest):
                limit = LimitCounterReader(self._counters(), message.limit_counter_id)
            else:
                counter_id = self.recordings.position_counter_id(message.recording_id)
                if counter_id is not None:
                    limit = LimitCounterReader(self._counters(), counter_id)
        except LimitCounterError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, str(error)) from None
        layout = RecordingLayout.of(descriptor)
        file_io_max_length = max(0, message.file_io_max_length)
        try:
            plan = plan_replay(layout, message.position, message.length,
                               limit_position=None if limit is None else limit.position(),
                               file_io_max_length=file_io_max_length,
                               replay_buffer_length=self.settings.replay_buffer_length)
        except ReplayRequestError as error:
            raise ArchiveRequestError(error.code, str(error)) from None
        try:
            requested = channel_uri.parse(message.replay_channel)
            check_channel_params(requested)
            requested_mtu = requested.get(channel_uri.MTU)
            channel = channel_uri.replay_channel(
                message.replay_channel, plan.replay_position, descriptor.initial_term_id,
                descriptor.term_buffer_length, descriptor.mtu_length,
                self.settings.replay_linger_timeout_ns,
                requested_mtu=None if requested_mtu is None else parse_size(channel_uri.MTU, requested_mtu))
        except ValueError as error:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      f"invalid replay channel {message.replay_channel!r}: {error}") from None
        publication = self.aeron.add_exclusive_publication(channel, message.replay_stream_id)
        self._replay_id = (self._replay_id + 1) & 0x7FFF_FFFF
        replay_session_id = make_replay_session_id(self._replay_id, publication.session_id)
        try:
            replay = ReplaySession(
                replay_session_id=replay_session_id, recording=layout, plan=plan,
                publication=publication, archive_dir=self.settings.archive_dir, limit=limit,
                correlation_id=message.correlation_id, owner=session,
                replay_buffer_length=self.settings.replay_buffer_length,
                file_io_max_length=file_io_max_length,
                connect_timeout_ns=self.settings.connect_timeout_ms * 1_000_000,
                checksum=self.settings.replay_checksum, listener=self.listener)
        except Exception:
            close_quietly(publication)
            raise
        self._replays[replay_session_id] = message.recording_id
        self._unanswered.add(replay_session_id)
        self.replayer.add_session(replay)
        log.info("replay %d of recording %d from %d length %d on %s stream %d",
                 replay_session_id, message.recording_id, plan.replay_position, plan.replay_length,
                 channel, message.replay_stream_id)

    def _counters(self) -> CountersView:
        if self.counters_reader is None:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC,
                                      "this archive reads no counters: a replay cannot follow a limit counter")
        return self.counters_reader

    def stop_replay(self, session: ControlSession, message: StopReplayRequest) -> None:
        if self.replayer is not None:
            self.replayer.stop_replay(message.replay_session_id)
        session.send_ok(message.correlation_id, 0)

    def stop_all_replays(self, session: ControlSession, message: StopAllReplaysRequest) -> None:
        self.stop_all_replays_of(message.recording_id)
        session.send_ok(message.correlation_id, 0)

    # ------------------------------------------------------------------ the replayer's reports

    def on_replay_ready(self, replay: ReplaySession) -> None:
        if replay.replay_session_id in self._unanswered:
            self._unanswered.discard(replay.replay_session_id)
            _control_session_of(replay).send_ok(replay.correlation_id, replay.replay_session_id)

    def on_replay_ended(self, replay: ReplaySession) -> None:
        self._replays.pop(replay.replay_session_id, None)
        control = _control_session_of(replay)
        if replay.error is not None:
            # after an OK this is the replay's asynchronous error (as Aeron's), else its answer
            self._unanswered.discard(replay.replay_session_id)
            control.send_error(replay.correlation_id, replay.error.message, replay.error.code)
        elif replay.replay_session_id in self._unanswered:
            self._unanswered.discard(replay.replay_session_id)
            control.send_error(replay.correlation_id,
                               f"replay {replay.replay_session_id} of recording {replay.recording_id} "
                               f"stopped before it started: {replay.end_reason or 'aborted'}")
        log.info("replay %d of recording %d ended: %s", replay.replay_session_id,
                 replay.recording_id, replay.end_reason or "done")


def _control_session_of(replay: ReplaySession) -> ControlSession:
    """The control session that asked for the replay: every replay these requests start has one."""
    if replay.owner is None:
        raise RuntimeError(f"replay {replay.replay_session_id} was started without its control session")
    return replay.owner
