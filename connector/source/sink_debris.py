"""A sink recording's rows without its commit markers and a dead commit's debris (sans-IO):
``SinkDebrisFilter``, which ``message_batches.MessageBatchBuilder`` passes a sink recording's
messages through. Why debris exists and is never truncated: ``connector/sink/commit.py``.
"""

from __future__ import annotations

import numpy as np

from aeron_spark.connector.commit_markers import CommitMarker, MarkerError
from aeron_spark.connector.source.assembled_messages import (
    AssembledMessages,
    BuilderStats,
    select_messages,
    slice_messages,
)


class SinkDebrisFilter:
    """The rows of a sink recording's committed batches, in order, without its DEBRIS (sans-IO).

    Each batch of a sink recording ends with a commit marker naming ``data_start``, where its data
    begins (``connector/commit_markers.py``). A commit that died before its marker leaves debris,
    and the sink never truncates it (why: ``connector/sink/commit.py``): the next batch is appended
    after it, so [previous marker end, data_start) is debris. The messages after the last marker
    seen are therefore HELD until the next marker says where its batch began: those ending at or
    before ``data_start`` are debris (dropped, counted in ``debris_messages``), the rest are rows.
    The markers themselves are never rows. A recording without debris (every one written before
    this rule: they truncated it) has ``data_start`` = previous marker end, so nothing is dropped.

    Held messages are at most the part of one batch that this range holds. ``finish`` releases
    what is held at the range end: a range ending at a committed end (a marker end: every range the
    source plans up to the sink's visible end) holds nothing there; a range cut inside a batch (a
    term-boundary split) cannot see the next marker: given the next marker's ``data_start`` (the
    reader looked past the range end: ``source/sink_visibility.py`` ``next_batch_start``) it
    resolves them, otherwise it releases them as rows, which is wrong only when the cut falls
    between debris and the marker after it (docs/exactly-once.md, "What readers see").

    A dead commit's last message may be unfinished: its fragments are dropped when the next batch's
    first message begins. Fragments dropped inside debris are counted as ``debris_fragments``, the
    others as ``dropped_fragments`` (data loss), as without this filter.
    """

    def __init__(self, marker_reserved_value: int, stats: BuilderStats) -> None:
        self._marker_value = marker_reserved_value
        self._held: list[AssembledMessages] = []
        self._held_dropped = np.empty(0, np.int64)  # where the held dropped fragments begin
        self._stats = stats

    def add(self, messages: AssembledMessages) -> list[AssembledMessages]:
        """This chunk's messages -> the rows now known to be committed (vectorized: Python runs
        only to decode the chunk's few markers)."""
        if messages.dropped_fragments:
            positions = messages.dropped_positions
            if positions is None or positions.size != messages.dropped_fragments:
                self._stats.dropped_fragments += messages.dropped_fragments  # not located: data loss
            else:
                self._held_dropped = np.concatenate([self._held_dropped, positions])
        if messages.count == 0:
            return []
        is_marker = messages.reserved == self._marker_value
        candidates = np.flatnonzero(is_marker)
        decoded = [_marker_of(messages, index) for index in candidates.tolist()]
        markers = np.array([i for i, m in zip(candidates.tolist(), decoded) if m is not None], dtype=np.int64)
        if markers.size == 0:  # nothing resolved yet: hold it all (marker-valued messages are never rows)
            rows = messages if not candidates.size else select_messages(messages, ~is_marker)
            if rows.count:
                self._held.append(rows)
            return []
        data_starts = np.array([m.data_start for m in decoded if m is not None], dtype=np.int64)
        self._resolve_dropped(data_starts, messages.end_positions[markers])
        released = self._release_held(int(data_starts[0]))
        last = int(markers[-1])
        # Each message up to the last marker belongs to the batch of the first marker at or after it.
        batch_start = data_starts[np.searchsorted(markers, np.arange(last + 1))]
        keep = np.zeros(messages.count, dtype=np.bool_)
        keep[:last + 1] = messages.end_positions[:last + 1] > batch_start
        keep &= ~is_marker
        self._stats.debris_messages += int(last + 1 - np.count_nonzero(is_marker[:last + 1])
                                           - np.count_nonzero(keep))
        if keep.any():
            released.append(messages if keep.all() else select_messages(messages, keep))
        if last + 1 < messages.count:
            rest = slice_messages(messages, last + 1, messages.count)
            rest_rows = rest if not is_marker[last + 1:].any() else select_messages(rest, ~is_marker[last + 1:])
            if rest_rows.count:
                self._held.append(rest_rows)
        return released

    @property
    def holding(self) -> bool:
        """Whether messages after the last marker read wait for the next one."""
        return bool(self._held) or bool(self._held_dropped.size)

    def finish(self, next_batch_start: int | None = None) -> list[AssembledMessages]:
        """What is still held, at the range end: the next batch's ``data_start`` when the caller
        looked past the range end for the next marker, else everything held, as rows."""
        if next_batch_start is not None:
            far = np.iinfo(np.int64).max
            self._resolve_dropped(np.array([next_batch_start], np.int64), np.array([far], np.int64))
            return self._release_held(next_batch_start)
        released, self._held = self._held, []
        self._stats.dropped_fragments += int(self._held_dropped.size)
        self._held_dropped = self._held_dropped[:0]
        return released

    def _release_held(self, data_start: int) -> list[AssembledMessages]:
        """The next marker names ``data_start``: what is held is its batch's rows, or debris when it
        ends at or before ``data_start``."""
        released: list[AssembledMessages] = []
        for held in self._held:
            keep = held.end_positions > data_start
            if keep.all():
                released.append(held)
                continue
            self._stats.debris_messages += int(held.count - np.count_nonzero(keep))
            if keep.any():
                released.append(select_messages(held, keep))
        self._held = []
        return released

    def _resolve_dropped(self, data_starts: np.ndarray, marker_ends: np.ndarray) -> None:
        """Held dropped fragments followed by one of these markers: debris when they begin before
        that marker's ``data_start``, else data loss."""
        if not self._held_dropped.size:
            return
        following = np.searchsorted(marker_ends, self._held_dropped, side="right")
        resolved = following < marker_ends.size
        in_debris = int(np.count_nonzero(self._held_dropped[resolved] < data_starts[following[resolved]]))
        self._stats.debris_fragments += in_debris
        self._stats.dropped_fragments += int(np.count_nonzero(resolved)) - in_debris
        self._held_dropped = self._held_dropped[~resolved]


def _marker_of(messages: AssembledMessages, index: int) -> CommitMarker | None:
    payload = messages.payload[messages.value_offsets[index]:messages.value_offsets[index + 1]]
    try:
        return CommitMarker.decode(payload.tobytes())
    except MarkerError:
        return None  # not a marker (a row may not use the marker's reserved value): dropped, no effect
