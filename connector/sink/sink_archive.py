"""What the sink's committer (``sink/commit.py``) needs from the archive, and how a commit fails.

``SinkArchive`` and ``SinkAppender`` are implemented over the archive client by
``sink/archive_access.py`` and in memory by the tests' fake; ``SinkConflict`` is what both raise
when the archive refuses a second writer of one sink.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass
from typing import Protocol

from aeron_spark.archive.client import RecordingDescriptor

from aeron_spark.connector.commit_markers import LocatedMarker
from aeron_spark.connector.sink.frames import PublicationLayout, TermBlock


class SinkCommitError(RuntimeError):
    """A commit could not complete; nothing of it is visible, and the next commit cleans up."""


class SinkConflict(SinkCommitError):
    """The sink recording is used in a way this commit cannot continue: stream and batch writes on one
    sink.id, or another committer appending to it at the same time (the archive refused this one)."""


class SinkAppender(Protocol):
    """An open, recorded publication positioned at the end of the sink recording."""

    @property
    def recording_id(self) -> int: ...

    @property
    def layout(self) -> PublicationLayout: ...

    @property
    def position(self) -> int: ...

    @property
    def refused_offers(self) -> int:
        """How many offers the publication refused so far (back pressure), for the step timings."""

    @property
    def back_pressure_s(self) -> float:
        """Seconds spent from each first refused offer to the offer that went through."""

    def append(self, block: TermBlock) -> None:
        """Append the block's frames (they start at ``position``)."""

    def seal(self) -> RecordingDescriptor:
        """Wait until everything appended is recorded, stop the recording; its stopped descriptor."""

    def abandon(self) -> None:
        """Best effort after a failure: stop the recording and release the publication."""


class SinkArchive(Protocol):
    """What the committer needs from the archive (``ClientSinkArchive`` over the archive client).
    No truncate: a sink recording is never truncated (why: ``sink/commit.py``)."""

    def find_sink_recordings(self, sink_id: str, stream_id: int) -> list[RecordingDescriptor]:
        """Recordings of ``stream_id`` whose original channel contains the sink's alias."""

    def describe(self, recording_id: int) -> RecordingDescriptor | None: ...

    @property
    def committed_states(self) -> dict[tuple[str, int], SinkState] | None:
        """What this connection's last commit of each (sink id, stream id) left, so the next commit
        of that sink skips the full recovery; None: this archive keeps nothing between commits."""

    def read(self, recording_id: int, start: int, end: int) -> ContextManager[Iterator[tuple[int, bytes]]]:
        """Whole frames of [start, end) as (position, block); raises if start is not a frame."""

    def stop_active(self, recording_id: int) -> None:
        """Stop a recording left active (by identity)."""

    def start_appender(self, recording: RecordingDescriptor | None, sink_id: str) -> SinkAppender:
        """Extend ``recording`` at its stop position, or start the sink recording when None. Raises
        SinkConflict when the archive refuses the extension (active, or the stop position moved)."""

    def discard(self, recording_id: int) -> None:
        """Best effort: remove a recording this committer started and abandoned (empty)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class SinkState:
    """Where the sink recording stands: its descriptor, its last commit marker and where that ends."""

    recording: RecordingDescriptor | None
    last_marker: LocatedMarker | None
    committed_end: int | None  # None: no sink recording yet; below the stop position: debris after it
