"""One replay of a recording to an exclusive publication: INIT -> REPLAY -> INACTIVE -> DONE.

Modelled on Aeron's ``ReplaySession`` (reference §3.6):

* :func:`plan_replay` (sans-IO) applies the request rules: replay position 32-aligned,
  >= start, < stop when the recording is stopped, not past a limit counter; length -1 follows
  (an active recording's rec-pos counter or a bounded replay's limit counter), -2 replays what
  exists now (EMPTY_RECORDING when that is nothing), otherwise min(length, available).
  Violations raise :class:`ReplayRequestError` with Aeron's error code.
* The conductor (through :class:`~aeron_spark.archive.service.replayer.ReplayFactory`) opens the
  publication (channel from ``channel_uri.replay_channel``: the client's stripped channel at the
  replay position with the recording's initial term id, term length and mtu) and builds the session with ``replay_session_id =``
  :func:`make_replay_session_id` ``(replay_id, publication.session_id)``.
* INIT waits (up to the connect timeout) for the first segment file, checks that a position
  other than the start is a real frame header of this recording (term offset, term id, stream
  id), then tells the listener ``on_replay_ready`` (the conductor's OK response, relevantId =
  replay_session_id), then waits for the subscriber to connect (ERROR after the timeout).
* REPLAY: each duty cycle reads at most the replay buffer (1 MiB, or the request's
  fileIoMaxLength), never past the term end, the current stop/limit position, so blocks are
  always whole frames inside one term. The block offered is the DATA frames up to the first PAD
  frame or the first frame starting at/after the replay limit (a frame that starts before the
  limit is sent whole, as Aeron does); each DATA frame gets the publication's session id and
  stream id (checksums verified first when enabled). Messages may span blocks: the subscriber
  reassembles fragments, and positions stay identical to the recording. A PAD frame becomes
  ``append_padding`` (split into several padding frames only if it exceeds the publication's
  max message length; the end position is the same). A back-pressured offer keeps the prepared block and retries it next cycle
  without re-reading. Follow/bounded replays wait at the limit; a closed limit is final.
* The end (limit reached) closes the publication normally (the subscriber sees end of stream);
  an abort, error or lost subscriber revokes it.

Frame boundaries come from ``driver_integration.frame.scan_frames`` (numpy, no per-frame Python)
and the header rewrite is one numpy scatter; ``vectorized=False`` selects the pure-Python walk,
kept as the reference the fast path is tested against byte for byte.
"""

from __future__ import annotations

import enum
import logging
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from aeron_spark.archive.service.counters import IoStats
from aeron_spark.archive.codecs.constants import REPLAY_ALL_AND_FOLLOW, REPLAY_ALL_AND_STOP, ArchiveErrorCode
from aeron_spark.archive.service.limit_counter import ReplayLimit
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.driver_integration.frame import (
    FRAME_ALIGNMENT, HDR_TYPE_DATA, HDR_TYPE_PAD, HEADER_LENGTH, SESSION_ID_OFFSET, STREAM_ID_OFFSET,
    StopReason, aligned_frame_length, scan_frames, walk_frames)
from aeron_spark.archive.storage.segment import SegmentReader, segment_file_path
from aeron_spark.driver_integration.position import (
    compute_term_id_from_position, position_bits_to_shift, segment_file_base_position)

log = logging.getLogger(__name__)

DEFAULT_REPLAY_BUFFER_LENGTH = 1024 * 1024
DEFAULT_CONNECT_TIMEOUT_NS = 5_000_000_000
INT64_MAX = (1 << 63) - 1

# Publication offer results (Aeron's Publication constants).
NOT_CONNECTED = -1
BACK_PRESSURED = -2
ADMIN_ACTION = -3
CLOSED = -4
MAX_POSITION_EXCEEDED = -5

_HEADER_CHECK = struct.Struct("<iiii")  # term_offset, session_id, stream_id, term_id at offset 8


class ReplayState(enum.Enum):
    INIT = "INIT"
    REPLAY = "REPLAY"
    INACTIVE = "INACTIVE"
    DONE = "DONE"


