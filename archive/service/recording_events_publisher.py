"""The recording events channel: RecordingStarted, RecordingProgress and RecordingStopped.

Aeron's archive publishes these on its recording events channel (``--recording-events-channel``,
off unless configured; see docs/protocol.md). An event is offered a few times when the
publication is back-pressured and then dropped: the channel is best effort, as in Aeron. Progress
is coalesced: the recorder reports each advance, the conductor keeps only the latest position per
recording and `flush_progress_events` offers those once per duty cycle (a later progress event
supersedes a dropped one).
"""

from __future__ import annotations

from aeron_spark.archive import codecs
from aeron_spark.archive.service.aeron_port import Publication, close_quietly
from aeron_spark.driver_integration.publication import OfferResult

OFFER_ATTEMPTS = 3
_BACK_PRESSURED = OfferResult.BACK_PRESSURED
_ADMIN_ACTION = OfferResult.ADMIN_ACTION


class RecordingEventsPublisher:
    """Offers recording events on ``publication`` (None: the archive publishes none)."""

    def __init__(self, publication: Publication | None) -> None:
        self.publication = publication
        self._pending_progress: dict[int, tuple[int, int]] = {}  # recordingId -> (start, position)

    def recording_started(self, recording_id: int, start_position: int, session_id: int,
                          stream_id: int, channel: str, source_identity: str) -> None:
        if self.publication is None:
            return
        self._offer_event(self.publication, codecs.RecordingStarted(recording_id, start_position, session_id, stream_id,
                                                  channel, source_identity))

    def recording_progressed(self, recording_id: int, start_position: int, position: int) -> None:
        self._pending_progress[recording_id] = (start_position, position)

    def forget_progress(self, recording_id: int) -> None:
        """The recording stopped: its last progress is not published after its stop."""
        self._pending_progress.pop(recording_id, None)

    def recording_stopped(self, recording_id: int, start_position: int, stop_position: int) -> None:
        if self.publication is None:
            return
        self._offer_event(self.publication, codecs.RecordingStopped(recording_id, start_position, stop_position))

    def flush_progress_events(self) -> int:
        """Offers the latest progress of every recording that advanced; returns events sent."""
        if not self._pending_progress:
            return 0
        work = 0
        publication = self.publication
        if publication is not None:
            for recording_id, (start, position) in list(self._pending_progress.items()):
                if self._offer_event(publication, codecs.RecordingProgress(recording_id, start, position)):
                    work += 1
        self._pending_progress.clear()  # a later progress event supersedes a dropped one
        return work

    @staticmethod
    def _offer_event(publication: Publication,
                     message: codecs.RecordingStarted | codecs.RecordingProgress | codecs.RecordingStopped) -> bool:
        data = codecs.encode(message)
        for _ in range(OFFER_ATTEMPTS):
            result = publication.offer(data)
            if result >= 0:
                return True
            if result != _BACK_PRESSURED and result != _ADMIN_ACTION:
                return False
        return False

    def close(self) -> None:
        if self.publication is not None:
            close_quietly(self.publication)
