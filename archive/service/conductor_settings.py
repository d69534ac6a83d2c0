"""`ConductorSettings`: the archive options the conductor and its request handlers apply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class ConductorSettings:
    archive_dir: Path
    archive_id: int
    segment_file_length: int = 128 * 1024 * 1024
    file_sync: int = 0
    checksum: Any = None  # a checksum.FrameChecksum or None
    replay_buffer_length: int = 1024 * 1024
    max_concurrent_recordings: int = 20
    max_concurrent_replays: int = 20
    connect_timeout_ms: int = 5_000
    session_liveness_check_interval_ms: int = 1_000
    session_idle_timeout_ms: int = 0
    replay_linger_timeout_ns: int = 5_000_000_000
    replay_checksum: Any = None
