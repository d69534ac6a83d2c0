"""`ReplayMerge`: read a recording from a position and switch to its live stream with no gap and no
duplicate, Aeron's ReplayMerge pattern (``io.aeron.archive.client.ReplayMerge``) for this client.

How it works: one multi-destination subscription (``aeron:udp?control-mode=manual``) receives both a
replay of the recording, to the *replay destination*, and later the live stream, to the *live
destination*. The archive replays positionally exact (same session id, initial term id and term
length as the live publication), so both transports feed ONE Image and each position is delivered
once, whichever transport brought it first. The states, visible as `ReplayMerge.state`:

``RESOLVE_REPLAY_PORT``
    the replay destination was added with port 0: wait for the port the driver bound;
``GET_RECORDING_POSITION``
    the recording's descriptor (its session id goes into the replay channel unless given) and the
    target: MaxRecordedPositionRequest (67), RecordingPosition/StopPosition on an older archive;
``REPLAY``
    a Replay from the start position with length ``Long.MAX_VALUE`` (follow the live recording) to
    the replay channel, with ``linger=0|eos=false`` and the replay destination's endpoint;
``CATCHUP``
    the replay Image consumed up to the target;
``ATTEMPT_LIVE_JOIN``
    the target asked again: within ``min(term length / 4, 32 MiB)`` of it the live destination is
    added; once the Image is at the target with two active transports the replay destination is
    removed and the replay stopped;
``MERGED``
    the Image carries on with the live stream alone (keep polling the merge, or the Image);
``FAILED`` / ``CLOSED``.

Every state has a progress timeout (default `DEFAULT_PROGRESS_TIMEOUT_S`, per state overridable):
with no progress for that long the merge fails with `ReplayMergeError` naming the state and what it
waited for. Progress is a state reached, the replay Image advancing, or, once the live destination
is added, the live transport joining the Image: a live destination that never delivers fails the
merge instead of leaving it replaying forever (Aeron's ReplayMerge keeps trying then).

The bookkeeping is `MergeStateMachine`, sans-IO: fed with times, positions and transport counts,
unit-tested without a driver. `ReplayMerge` is the glue that asks the archive and the driver. The
archive requests are the client's blocking calls, so a `ReplayMerge.poll` that sends one waits for
its answer (about a round trip). Like Aeron's, a merge is used by one thread, and its archive
client by that merge alone while it runs. Start one with `ArchiveClient.replay_merge` (which can
create the subscription) or construct it with any subscription of your own.
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.archive.client.response_routing import ArchiveError
from aeron_spark.archive.configuration import DEFAULT_REPLAY_MERGE_PROGRESS_TIMEOUT_S
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor
from aeron_spark.driver_integration import AeronError, Image, MessageHandler, Subscription
from aeron_spark.driver_integration.channel_uri import ChannelUri, ChannelUriError
from aeron_spark.driver_integration.position import INT64_MAX

#: Without progress for this long a merge fails (Aeron's MERGE_PROGRESS_TIMEOUT_DEFAULT_MS).
DEFAULT_PROGRESS_TIMEOUT_S = DEFAULT_REPLAY_MERGE_PROGRESS_TIMEOUT_S
#: The live destination is added within min(term length / 4, this) of the target (Aeron's LIVE_ADD_MAX_WINDOW).
LIVE_ADD_MAX_WINDOW = 32 * 1024 * 1024
#: Target queries back off from this, doubling, up to the maximum (Aeron's ReplayMerge).
TARGET_QUERY_BACKOFF_INITIAL_S = 0.008
TARGET_QUERY_BACKOFF_MAX_S = 0.5
#: Aeron's ReplayMerge replays with this length: follow the recording while it is live.
FOLLOW_LENGTH = INT64_MAX
MULTI_DESTINATION_CHANNEL = "aeron:udp?control-mode=manual"
DEFAULT_REPLAY_CHANNEL = "aeron:udp"
DEFAULT_REPLAY_DESTINATION = "aeron:udp?endpoint=localhost:0"


class MergeState(enum.Enum):
    RESOLVE_REPLAY_PORT = "RESOLVE_REPLAY_PORT"
    GET_RECORDING_POSITION = "GET_RECORDING_POSITION"
    REPLAY = "REPLAY"
    CATCHUP = "CATCHUP"
    ATTEMPT_LIVE_JOIN = "ATTEMPT_LIVE_JOIN"
    MERGED = "MERGED"
    FAILED = "FAILED"
    CLOSED = "CLOSED"


#: States in which the merge is still working (and its progress timeout runs).
ACTIVE_STATES = frozenset({MergeState.RESOLVE_REPLAY_PORT, MergeState.GET_RECORDING_POSITION,
                           MergeState.REPLAY, MergeState.CATCHUP, MergeState.ATTEMPT_LIVE_JOIN})


class LiveJoinStep(enum.Enum):
    """What ATTEMPT_LIVE_JOIN decided with a fresh target: nothing yet, add the live destination,
    or remove the replay destination and stop the replay (merged)."""

    WAIT = "WAIT"
    ADD_LIVE = "ADD_LIVE"
    MERGE = "MERGE"


class ReplayMergeError(ArchiveError):
    """A merge failed: ``state`` is where (the state it was in), ``reason`` what went wrong."""

    def __init__(self, message: str, *, state: MergeState, reason: str) -> None:
        super().__init__(message, request="ReplayMerge")
        self.state = state
        self.reason = reason


class MergeStateMachine:
    """The states, thresholds, back-off and progress timeouts of a merge, without any I/O: the glue
    reports what it observed (``now`` is a monotonic time in seconds) and performs what it is told."""

    def __init__(self, *, recording_id: int, resolve_replay_port: bool, now: float,
                 progress_timeout_s: float = DEFAULT_PROGRESS_TIMEOUT_S,
                 state_timeouts_s: Mapping[MergeState, float] | None = None) -> None:
        _check_timeout("progress_timeout_s", progress_timeout_s)
        for state, timeout in (state_timeouts_s or {}).items():
            if state not in ACTIVE_STATES:
                raise ValueError(f"state_timeouts_s names {state!r}: only the working states have a "
                                 f"timeout ({', '.join(sorted(s.value for s in ACTIVE_STATES))})")
            _check_timeout(f"state_timeouts_s[{state.value}]", timeout)
        self.recording_id = recording_id
        self.state = MergeState.RESOLVE_REPLAY_PORT if resolve_replay_port else MergeState.GET_RECORDING_POSITION
        self.progress_timeout_s = progress_timeout_s
        self.state_timeouts_s = dict(state_timeouts_s or {})
        self.target_position = NULL_POSITION
        self.replay_session_id: int | None = None
        self.is_replay_active = False
        self.is_live_added = False
        self.failure: ReplayMergeError | None = None
        self.image_position = NULL_POSITION
        self.active_transports = 0
        self._last_progress = now
        self._position_of_last_progress = NULL_POSITION
        self._live_added_at: float | None = None
        self._backoff = TARGET_QUERY_BACKOFF_INITIAL_S
        self._next_query = now

    # -- transitions reported by the glue ------------------------------------------------------
    def on_replay_port_resolved(self, now: float) -> None:
        self._expect(MergeState.RESOLVE_REPLAY_PORT)
        self._enter(MergeState.GET_RECORDING_POSITION, now)

    def should_query_target(self, now: float) -> bool:
        """Whether to ask the archive for the target now (queries back off from 8 ms to 500 ms)."""
        if now < self._next_query:
            return False
        self._backoff = min(self._backoff * 2, TARGET_QUERY_BACKOFF_MAX_S)
        self._next_query = now + self._backoff
        return True

    def on_initial_target(self, position: int, now: float) -> None:
        """GET_RECORDING_POSITION's answer; NULL_POSITION (not known yet) asks again later."""
        self._expect(MergeState.GET_RECORDING_POSITION)
        if position != NULL_POSITION:
            self.target_position = position
            self._enter(MergeState.REPLAY, now)

    def on_replay_started(self, replay_session_id: int, now: float) -> None:
        self._expect(MergeState.REPLAY)
        self.replay_session_id = replay_session_id
        self.is_replay_active = True
        self._backoff = TARGET_QUERY_BACKOFF_INITIAL_S
        self._next_query = now
        self._enter(MergeState.CATCHUP, now)

    @property
    def image_session_id(self) -> int:
        """The session id of the replay Image (the low 32 bits of the replay session id)."""
        if self.replay_session_id is None:
            raise RuntimeError("no replay has started yet")
        return replay_image_session_id(self.replay_session_id)

    def on_image_found(self, position: int, now: float) -> None:
        self._expect(MergeState.CATCHUP)
        self._position_of_last_progress = position
        self._progress(now)
        self.on_image_position(position, closed=False, active_transports=0, now=now)

    def on_image_position(self, position: int, *, closed: bool, active_transports: int, now: float) -> None:
        """CATCHUP: the Image's position; at the target, ATTEMPT_LIVE_JOIN."""
        self._expect(MergeState.CATCHUP)
        self._observe(position, active_transports, now)
        if position >= self.target_position:
            # Not progress by itself: CATCHUP and ATTEMPT_LIVE_JOIN alternate while waiting for live.
            self._enter(MergeState.ATTEMPT_LIVE_JOIN, now, progress=False)
        elif closed:
            raise self.fail(f"the replay Image closed at position {position}, before the target "
                            f"{self.target_position}")

    def on_live_join_target(self, target: int, *, position: int, term_length: int,
                            active_transports: int, now: float) -> LiveJoinStep:
        """ATTEMPT_LIVE_JOIN: a fresh target (NULL_POSITION: ask again) and the Image's state."""
        self._expect(MergeState.ATTEMPT_LIVE_JOIN)
        self._observe(position, active_transports, now)
        if target == NULL_POSITION:
            return LiveJoinStep.WAIT
        self.target_position = target
        if not self.is_live_added and target - position <= min(term_length >> 2, LIVE_ADD_MAX_WINDOW):
            self.is_live_added = True
            self._live_added_at = now
            self._progress(now)
            self._enter(MergeState.CATCHUP, now, progress=False)
            return LiveJoinStep.ADD_LIVE
        if self.is_live_added and target - position <= 0 and active_transports >= 2:
            return LiveJoinStep.MERGE  # merged once the glue dropped the replay (`on_merged`)
        self._enter(MergeState.CATCHUP, now, progress=False)
        return LiveJoinStep.WAIT

    def on_merged(self, now: float) -> None:
        """The replay destination is removed and the replay stopped: the Image is live alone."""
        self._expect(MergeState.ATTEMPT_LIVE_JOIN)
        self.is_replay_active = False
        self._enter(MergeState.MERGED, now)

    def check_progress(self, now: float) -> None:
        """Raises (and fails the merge) once the state's timeout passed without progress."""
        if self.state not in ACTIVE_STATES:
            return
        timeout = self.state_timeouts_s.get(self.state, self.progress_timeout_s)
        idle = now - self._last_progress
        if idle > timeout:
            raise self.fail(f"no progress for {idle:.1f} s (timeout {timeout} s): {self._waiting_for(now)}")

    def fail(self, reason: str) -> ReplayMergeError:
        """Moves to FAILED and returns the error naming the state it failed in (the caller raises it)."""
        state = self.state
        error = ReplayMergeError(
            f"ReplayMerge of recording {self.recording_id} failed in state {state.value}: {reason}",
            state=state, reason=reason)
        if self.state in ACTIVE_STATES:
            self.state = MergeState.FAILED
            self.failure = error
        return error

    def close(self) -> None:
        self.state = MergeState.CLOSED

    # -- helpers -------------------------------------------------------------------------------
    def _expect(self, state: MergeState) -> None:
        if self.state is not state:
            raise RuntimeError(f"ReplayMerge event for state {state.value} while in {self.state.value}")

    def _enter(self, state: MergeState, now: float, *, progress: bool = True) -> None:
        self.state = state
        if progress:
            self._progress(now)

    def _progress(self, now: float) -> None:
        self._last_progress = now

    def _observe(self, position: int, active_transports: int, now: float) -> None:
        """Image advance is progress, except while the added live destination has not joined yet
        (then only its joining is): a live stream that never arrives must not replay forever."""
        if active_transports > self.active_transports and self.is_live_added:
            self._progress(now)
        self.active_transports = active_transports
        self.image_position = position
        waiting_for_live = self.is_live_added and active_transports < 2
        if position > self._position_of_last_progress:
            self._position_of_last_progress = position
            if not waiting_for_live:
                self._progress(now)

    def _waiting_for(self, now: float) -> str:
        state = self.state
        if state is MergeState.RESOLVE_REPLAY_PORT:
            return "the media driver has not bound the replay destination's port"
        if state is MergeState.GET_RECORDING_POSITION:
            return "the archive has not given the recording's position"
        if state is MergeState.REPLAY:
            return "the archive has not started the replay"
        if self.image_position == NULL_POSITION:
            return (f"the replay Image (session id {self.image_session_id}) has not appeared: can the "
                    "archive reach the replay destination?")
        if self.is_live_added and self.active_transports < 2 and self._live_added_at is not None:
            return (f"the live destination added {now - self._live_added_at:.1f} s ago has not joined the "
                    f"Image (active transports {self.active_transports}, position {self.image_position}, "
                    f"target {self.target_position}): is the live stream reachable there?")
        return (f"the Image is at position {self.image_position}, the target is {self.target_position} "
                f"(active transports {self.active_transports}, live added {self.is_live_added})")

    def __repr__(self) -> str:
        return (f"MergeStateMachine(state={self.state.value}, target={self.target_position}, "
                f"position={self.image_position}, live_added={self.is_live_added}, "
                f"replay_active={self.is_replay_active}, active_transports={self.active_transports})")


