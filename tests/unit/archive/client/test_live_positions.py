"""read_owned_positions: one gather over the counters' columns, with the ownership guard."""

import numpy as np

from aeron_spark.archive.client.live_positions import read_owned_positions
from aeron_spark.archive.codecs.recording_position import RECORDING_POSITION_TYPE_ID


class Columns:
    """driver_integration.CounterColumns' shape over plain arrays (one counter per index)."""

    def __init__(self, count):
        self.values = np.zeros(count, dtype=np.int64)
        self.states = np.zeros(count, dtype=np.int32)
        self.type_ids = np.zeros(count, dtype=np.int32)
        self.recording_ids = np.full(count, -1, dtype=np.int64)

    def allocate(self, counter_id, recording_id, value, type_id=RECORDING_POSITION_TYPE_ID):
        self.states[counter_id], self.type_ids[counter_id] = 1, type_id
        self.recording_ids[counter_id], self.values[counter_id] = recording_id, value

    def key_int64(self, key_offset):
        assert key_offset == 0  # the recording id leads the rec-pos key
        return self.recording_ids


def test_positions_of_owned_counters_are_read_in_one_gather():
    columns = Columns(8)
    columns.allocate(2, recording_id=10, value=4096)
    columns.allocate(5, recording_id=11, value=8192)
    positions, owned = read_owned_positions(columns, [5, 2], [11, 10])
    assert positions.tolist() == [8192, 4096] and owned.tolist() == [True, True]


def test_a_freed_or_reallocated_counter_is_not_read_as_the_old_recordings():
    columns = Columns(8)
    columns.allocate(1, recording_id=10, value=64)
    columns.allocate(2, recording_id=11, value=128)
    columns.allocate(3, recording_id=12, value=256)
    columns.states[1] = -1  # freed (RECLAIMED)
    columns.allocate(2, recording_id=99, value=32)  # id reused by another recording
    columns.allocate(3, recording_id=12, value=256, type_id=4242)  # reused by another kind of counter
    _, owned = read_owned_positions(columns, [1, 2, 3], [10, 11, 12])
    assert owned.tolist() == [False, False, False]
