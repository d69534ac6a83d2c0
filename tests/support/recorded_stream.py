"""Reading back every message a stream's recordings hold (a sink's output), through our archive client."""

from __future__ import annotations

import time

from aeron_spark.archive.client import ArchiveClient
from tests.support.ports import free_udp_port
from tests.support.sidecar_streams import poll_into


def recorded(archive: ArchiveClient, stream_id: int) -> dict[int, list[bytes]]:
    """Every message of every recording of ``stream_id``, per recording, in recorded order (each
    replayed from its start to the position recorded now)."""
    messages: dict[int, list[bytes]] = {}
    for descriptor in archive.list_recordings():
        if descriptor.stream_id != stream_id:
            continue
        end = descriptor.stop_position if descriptor.stop_position >= 0 else \
            archive.recording_position(descriptor.recording_id)
        received: list[tuple[int, bytes]] = []
        if end > descriptor.start_position:
            length = end - descriptor.start_position
            with archive.replay(descriptor.recording_id, descriptor.start_position, length,
                                f"aeron:udp?endpoint=localhost:{free_udp_port()}", 9000 + stream_id) as replay:
                deadline = time.monotonic() + 60
                while replay.image.position < end:
                    if poll_into(replay, received) == 0:
                        assert time.monotonic() < deadline, f"replay of recording {descriptor.recording_id} stalled"
                        time.sleep(0.001)
        messages[descriptor.recording_id] = [payload for _, payload in received]
    return messages
