"""The writer's in-memory view of the catalog file: where each entry's frame is (`EntryFrame`) and
the per-id facts listings select on (`ListingIndex`). `Catalog` keeps both under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor


class ListingIndex:
    """Per recording id, in memory: its stream id, whether listings may return it (valid and
    readable) and whether it is active (stop position -1). Listings, finds and start-up select ids
    with numpy instead of reading and decoding every entry; only the writer keeps one (it sees
    every change)."""

    def __init__(self, capacity: int) -> None:
        self.stream_ids = np.zeros(capacity, dtype=np.int32)
        self.listable = np.zeros(capacity, dtype=bool)
        self.active = np.zeros(capacity, dtype=bool)

    def ensure(self, recording_id: int) -> None:
        if recording_id < len(self.listable):
            return
        capacity = max(recording_id + 1, len(self.listable) * 2, 16)
        for name in ("stream_ids", "listable", "active"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def store(self, descriptor: RecordingDescriptor, valid: bool) -> None:
        recording_id = descriptor.recording_id
        self.ensure(recording_id)
        self.stream_ids[recording_id] = descriptor.stream_id
        self.listable[recording_id] = valid
        self.active[recording_id] = descriptor.stop_position == NULL_POSITION


@dataclass(frozen=True, slots=True)
class EntryFrame:
    """Where an entry is: its file offset and the bytes of its descriptor area after the 32-byte
    header (modern: body + padding, the header's length field; old: the exact body length)."""

    offset: int
    descriptor_length: int  # modern: frame length - 32; old: the exact body length
