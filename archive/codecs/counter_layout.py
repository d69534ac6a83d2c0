"""What every archive counter shares: label limits, the archive-id label suffix, counter states.

The archive's counters (``rec-pos`` in ``recording_position``, the recorder's and replayer's
I/O counters in ``aeron_spark.archive.service.counters``) are read by clients too, so their
layouts live here, free of I/O; the protocols name what they need of driver_integration.
"""

from __future__ import annotations

from typing import Protocol

ARCHIVE_ID_LABEL_SUFFIX = " - archiveId="
MAX_LABEL_LENGTH = 380  # Aeron's CountersReader.MAX_LABEL_LENGTH
NULL_COUNTER_ID = -1
RECORD_ALLOCATED = 1  # counter metadata state of a live counter


class WritableCounter(Protocol):
    """What the archive needs of an allocated counter (driver_integration's ``Counter``)."""

    counter_id: int
    value: int

    def close(self) -> None: ...


class CounterAllocator(Protocol):
    """What the archive needs of ``AeronClient`` to allocate counters."""

    def add_counter(self, type_id: int, key: bytes, label: str) -> WritableCounter: ...


class CounterLookup(Protocol):
    """What lookups need of driver_integration's ``CountersReader``."""

    def find(self, type_id: int, key_predicate) -> list[int]: ...


def archive_id_label_suffix(archive_id: int) -> str:
    return f"{ARCHIVE_ID_LABEL_SUFFIX}{archive_id}"


def first_counter_id(found: list[int] | int) -> int:
    """First id of a ``CountersReader.find`` answer (a list of ids), else NULL_COUNTER_ID."""
    if isinstance(found, int):
        return found if found >= 0 else NULL_COUNTER_ID
    return found[0] if found else NULL_COUNTER_ID
