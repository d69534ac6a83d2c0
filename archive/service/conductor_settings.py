"""`ConductorSettings`: the archive options the conductor and its request handlers apply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.storage.checksum import FrameChecksum


@dataclass(frozen=True, slots=True)
class ConductorSettings:
    archive_dir: Path
    archive_id: int
    segment_file_length: int = defaults.DEFAULT_SEGMENT_LENGTH
    file_sync: int = defaults.DEFAULT_FILE_SYNC
    checksum: FrameChecksum | None = None  # stamped into recorded frames (None: no checksum)
    replay_buffer_length: int = defaults.DEFAULT_REPLAY_BUFFER_LENGTH
    max_concurrent_recordings: int = defaults.DEFAULT_MAX_CONCURRENT_RECORDINGS
    max_concurrent_replays: int = defaults.DEFAULT_MAX_CONCURRENT_REPLAYS
    connect_timeout_ms: int = defaults.DEFAULT_CONNECT_TIMEOUT_MS
    session_liveness_check_interval_ms: int = defaults.DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_MS
    session_idle_timeout_ms: int = defaults.DEFAULT_SESSION_IDLE_TIMEOUT_MS
    replay_linger_timeout_ns: int = defaults.DEFAULT_REPLAY_LINGER_TIMEOUT_NS
    replay_checksum: FrameChecksum | None = None  # verified before replaying (None: off)
    replication_channel: str = defaults.DEFAULT_REPLICATION_CHANNEL
    replication_response_channel: str = defaults.DEFAULT_REPLICATION_RESPONSE_CHANNEL
    #: Usable bytes at or below which recordings and extensions are refused (None: segment_file_length).
    low_storage_threshold: int | None = defaults.DEFAULT_LOW_STORAGE_THRESHOLD
