"""What the SOURCE may read of a sink recording: up to the end of its last commit marker.

A recording written by the `aeron-archive` sink (its original channel carries
``alias=aeron-spark-sink:<sink.id>``) is only ever extended by a commit, and a commit is visible
once its marker is recorded and the recording stopped. So, for the source's driver side:

* while the recording is ACTIVE (a commit in progress, or one that died and has not been stopped
  yet) its readable end is the committed end this reader last established; a reader that never
  saw it stopped scans the recorded part once for the last marker;
* once STOPPED, its stop position when the tail is a marker (one 96-byte replay); otherwise the
  tail is debris of a commit that died, and the end of the last marker is found by scanning
  forward from the last committed end known (or the start). The result is cached per stop
  position, so a quiet recording costs one descriptor request per poll.

Committed data only grows (nothing truncates a sink recording: a dead commit's debris stays, and
the next batch is appended after it, ``connector/sink/commit.py``), so a cached committed end is
always a valid lower bound. Debris never contains a marker of its sink, so the scans here find the
same last marker with it. Marker rows and debris are dropped by the partition reader
(``MessageBatchBuilder``, ``SinkDebrisFilter``); ``next_batch_start`` is what a reader whose range
ends inside a batch needs to resolve what it holds.
"""

from __future__ import annotations

import logging

import numpy as np
from aeron_spark.archive.client import RecordingDescriptor
from aeron_spark.driver_integration.frame import scan_frames

from aeron_spark.connector.options import ReplaySettings
from aeron_spark.connector.source.archive_access import ArchiveAccess
from aeron_spark.connector.commit_markers import (
    MARKER_FRAME_LENGTH,
    LocatedMarker,
    is_sink_recording,
    marker_at_tail,
    markers_in_frames,
    sink_id_hash,
    sink_id_of_channel,
)

LOG = logging.getLogger("aeron_spark.connector")

__all__ = ["SinkVisibility", "is_sink_recording", "next_batch_start"]


class SinkVisibility:
    def __init__(self, replay: ReplaySettings) -> None:
        self._replay = replay
        self._known_end: dict[int, int] = {}             # recording id -> committed end established
        self._by_stop: dict[int, tuple[int, int]] = {}   # recording id -> (stop position, committed end)

    def while_active(self, access: ArchiveAccess, descriptor: RecordingDescriptor, live_position: int | None) -> int:
        known = self._known_end.get(descriptor.recording_id)
        if known is not None:
            return known
        if live_position is None or live_position <= descriptor.start_position:
            return descriptor.start_position
        # Never seen stopped: the recorded part holds every committed batch (a commit in progress
        # or a dead one only adds after the last marker), so one scan finds the committed end.
        expected = sink_id_hash(sink_id_of_channel(descriptor.original_channel) or "")
        last = self._scan(access, descriptor, descriptor.start_position, live_position, expected)
        end = last.end if last is not None else descriptor.start_position
        self._known_end[descriptor.recording_id] = end
        return end

    def when_stopped(self, access: ArchiveAccess, descriptor: RecordingDescriptor) -> int:
        recording_id, stop = descriptor.recording_id, descriptor.stop_position
        cached = self._by_stop.get(recording_id)
        if cached is not None and cached[0] == stop:
            return cached[1]
        end = self._committed_end(access, descriptor)
        self._by_stop[recording_id] = (stop, end)
        self._known_end[recording_id] = end
        return end

    def _committed_end(self, access: ArchiveAccess, descriptor: RecordingDescriptor) -> int:
        start, stop = descriptor.start_position, descriptor.stop_position
        expected = sink_id_hash(sink_id_of_channel(descriptor.original_channel) or "")
        if stop - MARKER_FRAME_LENGTH >= start:
            tail = self._read_tail(access, descriptor, expected)
            if tail is not None:
                return stop
        known = self._known_end.get(descriptor.recording_id, start)
        if not start <= known <= stop:
            known = start
        last = self._scan(access, descriptor, known, stop, expected)
        end = last.end if last is not None else known
        if end < stop:
            LOG.info("sink recording %d: %d bytes after its last commit marker (a commit in progress or one that "
                     "died) are not read", descriptor.recording_id, stop - end)
        return end

    def _read_tail(self, access: ArchiveAccess, descriptor: RecordingDescriptor, expected: int) -> LocatedMarker | None:
        stop = descriptor.stop_position
        start = stop - MARKER_FRAME_LENGTH
        try:
            with access.replay(descriptor.recording_id, start, stop, self._replay) as blocks:
                data = b"".join(bytes(block) for _, block in blocks)
        except Exception as error:  # noqa: BLE001 - no frame starts there: not a marker
            LOG.debug("sink recording %d: tail is not a marker (%s)", descriptor.recording_id, error)
            return None
        return marker_at_tail(data, start, stop, expected)

    def _scan(self, access: ArchiveAccess, descriptor: RecordingDescriptor, start: int, end: int,
              expected: int) -> LocatedMarker | None:
        if start >= end:
            return None
        last: LocatedMarker | None = None
        with access.replay(descriptor.recording_id, start, end, self._replay) as blocks:
            for position, block in blocks:
                data = np.frombuffer(block, dtype=np.uint8)
                found = markers_in_frames(data, position, scan_frames(data).offsets, expected)
                if found:
                    last = found[-1]
        return last


def next_batch_start(access: ArchiveAccess, descriptor: RecordingDescriptor, position: int, limit: int,
                     replay: ReplaySettings) -> int | None:
    """The ``data_start`` of the first marker of this sink ending after ``position`` (a range end
    inside a batch), scanning [position, limit) (``limit``: the recorded or stop position); None
    when there is none yet. Reads at most up to the end of that marker's batch."""
    if position >= limit:
        return None
    expected = sink_id_hash(sink_id_of_channel(descriptor.original_channel) or "")
    with access.replay(descriptor.recording_id, position, limit, replay) as blocks:
        for block_position, block in blocks:
            data = np.frombuffer(block, dtype=np.uint8)
            found = markers_in_frames(data, block_position, scan_frames(data).offsets, expected)
            if found:
                return found[0].marker.data_start
    return None
