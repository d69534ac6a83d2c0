"""A live stream an archive records, and our ReplayMerge joining it, for the ReplayMerge tests against
our sidecar (tests/integration/client/test_replay_merge_sidecar.py) and the Java archive
(tests/interop/modern/test_replay_merge_python_on_java.py).

The live stream is an exclusive publication on a dynamic multi-destination-cast channel
(``aeron:udp?control=localhost:P|control-mode=dynamic``): the archive records it REMOTE through a
subscription ``endpoint=localhost:0|control=localhost:P|session-id=S``, and the merge's live
destination joins it the same way. Message ``i`` carries ``i`` in its first 8 bytes, so a reader can
check it saw every message once and in order.
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from aeron_spark.archive.client import ArchiveClient, MergeState, ReplayMerge
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.driver_integration import AeronClient, ExclusivePublication, Header

from tests.support.ports import free_udp_port

SIZE = 100
TERM_LENGTH = 64 * 1024
_INDEX = struct.Struct("<q")


#: Whole messages per term (a term's tail is padding): SIZE bytes framed to 160.
PER_TERM = TERM_LENGTH // 160


def position_of(index: int) -> int:
    """Where message ``index`` starts in the recording (position 0 is message 0)."""
    return (index // PER_TERM) * TERM_LENGTH + (index % PER_TERM) * 160


def payload(index: int) -> bytes:
    return _INDEX.pack(index) + bytes(SIZE - _INDEX.size)


@dataclass
class RecordedLiveStream:
    archive: ArchiveClient
    publication: ExclusivePublication
    control_port: int
    stream_id: int
    recording_channel: str
    recording_id: int
    published: int = 0

    @property
    def live_destination(self) -> str:
        """Where a ReplayMerge subscriber receives this stream: a dynamic-MDC destination."""
        return f"aeron:udp?endpoint=localhost:0|control=localhost:{self.control_port}"

    def publish(self, count: int) -> None:
        for _ in range(count):
            self.publication.offer_with_retry(payload(self.published))
            self.published += 1

    def try_publish_one(self) -> bool:
        if self.publication.offer(payload(self.published)) > 0:
            self.published += 1
            return True
        return False

    def await_recorded(self, timeout: float = 30.0) -> None:
        """Until the archive recorded everything published so far."""
        deadline = time.monotonic() + timeout
        target = self.publication.position
        while self.archive.max_recorded_position(self.recording_id) < target:
            assert time.monotonic() < deadline, f"recording {self.recording_id} did not reach {target}"
            time.sleep(0.01)


@contextlib.contextmanager
def recorded_live_stream(archive: ArchiveClient, aeron: AeronClient, stream_id: int) -> Iterator[RecordedLiveStream]:
    """A live publication the archive records (REMOTE); the recording stopped and the publication
    closed on exit."""
    control_port = free_udp_port()
    channel = f"aeron:udp?control=localhost:{control_port}|control-mode=dynamic|term-length={TERM_LENGTH}"
    publication = aeron.add_exclusive_publication(channel, stream_id)
    recording_channel = (f"aeron:udp?endpoint=localhost:0|control=localhost:{control_port}"
                         f"|session-id={publication.session_id}")
    try:
        archive.start_recording(recording_channel, stream_id, SourceLocation.REMOTE)
        try:
            deadline = time.monotonic() + 30.0
            recording_id = -1
            while recording_id < 0 or not publication.is_connected:
                assert time.monotonic() < deadline, "the archive did not start recording the live stream"
                time.sleep(0.01)
                # A listing, not FindLastMatchingRecording: 1.15.1 refuses that one on an empty catalog.
                recording_id = max((d.recording_id for d in archive.list_recordings_for_uri(
                    0, None, f"control=localhost:{control_port}", stream_id)
                    if d.session_id == publication.session_id), default=-1)
            yield RecordedLiveStream(archive, publication, control_port, stream_id, recording_channel, recording_id)
        finally:
            with contextlib.suppress(Exception):
                archive.stop_recording(recording_channel, stream_id)
    finally:
        publication.close()


@dataclass
class MergeRun:
    indices: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    merged_at_message: int | None = None

    def on_message(self, data: memoryview, header: Header) -> None:
        self.indices.append(_INDEX.unpack_from(data)[0])
        self.positions.append(header.position)


def merge_while_publishing(merge: ReplayMerge, stream: RecordedLiveStream, live_messages: int, *,
                           first_index: int = 0, timeout: float = 60.0) -> MergeRun:
    """Polls ``merge`` while ``live_messages`` more go live, a few per poll, until it merged and every
    message published from ``first_index`` (where the merge starts) arrived; then a few more on the
    merged live stream alone."""
    run = MergeRun()
    total = stream.published + live_messages
    deadline = time.monotonic() + timeout
    while not (merge.is_merged and len(run.indices) >= total - first_index):
        for _ in range(4):
            if stream.published < total:
                stream.try_publish_one()
        fragments = merge.poll(run.on_message, 64)
        if merge.is_merged and run.merged_at_message is None:
            run.merged_at_message = len(run.indices)
        if not fragments:
            assert time.monotonic() < deadline, (f"no merge within {timeout} s: {merge!r}, "
                                                 f"{len(run.indices)} of {total} messages")
            time.sleep(0.0005)
    # After the merge the live stream alone goes on, still once each and in order.
    after = stream.published + 50
    stream.publish(50)
    while len(run.indices) < after - first_index:
        if not merge.poll(run.on_message, 64):
            assert time.monotonic() < deadline, f"{len(run.indices)} of {after} messages after the merge"
            time.sleep(0.0005)
    return run


#: The states every merge from position 0 of a live recording goes through, in this order.
EXPECTED_STATES = [MergeState.RESOLVE_REPLAY_PORT, MergeState.GET_RECORDING_POSITION, MergeState.REPLAY,
                   MergeState.CATCHUP, MergeState.ATTEMPT_LIVE_JOIN]


def first_visits(states: list[MergeState]) -> list[MergeState]:
    seen: list[MergeState] = []
    for state in states:
        if state not in seen:
            seen.append(state)
    return seen
