"""One replay of a recording to an exclusive publication: INIT -> REPLAY -> INACTIVE -> DONE.

The state machine, modelled on Aeron's ``ReplaySession``. The request was checked and planned
first (:mod:`~aeron_spark.archive.service.replay_plan`); the replay request handler
(:mod:`~aeron_spark.archive.service.replay_requests`) has the publication added (channel from
``channel_uri.replay_channel``: the client's stripped channel at the replay position with the
recording's initial term id, term length and mtu, or the channel's larger mtu) and builds the session with
``replay_session_id = make_replay_session_id(replay_id, publication.session_id)``.

* INIT waits (up to the connect timeout) for the first segment file, checks that a position
  other than the start is a real frame header of this recording (term offset, term id, stream
  id), then tells the listener ``on_replay_ready`` (the conductor's OK response, relevantId =
  replay_session_id), then waits for the subscriber to connect (ERROR after the timeout).
* REPLAY: each duty cycle reads at most the replay buffer (1 MiB, or the request's
  fileIoMaxLength), never past the term end, the current stop/limit position, so blocks are
  always whole frames inside one term. The block offered is the DATA frames up to the first PAD
  frame or the first frame starting at/after the replay limit (a frame that starts before the
  limit is sent whole, as Aeron does); each DATA frame gets the publication's session id and
  stream id (checksums verified first when enabled); see
  :mod:`~aeron_spark.archive.service.replay_blocks`. Messages may span blocks: the subscriber
  reassembles fragments, and positions stay identical to the recording. A PAD frame becomes
  ``append_padding`` (split into several padding frames only if it exceeds the publication's
  max message length; the end position is the same). A back-pressured offer keeps the prepared
  block and retries it next cycle without re-reading. Follow/bounded replays wait at the limit;
  a closed limit is final.
* The end (limit reached) closes the publication normally (the subscriber sees end of stream);
  an abort, error or lost subscriber revokes it.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from aeron_spark.archive.codecs.constants import ArchiveErrorCode
from aeron_spark.archive.configuration import DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_REPLAY_BUFFER_LENGTH
from aeron_spark.archive.service.counters import IoStats
from aeron_spark.archive.service.limit_counter import ReplayLimit
from aeron_spark.archive.service.replay_blocks import (
    is_recorded_frame_start, open_segments, prepare_block, segment_exists)
from aeron_spark.archive.service.replay_plan import INT64_MAX, RecordingLayout, ReplayPlan
from aeron_spark.archive.storage.checksum import FrameChecksum
from aeron_spark.driver_integration.frame import FRAME_ALIGNMENT, HEADER_LENGTH, aligned_frame_length
from aeron_spark.driver_integration.position import compute_term_id_from_position, position_bits_to_shift
from aeron_spark.driver_integration.publication import OfferResult

if TYPE_CHECKING:  # the session only hands its owner back to the conductor's replay requests
    from aeron_spark.archive.service.control_session import ControlSession

log = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_NS = DEFAULT_CONNECT_TIMEOUT_MS * 1_000_000

# The publication results a replay tells apart, as plain names for the per-block comparisons.
NOT_CONNECTED = OfferResult.NOT_CONNECTED
BACK_PRESSURED = OfferResult.BACK_PRESSURED
CLOSED = OfferResult.CLOSED
MAX_POSITION_EXCEEDED = OfferResult.MAX_POSITION_EXCEEDED


class ReplayState(enum.Enum):
    INIT = "INIT"
    REPLAY = "REPLAY"
    INACTIVE = "INACTIVE"
    DONE = "DONE"


@dataclass(frozen=True, slots=True)
class ReplayError:
    code: int
    message: str


class ReplayPublication(Protocol):
    """What a replay needs of driver_integration's ``ExclusivePublication``."""

    session_id: int
    stream_id: int

    @property
    def is_connected(self) -> bool: ...

    def offer_block(self, buffer, offset: int, length: int) -> int: ...

    def append_padding(self, length: int) -> int: ...

    def close(self) -> None: ...


class ReplayListener(Protocol):
    """Callbacks on the replayer's thread (enqueue only if the conductor is another thread)."""

    def on_replay_ready(self, session: "ReplaySession") -> None:
        """Segment opened and position checked: send OK with relevantId = replay_session_id."""

    def on_replay_ended(self, session: "ReplaySession") -> None:
        """DONE; ``session.error`` (code, message) is None or the ERROR to send for correlation_id."""


