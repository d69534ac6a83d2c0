"""`ReplicationSession`: one replication into this archive (Aeron's ReplicationSession), sans-IO.

The destination archive is a client of the source archive. Driven by the conductor's duty cycle
(`do_work` returns a work count and never blocks), a session walks these states:

CONNECT                 the control connection to the source (`replication_link`); failure or no
                        answer within the connect timeout: ERROR 14 REPLICATION_CONNECTION_FAILURE
REPLICATE_DESCRIPTOR    ListRecording(src) on the source; a new destination recording is created
                        from the source descriptor (start = stop = source start: signal REPLICATE);
                        an existing one must continue it (same stream, term length, mtu, initial
                        term id); already equal positions: signal SYNC and done
SRC_RECORDING_POSITION  (live destination only) the source's live position
EXTEND                  a local autoStop ExtendRecording on the replication channel with
                        ``rejoin=false`` and ``session-id=<replay session id>`` (OK under the
                        replicationId, then EXTEND when the replay's Image arrives)
REPLAY                  Replay on the source from the destination's stop position, up to the
                        requested stop position or following a live source recording
AWAIT_IMAGE             until the local extension records
REPLICATE               until the source's stop position is reached (signal SYNC), the requested
                        stop position is reached, or the replay ends (end of stream, source gone)
CATCHUP / ATTEMPT_LIVE_JOIN  (live destination) the replay and the live stream feed one Image of a
                        multi-destination subscription: once the replica is within a window of
                        the source's live position the live destination is added; once it has
                        caught up and both transports deliver, the replay destination is removed
                        (signal MERGE) and the recording goes on with the live stream alone
STOPPING                the local recording is stopped (its STOP signal goes out; after a merge
                        it goes on), the source replay stopped, the source connection closed
DONE                    REPLICATE_END sent: always the last signal

Every signal and ERROR goes to the requesting control session with correlationId = replicationId.
The I/O lives behind small ports: `ReplicationSource` (the link), `ReplicaRecorder` (the local
catalog and recordings) and `Requester` (the control session), so unit tests drive it with fakes.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode, RecordingSignal
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor
from aeron_spark.archive.service.replication_link import SourceLinkError
from aeron_spark.archive.service.request_errors import NULL_VALUE, ArchiveRequestError
from aeron_spark.driver_integration import channel_uri

log = logging.getLogger(__name__)


class ReplicationState(enum.Enum):
    CONNECT = "CONNECT"
    REPLICATE_DESCRIPTOR = "REPLICATE_DESCRIPTOR"
    SRC_RECORDING_POSITION = "SRC_RECORDING_POSITION"
    EXTEND = "EXTEND"
    REPLAY = "REPLAY"
    AWAIT_IMAGE = "AWAIT_IMAGE"
    REPLICATE = "REPLICATE"
    CATCHUP = "CATCHUP"
    ATTEMPT_LIVE_JOIN = "ATTEMPT_LIVE_JOIN"
    STOPPING = "STOPPING"
    DONE = "DONE"


class ReplicationSource(Protocol):
    """The control connection to the source archive (`replication_link.SourceArchiveLink`)."""

    control_session_id: int | None

    @property
    def is_connected(self) -> bool: ...

    @property
    def is_request_connected(self) -> bool: ...

    def connect_step(self) -> int: ...

    def next_correlation_id(self) -> int: ...

    def offer(self, message: codecs.ControlMessage) -> bool: ...

    def poll(self) -> list[codecs.ControlMessage]: ...

    def close(self) -> None: ...


class ReplicaSubscription(Protocol):
    """The local recording subscription of the extension (multi-destination for a live merge)."""

    subscription_id: int

    def resolved_channel(self) -> str | None: ...

    def resolved_endpoint(self) -> str | None: ...

    def add_destination(self, destination: str) -> None: ...

    def remove_destination(self, destination: str) -> None: ...


class ReplicaRecorder(Protocol):
    """The local catalog and recordings as a replication uses them (`replication_requests`)."""

    def add_replica(self, source: RecordingDescriptor) -> int: ...

    def descriptor(self, recording_id: int) -> RecordingDescriptor | None: ...

    def extend(self, replication_id: int, recording_id: int, channel: str, stream_id: int) -> ReplicaSubscription: ...

    def is_recording(self, recording_id: int) -> bool: ...

    def recorded_position(self, recording_id: int) -> int | None: ...

    def is_subscription_open(self, subscription_id: int) -> bool: ...

    def active_transport_count(self, recording_id: int) -> int: ...

    def stop_subscription(self, subscription_id: int) -> None: ...


class Requester(Protocol):
    """The control session that asked for the replication (`control_session.ControlSession`)."""

    def send_signal(self, correlation_id: int, recording_id: int, subscription_id: int,
                    position: int, signal: RecordingSignal) -> None: ...

    def send_error(self, correlation_id: int, message: str, error_code: int = ...) -> None: ...


@dataclass(frozen=True, slots=True)
class ReplicationParams:
    """One replicate request (50, 62 or 66), normalised: absent fields are NULL_VALUE / ""."""

    replication_id: int
    src_recording_id: int
    dst_recording_id: int
    stop_position: int
    channel_tag_id: int
    subscription_tag_id: int
    live_destination: str
    replication_channel: str
    file_io_max_length: int
    replication_session_id: int


@dataclass(frozen=True, slots=True)
class ReplicationTimeouts:
    connect_ms: int  # the source must answer the connect within this
    action_ms: int  # each later request to the source, and the replay's Image
    stop_ms: int  # how long STOPPING waits for the local recording's STOP


#: Aeron's ReplayMerge.LIVE_ADD_MAX_WINDOW: the live destination is added within
#: min(termLength / 4, this) of the source's live position.
LIVE_ADD_MAX_WINDOW = 32 * 1024 * 1024
#: Unanswered live-position requests in ATTEMPT_LIVE_JOIN before the replication fails (Aeron's).
LIVE_JOIN_RETRY_ATTEMPTS = 3


class ReplicationFailure(Exception):
    """Ends the replication with ERROR ``code`` to the requester."""

    def __init__(self, message: str, code: int = ArchiveErrorCode.GENERIC) -> None:
        super().__init__(message)
        self.code = int(code)


class ReplicationSession:
    """See the module docstring."""

    def __init__(self, params: ReplicationParams, *, source: ReplicationSource, recorder: ReplicaRecorder,
                 requester: Requester, timeouts: ReplicationTimeouts, clock: Callable[[], int]) -> None:
        self.params = params
        self.replication_id = params.replication_id
        self._source = source
        self._recorder = recorder
        self._requester = requester
        self._timeouts = timeouts
        self._clock = clock
        self.state = ReplicationState.CONNECT
        self.dst_recording_id = params.dst_recording_id
        self.src_stop_position = NULL_POSITION
        self.replay_position = NULL_POSITION
        self.src_replay_session_id = NULL_VALUE
        self.stop_reason = ""
        self._replay_stream_id = 0
        self._replay_session_id = 0
        self._subscription: ReplicaSubscription | None = None
        self._active_correlation_id = NULL_VALUE
        self._replay_correlation_id = NULL_VALUE  # source ERRORs under it end the replication
        self._action_deadline_ms = clock() + timeouts.connect_ms
        self.src_recording_position = NULL_POSITION
        self._term_length = 0
        self._replay_destination: str | None = None
        self._live_added = False
        self._merged = False
        self._retries = LIVE_JOIN_RETRY_ATTEMPTS
        if params.dst_recording_id != NULL_VALUE:
            existing = recorder.descriptor(params.dst_recording_id)
            if existing is not None:
                self.replay_position = existing.stop_position
        self._handlers: dict[ReplicationState, Callable[[], int]] = {
            ReplicationState.CONNECT: self._connect,
            ReplicationState.REPLICATE_DESCRIPTOR: self._replicate_descriptor,
            ReplicationState.SRC_RECORDING_POSITION: self._src_recording_position,
            ReplicationState.EXTEND: self._extend,
            ReplicationState.REPLAY: self._replay,
            ReplicationState.AWAIT_IMAGE: self._await_image,
            ReplicationState.REPLICATE: self._replicate,
            ReplicationState.CATCHUP: self._catchup,
            ReplicationState.ATTEMPT_LIVE_JOIN: self._attempt_live_join,
            ReplicationState.STOPPING: self._stopping,
        }

    @property
    def is_done(self) -> bool:
        return self.state is ReplicationState.DONE

    # ------------------------------------------------------------------ duty cycle

    def do_work(self) -> int:
        handler = self._handlers.get(self.state)
        if handler is None:
            return 0
        try:
            work = handler()
            if self.state not in (ReplicationState.CONNECT, ReplicationState.STOPPING, ReplicationState.DONE):
                self._check_source_alive()
            return work
        except ReplicationFailure as failure:
            self._fail(str(failure), failure.code)
            return 1
        except SourceLinkError as error:
            self._fail(f"Replication connection failed={error}", error.code)
            return 1
        except ArchiveRequestError as error:
            self._fail(str(error), error.code)
            return 1
        except Exception as error:  # noqa: BLE001 - any other failure ends this replication only
            log.exception("replication %d failed", self.replication_id)
            self._fail(f"replication failed: {type(error).__name__}: {error}", ArchiveErrorCode.GENERIC)
            return 1

    def abort(self, reason: str) -> None:
        """StopReplication, the requester gone, or the archive closing: stop at the next cycle."""
        if self.state not in (ReplicationState.STOPPING, ReplicationState.DONE):
            self._finish(reason)

    # ------------------------------------------------------------------ states

    def _connect(self) -> int:
        if self._source.is_connected:
            self._to(ReplicationState.REPLICATE_DESCRIPTOR, "connected to the source archive")
            return 1
        work = self._source.connect_step()
        if self._source.is_connected:
            self._to(ReplicationState.REPLICATE_DESCRIPTOR, "connected to the source archive")
            return 1
        if self._clock() >= self._action_deadline_ms:
            raise ReplicationFailure(
                f"Replication connection failed=no answer from the source archive within "
                f"{self._timeouts.connect_ms}ms", ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE)
        return work

    def _replicate_descriptor(self) -> int:
        if self._active_correlation_id == NULL_VALUE:
            return self._send(lambda session, correlation: codecs.ListRecordingRequest(
                session, correlation, self.params.src_recording_id), "list the source recording descriptor")
        for message in self._responses():
            if isinstance(message, codecs.RecordingDescriptorMessage):
                self._on_source_descriptor(message.to_descriptor())
                return 1
            if (isinstance(message, codecs.ControlResponse)
                    and message.code == ControlResponseCode.RECORDING_UNKNOWN):
                raise ReplicationFailure(f"unknown src recording id {self.params.src_recording_id}",
                                         ArchiveErrorCode.UNKNOWN_RECORDING)
        self._check_action_deadline("failed to fetch remote recording descriptor")
        return 0

    def _on_source_descriptor(self, source: RecordingDescriptor) -> None:
        params = self.params
        self._active_correlation_id = NULL_VALUE
        self.src_stop_position = source.stop_position
        self._replay_stream_id = source.stream_id
        self._term_length = source.term_buffer_length
        self._replay_session_id = (params.replication_session_id
                                   if not params.live_destination and params.replication_session_id != NULL_VALUE
                                   else source.session_id)
        if params.file_io_max_length != NULL_VALUE and params.file_io_max_length < source.mtu_length:
            raise ReplicationFailure(f"Replication fileIoMaxLength ({params.file_io_max_length}) is less than "
                                     f"the recording mtuLength ({source.mtu_length})")
        if self.dst_recording_id == NULL_VALUE:
            self.replay_position = source.start_position
            self.dst_recording_id = self._recorder.add_replica(source)
            self._signal(source.start_position, RecordingSignal.REPLICATE)
        else:
            self._check_continues(source)
        next_state = ReplicationState.EXTEND
        if params.live_destination:
            if source.stop_position != NULL_POSITION:
                raise ReplicationFailure("cannot live merge without active source recording")
            next_state = ReplicationState.SRC_RECORDING_POSITION
        if source.start_position == source.stop_position or source.stop_position == self.replay_position:
            self._signal(source.stop_position, RecordingSignal.SYNC)
            self._finish("in sync")
            return
        if params.stop_position != NULL_POSITION and params.stop_position <= self.replay_position:
            self._signal(self.replay_position, RecordingSignal.SYNC)
            self._finish("destination already at the stop position")
            return
        self._to(next_state, f"source stopPosition={source.stop_position}")

    def _check_continues(self, source: RecordingDescriptor) -> None:
        """An existing destination must be a prefix of the source: same log parameters, and the
        source must hold what comes after the destination's stop position."""
        dst = self._recorder.descriptor(self.dst_recording_id)
        if dst is None:
            raise ReplicationFailure(f"unknown destination recording id {self.dst_recording_id}",
                                     ArchiveErrorCode.UNKNOWN_RECORDING)
        for name in ("stream_id", "term_buffer_length", "mtu_length", "initial_term_id"):
            if getattr(dst, name) != getattr(source, name):
                raise ReplicationFailure(
                    f"cannot extend recording {self.dst_recording_id} from source recording "
                    f"{source.recording_id}: {name} {getattr(dst, name)} != {getattr(source, name)}",
                    ArchiveErrorCode.INVALID_EXTENSION)
        source_end = source.stop_position
        if dst.stop_position < source.start_position or (source_end != NULL_POSITION and dst.stop_position > source_end):
            raise ReplicationFailure(
                f"cannot extend recording {self.dst_recording_id} at stopPosition={dst.stop_position}: "
                f"source recording {source.recording_id} spans {source.start_position}..{source_end}",
                ArchiveErrorCode.INVALID_EXTENSION)
        self.replay_position = dst.stop_position

    def _src_recording_position(self) -> int:
        asked = self._ask_source_live_position()
        if asked is None:
            self._check_action_deadline("failed to get the source's recording position")
            return 0
        if asked:
            return 1
        self._to(ReplicationState.EXTEND, f"srcRecordingPosition={self.src_recording_position}")
        return 1

    def _ask_source_live_position(self) -> bool | None:
        """RecordingPosition of the source recording: True when the request went out, False when the
        answer arrived (in ``src_recording_position``), None while waiting or back-pressured."""
        if self._active_correlation_id == NULL_VALUE:
            sent = self._send(lambda session, correlation: codecs.RecordingPositionRequest(
                session, correlation, self.params.src_recording_id), "ask the source's recording position")
            return True if sent else None
        for message in self._responses():
            if isinstance(message, codecs.ControlResponse) and message.code == ControlResponseCode.OK:
                self._active_correlation_id = NULL_VALUE
                if message.relevant_id == NULL_POSITION:
                    raise ReplicationFailure("cannot live merge without active source recording")
                self.src_recording_position = message.relevant_id
                return False
        return None

    def _extend(self) -> int:
        params = self.params
        uri = channel_uri.parse(params.replication_channel)
        endpoint = uri.get("endpoint")
        uri.set("rejoin", "false")
        uri.set("session-id", str(self._replay_session_id))
        tagged = params.channel_tag_id != NULL_VALUE or params.subscription_tag_id != NULL_VALUE
        if tagged or params.live_destination:  # Aeron's default tags: the replicationId
            uri.set("tags", f"{_or(params.channel_tag_id, self.replication_id)},"
                            f"{_or(params.subscription_tag_id, self.replication_id)}")
        if params.live_destination:  # a multi-destination subscription: replay and live feed one Image
            uri.remove("endpoint")
            uri.set("control-mode", "manual")
        self._subscription = self._recorder.extend(self.replication_id, self.dst_recording_id, uri.build(),
                                                   self._replay_stream_id)
        if params.live_destination:
            self._replay_destination = f"aeron:udp?endpoint={endpoint}"
            self._subscription.add_destination(self._replay_destination)
        self._arm_deadline()
        self._to(ReplicationState.REPLAY, f"recording subscription {self._subscription.subscription_id}")
        return 1

    def _replay(self) -> int:
        subscription = self._subscription
        assert subscription is not None
        if self._active_correlation_id == NULL_VALUE:
            replay_channel = self._replay_channel(subscription)
            if replay_channel is None:
                self._check_action_deadline("failed to resolve the replication subscription's endpoint")
                return 0
            stop = self.params.stop_position
            length = NULL_VALUE if stop == NULL_POSITION else stop - self.replay_position
            return self._send(lambda session, correlation: codecs.ReplayRequest(
                session, correlation, self.params.src_recording_id, self.replay_position, length,
                self._replay_stream_id, self.params.file_io_max_length, NULL_VALUE, replay_channel),
                "replay the source recording")
        for message in self._responses():
            if isinstance(message, codecs.ControlResponse) and message.code == ControlResponseCode.OK:
                self.src_replay_session_id = message.relevant_id
                self._active_correlation_id = NULL_VALUE
                self._arm_deadline()
                self._to(ReplicationState.AWAIT_IMAGE, f"srcReplaySessionId={message.relevant_id}")
                return 1
        self._check_action_deadline("failed to get acknowledgement of the replay request")
        return 0

    def _replay_channel(self, subscription: ReplicaSubscription) -> str | None:
        """Where the source replays to: the replication channel with the port our subscription
        bound (for ``:0``) and the replay's session id; for a live merge, linger 0 and no end of
        stream (the Image must outlive the replay). None until the driver has bound the port."""
        if self._replay_destination is None:
            resolved = subscription.resolved_channel()
            if resolved is None:
                return None
            uri = channel_uri.parse(resolved)
            for param in ("rejoin", "tags"):
                uri.remove(param)
        else:
            endpoint = subscription.resolved_endpoint()
            if endpoint is None:
                return None
            uri = channel_uri.parse(self.params.replication_channel)
            configured = uri.get("endpoint") or ""
            if configured.endswith(":0"):
                uri.set("endpoint", f"{configured.rsplit(':', 1)[0]}:{endpoint.rsplit(':', 1)[1]}")
            uri.set("linger", "0")
            uri.set("eos", "false")
        uri.set("session-id", str(self._replay_session_id))
        return uri.build()

    def _await_image(self) -> int:
        if self._recorder.is_recording(self.dst_recording_id):
            live = self._replay_destination is not None
            self._to(ReplicationState.CATCHUP if live else ReplicationState.REPLICATE, "replay image recording")
            return 1
        if not self._subscription_open():
            self._finish("recording subscription closed")
            return 1
        self._drain_source_errors()
        self._check_action_deadline(f"failed to get the replay image for sessionId={self._replay_session_id}")
        return 0

    def _replicate(self) -> int:
        recording = self._recorder.is_recording(self.dst_recording_id)
        position = self._recorder.recorded_position(self.dst_recording_id) if recording else None
        if position is None:
            descriptor = self._recorder.descriptor(self.dst_recording_id)
            position = descriptor.stop_position if descriptor is not None else NULL_POSITION
        synced = self.src_stop_position != NULL_POSITION and position >= self.src_stop_position
        stop = self.params.stop_position
        if synced or (stop != NULL_POSITION and position >= stop) or not recording:
            if synced:
                self._signal(position, RecordingSignal.SYNC)
            self.src_replay_session_id = NULL_VALUE  # the replay has ended or ends now: as Aeron, no StopReplay
            self._finish("sync" if synced else "done")
            return 1
        self._drain_source_errors()
        return 0

    def _catchup(self) -> int:
        position = self._recorder.recorded_position(self.dst_recording_id)
        if position is None:
            raise ReplicationFailure("replication image closed unexpectedly")
        if position >= self.src_recording_position:
            self._to(ReplicationState.ATTEMPT_LIVE_JOIN,
                     f"position {position} >= srcRecordingPosition {self.src_recording_position}")
            return 1
        self._drain_source_errors()
        return 0

    def _attempt_live_join(self) -> int:
        asked = self._ask_source_live_position()
        if asked is not None:
            if not asked:
                self._retries = LIVE_JOIN_RETRY_ATTEMPTS
                self._try_merge()
            return 1
        if self._recorder.recorded_position(self.dst_recording_id) is None:
            raise ReplicationFailure("replication image closed unexpectedly")
        if self._clock() >= self._action_deadline_ms:
            self._retries -= 1
            if self._retries == 0:
                raise ReplicationFailure("failed to get the source's recording position")
            self._active_correlation_id = NULL_VALUE
        return 0

    def _try_merge(self) -> None:
        subscription = self._subscription
        position = self._recorder.recorded_position(self.dst_recording_id)
        if subscription is None or position is None or self._replay_destination is None:
            raise ReplicationFailure("replication image closed unexpectedly")
        behind = self.src_recording_position - position
        if not self._live_added and behind <= min(self._term_length >> 2, LIVE_ADD_MAX_WINDOW):
            subscription.add_destination(self.params.live_destination)
            self._live_added = True
        elif (self._live_added and behind <= 0
              and self._recorder.active_transport_count(self.dst_recording_id) >= 2):
            subscription.remove_destination(self._replay_destination)
            self._replay_destination = None
            self._subscription = None  # the recording goes on with the live stream: not stopped
            self._merged = True
            self._signal(position, RecordingSignal.MERGE)
            self._finish("merge")

    def _stopping(self) -> int:
        if (not self._merged and self._recorder.is_recording(self.dst_recording_id)
                and self._clock() < self._action_deadline_ms):
            return 0  # STOP (sent when the recorder has stopped) goes before REPLICATE_END
        self._subscription = None
        self._signal(NULL_POSITION, RecordingSignal.REPLICATE_END)
        self._to(ReplicationState.DONE, self.stop_reason)
        return 1

    # ------------------------------------------------------------------ helpers

    def _finish(self, reason: str) -> None:
        """Stops the local recording, the source replay and the connection; STOPPING then waits
        for the recording's STOP before REPLICATE_END."""
        self.stop_reason = reason
        subscription = self._subscription
        if subscription is not None and self._subscription_open():
            self._recorder.stop_subscription(subscription.subscription_id)
        source = self._source
        if self.src_replay_session_id != NULL_VALUE and source.control_session_id is not None:
            source.offer(codecs.StopReplayRequest(source.control_session_id, source.next_correlation_id(),
                                                  self.src_replay_session_id))
            self.src_replay_session_id = NULL_VALUE
        source.close()
        self._action_deadline_ms = self._clock() + self._timeouts.stop_ms
        self._to(ReplicationState.STOPPING, reason)

    def _fail(self, message: str, code: int) -> None:
        log.warning("replication %d: %s", self.replication_id, message)
        if self.state in (ReplicationState.STOPPING, ReplicationState.DONE):
            return
        self._requester.send_error(self.replication_id, message, code)
        self._finish(message)

    def _check_source_alive(self) -> None:
        if not self._source.is_request_connected:
            raise ReplicationFailure("the connection to the source archive was lost",
                                     ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE)

    def _drain_source_errors(self) -> None:
        for message in self._source.poll():
            if isinstance(message, codecs.ControlResponse) and message.code == ControlResponseCode.ERROR:
                if message.correlation_id in (self._active_correlation_id, NULL_VALUE) or self._is_replay_error(message):
                    raise ReplicationFailure(f"source archive: {message.error_message}", int(message.relevant_id))

    def _is_replay_error(self, message: codecs.ControlResponse) -> bool:
        return self.src_replay_session_id != NULL_VALUE and message.correlation_id == self._replay_correlation_id

    def _responses(self) -> list[codecs.ControlMessage]:
        """Messages answering the request in flight; its ERROR ends the replication."""
        answers = []
        for message in self._source.poll():
            if getattr(message, "correlation_id", None) != self._active_correlation_id:
                continue
            if isinstance(message, codecs.ControlResponse) and message.code == ControlResponseCode.ERROR:
                raise ReplicationFailure(f"source archive: {message.error_message}", int(message.relevant_id))
            answers.append(message)
        return answers

    def _send(self, build: Callable[[int, int], codecs.ControlMessage], what: str) -> int:
        source = self._source
        assert source.control_session_id is not None
        correlation_id = source.next_correlation_id()
        if source.offer(build(source.control_session_id, correlation_id)):
            self._active_correlation_id = correlation_id
            if self.state is ReplicationState.REPLAY:
                self._replay_correlation_id = correlation_id
            self._arm_deadline()
            return 1
        self._check_action_deadline(f"failed to {what}")
        return 0

    def _arm_deadline(self) -> None:
        self._action_deadline_ms = self._clock() + self._timeouts.action_ms

    def _check_action_deadline(self, what: str) -> None:
        if self._clock() >= self._action_deadline_ms:
            raise ReplicationFailure(f"{what}: no answer within {self._timeouts.action_ms}ms")

    def _subscription_open(self) -> bool:
        subscription = self._subscription
        return subscription is not None and self._recorder.is_subscription_open(subscription.subscription_id)

    def _signal(self, position: int, signal: RecordingSignal) -> None:
        subscription = self._subscription
        subscription_id = subscription.subscription_id if subscription is not None else NULL_VALUE
        self._requester.send_signal(self.replication_id, self.dst_recording_id, subscription_id, position, signal)

    def _to(self, state: ReplicationState, reason: str) -> None:
        log.info("replication %d: %s -> %s (%s)", self.replication_id, self.state.value, state.value, reason)
        self.state = state


def _or(value: int, default: int) -> int:
    return default if value == NULL_VALUE else value
