"""An active recording's live position, read from its ``rec-pos`` counter.

Only a client on the archive's own media driver sees the archive's counters; others ask with a
RecordingPosition request. The counter's key layout is ``aeron_spark.archive.codecs.recording_position``.
"""

import struct

from aeron_spark.archive.codecs.counter_layout import RECORD_ALLOCATED
from aeron_spark.archive.codecs.recording_position import (
    NULL_ARCHIVE_ID,
    NULL_COUNTER_ID,
    RECORDING_POSITION_TYPE_ID,
    CountersView,
    RecordingPositionKey,
    decode_key,
    find_counter_id_by_recording,
    is_active,
    recorded_position,
)

__all__ = ["NULL_COUNTER_ID", "counter_ids_by_recording", "find_counter_id_by_recording", "is_active",
           "is_counter_of", "recorded_position"]

_RECORDING_ID = struct.Struct("<q")  # the key's first field


def counter_ids_by_recording(reader: CountersView, archive_id: int = NULL_ARCHIVE_ID) -> dict[int, int]:
    """Recording id -> rec-pos counter id of every live recording of the archive (the first counter
    of a recording, as `find_counter_id_by_recording`), in one pass over the counters: finding N
    recordings one at a time is N passes."""
    keys: list[RecordingPositionKey] = []

    def collect(key) -> bool:
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
