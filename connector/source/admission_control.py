"""How far a micro-batch may go: maxBytesPerTrigger, minBytesPerTrigger + maxTriggerDelay (pure).

The driver only knows frame boundaries it has not read at two kinds of positions: a recording's
latest position (rec-pos counter or stop position) and term boundaries. A capped batch end is
therefore rounded *down* to a term boundary; the cap is soft in one case only: when the budget
is smaller than the first step available, one step (to the next term boundary or to the latest
position, whichever is nearer) is taken anyway so that a query always progresses.

The budget is shared like Kafka's maxOffsetsPerTrigger: in proportion to each recording's
backlog, then what rounding left over goes, a step at a time, to the recordings furthest below their share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Backlog:
    recording_id: int
    start: int
    latest: int
    term_length: int

    @property
    def available(self) -> int:
        return max(0, self.latest - self.start)

    def furthest_end_within(self, budget: int) -> int:
        """The furthest frame boundary the driver can name, at most ``budget`` bytes past start."""
        if budget >= self.available:
            return self.latest
        if self.term_length <= 0:
            return self.start
        boundary = (self.start + budget) // self.term_length * self.term_length
        return boundary if boundary > self.start else self.start

    def first_step(self) -> int:
        """The nearest nameable frame boundary after start (for guaranteed progress)."""
        return self.next_step_after(self.start)

    def next_step_after(self, position: int) -> int:
        """The nearest nameable frame boundary after ``position`` (a term boundary or latest)."""
        if position >= self.latest:
            return position
        if self.term_length <= 0:
            return self.latest
        return min(self.latest, (position // self.term_length + 1) * self.term_length)


def total_available(backlogs: Iterable[Backlog]) -> int:
    return sum(b.available for b in backlogs)


def cap_by_bytes(backlogs: list[Backlog], max_bytes: int) -> dict[int, int]:
    """End position per recording so that the batch reads about ``max_bytes`` in total."""
    total = total_available(backlogs)
    if total <= max_bytes:
        return {b.recording_id: b.latest for b in backlogs}
    shares = {b.recording_id: max_bytes * b.available // total for b in backlogs}
    ends = {b.recording_id: b.furthest_end_within(shares[b.recording_id]) for b in backlogs}
    left = max_bytes - sum(ends[b.recording_id] - b.start for b in backlogs)
    # Rounding down left budget unused: hand it out one step at a time, largest shortfall first.
    while True:
        by_shortfall = sorted(backlogs, key=lambda b: (-(shares[b.recording_id] - (ends[b.recording_id] - b.start)),
                                                       b.recording_id))
        for backlog in by_shortfall:
            current = ends[backlog.recording_id]
            step = backlog.next_step_after(current)
            if step > current and step - current <= left:
                ends[backlog.recording_id] = step
                left -= step - current
                break
        else:
            break
    used = max_bytes - left
    if used == 0:
        for backlog in sorted(backlogs, key=lambda b: b.recording_id):
            if backlog.available:
                ends[backlog.recording_id] = backlog.first_step()
                break
    return ends


@dataclass
class TriggerDelay:
    """minBytesPerTrigger + maxTriggerDelay, as Kafka's minOffsetsPerTrigger does it.

    A batch is held back while fewer than ``min_bytes`` are available and less than
    ``max_delay_ms`` passed since the last batch. The clock starts at 0 as in Kafka, so the
    first trigger of a query is never delayed.
    """

    min_bytes: int
    max_delay_ms: int
    clock_ms: Callable[[], float]
    last_trigger_ms: float = 0.0

    def should_delay(self, available: int) -> bool:
        now = self.clock_ms()
        if now - self.last_trigger_ms >= self.max_delay_ms or available >= self.min_bytes:
            self.last_trigger_ms = now
            return False
        return True
