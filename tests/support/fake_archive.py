"""An in-memory archive implementing connector.source.archive_access.ArchiveAccess for unit tests.

Recordings are SyntheticLogs. Like the real archive, a replay must start on a frame of the
recording, inside [start, stop), and it delivers whole frames in blocks (sizes chosen by the
test, like Image.blockPoll limits), never past the bounded end. ``replay_pump`` hands the same
blocks out through the real ``ReplayPump`` (over a ``FakeImage``), as production reads them.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor
from aeron_spark.connector.options import ReplaySettings
from aeron_spark.connector.replay_pump import ReplayPump
from aeron_spark.connector.source.archive_access import ArchiveAccess

from tests.support.fake_image import pump_of
from tests.support.synthetic_log import SyntheticLog, blocks


@dataclass
class FakeRecording:
    recording_id: int
    log: SyntheticLog
    channel: str
    active: bool = True
    recorded_to: int | None = None  # live/stop position; None = everything in the log
    start_position: int | None = None  # moved forward by purge/detach
    start_timestamp: int = 1  # epoch ms, as the archive's descriptor has them
    stop_timestamp: int = 2

    @property
    def position(self) -> int:
        return self.log.position if self.recorded_to is None else self.recorded_to

    def descriptor(self) -> RecordingDescriptor:
        log = self.log
        return RecordingDescriptor(
            recording_id=self.recording_id, start_timestamp=self.start_timestamp,
            stop_timestamp=NULL_POSITION if self.active else self.stop_timestamp,
            start_position=self.start_position if self.start_position is not None else log.start_position,
            stop_position=NULL_POSITION if self.active else self.position,
            initial_term_id=log.initial_term_id, segment_file_length=max(log.term_length, 1 << 20),
            term_buffer_length=log.term_length, mtu_length=log.mtu, session_id=log.session_id,
            stream_id=log.stream_id, stripped_channel=self.channel, original_channel=self.channel,
            source_identity="fake")


@dataclass
class FakeArchive:
    archive_id: int = 42
    recordings: dict[int, FakeRecording] = field(default_factory=dict)
    max_block: int = 4096
    block_jitter: random.Random | None = None
    calls: dict[str, int] = field(default_factory=dict)
    replays: list[tuple[int, int, int]] = field(default_factory=list)
    closed: bool = False
    pump_idle_polls: int = 0  # empty polls of the replay image before each block (ReplayPump waits them out)

    def add(self, recording_id: int, log: SyntheticLog, channel: str = "aeron:udp?endpoint=localhost:40123",
            active: bool = True) -> FakeRecording:
        recording = FakeRecording(recording_id, log, channel, active)
        self.recordings[recording_id] = recording
        return recording

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        self._count("describe")
        recording = self.recordings.get(recording_id)
        return None if recording is None else recording.descriptor()

    def list_matching(self, channel_fragment: str, stream_id: int, from_recording_id: int) -> list[RecordingDescriptor]:
        self._count("list_matching")
        return [r.descriptor() for rid, r in sorted(self.recordings.items())
                if rid >= from_recording_id and r.log.stream_id == stream_id and channel_fragment in r.channel]

    def list_matching_since(self, channel_fragment: str, stream_id: int,
                            from_recording_id: int) -> tuple[list[RecordingDescriptor], int]:
        """The matches, and where the next listing starts: here just past the last match (a
        fake archive's scan end says no more)."""
        found = self.list_matching(channel_fragment, stream_id, from_recording_id)
        return found, max([from_recording_id, *(d.recording_id + 1 for d in found)])

    def has_recording_from(self, from_recording_id: int) -> bool:
        self._count("has_recording_from")
        return any(recording_id >= from_recording_id for recording_id in self.recordings)

    def list_from(self, from_recording_id: int) -> list[RecordingDescriptor]:
        self._count("list_from")
        return [r.descriptor() for rid, r in sorted(self.recordings.items()) if rid >= from_recording_id]

    def live_position(self, recording_id: int) -> int | None:
        self._count("live_position")
        recording = self.recordings.get(recording_id)
        if recording is None or not recording.active:
            return None
        return recording.position

    def live_positions(self, recording_ids: list[int]) -> dict[int, int | None]:
        return {recording_id: self.live_position(recording_id) for recording_id in recording_ids}

    @contextlib.contextmanager
    def replay(self, recording_id: int, start: int, end: int,
               settings: ReplaySettings) -> Iterator[Iterator[tuple[int, bytes]]]:
        self._count("replay")
        recording = self.recordings.get(recording_id)
        if recording is None:
            raise RuntimeError(f"UNKNOWN_RECORDING {recording_id}")
        descriptor = recording.descriptor()
        boundaries = recording.log.frame_boundaries()
        if start not in boundaries or start < descriptor.start_position:
            raise RuntimeError(f"INVALID_POSITION {start} not aligned to a data header")
        if end > recording.position or end not in boundaries:
            raise RuntimeError(f"INVALID_POSITION bounded end {end}")
        self.replays.append((recording_id, start, end))
        data = recording.log.bytes_between(start, end)
        max_block = self.max_block
        if self.block_jitter is not None:
            max_block = self.block_jitter.choice([64, 100, 512, 1500, 4096, 70_000])
        yield iter(blocks(data, start, boundaries, max_block))

    @contextlib.contextmanager
    def replay_pump(self, recording_id: int, start: int, end: int,
                    settings: ReplaySettings) -> Iterator[ReplayPump]:
        with self.replay(recording_id, start, end, settings) as replayed:
            self._count("replay_pump")
            yield pump_of(replayed, recording_id, start, end, settings, self.pump_idle_polls)

    @property
    def is_connected(self) -> bool:
        return not self.closed

    def keep_alive(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _implements_archive_access(fake: FakeArchive) -> ArchiveAccess:
    return fake  # tools/typecheck checks the fake against the Protocol here
