"""What the survival tests (archive restarts, network partitions) share: what a query's output is
checked against - what the archive recorded, read independently of the connector (a raw replay of
every recording of the stream with the archive client) - the exactly-once comparison of the two,
and releasing a sink commit paused by its fault-injection point (``PauseReleaser``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from aeron_spark.archive.client.archive_client import ArchiveClient

from tests.support.live_publisher import sequence_of

REPLAY_STREAM_ID = 1103
REPLAY_IDLE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RecordedStream:
    """Every message recorded of one stream: (recording id, end position, payload), in recording
    id and position order, and each recording's [start, stop)."""

    messages: list[tuple[int, int, bytes]]
    ranges: dict[int, tuple[int, int]]


def recorded_stream(client: ArchiveClient, channel_fragment: str, stream_id: int, replay_channel: str,
                    advertised_host: str | None = None) -> RecordedStream:
    """A raw replay of every (stopped) recording of the stream; whole messages only, as a
    subscriber with a fragment assembler sees them."""
    messages: list[tuple[int, int, bytes]] = []
    ranges: dict[int, tuple[int, int]] = {}
    for descriptor in client.list_recordings_for_uri(0, None, channel_fragment, stream_id):
        assert not descriptor.is_active, f"recording {descriptor.recording_id} is still active"
        start, stop = descriptor.start_position, descriptor.stop_position
        ranges[descriptor.recording_id] = (start, stop)
        if stop <= start:
            continue
        with client.replay(descriptor.recording_id, start, stop - start, replay_channel, REPLAY_STREAM_ID,
                           advertised_host=advertised_host) as replay:
            for message in replay.messages(idle_timeout=REPLAY_IDLE_TIMEOUT_S):
                messages.append((descriptor.recording_id, message.next_position, message.payload))
    return RecordedStream(messages, ranges)


def assert_every_row_exactly_once(delivered: list[tuple[int, int, bytes]], recorded: RecordedStream) -> None:
    """The query delivered each recorded message once: same (recording id, position, payload)
    set, no row twice, nothing missing and nothing that was not recorded."""
    keys = Counter((recording_id, position) for recording_id, position, _ in delivered)
    duplicates = sorted(key for key, count in keys.items() if count > 1)
    assert not duplicates, f"{len(duplicates)} rows delivered more than once, e.g. {duplicates[:5]}"
    want = {(recording_id, position): payload for recording_id, position, payload in recorded.messages}
    got = {(recording_id, position): payload for recording_id, position, payload in delivered}
    missing = sorted(want.keys() - got.keys())
    extra = sorted(got.keys() - want.keys())
    assert not missing, f"{len(missing)} recorded messages never delivered, e.g. {missing[:5]}"
    assert not extra, f"{len(extra)} rows delivered that are not recorded messages, e.g. {extra[:5]}"
    wrong = [key for key, payload in want.items() if got[key] != payload]
    assert not wrong, f"{len(wrong)} rows delivered with other bytes than recorded, e.g. {wrong[:5]}"


def sequence_gaps(recorded: RecordedStream) -> list[tuple[int, int]]:
    """Runs of publisher sequence numbers in no recording, as (first, last): what a killed archive
    never wrote (sent to its dead driver), which no reader can deliver."""
    sequences = sorted({sequence_of(payload) for _, _, payload in recorded.messages})
    gaps = []
    for before, after in zip(sequences, sequences[1:]):
        if after > before + 1:
            gaps.append((before + 1, after - 1))
    return gaps


class PauseReleaser:
    """Deletes the commit's pause file whenever it appears (a retried commit pauses at the same
    point again), counting how often, until stopped."""

    def __init__(self, pause: Path) -> None:
        self.pause = pause
        self.released = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.pause.exists():
                self.pause.unlink()
                self.released += 1
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
