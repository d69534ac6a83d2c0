"""Replay requests: Replay and BoundedReplay set-up, StopReplay, StopAllReplays.

A (Bounded)ReplayRequest is checked here (MAX_REPLAYS, the recording exists, the limit it follows:
a bounded replay's limit counter or an active recording's ``rec-pos`` counter), planned by
`plan_replay` (the request rules, docs/protocol.md), then its exclusive publication is asked of
the media driver without waiting (``async_add_exclusive_publication``, as Aeron's archive since
its ``CreateReplayPublicationSession``): it starts at the replay position with the recording's
initial term id, term length and mtu (or the larger ``mtu`` the replay channel asks for: whole
frames packed into fewer datagrams; Java's archive ignores it; a smaller one is an ERROR). The
driver takes milliseconds to build the publication's log; meanwhile the conductor serves every
other session, and polls the pending publications each duty cycle (`poll_pending`). Once the
publication is there a `ReplaySession` is built on it and handed to the `Replayer`; a driver's
refusal is answered with an ERROR (``media driver refused: ...``, as a refused request).
The OK carries the replaySessionId ``(replayId << 32) | publication sessionId`` and is sent when
the replayer reports the replay ready (the start checked against the segment files); the replay's
ERROR, if any, when it ends.
A replay that ends before it was ready (stopped by StopReplay/StopAllReplays while starting, or
failing) is answered then with its ERROR, or ERROR GENERIC "replay ... stopped before it started":
every replay request gets exactly one OK or ERROR (`_unanswered`). StopAllReplays (or a truncate)
also stops a replay whose publication is still pending: its publication is closed when it arrives.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from aeron_spark.archive.codecs import ArchiveErrorCode
from aeron_spark.archive.codecs.messages import (
    BoundedReplayRequest,
    ReplayRequest,
    StopAllReplaysRequest,
    StopReplayRequest,
)
from aeron_spark.archive.service.aeron_port import AeronPort, ExclusivePublication, close_quietly
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.connecting_sessions import Discards
from aeron_spark.archive.service.control_demuxer import driver_refusal
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.limit_counter import CountersView, LimitCounterError, LimitCounterReader
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.replay_plan import (
    RecordingLayout, ReplayPlan, ReplayRequestError, make_replay_session_id, plan_replay)
from aeron_spark.archive.service.replay_session import ReplayListener, ReplaySession
from aeron_spark.archive.service.request_errors import ArchiveRequestError, known_recording
from aeron_spark.archive.service.request_ports import ReplayerPort
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.driver_integration import channel_uri
from aeron_spark.driver_integration.channel_params import check_channel_params, parse_size
from aeron_spark.driver_integration.errors import AeronError

log = logging.getLogger(__name__)

ALL_RECORDINGS = -1  # StopAllReplays' recordingId for every recording (Aeron's NULL_VALUE)


class PendingPublication(Protocol):
    """An exclusive publication the media driver is still adding (driver_integration's
    ``PendingExclusivePublication``): ``poll`` returns None until it is there, raises AeronError
    when the driver refused it."""

    def poll(self) -> ExclusivePublication | None: ...


class ReplayAeronPort(AeronPort, Protocol):
    """`AeronPort` and the add without waiting that replays use (driver_integration's AeronClient)."""

    def async_add_exclusive_publication(self, channel: str, stream_id: int) -> PendingPublication: ...


class ReplayFailureReporter(Protocol):
    """Told of a replay request that failed after its handler returned (the publication the driver
    refused, or the session that could not be built): the conductor counts it as an archive error
    and logs it as it does a failed request. ``text`` is the ERROR sent to the client."""

    def __call__(self, request_name: str, correlation_id: int, error: Exception, text: str) -> None: ...


@dataclass(slots=True, eq=False)
class _PendingReplay:
    """A checked and planned replay whose publication the media driver is still adding."""

    publication: PendingPublication
    request_name: str
    owner: ControlSession
    correlation_id: int
    recording_id: int
    layout: RecordingLayout
    plan: ReplayPlan
    limit: LimitCounterReader | None
    file_io_max_length: int
    channel: str
    stream_id: int
    stopped: str | None = field(default=None)  # why it must not start (StopAllReplays, truncate)


class ReplayRequests:
    """See the module docstring. ``replayer`` is None in an archive that serves no replays;
    ``listener`` receives the replayer's callbacks (the conductor, which enqueues them)."""

    def __init__(self, *, aeron: ReplayAeronPort, catalog: Catalog, settings: ConductorSettings,
                 replayer: ReplayerPort | None, recordings: RecordingRequests,
                 counters_reader: CountersView | None,
                 listener: ReplayListener, report_failure: ReplayFailureReporter | None = None) -> None:
        self.aeron = aeron
        self.catalog = catalog
        self.settings = settings
        self.replayer = replayer
        self.recordings = recordings
        self.counters_reader = counters_reader
        self.listener = listener
        self.report_failure = report_failure
        self._replays: dict[int, int] = {}  # replaySessionId -> recordingId
        self._pending: list[_PendingReplay] = []  # publications the driver is still adding
        self._discards = Discards()  # adds given up on (timed out here), settled as the driver answers
        self._unanswered: set[int] = set()  # replaySessionIds whose request has no answer yet
        self._replay_id = 0

    def has_replays(self, recording_id: int) -> bool:
        return recording_id in self._replays.values() or any(
            pending.recording_id == recording_id and pending.stopped is None for pending in self._pending)

    @property
    def pending_count(self) -> int:
        """Replays whose publication the driver is still adding."""
        return len(self._pending)

    def stop_all_replays_of(self, recording_id: int) -> None:
        for pending in self._pending:
            if recording_id in (ALL_RECORDINGS, pending.recording_id) and pending.stopped is None:
                pending.stopped = "stop all replays"
        if self.replayer is not None:
            self.replayer.stop_all_replays(recording_id)

    def replay(self, session: ControlSession, message: ReplayRequest | BoundedReplayRequest) -> None:
        if self.replayer is None:
            raise ArchiveRequestError(ArchiveErrorCode.GENERIC, "replay is not available in this archive")
        if len(self._replays) + len(self._pending) >= self.settings.max_concurrent_replays:
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
        pending = _PendingReplay(
            publication=self.aeron.async_add_exclusive_publication(channel, message.replay_stream_id),
            request_name=type(message).__name__, owner=session, correlation_id=message.correlation_id,
            recording_id=message.recording_id, layout=layout, plan=plan, limit=limit,
            file_io_max_length=file_io_max_length, channel=channel, stream_id=message.replay_stream_id)
        self._pending.append(pending)
        self._poll(pending)  # a publication the driver already has starts at once

    def poll_pending(self) -> int:
        """The conductor's duty-cycle step: starts each replay whose publication the driver has
        added, answers those it refused; returns how many were settled (work done)."""
        settled = self._discards.reap() if len(self._discards) else 0
        if not self._pending:
            return settled
        return settled + sum(self._poll(pending) for pending in list(self._pending))

    def _poll(self, pending: _PendingReplay) -> int:
        try:
            publication = pending.publication.poll()
        except AeronError as error:
            self._pending.remove(pending)
            if hasattr(pending.publication, "discard"):  # a local timeout leaves the driver's add live
                self._discards.add(pending.publication)  # type: ignore[arg-type]
            if pending.stopped is None:
                self._failed(pending, error, f"{pending.request_name}: media driver refused: "
                                             f"{driver_refusal(error)}")
            else:
                self._answer_stopped(pending)
            return 1
        if publication is None:
            return 0
        self._pending.remove(pending)
        if pending.stopped is not None:
            close_quietly(publication)
            self._answer_stopped(pending)
            return 1
        try:
            self._start(pending, publication)
        except Exception as error:  # noqa: BLE001 - answered, and the conductor carries on
            close_quietly(publication)
            self._failed(pending, error, f"{pending.request_name} failed: {type(error).__name__}: {error}")
        return 1

    def _start(self, pending: _PendingReplay, publication: ExclusivePublication) -> None:
        self._replay_id = (self._replay_id + 1) & 0x7FFF_FFFF
        replay_session_id = make_replay_session_id(self._replay_id, publication.session_id)
        replay = ReplaySession(
            replay_session_id=replay_session_id, recording=pending.layout, plan=pending.plan,
            publication=publication, archive_dir=self.settings.archive_dir, limit=pending.limit,
            correlation_id=pending.correlation_id, owner=pending.owner,
            replay_buffer_length=self.settings.replay_buffer_length,
            file_io_max_length=pending.file_io_max_length,
            connect_timeout_ns=self.settings.connect_timeout_ms * 1_000_000,
            checksum=self.settings.replay_checksum, listener=self.listener)
        self._replays[replay_session_id] = pending.recording_id
        self._unanswered.add(replay_session_id)
        assert self.replayer is not None  # replay() refuses requests without one
        self.replayer.add_session(replay)
        log.info("replay %d of recording %d from %d length %d on %s stream %d",
                 replay_session_id, pending.recording_id, pending.plan.replay_position,
                 pending.plan.replay_length, pending.channel, pending.stream_id)

    def _failed(self, pending: _PendingReplay, error: Exception, text: str) -> None:
        if self.report_failure is not None:
            self.report_failure(pending.request_name, pending.correlation_id, error, text)
        else:
            log.warning("%s (correlationId=%d): %s", pending.request_name, pending.correlation_id, text)
        pending.owner.send_error(pending.correlation_id, text)

    def _answer_stopped(self, pending: _PendingReplay) -> None:
        pending.owner.send_error(pending.correlation_id,
                                 f"replay of recording {pending.recording_id} stopped before it started: "
                                 f"{pending.stopped}")

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