def _check_timeout(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} {value!r} is invalid: must be a positive number of seconds")


class MergeArchive(Protocol):
    """What a merge asks of the archive client (`ArchiveClient` has all of it)."""

    def list_recording(self, recording_id: int) -> RecordingDescriptor | None: ...

    def max_recorded_position(self, recording_id: int) -> int: ...

    def start_replay(self, recording_id: int, position: int, length: int, replay_channel: str,
                     replay_stream_id: int) -> int: ...

    def stop_replay(self, replay_session_id: int) -> None: ...

    def check_replay_error(self, replay_session_id: int) -> None: ...

    @property
    def is_closed(self) -> bool: ...


class ReplayMerge:
    """Replays ``recording_id`` from ``start_position`` into ``subscription`` (multi-destination,
    ``control-mode=manual``) and merges into the live stream: call `poll` (or `do_work` and poll
    `image` yourself) until `is_merged`, then go on polling for the live stream.

    ``replay_channel``: the channel the archive replays to, as a template (Aeron's
    ``replayChannel``): the replay destination's endpoint, ``linger=0``, ``eos=false`` and, unless
    given, the recording's ``session-id`` are added. ``replay_destination``: the UDP endpoint the
    replay arrives at (port 0: the driver picks one). ``live_destination``: where the live stream
    arrives, e.g. ``aeron:udp?endpoint=localhost:0|control=<publisher host>:<control port>`` for a
    dynamic multi-destination-cast publication. ``start_position`` None: the recording's start.
    ``owns_subscription``: close the subscription with the merge (`ArchiveClient.replay_merge`
    creating it does).
    """

    def __init__(self, archive: MergeArchive, subscription: Subscription, *, recording_id: int,
                 live_destination: str, start_position: int | None = None,
                 replay_channel: str = DEFAULT_REPLAY_CHANNEL,
                 replay_destination: str = DEFAULT_REPLAY_DESTINATION,
                 progress_timeout_s: float = DEFAULT_PROGRESS_TIMEOUT_S,
                 state_timeouts_s: Mapping[MergeState, float] | None = None,
                 owns_subscription: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        channels = {"subscription channel": subscription.channel, "replay_channel": replay_channel,
                    "replay_destination": replay_destination, "live_destination": live_destination}
        parsed = {name: _udp_channel(name, channel) for name, channel in channels.items()}
        if parsed["subscription channel"].get("control-mode") != "manual":
            raise ValueError(f"ReplayMerge needs a multi-destination subscription: its channel "
                             f"{subscription.channel!r} must have control-mode=manual "
                             f"(e.g. {MULTI_DESTINATION_CHANNEL!r})")
        replay_endpoint = parsed["replay_destination"].get("endpoint")
        if not replay_endpoint:
            raise ValueError(f"replay_destination {replay_destination!r} has no endpoint: the archive "
                             "must be told where to send the replay")
        if start_position is not None and (start_position < 0 or start_position % 32):
            raise ValueError(f"start_position {start_position} is invalid: must be >= 0 and a multiple of "
                             "the frame alignment 32 (None: the recording's start)")
        self._archive = archive
        self.subscription = subscription
        self.recording_id = recording_id
        self.live_destination = live_destination
        self.replay_destination = replay_destination
        self.start_position = start_position
        self._owns_subscription = owns_subscription
        self._clock = clock
        self._replay_uri = parsed["replay_channel"].set("linger", "0").set("eos", "false")
        self._replay_host, _, port = replay_endpoint.rpartition(":")
        needs_port = port == "0"
        if not needs_port:
            self._replay_uri.set("endpoint", replay_endpoint)
        self._machine = MergeStateMachine(recording_id=recording_id, resolve_replay_port=needs_port,
                                          now=clock(), progress_timeout_s=progress_timeout_s,
                                          state_timeouts_s=state_timeouts_s)
        self.image: Image | None = None
        self.states_seen: list[MergeState] = [self._machine.state]
        try:
            subscription.add_destination(replay_destination)
        except BaseException:
            if owns_subscription:
                subscription.close()
            raise

    # -- what it is doing ----------------------------------------------------------------------
    @property
    def state(self) -> MergeState:
        return self._machine.state

    @property
    def is_merged(self) -> bool:
        return self._machine.state is MergeState.MERGED

    @property
    def has_failed(self) -> bool:
        return self._machine.state is MergeState.FAILED

    @property
    def failure(self) -> ReplayMergeError | None:
        """Why the merge failed (None unless FAILED)."""
        return self._machine.failure

    @property
    def is_live_added(self) -> bool:
        return self._machine.is_live_added

    @property
    def target_position(self) -> int:
        """The recording position the replay must reach (the archive's latest answer)."""
        return self._machine.target_position

    @property
    def replay_channel(self) -> str:
        """The channel the archive is (or will be) told to replay to."""
        return self._replay_uri.build()

    @property
    def replay_session_id(self) -> int | None:
        return self._machine.replay_session_id

    # -- the duty cycle ------------------------------------------------------------------------
    def do_work(self) -> int:
        """One step of the merge; the work done (0: waiting). Raises `ReplayMergeError` when it
        fails (and again from every later `poll`)."""
        machine = self._machine
        if machine.state not in ACTIVE_STATES:
            return 0
        now = self._clock()
        before = machine.state
        try:
            work = self._step(machine, now)
            machine.check_progress(now)
        except ReplayMergeError:
            raise
        except (ArchiveError, AeronError) as error:
            raise machine.fail(f"{type(error).__name__}: {error}") from error
        finally:
            if machine.state is not before:
                self.states_seen.append(machine.state)
        return work

    def poll(self, handler: MessageHandler, fragment_limit: int) -> int:
        """`do_work`, then whole messages of the merged Image to ``handler(payload, header)``; the
        fragments consumed. Messages arrive once each and in order: replayed, then live."""
        if self._machine.failure is not None:
            raise self._machine.failure
        self.do_work()
        image = self.image
        if image is None or image.is_closed:
            return 0
        return image.poll(handler, fragment_limit)

    def _step(self, machine: MergeStateMachine, now: float) -> int:
        state = machine.state
        if state is MergeState.RESOLVE_REPLAY_PORT:
            endpoint = self.subscription.resolved_endpoint()
            if endpoint is None:
                return 0
            # The port the driver bound, at the host the destination names (reachable by the archive).
            self._replay_uri.set("endpoint", f"{self._replay_host}:{endpoint.rpartition(':')[2]}")
            machine.on_replay_port_resolved(now)
            return 1
        if state is MergeState.GET_RECORDING_POSITION:
            if not machine.should_query_target(now):
                return 0
            self._apply_descriptor()
            machine.on_initial_target(self._archive.max_recorded_position(self.recording_id), now)
            return 1
        if state is MergeState.REPLAY:
            assert self.start_position is not None  # set with the descriptor
            replay_session_id = self._archive.start_replay(
                self.recording_id, self.start_position, FOLLOW_LENGTH, self.replay_channel,
                self.subscription.stream_id)
            machine.on_replay_started(replay_session_id, now)
            return 1
        if state is MergeState.CATCHUP:
            return self._catch_up(machine, now)
        return self._attempt_live_join(machine, now)

    def _apply_descriptor(self) -> None:
        """The recording's start position (when none was given) and session id (the replay must
        carry the live stream's session id to share its Image)."""
        if self.start_position is not None and "session-id" in self._replay_uri:
            return
        descriptor = self._archive.list_recording(self.recording_id)
        if descriptor is None:
            raise self._machine.fail(f"the archive knows no recording {self.recording_id}")
        if self.start_position is None:
            self.start_position = descriptor.start_position
        if "session-id" not in self._replay_uri:
            self._replay_uri.set("session-id", str(descriptor.session_id))

    def _catch_up(self, machine: MergeStateMachine, now: float) -> int:
        assert machine.replay_session_id is not None
        if self.image is None:
            self._archive.check_replay_error(machine.replay_session_id)
            image = self.subscription.image_by_session_id(machine.image_session_id)
            if image is None:
                return 0
            self.image = image
            machine.on_image_found(image.position, now)
            return 1
        image = self.image
        closed = image.is_closed
        machine.on_image_position(image.position if not closed else machine.image_position, closed=closed,
                                  active_transports=0 if closed else image.active_transport_count, now=now)
        return 1 if machine.state is MergeState.ATTEMPT_LIVE_JOIN else 0

    def _attempt_live_join(self, machine: MergeStateMachine, now: float) -> int:
        if not machine.should_query_target(now):
            return 0
        target = self._archive.max_recorded_position(self.recording_id)
        image = self.image
        assert image is not None and machine.replay_session_id is not None
        step = machine.on_live_join_target(target, position=image.position, term_length=image.term_buffer_length,
                                           active_transports=image.active_transport_count, now=now)
        if step is LiveJoinStep.ADD_LIVE:
            self.subscription.add_destination(self.live_destination)
        elif step is LiveJoinStep.MERGE:
            self.subscription.remove_destination(self.replay_destination)
            self._archive.stop_replay(machine.replay_session_id)
            machine.on_merged(now)
        return 1

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stops the replay if it still runs and removes the replay destination (unless merged);
        the live destination stays, so the subscription goes on with the live stream (unless the
        merge owns the subscription: then it is closed). Idempotent."""
        machine = self._machine
        if machine.state is MergeState.CLOSED:
            return
        try:
            if not self.subscription.is_closed:
                if machine.state is not MergeState.MERGED:
                    with contextlib.suppress(AeronError):
                        self.subscription.remove_destination(self.replay_destination)
            if machine.is_replay_active and machine.replay_session_id is not None and not self._archive.is_closed:
                machine.is_replay_active = False
                with contextlib.suppress(ArchiveError):  # the archive may have ended it already
                    self._archive.stop_replay(machine.replay_session_id)
        finally:
            machine.close()
            self.states_seen.append(MergeState.CLOSED)
            if self._owns_subscription:
                if self.image is not None:
                    self.image.close()
                self.subscription.close()

    def __enter__(self) -> ReplayMerge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ReplayMerge(recording_id={self.recording_id}, {self._machine!r}, "
                f"replay_channel={self.replay_channel!r}, live_destination={self.live_destination!r})")


def _udp_channel(name: str, channel: str) -> ChannelUri:
    try:
        uri = ChannelUri.parse(channel)
    except ChannelUriError as error:
        raise ValueError(f"{name} {channel!r} is not a valid Aeron channel: {error}") from None
    if not uri.is_udp or uri.is_spy:
        raise ValueError(f"{name} {channel!r} is not supported: ReplayMerge merges UDP streams only "
                         "(aeron:udp?...), as Aeron's")
    return uri
