"""Every archive-wide counter of a running archive, allocated in Aeron 1.51's order, closed together.

:meth:`ArchiveCounters.allocate` allocates, through the archive's Aeron client and as
``Archive.Context.conclude`` does: the error count (101), the conductor's max cycle time and
threshold-exceeded count (103, 104), in DEDICATED threading the recorder's and the replayer's
(103, 104 each), the control, recording and replay session counts (102, 111, 112) and the
recorder's and replayer's I/O counters (105-110). Labels and keys:
``aeron_spark.archive.codecs.archive_counters`` and ``archive_io_counters``.

Who writes what (each counter has one writer thread, so writes are plain stores):

* 101: the error handler (``error_log.MarkFileErrorLog``), for every error it records;
* 102 and the per-session 113: the conductor (``control_demuxer``), through
  :class:`ControlSessionCounters`, as sessions open and close;
* 111 / 112: the recorder / the replayer (``session_agent``): the sessions it holds;
* 103 / 104: each agent's ``do_work`` (``duty_cycle_tracker``);
* 105-110: the recorder and the replayer (``counters.IoCounters``).

Aeron refuses to start an archive when its driver already has an error counter for the same
archive id; here that is logged only (a SIGKILLed archive's counters outlive it on a shared
driver until the driver reclaims them, and a restart then must not fail).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from aeron_spark import __version__
from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.codecs import archive_counters as layout
from aeron_spark.archive.codecs.archive_io_counters import archive_id_key
from aeron_spark.archive.codecs.counter_layout import CounterAllocator, CounterLookup, WritableCounter
from aeron_spark.archive.service.connecting_sessions import PendingResource, Settled
from aeron_spark.archive.service.counters import IoCounters
from aeron_spark.archive.service.duty_cycle_tracker import DutyCycleStallTracker

log = logging.getLogger(__name__)

#: The commit in the error counter's version info: an installed package does not know its commit.
UNKNOWN_COMMIT = "unknown"


@dataclass(frozen=True, slots=True)
class CycleThresholds:
    """Aeron's aeron.archive.{conductor,recorder,replayer}.cycle.threshold, in ns."""

    conductor_ns: int = defaults.DEFAULT_CONDUCTOR_CYCLE_THRESHOLD_NS
    recorder_ns: int = defaults.DEFAULT_RECORDER_CYCLE_THRESHOLD_NS
    replayer_ns: int = defaults.DEFAULT_REPLAYER_CYCLE_THRESHOLD_NS

    def __post_init__(self) -> None:
        for name in ("conductor_ns", "recorder_ns", "replayer_ns"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name.removesuffix('_ns')} cycle threshold must be > 0 ns, "
                                 f"got {getattr(self, name)}")


class ControlSessionCounters:
    """The control-session count (102) and one counter per control session (113), on the conductor's
    thread. A 113 counter's value is its control session id and its reference id the session's
    response publication's registration id, as Aeron's ControlSession sets them.

    The 113 counter is asked of the driver without waiting when the allocator can
    (``async_add_counter``): the conductor never blocks on a driver round trip for a connect."""

    def __init__(self, allocator: CounterAllocator, archive_id: int, sessions_count: WritableCounter) -> None:
        self._allocator = allocator
        self.archive_id = archive_id
        self.sessions_count = sessions_count
        self._open = 0

    def session_opened(self) -> None:
        """Counts a new session (closed with :meth:`session_closed`)."""
        self._open += 1
        self._store()

    def request_counter(self, control_session_id: int, *, client_info: str, source_identity: str,
                        image_session_id: int) -> PendingResource[WritableCounter]:
        """Asks for the session's 113 counter; poll the answer, then :meth:`counter_added`."""
        args = (layout.ARCHIVE_CONTROL_SESSION_TYPE_ID,
                layout.control_session_key(self.archive_id, control_session_id),
                layout.control_session_label(self.archive_id, client_info, source_identity, image_session_id))
        # An allocator without the async add (a unit test's fake) allocates at once.
        async_add = getattr(self._allocator, "async_add_counter", None)
        if async_add is not None:
            pending: PendingResource[WritableCounter] = async_add(*args)
            return pending
        return Settled.of(lambda: self._allocator.add_counter(*args))

    @staticmethod
    def counter_added(counter: WritableCounter, control_session_id: int,
                      response_registration_id: int | None) -> None:
        """Stores the session id and its response publication's registration id in its counter."""
        counter.value = control_session_id
        set_reference_id = getattr(counter, "set_reference_id", None)
        if response_registration_id is not None and set_reference_id is not None:
            set_reference_id(response_registration_id)

    def session_closed(self, counter: WritableCounter | None) -> None:
        if counter is not None:
            counter.close()
        self._open = max(0, self._open - 1)
        self._store()

    def _store(self) -> None:
        try:
            self.sessions_count.value = self._open
        except Exception:  # noqa: BLE001 - closed at shutdown: the count no longer matters
            log.debug("control sessions counter not updated", exc_info=True)


