"""An active recording's live position, read from its ``rec-pos`` counter.

Only a client on the archive's own media driver sees the archive's counters; others ask with a
RecordingPosition request. The counter's key layout is ``aeron_spark.archive.codecs.recording_position``.
"""

import struct
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from aeron_spark.archive.codecs.counter_layout import RECORD_ALLOCATED
from aeron_spark.archive.codecs.recording_position import (
    NULL_ARCHIVE_ID,
    NULL_COUNTER_ID,
    RECORDING_ID_OFFSET,
    RECORDING_POSITION_TYPE_ID,
    CountersView,
    RecordingPositionKey,
    decode_key,
    find_counter_id_by_recording,
    is_active,
    recorded_position,
)

__all__ = ["NULL_COUNTER_ID", "counter_ids_by_recording", "find_counter_id_by_recording", "is_active",
           "is_counter_of", "read_owned_positions", "recorded_position"]

_RECORDING_ID = struct.Struct("<q")  # the key's first field


def counter_ids_by_recording(reader: CountersView, archive_id: int = NULL_ARCHIVE_ID) -> dict[int, int]:
    """Recording id -> rec-pos counter id of every live recording of the archive (the first counter
    of a recording, as `find_counter_id_by_recording`), in one pass over the counters: finding N
    recordings one at a time is N passes."""
    keys: list[RecordingPositionKey] = []

    def collect(key: bytes) -> bool:
        try:
            decoded = decode_key(key)
        except ValueError:
            return False
        if archive_id != NULL_ARCHIVE_ID and decoded.archive_id != archive_id:
            return False
        keys.append(decoded)
        return True

    # find() asks the predicate about each candidate in counter id order and keeps those it accepts.
    counter_ids = reader.find(RECORDING_POSITION_TYPE_ID, collect)
    index: dict[int, int] = {}
    for key, counter_id in zip(keys, counter_ids):
        index.setdefault(key.recording_id, counter_id)
    return index


def is_counter_of(reader: CountersView, counter_id: int, recording_id: int) -> bool:
    """`is_active` for a counter id already found for ``recording_id``: whether it is still that
    recording's live rec-pos counter (a freed id may be reused), comparing only the key's recording
    id rather than decoding the whole key (read for every recording on every trigger)."""
    return (reader.state(counter_id) == RECORD_ALLOCATED
            and reader.type_id(counter_id) == RECORDING_POSITION_TYPE_ID
            and _RECORDING_ID.unpack_from(reader.key(counter_id), 0)[0] == recording_id)


class CounterColumnsView(Protocol):
    """What `read_owned_positions` needs of driver_integration's ``CounterColumns``."""

    values: np.ndarray
    states: np.ndarray
    type_ids: np.ndarray

    def key_int64(self, key_offset: int) -> np.ndarray: ...


def read_owned_positions(columns: CounterColumnsView, counter_ids: Sequence[int] | np.ndarray,
                         recording_ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values of many rec-pos counters with one gather, and which of them still belong to their
    recording: ``(positions, owned)``, each in the order given.

    The same guard as `is_counter_of`, vectorized: the value is read first, then the counter is
    checked to be ALLOCATED, a rec-pos counter and keyed by that recording id; a counter freed and
    allocated again to another recording after the read fails the check, so its value is never
    taken for the old recording's position.
    """
    ids = np.asarray(counter_ids, dtype=np.intp)
    positions = columns.values[ids]  # before the ownership check, as `is_counter_of`'s callers do
    owned = ((columns.states[ids] == RECORD_ALLOCATED)
             & (columns.type_ids[ids] == RECORDING_POSITION_TYPE_ID)
             & (columns.key_int64(RECORDING_ID_OFFSET)[ids] == np.asarray(recording_ids, dtype=np.int64)))
    return positions, owned
