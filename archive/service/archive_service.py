"""The archive sidecar's wiring: directory, media driver, Aeron client, agents, shutdown.

`ArchiveService.start()`:

1. creates the archive directory if needed and starts an embedded C media driver (or attaches
   to the one at ``aeron_dir``);
2. claims the directory with the mark file (`ArchiveMarkFile.create`: fails fast if another
   archive is live there) - before anything reads or writes the catalog;
3. opens the catalog (creating it) with `archive_opening.open_archive_directory`, which recovers
   every recording left active by a crash (the stop position is re-derived from the last
   segment file, stale bytes after it are zeroed, the catalog gets the stop position and
   timestamp) and repairs maintenance a crash interrupted;
4. connects an Aeron client and starts the agents on their threads: the conductor, the
   recorder and the replayer, one `AgentRunner` each (``threading_mode`` dedicated) or one for
   the three (shared). Every error their duty cycles catch is
   logged and also recorded in the mark file's error log (`error_log.MarkFileErrorLog`).
   Before them it allocates the archive's counters (`archive_counters.ArchiveCounters`: errors,
   session counts, duty-cycle times, I/O), which are closed after the agents have stopped.

`ArchiveService.close()` (also on SIGTERM/SIGINT via the serve command): the conductor stops
every recording; the service waits until the recorder has written their last blocks and the
conductor has stored their stop positions; then the agents stop, the catalog is synced and
closed, the Aeron client and the embedded driver are closed, and the mark file is marked
terminated (activity timestamp -1).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from aeron_spark.archive.configuration import SHUTDOWN_RECORDINGS_TIMEOUT_S
from aeron_spark.archive.service.agent_runner import AgentRunner, new_idle_strategy
from aeron_spark.archive.service.service_options import ArchiveServiceOptions
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.service.conductor import ArchiveConductor, ConductorSettings
from aeron_spark.archive.service.error_log import MarkFileErrorLog
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile
from aeron_spark.archive.service.recorder import Recorder
from aeron_spark.archive.service.replayer import Replayer
from aeron_spark.archive.storage import recovery
from aeron_spark.archive.storage.archive_opening import open_archive_directory
from aeron_spark.archive.storage.checksum import FrameChecksum, checksum_from_name

if TYPE_CHECKING:  # imported where they start: the service module loads without the driver
    from aeron_spark.archive.service.archive_counters import ArchiveCounters
    from aeron_spark.driver_integration.client import AeronClient
    from aeron_spark.driver_integration.media_driver import MediaDriver

log = logging.getLogger(__name__)


class ArchiveService:
    """One running archive. Use `start()` then `close()` (or as a context manager)."""

    def __init__(self, options: ArchiveServiceOptions) -> None:
        self.options = options
        self.driver: MediaDriver | None = None
        self.aeron: AeronClient | None = None
        self.mark_file: ArchiveMarkFile | None = None
        self.error_log: MarkFileErrorLog | None = None
        self.counters: ArchiveCounters | None = None
        self.catalog: Catalog | None = None
        self.conductor: ArchiveConductor | None = None
        self.recorder: Recorder | None = None
        self.replayer: Replayer | None = None
        self.archive_id: int | None = None
        self.recovered: list[recovery.RecoveryReport] = []
        self._runners: list[AgentRunner] = []
        self._stop_requested = threading.Event()
        self._closed = False

    # ------------------------------------------------------------------ start

    @property
    def aeron_dir(self) -> str | None:
        """The media driver's directory (None before an embedded driver has started)."""
        return self.options.aeron_dir if self.driver is None else str(self.driver.dir)

    def start(self) -> "ArchiveService":
        try:
            self._start()
        except BaseException:
            self._release(clean=True)
            raise
        return self

    def _start(self) -> None:
        from aeron_spark.driver_integration.client import AeronClient
        from aeron_spark.driver_integration.media_driver import MediaDriver, MediaDriverOptions

        o = self.options
        directory = Path(o.archive_dir)
        directory.mkdir(parents=True, exist_ok=True)
        if o.aeron_dir is None:
            driver_options = MediaDriverOptions(dir=o.driver_dir)
            if o.driver_term_buffer_length is not None:
                driver_options = driver_options.with_overrides(term_buffer_length=o.driver_term_buffer_length)
            driver = self.driver = MediaDriver(driver_options)
            log.info("embedded media driver started in %s", driver.dir)
            aeron_dir = str(driver.dir)
        else:
            aeron_dir = o.aeron_dir
        aeron = self.aeron = AeronClient(aeron_dir)
        self.archive_id = o.archive_id if o.archive_id is not None else aeron.client_id
        self.mark_file = ArchiveMarkFile.create(
            directory, archive_id=self.archive_id,
            control_channel=o.control_channel or "", control_stream_id=o.control_stream_id,
            local_control_channel=o.local_control_channel,
            local_control_stream_id=o.local_control_stream_id,
            events_channel=o.recording_events_channel or "",
            events_stream_id=o.recording_events_stream_id, aeron_directory=aeron_dir,
            threading_mode=o.threading_mode)
        self.error_log = errors = MarkFileErrorLog(self.mark_file)
        checksum = _checksum(o.checksum)
        # The recording requests create the writers with the process default (one archive per process).
        from aeron_spark.archive.storage.segment import set_default_direct_io
        set_default_direct_io(o.segment_direct_io)
        self.catalog, opened = open_archive_directory(directory, file_sync=o.file_sync,
                                                      catalog_file_sync=o.catalog_file_sync, checksum=checksum)
        self.recovered = list(opened.recovered)
        counters_reader = aeron.counters_reader
        counters = self.counters = _archive_counters(aeron, self.archive_id, o)
        errors.error_counter = counters.errors if counters is not None else None
        self.recorder = Recorder(
            counters.recorder_io if counters is not None else None, error_handler=errors,
            session_count=counters.recording_sessions if counters is not None else None,
            cycle_tracker=counters.recorder_cycle if counters is not None else None)
        self.replayer = Replayer(
            counters.replayer_io if counters is not None else None, error_handler=errors,
            session_count=counters.replay_sessions if counters is not None else None,
            cycle_tracker=counters.replayer_cycle if counters is not None else None)
        control_channels = []
        if o.control_channel:
            control_channels.append((o.control_channel, o.control_stream_id))
        control_channels.append((o.local_control_channel, o.local_control_stream_id))
        events = None
        if o.recording_events_channel:
            events = (o.recording_events_channel, o.recording_events_stream_id)
        settings = ConductorSettings(o, self.archive_id, checksum=checksum, replay_checksum=_checksum(o.replay_checksum))
        self.conductor = ArchiveConductor(
            aeron=aeron, catalog=self.catalog, settings=settings, recorder=self.recorder,
            replayer=self.replayer, control_channels=control_channels,
            authenticator=o.authenticator, recording_events=events, mark_file=self.mark_file,
            counters_reader=counters_reader, error_handler=errors,
            cycle_tracker=counters.conductor_cycle if counters is not None else None,
            control_session_counters=counters.control_sessions if counters is not None else None)
        self._start_agents([self.conductor, self.recorder, self.replayer])

    def _start_agents(self, agents: list[ArchiveConductor | Recorder | Replayer]) -> None:
        """One `AgentRunner` thread per agent named by its role (Aeron's DEDICATED threading), or
        one ``archive-shared`` thread running the three with the conductor's idle strategy (SHARED);
        an error a duty cycle raises is logged, counted and recorded in the mark file."""
        o = self.options
        if o.threading_mode == "shared":
            if o.recorder_idle_strategy or o.replayer_idle_strategy:
                log.warning("threading mode shared: the recorder and replayer idle strategies (%s, %s) do not "
                            "apply; the one thread idles with %s", o.recorder_idle_strategy,
                            o.replayer_idle_strategy, o.idle_strategy)
            self._runners.append(AgentRunner(agents, name="archive-shared", idle_strategy=new_idle_strategy(
                o.idle_strategy), error_handler=self.error_log).start())
            return
        strategies = {"archive-recorder": o.recorder_idle_strategy, "archive-replayer": o.replayer_idle_strategy}
        for agent in agents:
            idle = new_idle_strategy(strategies.get(agent.role_name) or o.idle_strategy)
            self._runners.append(AgentRunner([agent], name=agent.role_name, idle_strategy=idle,
                                             error_handler=self.error_log).start())

    # ------------------------------------------------------------------ stop

    def close(self) -> None:
        """Stops recordings (stop positions stored), agents, catalog, client, driver; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.conductor is not None and self._runners:
            self._stop_recordings()
        for runner in self._runners:
            try:
                runner.close()
            except Exception:  # noqa: BLE001
                log.exception("stopping agent runner %s failed", runner.name)
        self._runners = []
        self._release(clean=True)

    def _stop_recordings(self) -> None:
        conductor, recorder = self.conductor, self.recorder
        if conductor is None or recorder is None:  # the agents never started: nothing records
            return
        conductor.request_stop_all_recordings()
        deadline = time.monotonic() + SHUTDOWN_RECORDINGS_TIMEOUT_S
        while time.monotonic() < deadline:
            if conductor.all_recordings_stopped and recorder.session_count == 0:
                return
            time.sleep(0.005)
        log.error("recordings %s did not stop within %.0f s; their stop positions will be "
                  "recovered on the next start", conductor.active_recording_ids,
                  SHUTDOWN_RECORDINGS_TIMEOUT_S)

    def _release(self, *, clean: bool) -> None:
        if self.counters is not None:
            self.counters.close()  # the agents have stopped (or never started): nothing writes them
        if self.catalog is not None:
            try:
                _sync_file(self.catalog.path)  # stop positions on disk whatever the sync level
                self.catalog.close()
            except Exception:  # noqa: BLE001
                log.exception("closing the catalog failed")
        for name in ("aeron", "driver"):
            resource = getattr(self, name)
            if resource is not None:
                try:
                    resource.close()
                except Exception:  # noqa: BLE001
                    log.exception("closing the %s failed", name)
        if self.mark_file is not None:
            self.mark_file.close(clean=clean)

    def __enter__(self) -> "ArchiveService":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _archive_counters(aeron: AeronClient, archive_id: int, o: ArchiveServiceOptions) -> ArchiveCounters | None:
    from aeron_spark.archive.service.archive_counters import ArchiveCounters, CycleThresholds

    thresholds = CycleThresholds(conductor_ns=o.conductor_cycle_threshold_ns,
                                 recorder_ns=o.recorder_cycle_threshold_ns,
                                 replayer_ns=o.replayer_cycle_threshold_ns)  # a bad value raises: start fails
    try:
        # The threading mode (Aeron's: DEDICATED allocates the recorder's and replayer's cycle counters
        # too; in SHARED the conductor's cycle is the one thread's whole cycle: it runs first).
        return ArchiveCounters.allocate(aeron, archive_id, threading_mode=o.threading_mode,
                                        thresholds=thresholds, counters_reader=aeron.counters_reader)
    except Exception:  # noqa: BLE001 - counters are diagnostics; the archive runs without them
        log.exception("allocating the archive counters failed")
        return None


def _checksum(name: str | None) -> FrameChecksum | None:
    return None if name is None else checksum_from_name(name)


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
