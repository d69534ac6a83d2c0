"""`ConductorSettings`: the archive's options as the conductor and its request handlers apply them.

Derived from `ArchiveServiceOptions` (the one declaration of each option and its default): it
holds those options and what the service resolves when it starts (the archive id, the checksums
by name turned into `FrameChecksum`s), and reads every other value from the options.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.service.service_options import ArchiveServiceOptions
from aeron_spark.archive.storage.checksum import FrameChecksum


@dataclass(frozen=True, slots=True)
class ConductorSettings:
    options: ArchiveServiceOptions
    archive_id: int  # resolved: the option, or the Aeron client id
    checksum: FrameChecksum | None = None  # ``options.checksum``: stamped into recorded frames (None: none)
    replay_checksum: FrameChecksum | None = None  # ``options.replay_checksum``: verified before replaying
    # Not options of the service: Aeron's fixed values (tests shorten them).
    session_liveness_check_interval_ms: int = defaults.DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_MS
    replay_linger_timeout_ns: int = defaults.DEFAULT_REPLAY_LINGER_TIMEOUT_NS

    @property
    def archive_dir(self) -> Path:
        return Path(self.options.archive_dir)

    @property
    def segment_file_length(self) -> int:
        return self.options.segment_file_length

    @property
    def file_sync(self) -> int:
        return self.options.file_sync

    @property
    def replay_buffer_length(self) -> int:
        return self.options.replay_buffer_length

    @property
    def max_concurrent_recordings(self) -> int:
        return self.options.max_concurrent_recordings

    @property
    def max_concurrent_replays(self) -> int:
        return self.options.max_concurrent_replays

    @property
    def connect_timeout_ms(self) -> int:
        return self.options.connect_timeout_ms

    @property
    def session_idle_timeout_ms(self) -> int:
        return self.options.session_idle_timeout_ms

    @property
    def replication_channel(self) -> str:
        return self.options.replication_channel

    @property
    def replication_response_channel(self) -> str:
        return self.options.replication_response_channel

    @property
    def low_storage_threshold(self) -> int:
        """Usable bytes at or below which recordings and extensions are refused."""
        return self.options.effective_low_storage_threshold
