"""`MergeStateMachine`, the sans-IO core of ReplayMerge, fed with times, positions and transport
counts; and the argument checks of `ReplayMerge` (which fail before any I/O)."""

from __future__ import annotations

import pytest

from aeron_spark.archive.client import MergeState, ReplayMerge, ReplayMergeError
from aeron_spark.archive.client.replay_merge import (
    LIVE_ADD_MAX_WINDOW,
    TARGET_QUERY_BACKOFF_INITIAL_S,
    TARGET_QUERY_BACKOFF_MAX_S,
    LiveJoinStep,
    MergeStateMachine,
)
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION

TERM = 64 * 1024
WINDOW = TERM // 4


def machine(now: float = 0.0, *, resolve: bool = False, **kw) -> MergeStateMachine:
    return MergeStateMachine(recording_id=7, resolve_replay_port=resolve, now=now, **kw)


def caught_up(target: int = 10_000, now: float = 0.0) -> MergeStateMachine:
    """A machine whose replay Image reached ``target``: in ATTEMPT_LIVE_JOIN."""
    m = machine(now)
    m.on_initial_target(target, now)
    m.on_replay_started((3 << 32) | 99, now)
    m.on_image_found(0, now)  # a target of 0 is reached at once
    if m.state is MergeState.CATCHUP:
        m.on_image_position(target, closed=False, active_transports=1, now=now)
    assert m.state is MergeState.ATTEMPT_LIVE_JOIN
    return m


def test_the_happy_path_goes_through_every_state_in_order():
    m = machine(resolve=True)
    assert m.state is MergeState.RESOLVE_REPLAY_PORT
    m.on_replay_port_resolved(0.1)
    assert m.state is MergeState.GET_RECORDING_POSITION
    m.on_initial_target(5_000, 0.2)
    assert (m.state, m.target_position) == (MergeState.REPLAY, 5_000)
    m.on_replay_started((3 << 32) | 0xFFFF_FFFE, 0.3)
    assert m.state is MergeState.CATCHUP and m.is_replay_active
    assert m.image_session_id == -2  # the low 32 bits, signed, as Aeron's (int) cast
    m.on_image_found(0, 0.4)
    m.on_image_position(4_000, closed=False, active_transports=1, now=0.5)
    assert m.state is MergeState.CATCHUP
    m.on_image_position(5_000, closed=False, active_transports=1, now=0.6)
    assert m.state is MergeState.ATTEMPT_LIVE_JOIN
    # Within a quarter term of the fresh target: add the live destination, back to CATCHUP.
    step = m.on_live_join_target(5_000 + WINDOW, position=5_000, term_length=TERM, active_transports=1, now=0.7)
    assert (step, m.state, m.is_live_added) == (LiveJoinStep.ADD_LIVE, MergeState.CATCHUP, True)
    m.on_image_position(5_000 + WINDOW, closed=False, active_transports=2, now=0.8)
    step = m.on_live_join_target(5_000 + WINDOW, position=5_000 + WINDOW, term_length=TERM,
                                 active_transports=2, now=0.9)
    assert (step, m.state, m.is_replay_active) == (LiveJoinStep.MERGE, MergeState.ATTEMPT_LIVE_JOIN, True)
    m.on_merged(1.0)  # the glue removed the replay destination and stopped the replay
    assert (m.state, m.is_replay_active) == (MergeState.MERGED, False)
    m.check_progress(100.0)  # no timeout once merged
    m.close()
    assert m.state is MergeState.CLOSED


def test_the_live_destination_waits_until_the_replay_is_within_the_window():
    m = caught_up(10_000)
    step = m.on_live_join_target(10_000 + WINDOW + 32, position=10_000, term_length=TERM, active_transports=1,
                                 now=0.1)
    assert (step, m.state, m.is_live_added) == (LiveJoinStep.WAIT, MergeState.CATCHUP, False)
    # The window is capped at 32 MiB for large terms.
    big = caught_up(0)
    term = 1024 * 1024 * 1024
    assert big.on_live_join_target(LIVE_ADD_MAX_WINDOW + 32, position=0, term_length=term, active_transports=1,
                                   now=0.1) is LiveJoinStep.WAIT
    big.on_image_position(LIVE_ADD_MAX_WINDOW + 32, closed=False, active_transports=1, now=0.2)
    assert big.on_live_join_target(2 * LIVE_ADD_MAX_WINDOW + 32, position=LIVE_ADD_MAX_WINDOW + 32,
                                   term_length=term, active_transports=1, now=0.3) is LiveJoinStep.ADD_LIVE


