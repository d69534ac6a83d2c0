"""Finding the recording an archive made of a publication, for tests that publish and then ask."""

from __future__ import annotations

from typing import Protocol

from tests.support.waiting import WAIT_SECONDS, wait_until


class RecordingFinder(Protocol):
    def find_last_matching_recording(self, min_recording_id: int, channel_fragment: str, stream_id: int,
                                     session_id: int) -> int: ...


def recording_of(client: RecordingFinder, channel: str, stream_id: int, session_id: int,
                 timeout: float = WAIT_SECONDS) -> int:
    """The recording of a publication's session, once the archive has it in its catalog (a
    publication connects to the recording subscription before the recording is catalogued)."""
    return wait_until(lambda: _found(client.find_last_matching_recording(0, channel, stream_id, session_id)),
                      f"the recording of session {session_id}", timeout, interval=0.01) - 1


def _found(recording_id: int) -> int:
    # wait_until needs a truthy value and recording id 0 is a real recording: shift by one.
    return recording_id + 1 if recording_id >= 0 else 0
