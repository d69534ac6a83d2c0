"""The events other threads queue for the conductor, one frozen slotted dataclass per event.

Aeron's client thread (image callbacks), the recorder and the replayer (their session
listeners) and the service's shutdown only *enqueue* these (a ``collections.deque`` append is
thread-safe); the conductor drains its queue at the start of each duty cycle and dispatches each
event by its type (`ArchiveConductor._drain_events`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the sessions' modules do not import this one; only the annotations need them
    from aeron_spark.archive.service.recording_session import RecordingSession
    from aeron_spark.archive.service.replay_session import ReplaySession
    from aeron_spark.archive.service.request_ports import RecordingImage


@dataclass(frozen=True, slots=True)
class ControlImageUnavailable:
    """A control request Image went away (Aeron client thread); ``image_key`` is
    ``(control subscription index, image session id)``, as `ControlSession.request_image_key`."""

    image_key: tuple[int, int]


@dataclass(frozen=True, slots=True)
class RecordingImageAvailable:
    """An Image appeared on a recording subscription (Aeron client thread).

    Aeron may announce an Image before ``add_subscription`` has returned the subscription's
    registration id, so ``subscription_id`` is a holder filled in right after it returns:
    ``subscription_id["id"]``, read on the conductor's thread.
    """

    subscription_id: dict[str, int]
    image: RecordingImage


@dataclass(frozen=True, slots=True)
class RecordingSessionStarted:
    """The recorder started a `RecordingSession` (its segment writer exists)."""

    session: RecordingSession


@dataclass(frozen=True, slots=True)
class RecordingSessionProgressed:
    """A recording's recorded position advanced (recorder thread)."""

    recording_id: int
    start_position: int
    position: int


@dataclass(frozen=True, slots=True)
class RecordingSessionStopped:
    """A `RecordingSession` stopped; its stop position is final (recorder thread)."""

    session: RecordingSession


@dataclass(frozen=True, slots=True)
class ReplaySessionReady:
    """A `ReplaySession` found its start: answer OK with its replay session id (replayer thread)."""

    replay: ReplaySession


@dataclass(frozen=True, slots=True)
class ReplaySessionEnded:
    """A `ReplaySession` is done; ``replay.error`` is the ERROR to send, if any (replayer thread)."""

    replay: ReplaySession


@dataclass(frozen=True, slots=True)
class StopAllRecordings:
    """The archive is shutting down: stop every recording (`ArchiveService.close`)."""


STOP_ALL_RECORDINGS = StopAllRecordings()

#: Every event the conductor's queue holds.
ConductorEvent = (ControlImageUnavailable | RecordingImageAvailable | RecordingSessionStarted
                  | RecordingSessionProgressed | RecordingSessionStopped | ReplaySessionReady
                  | ReplaySessionEnded | StopAllRecordings)
