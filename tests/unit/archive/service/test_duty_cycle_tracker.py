"""archive.service.duty_cycle_tracker and its use by the agents: a cycle's time is the time between
two do_work starts (Aeron's DutyCycleTracker.measureAndUpdate); the max and the count over the
threshold go to counters 103/104; a dormant wait is not a cycle."""

from __future__ import annotations

import threading
import time

import pytest

from aeron_spark.archive.service.duty_cycle_tracker import DutyCycleStallTracker, DutyCycleTracker
from aeron_spark.archive.service.session_agent import SessionAgent

from tests.unit.archive.service.request_handler_parts import FakeCounter


def stall_tracker(threshold_ns: int = 100) -> DutyCycleStallTracker:
    return DutyCycleStallTracker(FakeCounter(0, 103, b"", ""), FakeCounter(1, 104, b"", ""), threshold_ns)


def test_the_first_call_starts_the_clock_then_each_call_reports_the_time_since_the_previous():
    measured: list[int] = []

    class Recording(DutyCycleTracker):
        def report_measurement(self, duration_ns: int) -> None:
            measured.append(duration_ns)

    tracker = Recording()
    for now in (1_000, 1_050, 1_300, 1_310):
        tracker.measure_and_update(now)
    tracker.update(5_000)  # restarts without a report
    tracker.measure_and_update(5_020)
    assert measured == [50, 250, 10, 20]


def test_the_max_cycle_time_and_the_cycles_over_the_threshold_are_published():
    tracker = stall_tracker(threshold_ns=100)
    for now in (0, 50, 250, 260, 261, 500):  # cycles of 50, 200, 10, 1, 239 ns
        tracker.measure_and_update(now)
    assert tracker.max_cycle_time.value == tracker.max_cycle_time_ns == 239
    assert tracker.threshold_exceeded.value == 2  # 200 and 239; a cycle equal to the threshold is not over it
    tracker.measure_and_update(600)
    assert tracker.threshold_exceeded.value == 2
    tracker.close()
    tracker.measure_and_update(10_000)  # closing: ignored, as Aeron's isClosed() check
    assert tracker.max_cycle_time.value == 239
    assert tracker.max_cycle_time.closed and tracker.threshold_exceeded.closed


def test_a_threshold_must_be_positive():
    with pytest.raises(ValueError, match="cycle time threshold must be > 0 ns, got 0"):
        stall_tracker(threshold_ns=0)


class Session:
    io_stats = None

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s
        self.done = False

    @property
    def is_done(self) -> bool:
        return self.done

    def do_work(self) -> int:
        time.sleep(self.sleep_s)
        self.done = True
        return 1

    def abort(self, reason: str = "") -> None:
        self.done = True


class Agent(SessionAgent[Session]):
    def _describe(self, session: Session) -> str:
        return "session"

    def _apply(self, command: str, ident: int, session: Session) -> None:
        pass

    def _retire(self, session: Session) -> None:
        pass


def test_a_session_agent_measures_its_busy_cycles_but_not_its_dormant_waits():
    tracker = stall_tracker(threshold_ns=20_000_000)
    agent = Agent(cycle_tracker=tracker)
    agent.set_wake_signal(threading.Event())
    agent.do_work()  # dormant from the start: starts the clock only
    time.sleep(0.3)  # a dormant wait
    agent.add_session(Session(sleep_s=0.03))
    agent.do_work()  # restarts the clock after the wait, then a 30 ms cycle
    assert tracker.max_cycle_time.value == 0
    agent.do_work()  # measures the 30 ms cycle
    assert 30_000_000 <= tracker.max_cycle_time.value < 300_000_000  # the wait is not in it
    assert tracker.threshold_exceeded.value == 1


def test_the_conductor_measures_each_duty_cycle(tmp_path):
    from aeron_spark.archive.service.conductor import ArchiveConductor, ConductorSettings
    from aeron_spark.archive.service.service_options import ArchiveServiceOptions
    from aeron_spark.archive.storage.catalog import Catalog

    from tests.unit.archive.service.request_handler_parts import FakeAeron, FakeRecorder

    measured: list[int] = []

    class Recording(DutyCycleTracker):
        def report_measurement(self, duration_ns: int) -> None:
            measured.append(duration_ns)

    with Catalog.open(tmp_path) as catalog:
        settings = ConductorSettings(ArchiveServiceOptions(tmp_path), 1)
        conductor = ArchiveConductor(aeron=FakeAeron(), catalog=catalog, settings=settings,
                                     recorder=FakeRecorder(), control_channels=[("aeron:ipc", 10)],
                                     cycle_tracker=Recording())
        for _ in range(3):
            conductor.do_work()
            time.sleep(0.01)
        conductor.on_close()
    assert len(measured) == 2 and all(m >= 10_000_000 for m in measured)