class ReplayRequestError(ValueError):
    """A replay request the archive refuses; ``code`` is the ArchiveErrorCode for the response."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)


class ReplayFrameError(ValueError):
    """Recorded bytes that are not a valid frame chain where the recording says data is."""


@dataclass(frozen=True, slots=True)
class ReplayError:
    code: int
    message: str


@dataclass(frozen=True, slots=True)
class RecordingLayout:
    """The descriptor fields a replay needs (see RecordingDescriptor)."""

    recording_id: int
    start_position: int
    stop_position: int  # NULL_POSITION while active
    initial_term_id: int
    segment_file_length: int
    term_buffer_length: int
    mtu_length: int
    stream_id: int

    @classmethod
    def of(cls, descriptor) -> "RecordingLayout":
        return cls(descriptor.recording_id, descriptor.start_position, descriptor.stop_position,
                   descriptor.initial_term_id, descriptor.segment_file_length,
                   descriptor.term_buffer_length, descriptor.mtu_length, descriptor.stream_id)


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    replay_position: int
    replay_length: int  # bytes; INT64_MAX - position for an open-ended follow
    stop_position: int  # readable end right now: the limit's value or the recording's stop

    @property
    def replay_limit(self) -> int:
        return min(INT64_MAX, self.replay_position + self.replay_length)


def make_replay_session_id(replay_id: int, publication_session_id: int) -> int:
    """``(replayId << 32) | (sessionId & 0xFFFFFFFF)`` as a signed int64 (the OK's relevantId)."""
    value = ((replay_id & 0xFFFFFFFF) << 32) | (publication_session_id & 0xFFFFFFFF)
    return value - (1 << 64) if value >= 1 << 63 else value


def plan_replay(recording: RecordingLayout, position: int, length: int, *,
                limit_position: int | None = None, file_io_max_length: int = 0,
                replay_buffer_length: int = DEFAULT_REPLAY_BUFFER_LENGTH) -> ReplayPlan:
    """Validate a (bounded) replay request; ``limit_position`` is the value of the counter the
    replay will follow (the active recording's rec-pos, or the bounded replay's limit counter),
    None for a stopped recording without a limit counter."""
    rid = recording.recording_id
    start = recording.start_position
    replay_position = start
    if position != NULL_POSITION:
        if position & (FRAME_ALIGNMENT - 1):
            raise ReplayRequestError(ArchiveErrorCode.GENERIC,
                                     f"requested replay start position={position} is not a multiple of "
                                     f"FRAME_ALIGNMENT ({FRAME_ALIGNMENT}) for recording {rid}")
        if position < start:
            raise ReplayRequestError(ArchiveErrorCode.INVALID_POSITION,
                                     f"requested replay start position={position} is less than recording "
                                     f"start position={start} for recording {rid}")
        stop = recording.stop_position
        if stop != NULL_POSITION and position >= stop:
            raise ReplayRequestError(ArchiveErrorCode.INVALID_POSITION,
                                     f"requested replay start position={position} must be less than the "
                                     f"limit position={stop} for recording {rid}")
        replay_position = position
    if 0 < file_io_max_length < recording.mtu_length:
        raise ReplayRequestError(ArchiveErrorCode.GENERIC,
                                 f"fileIoMaxLength={file_io_max_length} < mtuLength={recording.mtu_length}")
    if replay_buffer_length < recording.mtu_length:
        raise ReplayRequestError(ArchiveErrorCode.GENERIC,
                                 f"replayBufferCapacity={replay_buffer_length} < mtuLength={recording.mtu_length}")
    if limit_position is not None and limit_position != NULL_POSITION:
        if replay_position > limit_position:
            raise ReplayRequestError(ArchiveErrorCode.INVALID_POSITION,
                                     f"requested replay start position={replay_position} must be less than "
                                     f"the limit position={limit_position} for recording {rid}")
        stop_position = limit_position
        max_length = INT64_MAX - replay_position
    else:
        if recording.stop_position == NULL_POSITION:
            raise ReplayRequestError(ArchiveErrorCode.GENERIC,
                                     f"recording {rid} is active but no position counter to follow was given")
        stop_position = recording.stop_position
        max_length = stop_position - replay_position
    if length == REPLAY_ALL_AND_FOLLOW:
        replay_length = max_length
    elif length == REPLAY_ALL_AND_STOP:
        replay_length = stop_position - replay_position
        if replay_length == 0:
            raise ReplayRequestError(ArchiveErrorCode.EMPTY_RECORDING,
                                     f"when replaying and stopping the replay length must be non-zero, "
                                     f"recordingId={rid}")
    else:
        replay_length = min(length, max_length)
    if replay_length < 0:
        raise ReplayRequestError(ArchiveErrorCode.GENERIC,
                                 f"replay length must be positive: replayLength={replay_length}, length={length}, "
                                 f"stopPosition={stop_position}, replayPosition={replay_position} for recording {rid}")
    return ReplayPlan(replay_position, replay_length, stop_position)


# -- the bulk path: find the block to offer and rewrite its headers ---------------------------------
@dataclass(frozen=True, slots=True)
class PreparedBlock:
    data_length: int  # bytes of whole DATA frames from offset 0 to offer as one block
    padding_frame_length: int  # frame_length of a PAD frame right after them (0: none)


def prepare_block(buffer: np.ndarray, length: int, remaining: int, session_id: int, stream_id: int,
                  *, checksum=None, block_position: int = 0, vectorized: bool = True,
                  term_offset: int | None = None, term_id: int | None = None) -> PreparedBlock:
    """Choose the frames of ``buffer[:length]`` (read from the recording at ``block_position``)
    to replay now, and rewrite their session and stream ids in place.

    The block is the DATA frames from offset 0 up to (not including) the first PAD frame, the
    first incomplete frame, or the first frame starting at or after ``remaining`` (bytes left
    before the replay limit). A frame_length <= 0 or < 32 before that point means the recording
    has no valid frame where data should be: :class:`ReplayFrameError`.

    With ``term_offset``/``term_id`` (where the block sits in its term) frame starts are found
    in one pass from the headers' own term offset and term id fields, confirmed by the length
    chain; payload bytes that merely look like a header break the chain and fall back to the
    general scan, so the result is always exact.
    """
    if vectorized and term_offset is not None and term_id is not None:
        fixed = _prepare_fixed_size(buffer, length, remaining, session_id, stream_id, checksum,
                                    block_position, term_offset, term_id)
        if fixed is not None:
            return fixed
    view = memoryview(buffer)[:length]
    if vectorized:
        found = None
        if term_offset is not None and term_id is not None:
            found = _frames_by_header_fields(buffer, length, term_offset, term_id)
        offsets, end, stop_reason, types = found if found is not None else _frames_numpy(buffer, view)
    else:
        offsets, end, stop_reason, types = _frames_python(view)
    count = len(offsets)
    cut = count
    pad_index = -1
    if count:
        if vectorized:
            non_data = np.flatnonzero(types != HDR_TYPE_DATA)
            first_other = int(non_data[0]) if len(non_data) else count
            beyond = int(np.searchsorted(offsets, remaining, side="left"))
        else:
            first_other = next((i for i, t in enumerate(types) if t != HDR_TYPE_DATA), count)
            beyond = next((i for i, o in enumerate(offsets) if o >= remaining), count)
        cut = min(first_other, beyond)
        if first_other < beyond:
            if types[first_other] != HDR_TYPE_PAD:
                raise ReplayFrameError(f"unexpected frame type {int(types[first_other])} at position="
                                       f"{block_position + int(offsets[first_other])}")
            pad_index = first_other
    # The chain stopped before the limit on a bad length: nothing valid is recorded there.
    stop_offset = int(offsets[cut]) if cut < count else end
    if cut == count and stop_offset < remaining and stop_reason in (
            StopReason.ZERO_LENGTH, StopReason.NEGATIVE_LENGTH, StopReason.TOO_SHORT):
        raise ReplayFrameError(f"unexpected end of recording at position={block_position + stop_offset} "
                               f"({stop_reason.value})")
    data_length = int(offsets[cut - 1]) + _aligned_at(view, int(offsets[cut - 1])) if cut else 0
    padding = _frame_length_at(view, int(offsets[pad_index])) if pad_index >= 0 else 0
    if cut == count and stop_reason is StopReason.OVERRUN and end < remaining \
            and struct.unpack_from("<H", view, end + 6)[0] == HDR_TYPE_PAD:
        padding = _frame_length_at(view, end)  # a PAD needs only its header, not its (long) body
    if data_length:
        if checksum is not None:
            from aeron_spark.archive.storage.checksum import verify_and_restore  # only when enabled
            verify_and_restore(view[:data_length], session_id, checksum, block_position=block_position)
        if vectorized:
            words = buffer[:data_length].view("<i4")
            starts = offsets[:cut] >> 2
            words[starts + SESSION_ID_OFFSET // 4] = session_id
            words[starts + STREAM_ID_OFFSET // 4] = stream_id
        else:
            for offset in offsets[:cut]:
                struct.pack_into("<ii", view, offset + SESSION_ID_OFFSET, session_id, stream_id)
    return PreparedBlock(data_length, padding)


def _prepare_fixed_size(buffer: np.ndarray, length: int, remaining: int, session_id: int, stream_id: int,
                        checksum, block_position: int, term_offset: int, term_id: int) -> PreparedBlock | None:
    """The common case (fixed-size messages): DATA frames of one length, back to back from
    offset 0. One strided view over the block checks every header's frame length, type, term
    offset and term id and rewrites the ids; None (the general path decides) when any frame
    differs or the tail after them holds a whole frame."""
    if length < HEADER_LENGTH:
        return None
    words = buffer[:length].view("<i4") if not length & 3 else buffer[: length & ~3].view("<i4")
    frame_length = int(words[0])
    if frame_length < HEADER_LENGTH:
        return None
    aligned = (frame_length + (FRAME_ALIGNMENT - 1)) & ~(FRAME_ALIGNMENT - 1)
    count = length // aligned
    if count == 0:
        return None
    stride = aligned // 4
    rows = words[: count * stride].reshape(count, stride)
    matches = ((rows[:, 0] == frame_length)
               & (rows[:, 1] >> 16 == HDR_TYPE_DATA)  # type: u16 at byte 6 (little-endian)
               & (rows[:, 5] == term_id)
               & (rows[:, 2] == np.arange(term_offset, term_offset + count * aligned, aligned, dtype=np.int32)))
    if not matches[-1]:  # the frames stop early: only the term's PAD may follow them
        count = int(np.argmin(matches))
        if count == 0 or matches[count:].any():
            return None
        rows = rows[:count]
    elif not matches.all():
        return None
    end = count * aligned
    padding = 0
    if end < length:
        if length - end < HEADER_LENGTH:
            return None  # a truncated header after the frames: rare, the general path decides
        next_length = int(words[end >> 2])
        if next_length <= 0 or next_length < HEADER_LENGTH:
            return None  # bad length: the general path reports it (or stops at the limit)
        is_pad = (int(words[(end >> 2) + 1]) >> 16) & 0xFFFF == HDR_TYPE_PAD
        if not is_pad and end + ((next_length + (FRAME_ALIGNMENT - 1)) & ~(FRAME_ALIGNMENT - 1)) <= length:
            return None  # a whole DATA frame of another length follows
        if is_pad and end < remaining:
            padding = next_length  # the term's PAD (whole or cut by the read: its header is enough)
    cut = min(count, -(-remaining // aligned)) if remaining > 0 else 0
    if cut < count:
        padding = 0
    data_length = cut * aligned
    if data_length:
        if checksum is not None:
            from aeron_spark.archive.storage.checksum import verify_and_restore  # only when enabled
            verify_and_restore(memoryview(buffer)[:data_length], session_id, checksum,
                               block_position=block_position)
        rows[:cut, SESSION_ID_OFFSET // 4] = session_id
        rows[:cut, STREAM_ID_OFFSET // 4] = stream_id
    return PreparedBlock(data_length, padding)


def _frame_length_at(view: memoryview, offset: int) -> int:
    return struct.unpack_from("<i", view, offset)[0]


def _aligned_at(view: memoryview, offset: int) -> int:
    return aligned_frame_length(_frame_length_at(view, offset))


def _frames_by_header_fields(buffer: np.ndarray, length: int, term_offset: int, term_id: int):
    """Frame starts = 32-byte slots whose term_offset field is their own term offset and whose
    term_id is the block's, if those slots chain exactly by aligned frame length; else None."""
    slots = length // HEADER_LENGTH
    if slots == 0:
        return None
    words = buffer[: slots * HEADER_LENGTH].view("<i4").reshape(slots, HEADER_LENGTH // 4)
    own_offsets = np.arange(term_offset, term_offset + slots * HEADER_LENGTH, HEADER_LENGTH, dtype=np.int64)
    lengths = words[:, 0]
    candidates = np.flatnonzero((words[:, 2] == own_offsets) & (words[:, 5] == term_id) & (lengths >= HEADER_LENGTH))
    if len(candidates) == 0 or candidates[0] != 0:
        return None
    offsets = candidates.astype(np.int64) * HEADER_LENGTH
    ends = offsets + ((lengths[candidates].astype(np.int64) + (FRAME_ALIGNMENT - 1)) & ~(FRAME_ALIGNMENT - 1))
    if not np.array_equal(ends[:-1], offsets[1:]):
        return None  # a payload that looks like a header, or a gap: let the general scan decide
    if ends[-1] > length:  # the last frame is cut by the read length
        offsets = offsets[:-1]
        end = int(ends[-2]) if len(ends) > 1 else 0
    else:
        end = int(ends[-1])
    stop_reason = StopReason.END
    if end < length:
        if length - end < HEADER_LENGTH:
            stop_reason = StopReason.TRUNCATED_HEADER
        else:
            next_length = int(lengths[end // HEADER_LENGTH])
            if next_length == 0:
                stop_reason = StopReason.ZERO_LENGTH
            elif next_length < 0:
                stop_reason = StopReason.NEGATIVE_LENGTH
            elif next_length < HEADER_LENGTH:
                stop_reason = StopReason.TOO_SHORT
            elif end + aligned_frame_length(next_length) <= length:
                return None  # a whole frame whose fields do not match: the general scan decides
            else:
                stop_reason = StopReason.OVERRUN
    types = buffer[: length & ~1].view("<u2")[(offsets + 6) >> 1]
    return offsets, end, stop_reason, types


def _frames_numpy(buffer: np.ndarray, view: memoryview):
    scan = scan_frames(view)
    offsets = scan.offsets
    if len(offsets):
        types = buffer[: len(view) & ~1].view("<u2")[(offsets + 6) >> 1]
    else:
        types = np.empty(0, dtype=np.uint16)
    return offsets, scan.end, scan.stop_reason, types


def _frames_python(view: memoryview):
    offsets: list[int] = []
    types: list[int] = []
    end = 0
    for offset, header in walk_frames(view):
        offsets.append(offset)
        types.append(header.frame_type)
        end = offset + header.aligned_length
    reason = StopReason.END
    if len(view) - end >= HEADER_LENGTH:
        length = _frame_length_at(view, end)
        if length == 0:
            reason = StopReason.ZERO_LENGTH
        elif length < 0:
            reason = StopReason.NEGATIVE_LENGTH
        elif length < HEADER_LENGTH:
            reason = StopReason.TOO_SHORT
        else:
            reason = StopReason.OVERRUN
    elif end != len(view):
        reason = StopReason.TRUNCATED_HEADER
    return offsets, end, reason, types


# -- segment file access ----------------------------------------------------------------------------
def _segment_reader(archive_dir, recording: RecordingLayout) -> SegmentReader:
    return SegmentReader(archive_dir, recording.recording_id, recording.start_position,
                         recording.term_buffer_length, recording.segment_file_length)


def _segment_exists(archive_dir, recording: RecordingLayout, position: int) -> bool:
    base = segment_file_base_position(recording.start_position, position, recording.term_buffer_length,
                                      recording.segment_file_length)
    return segment_file_path(archive_dir, recording.recording_id, base).exists()


# -- the session --------------------------------------------------------------------------------------
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
                 limit: ReplayLimit | None = None, correlation_id: int = 0, owner: Any = None,
                 replay_buffer_length: int = DEFAULT_REPLAY_BUFFER_LENGTH, file_io_max_length: int = 0,
                 connect_timeout_ns: int = DEFAULT_CONNECT_TIMEOUT_NS, checksum=None,
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
        self._files = _segment_reader(archive_dir, recording)
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
            if not _segment_exists(self._archive_dir, self.recording, self._replay_position):
                if self._clock_ns() > self._connect_deadline_ns:
                    self._raise_error("recording segment file not created", ArchiveErrorCode.GENERIC)
                return 0
            position = self._replay_position
            if position > self.recording.start_position and position != self._stop_position \
                    and not self._is_frame_start(position):
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

    def _is_frame_start(self, position: int) -> bool:
        header = self._buffer_view[:HEADER_LENGTH]
        if self._files.read_into(position, header) < HEADER_LENGTH:
            return False
        term_offset, _, stream_id, term_id = _HEADER_CHECK.unpack_from(header, 8)
        expected_term_id = compute_term_id_from_position(position, self._bits, self.recording.initial_term_id)
        return (term_offset == position & (self._term_length - 1) and term_id == expected_term_id
                and stream_id == self.recording.stream_id and struct.unpack_from("<i", header, 0)[0] > 0)

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
