"""`ArchiveServiceOptions`: every option of one archive (``ArchiveService``), each declared once
here with its default from `archive.configuration`. The conductor applies them through
`conductor_settings.ConductorSettings`, which is derived from these.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.service.agent_runner import threading_mode_name
from aeron_spark.archive.service.authenticator import Authenticator


@dataclass(frozen=True)
class ArchiveServiceOptions:
    archive_dir: Path
    aeron_dir: str | None = None  # None: start an embedded media driver
    control_channel: str | None = defaults.DEFAULT_CONTROL_CHANNEL  # None: local IPC control only
    control_stream_id: int = defaults.DEFAULT_CONTROL_STREAM_ID
    local_control_channel: str = defaults.DEFAULT_LOCAL_CONTROL_CHANNEL
    local_control_stream_id: int = defaults.DEFAULT_LOCAL_CONTROL_STREAM_ID
    recording_events_channel: str | None = None  # None: no recording events
    recording_events_stream_id: int = defaults.DEFAULT_RECORDING_EVENTS_STREAM_ID
    archive_id: int | None = None  # None: the Aeron client id
    segment_file_length: int = defaults.DEFAULT_SEGMENT_LENGTH
    file_sync: int = defaults.DEFAULT_FILE_SYNC
    catalog_file_sync: int = defaults.DEFAULT_CATALOG_FILE_SYNC
    # O_DIRECT segment writes (where the file system allows): for write-heavy archives
    segment_direct_io: bool = defaults.DEFAULT_SEGMENT_DIRECT_IO
    checksum: str | None = None  # None or a checksum name accepted by storage.checksum
    replay_checksum: str | None = None  # verify stored checksums before replaying (None: off)
    replay_buffer_length: int = defaults.DEFAULT_REPLAY_BUFFER_LENGTH
    max_concurrent_recordings: int = defaults.DEFAULT_MAX_CONCURRENT_RECORDINGS
    max_concurrent_replays: int = defaults.DEFAULT_MAX_CONCURRENT_REPLAYS
    connect_timeout_ms: int = defaults.DEFAULT_CONNECT_TIMEOUT_MS
    session_idle_timeout_ms: int = defaults.DEFAULT_SESSION_IDLE_TIMEOUT_MS
    #: Where a source archive replays to when a replicate request names no replication channel, and
    #: where it answers this archive's control requests (a remote source must reach this host there).
    replication_channel: str = defaults.DEFAULT_REPLICATION_CHANNEL
    replication_response_channel: str = defaults.DEFAULT_REPLICATION_RESPONSE_CHANNEL
    authenticator: Authenticator | None = None
    driver_dir: str | None = None  # embedded driver directory (default: a fresh unique one)
    driver_term_buffer_length: int | None = None
    # Idle strategies by name (agent_runner.IDLE_STRATEGIES): Java's aeron.archive.idle.strategy,
    # and its recorder/replayer overrides (None: the general one).
    idle_strategy: str = defaults.DEFAULT_IDLE_STRATEGY
    recorder_idle_strategy: str | None = None
    replayer_idle_strategy: str | None = None
    #: dedicated (a thread per agent) or shared (one thread for the three; the recorder and replayer
    #: idle strategies then do not apply, as in Aeron): agent_runner.threading_mode_name.
    threading_mode: str = defaults.DEFAULT_THREADING_MODE
    #: Usable bytes at or below which StartRecording/ExtendRecording are refused with STORAGE_SPACE
    #: (None: the segment file length; see configuration.DEFAULT_LOW_STORAGE_THRESHOLD).
    low_storage_threshold: int | None = defaults.DEFAULT_LOW_STORAGE_THRESHOLD
    # Duty cycles longer than these are counted (counters 104): Java's aeron.archive.*.cycle.threshold.
    conductor_cycle_threshold_ns: int = defaults.DEFAULT_CONDUCTOR_CYCLE_THRESHOLD_NS
    recorder_cycle_threshold_ns: int = defaults.DEFAULT_RECORDER_CYCLE_THRESHOLD_NS
    replayer_cycle_threshold_ns: int = defaults.DEFAULT_REPLAYER_CYCLE_THRESHOLD_NS

    def __post_init__(self) -> None:
        object.__setattr__(self, "threading_mode", threading_mode_name(self.threading_mode))
        if self.low_storage_threshold is not None and self.low_storage_threshold < 0:
            raise ValueError(f"low_storage_threshold must be >= 0 bytes, got {self.low_storage_threshold}")

    @property
    def effective_low_storage_threshold(self) -> int:
        return self.segment_file_length if self.low_storage_threshold is None else self.low_storage_threshold

    def with_changes(self, **changes: Any) -> "ArchiveServiceOptions":
        return dataclasses.replace(self, **changes)
