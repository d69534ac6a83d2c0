"""Driver-side view of the archive: which recordings to read and where they begin and end.

Like Kafka's KafkaOffsetReader: lists recordings (``recordingIds``, or ``channel``/``channelPattern``
+ ``streamId`` with discovery of recordings that start later, at most once per
``discoveryIntervalMs``: source/recording_selection.py), and
turns them into positions. Live recordings are followed through their rec-pos counters (no
control round trip); a recording whose counter is gone is described again to get its stop
position, so a stopped recording is read to its end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import cast

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
        self._recheck_not_before_ms: float | None = None  # no stopped recording is due before
        # Bumped whenever a descriptor is added, dropped or its stop position changes: the plan
        # of latest_positions (which recordings are sink, stopped or live) holds until then.
        self._descriptors_version = 0
        self._plan: _PositionsPlan | None = None

    @property
    def access(self) -> ArchiveAccess:
        if self._access is None:
            self._access = self._access_factory()
        return self._access

    def known_recordings(self, force_discovery: bool = False,
                         already_read: Collection[int] = frozenset()) -> dict[int, RecordingDescriptor]:
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
                    self._store(recording_id, descriptor)
            return dict(self.descriptors)
        discovery = self._discovery
        assert discovery is not None  # a source without recordingIds subscribes to a channel (__init__)
        now = self._clock_ms()
        due = (self._last_discovery_ms is None
               or now - self._last_discovery_ms >= self.options.discovery_interval_ms)
        if force_discovery or due:
            for descriptor in discovery.discover(self.access):
                if descriptor.recording_id not in self.descriptors:
                    self._store(descriptor.recording_id, descriptor)
            self._last_discovery_ms = now
        return dict(self.descriptors)

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        descriptor = self.descriptors.get(recording_id)
        if descriptor is None:
            descriptor = self.access.describe(recording_id)
            if descriptor is not None:
                self._store(recording_id, descriptor)
        return descriptor

    def refresh(self, recording_id: int) -> RecordingDescriptor | None:
        descriptor = self.access.describe(recording_id)
        if descriptor is None:
            if self.descriptors.pop(recording_id, None) is not None:
                self._descriptors_version += 1
        else:
            self._store(recording_id, descriptor)
        return descriptor

    def _store(self, recording_id: int, descriptor: RecordingDescriptor) -> None:
        known = self.descriptors.get(recording_id)
        if known is None or known.stop_position != descriptor.stop_position:
            self._descriptors_version += 1
        self.descriptors[recording_id] = descriptor

    def latest_positions(self, recording_ids: Iterable[int]) -> tuple[dict[int, int], set[int]]:
        """Latest position per recording, and the recordings that left the catalog.

        Costs what changed plus C-level work over all: which recordings are sink, stopped or live
        is worked out again only when a descriptor or the set of recordings changes
        (`_PositionsPlan`), stopped recordings' positions are copied as one dict, and the
        positions of all live recordings are read together (`ArchiveAccess.live_positions`: one
        gather over the rec-pos counters)."""
        recording_ids = list(recording_ids)
        plan = self._plan
        if plan is None or plan.version != self._descriptors_version or plan.recording_ids != recording_ids:
            plan = self._plan = _PositionsPlan.of(recording_ids, self.descriptors, self._is_sink,
                                                  self._descriptors_version)
            self._recheck_not_before_ms = None  # other stopped recordings: look at each again
        latest: dict[int, int] = dict(plan.stopped)
        vanished: set[int] = set()
        live_ids = plan.live
        for recording_id in plan.sinks:
            # Written by the aeron-archive sink: readable up to its last commit marker only.
            end = self._sink_committed_end(recording_id)
            if end is None:
                vanished.add(recording_id)
            else:
                latest[recording_id] = end
        for recording_id in plan.missing:
            descriptor = self.describe(recording_id)  # asked for each time (once found, planned)
            if descriptor is None:
                vanished.add(recording_id)
            elif self._is_sink(descriptor):
                end = self._sink_committed_end(recording_id)
                if end is None:
                    vanished.add(recording_id)
                else:
                    latest[recording_id] = end
            elif descriptor.is_active:
                live_ids = [*live_ids, recording_id]
            else:
                latest[recording_id] = descriptor.stop_position
        for recording_id in self._stopped_rechecks_due(plan.stopped):
            descriptor = self.refresh(recording_id)  # extended since?
            if descriptor is None:
                del latest[recording_id]
                vanished.add(recording_id)
            elif descriptor.is_active:
                del latest[recording_id]
                live_ids = [*live_ids, recording_id]
            else:
                latest[recording_id] = descriptor.stop_position
        lives = self.access.live_positions(live_ids)
        if None not in lives.values():
            latest.update(cast("dict[int, int]", lives))  # checked: no None among them
            return latest, vanished
        for recording_id in live_ids:
            live = lives[recording_id]
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

    def _stopped_rechecks_due(self, stopped: Iterable[int]) -> set[int]:
        """Stopped recordings to describe again now: one may be extended later.

        Each at most once per discoveryIntervalMs (latestOffset is called many times a second), and
        at most STOPPED_RECHECKS_PER_INTERVAL of them per interval, longest unchecked first: a query
        over thousands of stopped recordings must not send thousands of requests every interval
        (an extension of one of them is then seen within ceil(stopped / that) intervals). Until
        the earliest time one can be due, a trigger looks at none of them.
        """
        now = self._clock_ms()
        interval = self.options.discovery_interval_ms
        if self._recheck_window_ms is None or now - self._recheck_window_ms >= interval:
            self._recheck_window_ms, self._rechecks_in_window = now, 0
        if self._recheck_not_before_ms is not None and now < self._recheck_not_before_ms:
            return set()
        budget = STOPPED_RECHECKS_PER_INTERVAL - self._rechecks_in_window
        due: list[tuple[float, int]] = []
        earliest_later = now + interval  # a recording not seen before is checked `interval` from now
        for recording_id in stopped:
            last = self._stopped_checked_ms.setdefault(recording_id, now)  # just described
            if now - last >= interval:
                due.append((last, recording_id))
            else:
                earliest_later = min(earliest_later, last + interval)
        due.sort()
        chosen = {recording_id for _, recording_id in due[:max(0, budget)]}
        for recording_id in chosen:
            self._stopped_checked_ms[recording_id] = now
        self._rechecks_in_window += len(chosen)
        if len(due) > len(chosen):  # the rest wait for the next window's budget
            earliest_later = min(earliest_later, self._recheck_window_ms + interval)
        self._recheck_not_before_ms = earliest_later
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

    def reset_connection(self) -> None:
        """Drops the archive connection (it failed, or the archive closed it); the next use of
        ``access`` opens a fresh one. What was learnt of the recordings is kept."""
        access, self._access = self._access, None
        if access is not None:
            with contextlib.suppress(Exception):  # a dead session's close may fail too
                access.close()

    def close(self) -> None:
        if self._access is not None:
            self._access.close()
            self._access = None


@dataclass(frozen=True)
class _PositionsPlan:
    """Which of a trigger's recordings are the sink's, stopped (with their stop positions), live
    or not in the catalog, for one version of the descriptors."""

    version: int
    recording_ids: list[int]
    sinks: list[int]
    stopped: dict[int, int]
    live: list[int]
    missing: list[int]

    @classmethod
    def of(cls, recording_ids: list[int], descriptors: dict[int, RecordingDescriptor],
           is_sink: Callable[[RecordingDescriptor], bool], version: int) -> "_PositionsPlan":
        sinks: list[int] = []
        stopped: dict[int, int] = {}
        live: list[int] = []
        missing: list[int] = []
        for recording_id in recording_ids:
            descriptor = descriptors.get(recording_id)
            if descriptor is None:
                missing.append(recording_id)
            elif is_sink(descriptor):
                sinks.append(recording_id)
            elif descriptor.is_active:
                live.append(recording_id)
            else:
                stopped[recording_id] = descriptor.stop_position
        return cls(version, recording_ids, sinks, stopped, live, missing)
