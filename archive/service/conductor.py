"""`ArchiveConductor`: the archive's control plane agent (Aeron's ArchiveConductor).

The conductor owns the parts of the control plane and runs their duty cycle on its thread
(`do_work`, the conductor thread only):

1. drains the events other threads queued (`conductor_events`): images that became available or
   unavailable on the control and recording subscriptions (Aeron client thread), recordings that
   started, progressed or stopped (recorder thread), replays that became ready or ended (replayer
   thread), the shutdown's stop-all-recordings - those threads only enqueue; each event is
   dispatched by its type;
2. polls the control subscriptions and dispatches every request (`control_demuxer`) to its
   handler: recordings (`recording_requests`), replays (`replay_requests`), maintenance
   (`maintenance_requests`), listings (`listing_sessions`) and read-only queries
   (`recording_queries`);
3. advances every control session (handshake, pings, timeouts, listings in progress, responses
   out) and closes finished sessions (`control_demuxer`);
4. offers the coalesced RecordingProgress events (`recording_events_publisher`);
5. updates the mark file's activity timestamp every second.

Replication into this archive (50, 62, 66 and StopReplication 51) is served by
`replication_requests`; its sessions advance in step 3 as well. UpdateChannel (107) is served by
`maintenance_requests` (the catalog entry rewritten by `Catalog.replace_channels`). ReplayToken
(105) is served by the control demuxer (replays over response channels), which also keeps the
control-session counters (102 and one 113 per session, `archive_counters.ControlSessionCounters`).
Each ``do_work`` starts by measuring the previous duty cycle (``cycle_tracker``, Aeron's conductor
max cycle time and threshold-exceeded counters 103/104; in SHARED threading that cycle covers the
recorder and the replayer too). See docs/protocol.md for the requests and docs/architecture.md for
the threads.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from typing import Any

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import BooleanType
from aeron_spark.archive.service.archive_counters import ControlSessionCounters
from aeron_spark.archive.service.authenticator import AcceptAllAuthenticator, Authenticator
from aeron_spark.archive.service.conductor_events import (
    STOP_ALL_RECORDINGS,
    ConductorEvent,
    ControlImageUnavailable,
    RecordingImageAvailable,
    RecordingSessionProgressed,
    RecordingSessionStarted,
    RecordingSessionStopped,
    ReplaySessionEnded,
    ReplaySessionReady,
    StopAllRecordings,
)
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.control_demuxer import ControlDemuxer, RequestHandler
from aeron_spark.archive.service.control_session import ControlSession
from aeron_spark.archive.service.duty_cycle_tracker import CycleTracker
from aeron_spark.archive.service.limit_counter import CountersView
from aeron_spark.archive.service.listing_sessions import ListingRequests
from aeron_spark.archive.service.maintenance_requests import MaintenanceRequests
from aeron_spark.archive.service.recording_events_publisher import RecordingEventsPublisher
from aeron_spark.archive.service.recording_queries import RecordingQueries
from aeron_spark.archive.service.recording_requests import RecordingRequests
from aeron_spark.archive.service.recording_session import RecordingSession
from aeron_spark.archive.service.replay_requests import ReplayAeronPort, ReplayRequests
from aeron_spark.archive.service.replay_session import ReplaySession
from aeron_spark.archive.service.replication_requests import ReplicationRequests
from aeron_spark.archive.service.request_ports import RecorderPort, ReplayerPort
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile

__all__ = ["ArchiveConductor", "ConductorSettings"]

log = logging.getLogger(__name__)

MARK_FILE_UPDATE_INTERVAL_MS = 1_000


class ArchiveConductor:
    """See the module docstring. Construct, then call `do_work` from one thread; `on_close` last.

    It is the recorder's `RecordingListener` and the replayer's `ReplayListener`: those
    callbacks, on the recorder's and the replayer's threads, only enqueue.
    """

    role_name = "archive-conductor"

    def __init__(self, *, aeron: ReplayAeronPort, catalog: Catalog, settings: ConductorSettings,
                 recorder: RecorderPort, replayer: ReplayerPort | None = None,
                 control_channels: list[tuple[str, int]],
                 authenticator: Authenticator | None = None,
                 recording_events: tuple[str, int] | None = None,
                 mark_file: ArchiveMarkFile | None = None, epoch_clock: Callable[[], int] | None = None,
                 counters_reader: CountersView | None = None,
                 error_handler: Callable[[BaseException], None] | None = None,
                 cycle_tracker: CycleTracker | None = None,
                 control_session_counters: ControlSessionCounters | None = None) -> None:
        self.aeron = aeron
        self.cycle_tracker = cycle_tracker
        self.catalog = catalog
        self.settings = settings
        self.recorder = recorder
        self.replayer = replayer
        self.authenticator = authenticator or AcceptAllAuthenticator()
        self.mark_file = mark_file
        self.counters_reader = counters_reader
        self.error_handler = error_handler
        self._clock = epoch_clock or (lambda: time.time_ns() // 1_000_000)
        self._events: collections.deque[ConductorEvent] = collections.deque()  # thread-safe appends
        self._mark_deadline_ms = 0
        self._closed = False
        enqueue = self._events.append
        self.events = RecordingEventsPublisher(
            aeron.add_exclusive_publication(*recording_events) if recording_events is not None else None)
        self.recordings = RecordingRequests(aeron=aeron, catalog=catalog, settings=settings,
                                            recorder=recorder, listener=self, enqueue=enqueue,
                                            events=self.events)
        self.recordings.report_failure = self._replay_failed  # a refused recording subscription, the same way
        self.replays = ReplayRequests(aeron=aeron, catalog=catalog, settings=settings,
                                      replayer=replayer, recordings=self.recordings,
                                      counters_reader=counters_reader, listener=self,
                                      report_failure=self._replay_failed)
        self.maintenance = MaintenanceRequests(catalog=catalog, settings=settings,
                                               recordings=self.recordings, replays=self.replays)
        self.listings = ListingRequests(catalog=catalog, recordings=self.recordings)
        self.queries = RecordingQueries(catalog=catalog, archive_id=settings.archive_id,
                                        recordings=self.recordings)
        self.replications = ReplicationRequests(aeron=aeron, catalog=catalog, settings=settings,
                                                recordings=self.recordings,
                                                next_replication_id=lambda: self.demuxer.allocate_session_id(),
                                                clock=self._clock)
        self.demuxer = ControlDemuxer(aeron=aeron, settings=settings, authenticator=self.authenticator,
                                      control_channels=control_channels,
                                      handlers=self._request_handlers(), enqueue=enqueue,
                                      clock=self._clock, error_handler=error_handler,
                                      session_counters=control_session_counters)
        self._event_handlers: dict[type, Callable[[Any], None]] = {
            ControlImageUnavailable: lambda e: self.demuxer.on_request_image_unavailable(e.image_key),
            RecordingImageAvailable: lambda e: self.recordings.on_image(e.subscription_id["id"], e.image),
            RecordingSessionStarted: lambda e: self.recordings.on_recording_started(e.session),
            RecordingSessionProgressed: lambda e: self.events.recording_progressed(
                e.recording_id, e.start_position, e.position),
            RecordingSessionStopped: lambda e: self.recordings.on_recording_stopped(e.session),
            ReplaySessionReady: lambda e: self.replays.on_replay_ready(e.replay),
            ReplaySessionEnded: lambda e: self.replays.on_replay_ended(e.replay),
            StopAllRecordings: lambda e: self.stop_all_recordings(),
        }

    # ------------------------------------------------------------------ listeners (any thread)

    # RecordingListener (recorder thread: enqueue only)
    def on_recording_started(self, session: RecordingSession) -> None:
        self._events.append(RecordingSessionStarted(session))

    def on_recording_progress(self, session: RecordingSession, position: int) -> bool:
        self._events.append(RecordingSessionProgressed(session.recording_id, session.join_position, position))
        return True

    def on_recording_stopped(self, session: RecordingSession) -> None:
        self._events.append(RecordingSessionStopped(session))

    # ReplayListener (replayer thread: enqueue only)
    def on_replay_ready(self, replay: ReplaySession) -> None:
        self._events.append(ReplaySessionReady(replay))

    def on_replay_ended(self, replay: ReplaySession) -> None:
        self._events.append(ReplaySessionEnded(replay))

    # ------------------------------------------------------------------ duty cycle

    def do_work(self) -> int:
        # Each step is guarded on its own: a failure in one (already contained per session and per
        # event inside) must not skip the later ones, above all the mark file's activity update,
        # without which the archive looks dead to clients that find it by its directory.
        if self.cycle_tracker is not None:
            self.cycle_tracker.measure_and_update(time.monotonic_ns())
        # Subscriptions the driver added are answered (OK) before their Images' events (START).
        work = self._step(self.recordings.poll_pending)
        work += self._step(self._drain_events)
        work += self._step(self.demuxer.poll)
        work += self._step(self.replays.poll_pending)  # replay publications the driver has added
        now = self._clock()
        work += self._step(lambda: self.demuxer.service_sessions(now))
        work += self._step(self.replications.do_work)
        work += self._step(self.events.flush_progress_events)
        mark_file = self.mark_file
        if mark_file is not None and now >= self._mark_deadline_ms:
            self._mark_deadline_ms = now + MARK_FILE_UPDATE_INTERVAL_MS
            work += self._step(lambda: _update_activity(mark_file, now))
        return work

    def _step(self, step: Callable[[], int]) -> int:
        try:
            return step()
        except Exception as error:  # noqa: BLE001 - see do_work
            self.demuxer.count_error(error)
            self.demuxer.failures.failed(("conductor step", type(error).__name__),
                                         "archive conductor: duty cycle step failed: %s: %s",
                                         type(error).__name__, error, exc_info=True)
            return 1

    def _replay_failed(self, request_name: str, correlation_id: int, error: Exception, text: str) -> None:
        """A replay or recording request that failed after its handler returned (its publication or
        subscription refused by the driver): counted and logged as the demuxer does a failed request."""
        self.demuxer.count_error(error)
        self.demuxer.failures.failed((request_name, type(error).__name__),
                                     "%s (correlationId=%d) failed: %s", request_name, correlation_id, text)

    def _drain_events(self) -> int:
        work = 0
        events = self._events
        handlers = self._event_handlers
        while events:
            event = events.popleft()
            try:
                handlers[type(event)](event)
            except Exception as error:  # noqa: BLE001 - one bad event must not stop the conductor
                self.demuxer.count_error(error)
                self.demuxer.failures.failed(("event", type(event).__name__, type(error).__name__),
                                             "archive conductor: handling %s failed: %s: %s",
                                             type(event).__name__, type(error).__name__, error,
                                             exc_info=True)
            work += 1
        return work

    def on_control_message(self, data: bytes, image_key: object) -> None:
        """One request as received on a control Image (``image_key`` names that Image)."""
        self.demuxer.on_control_message(data, image_key)

    @property
    def sessions(self) -> dict[int, ControlSession]:
        return self.demuxer.sessions

    # ------------------------------------------------------------------ request dispatch table

    def _request_handlers(self) -> dict[type, RequestHandler]:
        c = codecs
        recordings, replays, maintenance = self.recordings, self.replays, self.maintenance
        listings, queries = self.listings, self.queries
        return {
            c.ArchiveIdRequest: queries.archive_id_request,
            c.StartRecordingRequest: lambda s, m: recordings.start_recording(s, m, auto_stop=False),
            c.StartRecordingRequest2: lambda s, m: recordings.start_recording(
                s, m, auto_stop=m.auto_stop == BooleanType.TRUE),
            c.StopRecordingRequest: recordings.stop_recording,
            c.StopRecordingSubscriptionRequest: recordings.stop_recording_subscription,
            c.StopRecordingByIdentityRequest: recordings.stop_recording_by_identity,
            c.ExtendRecordingRequest: lambda s, m: recordings.extend_recording(s, m, auto_stop=False),
            c.ExtendRecordingRequest2: lambda s, m: recordings.extend_recording(
                s, m, auto_stop=m.auto_stop == BooleanType.TRUE),
            c.ReplayRequest: replays.replay,
            c.BoundedReplayRequest: replays.replay,
            c.StopReplayRequest: replays.stop_replay,
            c.StopAllReplaysRequest: replays.stop_all_replays,
            c.ListRecordingsRequest: listings.list_recordings,
            c.ListRecordingsForUriRequest: listings.list_recordings_for_uri,
            c.ListRecordingRequest: listings.list_recording,
            c.RecordingPositionRequest: queries.recording_position,
            c.StopPositionRequest: queries.stop_position,
            c.StartPositionRequest: queries.start_position,
            c.MaxRecordedPositionRequest: queries.max_recorded_position,
            c.FindLastMatchingRecordingRequest: queries.find_last_matching_recording,
            c.ListRecordingSubscriptionsRequest: listings.list_recording_subscriptions,
            c.TruncateRecordingRequest: maintenance.truncate_recording,
            c.PurgeRecordingRequest: maintenance.purge_recording,
            c.DetachSegmentsRequest: maintenance.detach_segments,
            c.DeleteDetachedSegmentsRequest: maintenance.delete_detached_segments,
            c.PurgeSegmentsRequest: maintenance.purge_segments,
            c.AttachSegmentsRequest: maintenance.attach_segments,
            c.MigrateSegmentsRequest: maintenance.migrate_segments,
            c.ReplicateRequest: self.replications.replicate,
            c.TaggedReplicateRequest: self.replications.replicate,
            c.ReplicateRequest2: self.replications.replicate,
            c.StopReplicationRequest: self.replications.stop_replication,
            c.ReplayTokenRequest: lambda s, m: self.demuxer.issue_replay_token(s, m),
            c.UpdateChannelRequest: maintenance.update_channel,
        }

    # ------------------------------------------------------------------ shutdown

    @property
    def active_recording_ids(self) -> list[int]:
        return self.recordings.active_recording_ids

    def request_stop_all_recordings(self) -> None:
        """Thread-safe: the next duty cycle stops every recording (archive shutdown)."""
        self._events.append(STOP_ALL_RECORDINGS)

    @property
    def all_recordings_stopped(self) -> bool:
        """No recording left whose stop position is still to be stored (any thread)."""
        return not self.recordings.has_active_recordings and not any(
            type(e) is StopAllRecordings for e in list(self._events))

    def stop_all_recordings(self) -> None:
        """Asks the recorder to stop everything; `do_work` then records the stop positions."""
        self.recordings.stop_all_recordings()

    def _close_replications(self) -> int:
        self.replications.close()
        return 1

    def on_close(self) -> None:
        """Closes sessions, subscriptions and publications (call after the recorder stopped)."""
        if self._closed:
            return
        self._closed = True
        self._drain_events()
        self._step(self._close_replications)
        self.demuxer.close_sessions("archive shutting down")
        self.recordings.close()
        self.demuxer.close_subscriptions()
        self.events.close()


def _update_activity(mark_file: ArchiveMarkFile, now_ms: int) -> int:
    mark_file.update_activity(now_ms)
    return 1  # counts as work

