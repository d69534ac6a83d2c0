"""Replay limits that follow a counter: bounded replays and tails of active recordings.

A bounded replay (BoundedReplayRequest) may not go past the value of a counter owned by some
other client (e.g. a cluster's commit position); a replay of an active recording follows the
recording's own ``rec-pos`` counter. Both are read by counter id through the CountersReader.

When the counter is closed the limit is frozen at its last value (Aeron issue #1478: a closed
limit caps the replay). The driver frees a counter by setting its state to RECLAIMED and
zeroing its key; the value word is left alone and the slot is not reused for the driver's
free-to-reuse timeout (1 s by default). So on first seeing the counter closed we read the value
once more while the slot is still RECLAIMED: that is the final value written before the close
(for a rec-pos counter, the recording's stop position), not a stale earlier sample.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from aeron_spark.archive.codecs.counter_layout import RECORD_ALLOCATED

RECORD_UNUSED = 0
RECORD_RECLAIMED = -1


class CountersView(Protocol):
    def value(self, counter_id: int) -> int: ...
    def type_id(self, counter_id: int) -> int: ...
    def key(self, counter_id: int) -> bytes: ...
    def state(self, counter_id: int) -> int: ...


@runtime_checkable
class RegisteredCountersView(CountersView, Protocol):
    """A counters view that also tells each counter's registration id (driver_integration's
    `CountersReader`): a reused counter id is then told apart from the counter it replaced."""

    def registration_id(self, counter_id: int) -> int: ...


class ReplayLimit(Protocol):
    """A position a replay may not pass, which may advance, and may close (then it is final)."""

    def position(self) -> int:
        """Current limit; once :attr:`is_closed` is true this never changes again."""
        ...

    @property
    def is_closed(self) -> bool: ...


class LimitCounterError(LookupError):
    """The counter id does not name a live counter."""


class LimitCounterReader:
    """Follows the counter ``counter_id``; frozen at its last value once it is closed."""

    def __init__(self, reader: CountersView, counter_id: int) -> None:
        if counter_id < 0:
            raise LimitCounterError(f"limit counter id {counter_id} is invalid: must be >= 0")
        try:
            state = reader.state(counter_id)
        except (IndexError, ValueError) as error:
            raise LimitCounterError(f"limit counter id {counter_id} is out of range: {error}") from None
        if state != RECORD_ALLOCATED:
            raise LimitCounterError(f"limit counter id {counter_id} is not allocated (state {state})")
        self._reader = reader
        self.counter_id = counter_id
        self.type_id = reader.type_id(counter_id)
        self._key = bytes(reader.key(counter_id))
        self._registered = reader if isinstance(reader, RegisteredCountersView) else None
        self._registration_id = self._registered.registration_id(counter_id) if self._registered is not None else None
        self._last = reader.value(counter_id)
        self._closed = False

    def _still_ours(self) -> bool:
        reader = self._reader
        return (reader.state(self.counter_id) == RECORD_ALLOCATED
                and reader.type_id(self.counter_id) == self.type_id
                and bytes(reader.key(self.counter_id)) == self._key
                and self._same_registration())

    def _same_registration(self) -> bool:
        """Whether the counter still has the registration id it had (True when unknown)."""
        return self._registered is None or self._registered.registration_id(self.counter_id) == self._registration_id

    def position(self) -> int:
        if self._closed:
            return self._last
        value = self._reader.value(self.counter_id)
        if self._still_ours():  # read value first: a value seen before a still-live check is valid
            if value > self._last:
                self._last = value
            return self._last
        self._closed = True
        if self._reader.state(self.counter_id) == RECORD_RECLAIMED and self._same_registration():
            final = self._reader.value(self.counter_id)  # freed, not yet reused: the last write
            if final > self._last:
                self._last = final
        return self._last

    @property
    def is_closed(self) -> bool:
        if not self._closed:
            self.position()
        return self._closed


class FixedLimit:
    """A limit that never moves (a stopped recording's stop position); closed from the start."""

    def __init__(self, position: int) -> None:
        self._position = position

    def position(self) -> int:
        return self._position

    @property
    def is_closed(self) -> bool:
        return True
