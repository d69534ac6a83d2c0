"""Replay block preparation: read a block of a recording, find its frames, rewrite its headers.

A replay offers whole frames of one term per block. :func:`prepare_block` chooses the frames
of a block just read from the segment files (the DATA frames up to the first PAD frame, the
first incomplete frame or the first frame at/after the replay limit), verifies their checksums
when a replay checksum is configured, and rewrites their session and stream ids to the replay
publication's, in place.

Frame boundaries come from ``driver_integration.frame.scan_frames`` (numpy, no per-frame
Python) or, for fixed-size messages, from one strided view over the block; the header rewrite is
one numpy scatter. ``vectorized=False`` selects the pure-Python walk, kept as the reference the
fast path is tested against byte for byte.

The segment-file helpers (:func:`open_segments`, :func:`segment_exists`,
:func:`is_recorded_frame_start`) are what a replay's INIT state needs to check that its start
position is a real frame of the recording (term offset, term id, stream id as the recording's).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from aeron_spark.archive.service.replay_plan import RecordingLayout
from aeron_spark.archive.storage.checksum import FrameChecksum
from aeron_spark.archive.storage.segment import SegmentReader, segment_file_path
from aeron_spark.driver_integration.frame import (
    FRAME_ALIGNMENT, HDR_TYPE_DATA, HDR_TYPE_PAD, HEADER_LENGTH, SESSION_ID_OFFSET, STREAM_ID_OFFSET,
    StopReason, aligned_frame_length, scan_frames, walk_frames)
from aeron_spark.driver_integration.position import (
    compute_term_id_from_position, position_bits_to_shift, segment_file_base_position)

_HEADER_CHECK = struct.Struct("<iiii")  # term_offset, session_id, stream_id, term_id at offset 8


class ReplayFrameError(ValueError):
    """Recorded bytes that are not a valid frame chain where the recording says data is."""



@dataclass(frozen=True, slots=True)
class PreparedBlock:
    data_length: int  # bytes of whole DATA frames from offset 0 to offer as one block
    padding_frame_length: int  # frame_length of a PAD frame right after them (0: none)


def prepare_block(buffer: np.ndarray, length: int, remaining: int, session_id: int, stream_id: int,
                  *, checksum: FrameChecksum | None = None, block_position: int = 0, vectorized: bool = True,
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
                        checksum: FrameChecksum | None, block_position: int, term_offset: int,
                        term_id: int) -> PreparedBlock | None:
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
def open_segments(archive_dir: str | os.PathLike, recording: RecordingLayout) -> SegmentReader:
    return SegmentReader(archive_dir, recording.recording_id, recording.start_position,
                         recording.term_buffer_length, recording.segment_file_length)


def segment_exists(archive_dir: str | os.PathLike, recording: RecordingLayout, position: int) -> bool:
    base = segment_file_base_position(recording.start_position, position, recording.term_buffer_length,
                                      recording.segment_file_length)
    return segment_file_path(archive_dir, recording.recording_id, base).exists()


def is_recorded_frame_start(files: SegmentReader, scratch: memoryview, recording: RecordingLayout,
                            position: int) -> bool:
    """Whether a frame of ``recording`` starts at ``position``: its header (read into
    ``scratch``, at least 32 bytes) has a positive length and this position's term offset and
    term id, and the recording's stream id."""
    header = scratch[:HEADER_LENGTH]
    if files.read_into(position, header) < HEADER_LENGTH:
        return False
    term_length = recording.term_buffer_length
    term_offset, _, stream_id, term_id = _HEADER_CHECK.unpack_from(header, 8)
    expected_term_id = compute_term_id_from_position(position, position_bits_to_shift(term_length),
                                                     recording.initial_term_id)
    return (term_offset == position & (term_length - 1) and term_id == expected_term_id
            and stream_id == recording.stream_id and struct.unpack_from("<i", header, 0)[0] > 0)
