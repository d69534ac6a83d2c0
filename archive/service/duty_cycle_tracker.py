"""Duty-cycle tracking: how long an agent's cycles take, as Aeron's DutyCycleTracker/DutyCycleStallTracker.

An agent calls :meth:`DutyCycleTracker.measure_and_update` with the monotonic clock at the start of
every ``do_work``: a cycle's time is the time since the previous call, so it covers the cycle's
work and the idling after it, as in Aeron (a cycle that blocks, e.g. on a slow disk, shows here).
:class:`DutyCycleStallTracker` publishes the longest cycle (counter type 103) and counts the cycles
longer than its threshold (type 104). Only the agent's thread writes them: plain stores of values
kept in local ints, no read of shared memory per cycle.

:meth:`DutyCycleTracker.update` restarts the measurement without reporting one: the recorder and
replayer call it after a dormant wait (their runners sleep on a wake signal when they have no
session, which Aeron's agents never do; that wait is not a duty cycle).
"""

from __future__ import annotations

from typing import Protocol

from aeron_spark.archive.codecs.counter_layout import WritableCounter

_NOT_STARTED = -1


class CycleTracker(Protocol):
    def update(self, now_ns: int) -> None: ...

    def measure_and_update(self, now_ns: int) -> None: ...


class DutyCycleTracker:
    """Measures the time between calls; :meth:`report_measurement` gets each cycle's time."""

    def __init__(self) -> None:
        self.time_of_last_update_ns = _NOT_STARTED

    def update(self, now_ns: int) -> None:
        self.time_of_last_update_ns = now_ns

    def measure_and_update(self, now_ns: int) -> None:
        last = self.time_of_last_update_ns
        self.time_of_last_update_ns = now_ns
        if last != _NOT_STARTED:  # the first call only starts the clock (Aeron's onStart update)
            self.report_measurement(now_ns - last)

    def report_measurement(self, duration_ns: int) -> None:
        pass


class DutyCycleStallTracker(DutyCycleTracker):
    """Max cycle time and threshold-exceeded count into two counters (Aeron's DutyCycleStallTracker)."""

    def __init__(self, max_cycle_time: WritableCounter, threshold_exceeded: WritableCounter,
                 cycle_time_threshold_ns: int) -> None:
        if cycle_time_threshold_ns <= 0:
            raise ValueError(f"cycle time threshold must be > 0 ns, got {cycle_time_threshold_ns}")
        super().__init__()
        self.max_cycle_time = max_cycle_time
        self.threshold_exceeded = threshold_exceeded
        self.cycle_time_threshold_ns = cycle_time_threshold_ns
        self.max_cycle_time_ns = 0
        self.threshold_exceeded_count = 0
        self._closed = False

    def report_measurement(self, duration_ns: int) -> None:
        if self._closed:  # Aeron checks maxCycleTime.isClosed() too: the archive is closing
            return
        if duration_ns > self.max_cycle_time_ns:
            self.max_cycle_time_ns = duration_ns
            self.max_cycle_time.value = duration_ns
        if duration_ns > self.cycle_time_threshold_ns:
            self.threshold_exceeded_count += 1
            self.threshold_exceeded.value = self.threshold_exceeded_count

    def close(self) -> None:
        self._closed = True
        for counter in (self.max_cycle_time, self.threshold_exceeded):
            counter.close()
