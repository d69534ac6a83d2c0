"""Driver-side view of the archive: which recordings to read and where they begin and end.

Like Kafka's KafkaOffsetReader: lists recordings (``recordingIds``, or ``channel``/``channelPattern``
+ ``streamId`` with discovery of recordings that start later, at most once per
``discoveryIntervalMs``: source/recording_selection.py), and
turns them into positions. Live recordings are followed through their rec-pos counters (no
control round trip); a recording whose counter is gone is described again to get its stop
position, so a stopped recording is read to its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from aeron_spark.archive.client import RecordingDescriptor

from aeron_spark.connector.source.archive_access import ArchiveAccess
from aeron_spark.connector.source.data_loss import DataLossPolicy
from aeron_spark.connector.source.offsets import EARLIEST, LATEST, RecordingPositions
from aeron_spark.connector.source.options import PositionSpec, SourceOptions
from aeron_spark.connector.source.partition_planner import RecordingLayout
from aeron_spark.connector.source.recording_selection import RecordingDiscovery
from aeron_spark.connector.source.sink_visibility import SinkVisibility, is_sink_recording


# Stopped recordings described again (to see an extension) per discoveryIntervalMs, at most.
STOPPED_RECHECKS_PER_INTERVAL = 32


class RecordingNotFound(LookupError):
    pass


class OffsetReader:
    def __init__(self, options: SourceOptions, access: Callable[[], ArchiveAccess],
                 clock_ms: Callable[[], float] | None = None) -> None:
        self.options = options
        self._access_factory = access
        self._access: ArchiveAccess | None = None
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)
        self._policy = DataLossPolicy(options.fail_on_data_loss)
        self.descriptors: dict[int, RecordingDescriptor] = {}
        self._discovery = RecordingDiscovery(options.selection) if options.subscribes_to_channel else None
        self._last_discovery_ms: float | None = None
        self._sink_visibility = SinkVisibility(options.replay)
        self._stopped_checked_ms: dict[int, float] = {}
        self._sink_recordings: dict[int, bool] = {}  # a recording's channel never changes
        self._layouts: dict[int, tuple[RecordingDescriptor, RecordingLayout]] = {}
        self._recheck_window_ms: float | None = None
        self._rechecks_in_window = 0

    @property
    def access(self) -> ArchiveAccess:
        if self._access is None:
            self._access = self._access_factory()
        return self._access

    def known_recordings(self, force_discovery: bool = False,
                         already_read: frozenset[int] | set[int] = frozenset()) -> dict[int, RecordingDescriptor]:
        """Descriptors of every recording this source reads (discovering new ones if due).

        A named recording that is missing is an error, unless the query has already read from it
        (``already_read``): then it left the archive, which the caller reports as data loss.
        """
        if self.options.recording_ids is not None:
            for recording_id in self.options.recording_ids:
                if recording_id not in self.descriptors:
                    descriptor = self.access.describe(recording_id)
                    if descriptor is None and recording_id in already_read:
                        continue
                    if descriptor is None:
                        raise RecordingNotFound(
                            f"option recordingIds: recording {recording_id} is not in the archive "
                            f"(archive id {self.access.archive_id})")
                    self.descriptors[recording_id] = descriptor
            return dict(self.descriptors)
        now = self._clock_ms()
        due = (self._last_discovery_ms is None
               or now - self._last_discovery_ms >= self.options.discovery_interval_ms)
        if force_discovery or due:
            for descriptor in self._discovery.discover(self.access):
                self.descriptors.setdefault(descriptor.recording_id, descriptor)
            self._last_discovery_ms = now
        return dict(self.descriptors)

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        descriptor = self.descriptors.get(recording_id)
        if descriptor is None:
            descriptor = self.access.describe(recording_id)
            if descriptor is not None:
                self.descriptors[recording_id] = descriptor
        return descriptor

    def refresh(self, recording_id: int) -> RecordingDescriptor | None:
        descriptor = self.access.describe(recording_id)
        if descriptor is None:
            self.descriptors.pop(recording_id, None)
        else:
            self.descriptors[recording_id] = descriptor
        return descriptor

    def latest_positions(self, recording_ids: Iterable[int]) -> tuple[dict[int, int], set[int]]:
        """Latest position per recording, and the recordings that left the catalog."""
        latest: dict[int, int] = {}
        vanished: set[int] = set()
        recording_ids = list(recording_ids)
        rechecks = self._stopped_rechecks_due(recording_ids)
        for recording_id in recording_ids:
            descriptor = self.describe(recording_id)
            if descriptor is not None and self._is_sink(descriptor):
                # Written by the aeron-archive sink: readable up to its last commit marker only.
                end = self._sink_committed_end(recording_id)
                if end is None:
                    vanished.add(recording_id)
                else:
                    latest[recording_id] = end
                continue
            if descriptor is not None and not descriptor.is_active and recording_id in rechecks:
                descriptor = self.refresh(recording_id)  # extended since?
            if descriptor is not None and descriptor.is_active:
                live = self.access.live_position(recording_id)
                if live is not None:
                    latest[recording_id] = live
                    continue
                descriptor = self.refresh(recording_id)  # stopped since: its stop position is final
            if descriptor is None:
                vanished.add(recording_id)
            elif descriptor.is_active:
                latest[recording_id] = descriptor.start_position  # recording, nothing counted yet
            else:
                latest[recording_id] = descriptor.stop_position
        return latest, vanished

    def _is_sink(self, descriptor: RecordingDescriptor) -> bool:
        """Whether the aeron-archive sink wrote it, from its channel (parsed once per recording)."""
        known = self._sink_recordings.get(descriptor.recording_id)
        if known is None:
            known = self._sink_recordings[descriptor.recording_id] = is_sink_recording(descriptor)
        return known

    def _stopped_rechecks_due(self, recording_ids: list[int]) -> set[int]:
        """Stopped recordings to describe again now: one may be extended later.

        Each at most once per discoveryIntervalMs (latestOffset is called many times a second), and
        at most STOPPED_RECHECKS_PER_INTERVAL of them per interval, longest unchecked first: a query
        over thousands of stopped recordings must not send thousands of requests every interval
        (an extension of one of them is then seen within ceil(stopped / that) intervals).
        """
        now = self._clock_ms()
        interval = self.options.discovery_interval_ms
        if self._recheck_window_ms is None or now - self._recheck_window_ms >= interval:
            self._recheck_window_ms, self._rechecks_in_window = now, 0
        budget = STOPPED_RECHECKS_PER_INTERVAL - self._rechecks_in_window
        due: list[tuple[float, int]] = []
        for recording_id in recording_ids:
            descriptor = self.descriptors.get(recording_id)
            if descriptor is None or descriptor.is_active or self._is_sink(descriptor):
                continue
            last = self._stopped_checked_ms.setdefault(recording_id, now)  # just described
            if now - last >= interval:
                due.append((last, recording_id))
        if budget <= 0 or not due:
            return set()
        chosen = {recording_id for _, recording_id in sorted(due)[:budget]}
        for recording_id in chosen:
            self._stopped_checked_ms[recording_id] = now
        self._rechecks_in_window += len(chosen)
        return chosen

    def _sink_committed_end(self, recording_id: int) -> int | None:
        """A sink recording is stopped between commits and extended by each: always re-described."""
        live = self.access.live_position(recording_id)
        if live is not None:
            return self._sink_visibility.while_active(self.access, self.descriptors[recording_id], live)
        descriptor = self.refresh(recording_id)
        if descriptor is None:
            return None
        if descriptor.is_active:
            return self._sink_visibility.while_active(self.access, descriptor, None)
        return self._sink_visibility.when_stopped(self.access, descriptor)

    def layouts(self, recording_ids: Iterable[int]) -> dict[int, RecordingLayout]:
        layouts: dict[int, RecordingLayout] = {}
        for recording_id in recording_ids:
            descriptor = self.describe(recording_id)
            if descriptor is None:
                continue
            cached = self._layouts.get(recording_id)
            if cached is None or cached[0] is not descriptor:  # made once per descriptor
                cached = self._layouts[recording_id] = (descriptor, RecordingLayout(
                    recording_id, descriptor.start_position, descriptor.term_buffer_length))
            layouts[recording_id] = cached[1]
        return layouts

    def resolve(self, spec: PositionSpec, option_name: str) -> RecordingPositions:
        """startingPositions / endingPositions -> concrete positions of every known recording."""
        recordings = self.known_recordings(force_discovery=True)
        named = dict(spec.specific)
        unknown = sorted(set(named) - set(recordings))
        if unknown:
            raise RecordingNotFound(
                f"option {option_name} names recording(s) {unknown}, which "
                + ("are not in the archive" if self.options.recording_ids is not None
                   else f"do not match {self.options.selection.describe()}"))
        default = EARLIEST if option_name == "startingPositions" else LATEST
        wanted = {rid: spec.for_recording(rid, default) for rid in recordings}
        is_ending = option_name == "endingPositions"
        needs_latest = [rid for rid, marker in wanted.items()
                        if marker == LATEST or (is_ending and marker >= 0 and recordings[rid].is_active)]
        latest, vanished = self.latest_positions(needs_latest)
        positions: dict[int, int] = {}
        for recording_id, marker in wanted.items():
            descriptor = recordings[recording_id]
            if recording_id in vanished:
                continue
            if marker == EARLIEST:
                positions[recording_id] = descriptor.start_position
            elif marker == LATEST:
                positions[recording_id] = latest[recording_id]
            else:
                position = self._checked_position(option_name, descriptor, marker)
                if is_ending and descriptor.is_active and position > latest[recording_id]:
                    raise ValueError(
                        f"option endingPositions: position {position} of recording {recording_id} is beyond "
                        f"what is recorded ({latest[recording_id]}); accepted: a position up to the recorded "
                        "one, or latest")
                positions[recording_id] = position
        return RecordingPositions(positions)

    def _checked_position(self, option_name: str, descriptor: RecordingDescriptor, position: int) -> int:
        if position < descriptor.start_position:
            self._policy.report(
                f"option {option_name}: position {position} of recording {descriptor.recording_id} is before "
                f"its start position {descriptor.start_position}")
            return descriptor.start_position
        if not descriptor.is_active and position > descriptor.stop_position:
            raise ValueError(
                f"option {option_name}: position {position} of recording {descriptor.recording_id} is after "
                f"its stop position {descriptor.stop_position}; accepted: {descriptor.start_position}.."
                f"{descriptor.stop_position}")
        return position

    def close(self) -> None:
        if self._access is not None:
            self._access.close()
            self._access = None