@dataclass
class ArchiveCounters:
    """See the module docstring. ``recorder_cycle``/``replayer_cycle`` are None in SHARED threading."""

    archive_id: int
    threading_mode: str
    errors: WritableCounter
    conductor_cycle: DutyCycleStallTracker
    recorder_cycle: DutyCycleStallTracker | None
    replayer_cycle: DutyCycleStallTracker | None
    control_sessions: ControlSessionCounters
    recording_sessions: WritableCounter
    replay_sessions: WritableCounter
    recorder_io: IoCounters
    replayer_io: IoCounters
    _closed: bool = field(default=False, repr=False)

    @classmethod
    def allocate(cls, client: CounterAllocator, archive_id: int, *, threading_mode: str = "dedicated",
                 thresholds: CycleThresholds | None = None, version: str = __version__,
                 commit: str = UNKNOWN_COMMIT, counters_reader: CounterLookup | None = None) -> "ArchiveCounters":
        """Allocates every counter (Aeron's order); on a failure closes those allocated and raises."""
        mode = layout.threading_mode_name(threading_mode)  # ValueError naming the modes, before allocating
        thresholds = thresholds or CycleThresholds()
        if counters_reader is not None:
            _warn_on_existing_archive(counters_reader, archive_id)
        allocated: list[Callable[[], None]] = []  # closers, in allocation order

        def counter(type_id: int, label: str) -> WritableCounter:
            new = client.add_counter(type_id, archive_id_key(archive_id), label)
            allocated.append(new.close)
            return new

        def tracker(role: str, threshold_ns: int) -> DutyCycleStallTracker:
            return DutyCycleStallTracker(
                counter(layout.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID,
                        layout.max_cycle_time_label(role, mode, archive_id)),
                counter(layout.ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID,
                        layout.cycle_threshold_exceeded_label(role, threshold_ns, mode, archive_id)),
                threshold_ns)

        try:
            errors = counter(layout.ARCHIVE_ERROR_COUNT_TYPE_ID,
                             layout.error_counter_label(archive_id, version, commit))
            conductor_cycle = tracker("archive-conductor", thresholds.conductor_ns)
            recorder_cycle = replayer_cycle = None
            if mode == "DEDICATED":
                recorder_cycle = tracker("archive-recorder", thresholds.recorder_ns)
                replayer_cycle = tracker("archive-replayer", thresholds.replayer_ns)
            control_sessions = counter(layout.ARCHIVE_CONTROL_SESSIONS_TYPE_ID, layout.session_count_label(
                layout.ARCHIVE_CONTROL_SESSIONS_TYPE_ID, archive_id))
            recording_sessions = counter(layout.ARCHIVE_RECORDING_SESSION_COUNT_TYPE_ID, layout.session_count_label(
                layout.ARCHIVE_RECORDING_SESSION_COUNT_TYPE_ID, archive_id))
            replay_sessions = counter(layout.ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID, layout.session_count_label(
                layout.ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID, archive_id))
            recorder_io = IoCounters.allocate_recorder(client, archive_id)
            allocated.append(recorder_io.close)
            replayer_io = IoCounters.allocate_replayer(client, archive_id)
            allocated.append(replayer_io.close)
        except BaseException:
            for close in reversed(allocated):
                try:
                    close()
                except Exception:  # noqa: BLE001 - the allocation failure is what is raised
                    log.exception("closing a counter after a failed allocation failed")
            raise
        return cls(archive_id=archive_id, threading_mode=mode, errors=errors, conductor_cycle=conductor_cycle,
                   recorder_cycle=recorder_cycle, replayer_cycle=replayer_cycle,
                   control_sessions=ControlSessionCounters(client, archive_id, control_sessions),
                   recording_sessions=recording_sessions, replay_sessions=replay_sessions,
                   recorder_io=recorder_io, replayer_io=replayer_io)

    def close(self) -> None:
        """Closes every archive-wide counter (after the agents stopped); harmless when repeated."""
        if self._closed:
            return
        self._closed = True
        closers: list[Callable[[], None]] = [self.errors.close, self.conductor_cycle.close]
        closers += [tracker.close for tracker in (self.recorder_cycle, self.replayer_cycle) if tracker is not None]
        closers += [self.control_sessions.sessions_count.close, self.recording_sessions.close,
                    self.replay_sessions.close, self.recorder_io.close, self.replayer_io.close]
        for close in closers:
            try:
                close()
            except Exception:  # noqa: BLE001 - close the others anyway
                log.exception("closing an archive counter failed")


def _warn_on_existing_archive(reader: CounterLookup, archive_id: int) -> None:
    try:
        existing = layout.find_archive_wide_counters(reader, layout.ARCHIVE_ERROR_COUNT_TYPE_ID, archive_id)
    except Exception:  # noqa: BLE001 - a diagnostic only
        log.debug("could not look for another archive's counters", exc_info=True)
        return
    if existing:
        log.warning("the media driver already has an error counter (id %d) for archiveId=%d: another archive "
                    "with this id runs on it, or one that crashed has not been reclaimed yet; Aeron refuses to "
                    "start in this case", existing[0], archive_id)
