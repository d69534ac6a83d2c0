"""What the request handlers need of the recorder, the replayer and a recording's Image.

The conductor wires the real `Recorder`, `Replayer` and driver_integration's ``Image``; unit tests
pass small fakes. Each Protocol lists only the calls the handlers make, so a fake needs no more.
"""

from __future__ import annotations

from typing import Protocol

from aeron_spark.archive.service.recording_session import RecordedImage, RecordingSession
from aeron_spark.archive.service.replay_session import ReplaySession


class RecordingImage(RecordedImage, Protocol):
    """An Image of a recording subscription: what the catalog entry and the rec-pos counter take
    from it, besides what the `RecordingSession` polls."""

    initial_term_id: int
    mtu_length: int
    source_identity: str


class RecorderPort(Protocol):
    """The recorder agent as the recording handlers drive it (`recorder.Recorder`)."""

    def add_session(self, session: RecordingSession) -> None: ...

    def stop_recording(self, recording_id: int) -> None: ...


class ReplayerPort(Protocol):
    """The replayer agent as the replay and maintenance handlers drive it (`replayer.Replayer`)."""

    def add_session(self, session: ReplaySession) -> None: ...

    def stop_replay(self, replay_session_id: int) -> None: ...

    def stop_all_replays(self, recording_id: int = ...) -> None: ...

    def lowest_replay_position(self, recording_id: int) -> int | None: ...
