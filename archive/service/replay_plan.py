"""Replay planning: the rules a (Bounded)ReplayRequest must satisfy, sans-IO.

:func:`plan_replay` applies Aeron's ``ArchiveConductor``/``ReplaySession`` request rules (see
docs/protocol.md): the replay position is 32-aligned, >= the recording's start and < its stop
when the recording is stopped, and not past the limit counter the replay follows; length -1
(``REPLAY_ALL_AND_FOLLOW``) follows that limit (an active recording's ``rec-pos`` counter or a
bounded replay's limit counter), -2 (``REPLAY_ALL_AND_STOP``) replays what exists now
(EMPTY_RECORDING when that is nothing), any other length is min(length, available).
Violations raise :class:`ReplayRequestError` with Aeron's error code.

A replay's session id is :func:`make_replay_session_id` ``(replay_id, publication.session_id)``:
the OK response's relevantId, and the low 32 bits are the replay Image's session id.
"""

from __future__ import annotations

from dataclasses import dataclass

from aeron_spark.archive.codecs.constants import REPLAY_ALL_AND_FOLLOW, REPLAY_ALL_AND_STOP, ArchiveErrorCode
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION
from aeron_spark.archive.configuration import DEFAULT_REPLAY_BUFFER_LENGTH
from aeron_spark.driver_integration.frame import FRAME_ALIGNMENT

INT64_MAX = (1 << 63) - 1


class ReplayRequestError(ValueError):
    """A replay request the archive refuses; ``code`` is the ArchiveErrorCode for the response."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)



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
