"""The time a recorded message carries, for time-based positions (startingTimestamp & co).

A ``MessageTime`` turns one whole message (the reserved value of its first frame and its
reassembled payload) into nanoseconds since the epoch, or None when the message carries no time.
Aeron frames have no time field of their own, so the time is a convention of the publisher:

* ``includeTimestamp=true``: the reserved value is the time (the convention of the `timestamp`
  column, docs/options.md); a reserved value <= 0 (no reserved-value supplier) is no time;
* an SBE field (``sbe.timestampField``): the SBE decoder supplies a ``payload -> epoch ns | None``
  function, wrapped by :func:`payload_field_time`.

Both conventions skip the sink's commit markers: their reserved value is the marker magic, not a
time, and they are not rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aeron_spark.connector.commit_markers import MARKER_RESERVED_VALUE


class MessageTime(Protocol):
    def __call__(self, reserved_value: int, payload: memoryview | bytes) -> int | None:
        """Epoch nanoseconds of this message, None if it carries no time."""


def reserved_value_time(reserved_value: int, payload: memoryview | bytes) -> int | None:
    if reserved_value <= 0 or reserved_value == MARKER_RESERVED_VALUE:
        return None
    return reserved_value


def payload_field_time(field_time: Callable[[bytes], int | None]) -> MessageTime:
    """A MessageTime reading the time from the payload (e.g. an SBE field decoder's function)."""

    def message_time(reserved_value: int, payload: memoryview | bytes) -> int | None:
        if reserved_value == MARKER_RESERVED_VALUE:
            return None
        return field_time(bytes(payload))

    return message_time


class PayloadTimeField(Protocol):
    """``sbe_columns.SbeSettings``: the decoder of ``sbe.timestampField``, if one is set."""

    def field_time(self) -> Callable[[bytes], int | None] | None: ...


class TimeOptions(Protocol):
    """The options that say where a message's time is (``SourceOptions``)."""

    @property
    def sbe(self) -> PayloadTimeField | None: ...

    @property
    def include_timestamp(self) -> bool: ...


def message_time_for(options: TimeOptions) -> MessageTime | None:
    """The time source the options configure; None: messages carry no time the source knows of,
    so only the recording descriptors' timestamps can place a time (timestamp_resolution)."""
    sbe = options.sbe
    field_time = sbe.field_time() if sbe is not None else None
    if field_time is not None:  # a field the publisher wrote for this purpose wins over the reserved value
        return payload_field_time(field_time)
    if options.include_timestamp:
        return reserved_value_time
    return None
