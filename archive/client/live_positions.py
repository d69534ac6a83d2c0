"""An active recording's live position, read from its ``rec-pos`` counter.

Only a client on the archive's own media driver sees the archive's counters; others ask with a
RecordingPosition request. The counter's key layout is ``aeron_spark.archive.codecs.recording_position``.
"""

from aeron_spark.archive.codecs.recording_position import (
    NULL_COUNTER_ID,
    find_counter_id_by_recording,
    is_active,
    recorded_position,
)

__all__ = ["NULL_COUNTER_ID", "find_counter_id_by_recording", "is_active", "recorded_position"]