def test_merging_needs_the_target_reached_and_two_transports_and_never_happens_with_the_add():
    m = caught_up(10_000)
    assert m.on_live_join_target(10_000, position=10_000, term_length=TERM, active_transports=2,
                                 now=0.1) is LiveJoinStep.ADD_LIVE  # not merged in the same step
    m.on_image_position(10_000, closed=False, active_transports=1, now=0.2)
    assert m.on_live_join_target(10_000, position=10_000, term_length=TERM, active_transports=1,
                                 now=0.3) is LiveJoinStep.WAIT  # the live transport has not joined
    m.on_image_position(10_000, closed=False, active_transports=2, now=0.4)
    assert m.on_live_join_target(10_100, position=10_000, term_length=TERM, active_transports=2,
                                 now=0.5) is LiveJoinStep.WAIT  # the recording moved on: catch up again
    assert m.state is MergeState.CATCHUP
    m.on_image_position(10_112, closed=False, active_transports=2, now=0.6)
    assert m.on_live_join_target(10_100, position=10_112, term_length=TERM, active_transports=2,
                                 now=0.7) is LiveJoinStep.MERGE  # live ahead of the recording is fine


def test_a_null_target_is_asked_again():
    m = machine()
    m.on_initial_target(NULL_POSITION, 0.1)
    assert m.state is MergeState.GET_RECORDING_POSITION
    m2 = caught_up()
    assert m2.on_live_join_target(NULL_POSITION, position=10_000, term_length=TERM, active_transports=1,
                                  now=0.1) is LiveJoinStep.WAIT
    assert m2.state is MergeState.ATTEMPT_LIVE_JOIN


def test_target_queries_back_off_from_8_ms_to_500_ms_and_restart_with_the_replay():
    m = machine()
    assert m.should_query_target(0.0)
    assert not m.should_query_target(0.015)
    assert m.should_query_target(0.016)  # 8 ms doubled to 16 ms after the first query
    now, gaps = 0.016, []
    for _ in range(10):
        nxt = now
        while not m.should_query_target(nxt):
            nxt += 0.001
        gaps.append(round(nxt - now, 3))
        now = nxt
    assert gaps[0] == pytest.approx(0.032, abs=0.0015)
    assert gaps[-1] == pytest.approx(TARGET_QUERY_BACKOFF_MAX_S, abs=0.0015)
    m.on_initial_target(100, now)
    m.on_replay_started(1, now)
    assert m.should_query_target(now)
    assert not m.should_query_target(now + TARGET_QUERY_BACKOFF_INITIAL_S)


@pytest.mark.parametrize(("state", "reach", "reason"), [
    (MergeState.RESOLVE_REPLAY_PORT, lambda m: None, "has not bound the replay destination's port"),
    (MergeState.GET_RECORDING_POSITION, lambda m: m.on_replay_port_resolved(0.0), "recording's position"),
    (MergeState.REPLAY, lambda m: (m.on_replay_port_resolved(0.0), m.on_initial_target(10, 0.0)),
     "has not started the replay"),
    (MergeState.CATCHUP, lambda m: (m.on_replay_port_resolved(0.0), m.on_initial_target(10, 0.0),
                                    m.on_replay_started(5, 0.0)), "replay Image (session id 5) has not appeared"),
])
def test_each_state_times_out_without_progress_naming_the_state(state, reach, reason):
    m = machine(resolve=True)
    reach(m)
    assert m.state is state
    m.check_progress(5.0)  # exactly the timeout is still fine
    with pytest.raises(ReplayMergeError) as failed:
        m.check_progress(5.1)
    assert failed.value.state is state and m.state is MergeState.FAILED and m.failure is failed.value
    assert f"failed in state {state.value}: no progress for 5.1 s (timeout 5.0 s)" in str(failed.value)
    assert reason in str(failed.value)
    m.check_progress(50.0)  # a failed merge raises no more


def test_replay_progress_keeps_the_merge_alive_and_a_stall_fails_it():
    m = caught_up(1_000_000)
    m.on_live_join_target(2_000_000, position=1_000_000, term_length=TERM, active_transports=1, now=0.0)
    for second in range(1, 20):  # the replay advances every second: never a timeout
        m.on_image_position(1_000_000 + second * 1000, closed=False, active_transports=1, now=float(second))
        m.check_progress(float(second) + 0.5)
    with pytest.raises(ReplayMergeError, match=r"failed in state CATCHUP: .*Image is at position 1019000, "
                                               r"the target is 2000000"):
        m.check_progress(25.0)


def test_a_live_destination_that_never_joins_fails_even_while_the_replay_advances():
    m = caught_up(10_000)
    assert m.on_live_join_target(10_000, position=10_000, term_length=TERM, active_transports=1,
                                 now=1.0) is LiveJoinStep.ADD_LIVE
    for tick in range(1, 12):  # the replay goes on and the recording with it; no live transport
        now, position = 1.0 + tick * 0.5, 10_000 + tick * 32
        m.on_image_position(position, closed=False, active_transports=1, now=now)
        assert m.on_live_join_target(position + 32, position=position, term_length=TERM, active_transports=1,
                                     now=now) is LiveJoinStep.WAIT
    with pytest.raises(ReplayMergeError) as failed:
        m.check_progress(6.5)
    assert failed.value.state is MergeState.CATCHUP
    assert "the live destination added 5.5 s ago has not joined the Image (active transports 1" in str(failed.value)


