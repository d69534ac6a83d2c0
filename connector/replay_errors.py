"""How a replay fails, and how a replay being waited for is watched for failing.

The errors name the recording, the range and (where an option can fix it) the option. A waiting
replay asks its ``ReplayWatch`` (``ArchiveReplayWatch`` over the archive client) whether the
archive sent an ERROR for it after its OK (Java 1.15.x checks the start frame then; ours when a
segment is unreadable), why its image ended early, and whether a stall at some position can ever
end (the archive sends whole frames only, so a range end inside a frame is never reached).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from aeron_spark.archive.client.response_routing import ArchiveError

#: How long an ended replay image waits for the archive's ERROR that explains it.
LATE_ERROR_WAIT_MS = 500
#: How archives (ours, Java's) word a replay whose publication never connected.
NOT_CONNECTED_TEXT = "no connection established"


class ReplayFailed(RuntimeError):
    """A replay stopped before delivering its whole range."""


class ReplayEndInsideFrame(ReplayFailed):
    """The range end falls inside a frame: the archive replays whole frames only, so the frame
    ``[frame_start, frame_end)`` that crosses it is never sent."""

    def __init__(self, recording_id: int, end: int, frame_start: int, frame_end: int) -> None:
        super().__init__(
            f"recording {recording_id}: the range end {end} is not a frame boundary, it falls inside "
            f"the frame [{frame_start}, {frame_end}); positions in endingPositions (and "
            f"startingPositions) must be frame boundaries of the recording, e.g. {frame_start} or "
            f"{frame_end} here")
        self.recording_id = recording_id
        self.end = end
        self.frame_start = frame_start
        self.frame_end = frame_end


class ReplayEndpointUnreachable(ReplayFailed):
    """The archive's replay did not reach this worker's endpoint."""


class ReplayImageTimeout(ReplayFailed):
    """No replay image appeared in time."""


class ReplayStreamRecorded(ReplayFailed):
    """The archive records the channel/stream replays would be sent on."""


class ReplayWatch(Protocol):
    """What a waiting replay asks its archive connection (see ArchiveReplayWatch)."""

    def check(self) -> None:
        """Raise ReplayFailed if the archive sent an error for this replay (non-blocking)."""

    def explain_end(self) -> str:
        """Why the replay image ended early: the archive's error text, "" if none arrives soon."""

    def stalled(self, position: int) -> None:
        """The replay made no progress at ``position`` for a while: raise ReplayFailed when that
        has a cause that waiting cannot fix (e.g. :class:`ReplayEndInsideFrame`)."""


class ArchiveReplayWatch:
    """ReplayWatch over the archive client: asynchronous ERRORs of this replay session
    (``check_error``, the client's ``check_replay_error``) and the frame at a stall
    (``frame_end_at``: where the frame recorded at a position ends, None when unknown)."""

    def __init__(self, recording_id: int, end: int, replay_session_id: int, *,
                 check_error: Callable[[int], None], frame_end_at: Callable[[int], int | None]) -> None:
        self._recording_id = recording_id
        self._end = end
        self._replay_session_id = replay_session_id
        self._check_error = check_error
        self._frame_end_at = frame_end_at

    def _archive_error(self) -> Exception | None:
        """The archive's ERROR for this replay, if one has arrived (polls once, non-blocking)."""
        try:
            self._check_error(self._replay_session_id)
        except Exception as error:
            if is_archive_error(error):
                return error
            raise
        return None

    def check(self) -> None:
        error = self._archive_error()
        if error is not None:
            raise ReplayFailed(f"recording {self._recording_id}: the archive failed the replay "
                               f"(replaySessionId={self._replay_session_id}): {archive_text(error)}") from error

    def explain_end(self) -> str:
        # The ERROR follows the end of the image closely (the archive revokes, then reports).
        deadline = time.monotonic() + LATE_ERROR_WAIT_MS / 1000.0
        while True:
            error = self._archive_error()
            if error is not None:
                return f"the archive reports: {archive_text(error)}"
            if time.monotonic() > deadline:
                return ""
            time.sleep(0.002)

    def stalled(self, position: int) -> None:
        if position >= self._end:
            return
        frame_end = self._frame_end_at(position)
        if frame_end is not None and frame_end > self._end:
            raise ReplayEndInsideFrame(self._recording_id, self._end, position, frame_end)


def is_archive_error(error: Exception) -> bool:
    """The archive refused or failed a request (as opposed to a transport or local failure)."""
    return isinstance(error, ArchiveError)


def archive_text(error: Exception) -> str:
    """The archive's own text of ``error`` when it sent one, else the error's."""
    return (error.archive_message if isinstance(error, ArchiveError) else "") or str(error)