class ReplaySession:
    def __init__(self, *, replay_session_id: int, recording: RecordingLayout, plan: ReplayPlan,
                 publication: ReplayPublication, archive_dir: str | os.PathLike,
                 limit: ReplayLimit | None = None, correlation_id: int = 0,
                 owner: ControlSession | None = None,
                 replay_buffer_length: int = DEFAULT_REPLAY_BUFFER_LENGTH, file_io_max_length: int = 0,
                 connect_timeout_ns: int = DEFAULT_CONNECT_TIMEOUT_NS, checksum: FrameChecksum | None = None,
                 listener: ReplayListener | None = None, vectorized: bool = True,
                 clock_ns: Callable[[], int] = time.monotonic_ns,
                 nano_clock: Callable[[], int] = time.perf_counter_ns) -> None:
        buffer_length = replay_buffer_length
        if 0 < file_io_max_length < buffer_length:
            buffer_length = file_io_max_length
        if buffer_length < recording.mtu_length:
            raise ValueError(f"replay buffer of {buffer_length} bytes is smaller than the recording's "
                             f"mtu {recording.mtu_length}")
        self.replay_session_id = replay_session_id
        self.recording = recording
        self.recording_id = recording.recording_id
        self.correlation_id = correlation_id
        self.owner = owner
        self.publication = publication
        self.listener = listener
        self.io_stats = IoStats()  # the Replayer replaces it with its shared one
        self.error: ReplayError | None = None
        self.end_reason = ""
        self.vectorized = vectorized
        self._limit = limit
        self._checksum = checksum
        self._archive_dir = archive_dir
        self._files = open_segments(archive_dir, recording)
        self._clock_ns = clock_ns
        self._nano_clock = nano_clock
        self._connect_deadline_ns = clock_ns() + connect_timeout_ns
        self._buffer = np.zeros(buffer_length, dtype=np.uint8)
        self._buffer_view = memoryview(self._buffer)
        self._term_length = recording.term_buffer_length
        self._bits = position_bits_to_shift(recording.term_buffer_length)
        self._replay_position = plan.replay_position
        self._replay_limit = plan.replay_limit
        self._stop_position = plan.stop_position
        self._state = ReplayState.INIT
        self._ready_sent = False
        self._abort_reason: str | None = None
        self._revoke = False
        self._pending_data = 0  # bytes at the start of the buffer still to offer as a block
        self._pending_pad = 0  # frame length of padding still to append
        max_message = getattr(publication, "max_message_length", None)
        self._max_pad_chunk = ((max_message + HEADER_LENGTH) & ~(FRAME_ALIGNMENT - 1)
                               if max_message else INT64_MAX)
        self._closed = False

    # -- any thread --------------------------------------------------------------------------------
    @property
    def state(self) -> ReplayState:
        return self._state

    @property
    def replay_position(self) -> int:
        return self._replay_position

    @property
    def replay_limit(self) -> int:
        return self._replay_limit

    @property
    def is_done(self) -> bool:
        return self._state is ReplayState.DONE

    def abort(self, reason: str = "replay aborted") -> None:
        self._abort_reason = reason

    # -- the replayer's thread ---------------------------------------------------------------------
    def do_work(self) -> int:
        work = 0
        if self._abort_reason is not None and self._state in (ReplayState.INIT, ReplayState.REPLAY):
            self._revoke = True
            self._to(ReplayState.INACTIVE, self._abort_reason)
        try:
            if self._state is ReplayState.INIT:
                work += self._init()
            if self._state is ReplayState.REPLAY:
                work += self._replay()
        except Exception as error:  # noqa: BLE001 - every failure ends the replay with an ERROR
            self._raise_error(f"{type(error).__name__}: {error}", self._code_of(error))
        if self._state is ReplayState.INACTIVE:
            self._files.close()
            self._to(ReplayState.DONE, "")
            work += 1
            if self.listener is not None:
                self.listener.on_replay_ended(self)
        return work

    @staticmethod
    def _code_of(error: Exception) -> int:
        code = getattr(error, "code", None)
        return int(code) if isinstance(code, int) else int(ArchiveErrorCode.GENERIC)

    def _init(self) -> int:
        if not self._ready_sent:
            if not segment_exists(self._archive_dir, self.recording, self._replay_position):
                if self._clock_ns() > self._connect_deadline_ns:
                    self._raise_error("recording segment file not created", ArchiveErrorCode.GENERIC)
                return 0
            position = self._replay_position
            if position > self.recording.start_position and position != self._stop_position \
                    and not is_recorded_frame_start(self._files, self._buffer_view, self.recording, position):
                self._raise_error(f"replayPosition={position} does not point to a valid frame",
                                  ArchiveErrorCode.INVALID_POSITION)
                return 0
            self._ready_sent = True
            if self.listener is not None:
                self.listener.on_replay_ready(self)
        if not self.publication.is_connected:
            if self._clock_ns() > self._connect_deadline_ns:
                self._raise_error(f"no connection established for replayChannel="
                                  f"{getattr(self.publication, 'channel', '?')}, replayStreamId="
                                  f"{self.publication.stream_id}", ArchiveErrorCode.GENERIC)
            return 0
        self._to(ReplayState.REPLAY, "")
        return 1

    def _replay(self) -> int:
        if not self.publication.is_connected:
            self._revoke = True
            self._to(ReplayState.INACTIVE, "publication is not connected")
            return 0
        if self._pending_data or self._pending_pad:
            return self._offer()
        if self._replay_position >= self._replay_limit:
            self._to(ReplayState.INACTIVE, f"position ({self._replay_position}) past limit ({self._replay_limit})")
            return 0
        if self._replay_position >= self._stop_position and not self._limit_extended():
            return 0
        position = self._replay_position
        term_offset = position & (self._term_length - 1)
        length = min(self._stop_position - position, len(self._buffer), self._term_length - term_offset)
        start_ns = self._nano_clock()
        length = self._files.read_into(position, self._buffer_view[:length])
        remaining = min(self._replay_limit - position, INT64_MAX)
        block = prepare_block(self._buffer, length, remaining, self.publication.session_id,
                              self.publication.stream_id, checksum=self._checksum,
                              block_position=position, vectorized=self.vectorized, term_offset=term_offset,
                              term_id=compute_term_id_from_position(position, self._bits,
                                                                    self.recording.initial_term_id))
        self.io_stats.record(length, self._nano_clock() - start_ns)
        if block.data_length == 0 and block.padding_frame_length == 0:
            return 0
        self._pending_data = block.data_length
        self._pending_pad = block.padding_frame_length
        return self._offer()

    def _limit_extended(self) -> bool:
        """At the readable end: move it to the limit's new value; end the replay if it closed."""
        limit = self._limit
        if limit is None:
            self._to(ReplayState.INACTIVE, f"position ({self._replay_position}) reached stop ({self._stop_position})")
            return False
        current = limit.position()
        if limit.is_closed:
            current = limit.position()
            self._replay_limit = min(self._replay_limit, max(current, self._stop_position))
        if self._replay_position >= self._replay_limit:
            self._to(ReplayState.INACTIVE, f"position ({self._replay_position}) past limit "
                                           f"({self._replay_limit}), limit closed")
            return False
        if current > self._stop_position:
            self._stop_position = current
            return True
        return False

    def _offer(self) -> int:
        """Offer the prepared data block, then the padding; what is refused stays pending."""
        work = 0
        if self._pending_data:
            result = self.publication.offer_block(self._buffer, 0, self._pending_data)
            if not self._advanced(result, self._pending_data):
                return work
            self._pending_data = 0
            work += 1
        while self._pending_pad and self._state is ReplayState.REPLAY:
            aligned = aligned_frame_length(self._pending_pad)
            if aligned <= self._max_pad_chunk:
                chunk, payload = aligned, self._pending_pad - HEADER_LENGTH  # the frame as recorded
            else:  # bigger than one padding frame may be: several frames, same end position
                chunk = self._max_pad_chunk
                payload = chunk - HEADER_LENGTH
            result = self.publication.append_padding(payload)
            if not self._advanced(result, chunk):
                return work
            self._pending_pad = 0 if chunk == aligned else aligned - chunk
            work += 1
        self._pending_pad = 0
        return work

    def _advanced(self, result: int, aligned_length: int) -> bool:
        if result > 0:
            self._replay_position += aligned_length
            if self._replay_position >= self._replay_limit:
                self._to(ReplayState.INACTIVE, f"position ({self._replay_position}) past limit "
                                               f"({self._replay_limit})")
            return True
        if result in (CLOSED, NOT_CONNECTED):
            self._revoke = True
            self._to(ReplayState.INACTIVE, "stream closed before replay complete")
        elif result == MAX_POSITION_EXCEEDED:
            self._raise_error("replay publication reached its maximum position", ArchiveErrorCode.GENERIC)
        return False

    def _raise_error(self, message: str, code: int) -> None:
        self._revoke = True
        full = (f"{message}, recordingId={self.recording_id}, replaySessionId={self.replay_session_id}, "
                f"position={self._replay_position}")
        self.error = ReplayError(int(code), full)
        log.warning("replay error: %s", full)
        self._to(ReplayState.INACTIVE, message)

    def _to(self, state: ReplayState, reason: str) -> None:
        log.debug("replay %d of recording %d: %s -> %s %s", self.replay_session_id, self.recording_id,
                  self._state.value, state.value, reason)
        if state is ReplayState.INACTIVE:
            self.end_reason = reason
        self._state = state

    def close(self) -> None:
        """Close (or revoke, after an abort or error) the publication and the segment file."""
        if self._closed:
            return
        self._closed = True
        self._files.close()
        revoke = getattr(self.publication, "revoke", None) if self._revoke else None
        try:
            if revoke is not None:
                revoke()
            else:
                self.publication.close()
        except Exception:  # noqa: BLE001
            log.exception("replay %d: closing the publication failed", self.replay_session_id)