def test_a_closed_replay_image_fails_the_merge():
    m = machine()
    m.on_initial_target(10_000, 0.0)
    m.on_replay_started(1, 0.0)
    m.on_image_found(0, 0.0)
    with pytest.raises(ReplayMergeError, match=r"in state CATCHUP: the replay Image closed at position 320, "
                                               r"before the target 10000"):
        m.on_image_position(320, closed=True, active_transports=0, now=0.1)
    assert m.state is MergeState.FAILED


def test_per_state_timeouts_override_the_default():
    m = machine(resolve=True, progress_timeout_s=5.0, state_timeouts_s={MergeState.RESOLVE_REPLAY_PORT: 0.5})
    with pytest.raises(ReplayMergeError, match="timeout 0.5 s"):
        m.check_progress(0.6)
    m2 = machine(resolve=True, progress_timeout_s=5.0, state_timeouts_s={MergeState.RESOLVE_REPLAY_PORT: 0.5})
    m2.on_replay_port_resolved(0.4)
    m2.check_progress(5.0)  # GET_RECORDING_POSITION keeps the default


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"progress_timeout_s": 0}, "progress_timeout_s 0 is invalid: must be a positive number of seconds"),
    ({"progress_timeout_s": float("nan")}, "progress_timeout_s nan is invalid"),
    ({"state_timeouts_s": {MergeState.MERGED: 1.0}}, "names <MergeState.MERGED: 'MERGED'>: only the working states"),
    ({"state_timeouts_s": {MergeState.CATCHUP: -1}}, r"state_timeouts_s\[CATCHUP\] -1 is invalid"),
])
def test_bad_timeouts_are_refused_naming_the_option(kwargs, message):
    with pytest.raises(ValueError, match=message):
        machine(**kwargs)


def test_events_out_of_order_are_a_programming_error():
    m = machine()
    with pytest.raises(RuntimeError, match="event for state REPLAY while in GET_RECORDING_POSITION"):
        m.on_replay_started(1, 0.0)
    with pytest.raises(RuntimeError, match="no replay has started"):
        _ = m.image_session_id


class _Subscription:
    """Only what ReplayMerge reads before any I/O: the channel, and the add it makes last."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.stream_id = 1001
        self.added: list[str] = []
        self.is_closed = False

    def add_destination(self, destination: str) -> None:
        self.added.append(destination)

    def close(self) -> None:
        self.is_closed = True


@pytest.mark.parametrize(("channels", "message"), [
    ({"subscription": "aeron:udp?endpoint=localhost:0"}, "must have control-mode=manual"),
    ({"subscription": "aeron:ipc"}, "subscription channel 'aeron:ipc' is not supported: ReplayMerge merges UDP"),
    ({"live_destination": "aeron:ipc"}, "live_destination 'aeron:ipc' is not supported"),
    ({"replay_channel": "aeron-spy:aeron:udp"}, "replay_channel 'aeron-spy:aeron:udp' is not supported"),
    ({"replay_destination": "aeron:udp?control=localhost:5"}, "replay_destination .* has no endpoint"),
    ({"live_destination": "udp://x"}, "live_destination 'udp://x' is not a valid Aeron channel"),
    ({"start_position": 33}, "start_position 33 is invalid: must be >= 0 and a multiple of the frame alignment 32"),
])
def test_bad_arguments_are_refused_before_any_io(channels, message):
    subscription = _Subscription(channels.pop("subscription", "aeron:udp?control-mode=manual"))
    kwargs = {"live_destination": "aeron:udp?endpoint=localhost:0|control=localhost:9", "recording_id": 1}
    kwargs.update(channels)
    with pytest.raises(ValueError, match=message):
        ReplayMerge(None, subscription, **kwargs)  # type: ignore[arg-type]
    assert subscription.added == []


def test_the_replay_channel_gets_linger_eos_and_the_replay_endpoint():
    subscription = _Subscription("aeron:udp?control-mode=manual")
    merge = ReplayMerge(None, subscription, recording_id=1,  # type: ignore[arg-type]
                        live_destination="aeron:udp?endpoint=localhost:0|control=localhost:9",
                        replay_channel="aeron:udp?session-id=5", replay_destination="aeron:udp?endpoint=localhost:4100")
    assert merge.state is MergeState.GET_RECORDING_POSITION  # a concrete port: nothing to resolve
    assert merge.replay_channel == "aeron:udp?session-id=5|linger=0|eos=false|endpoint=localhost:4100"
    assert subscription.added == ["aeron:udp?endpoint=localhost:4100"]
    wildcard = ReplayMerge(None, _Subscription("aeron:udp?control-mode=manual"), recording_id=1,  # type: ignore[arg-type]
                           live_destination="aeron:udp?endpoint=localhost:0|control=localhost:9")
    assert wildcard.state is MergeState.RESOLVE_REPLAY_PORT
    assert wildcard.states_seen == [MergeState.RESOLVE_REPLAY_PORT]
