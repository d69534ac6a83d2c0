"""Recording maintenance: truncate, purge, detach / delete detached / attach segments.

Plain functions over an open writable `Catalog` and the archive directory; the sidecar's
conductor calls them (and checks what only it knows, e.g. that no replay reads the recording).
Crash safety (SIGKILL at any point): files to be deleted are first renamed ``<name>.del``, then
the catalog is changed (the commit point), then the ``.del`` files are unlinked and the segment
holding a new stop is zeroed past it. Restart repair (`recovery.repair_archive`) restores ``.del``
files the catalog still needs (the operation never happened), deletes the others (it finishes),
and extends a segment left short and zeroes stale bytes past a stop. Fault points for the tests:
`fault_injection`.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aeron_spark.archive.storage import segment
from aeron_spark.archive.storage.fault_injection import fault_point
from aeron_spark.archive.storage.catalog import Catalog, UnknownRecordingError
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.driver_integration import frame, position as positions

log = logging.getLogger(__name__)

class MaintenanceError(Exception):
    """A maintenance request that cannot be carried out; names the recording and position."""

    def __init__(self, recording_id: int, message: str) -> None:
        super().__init__(f"recording {recording_id}: {message}")
        self.recording_id = recording_id


@dataclass(frozen=True)
class MaintenanceResult:
    recording_id: int
    start_position: int
    stop_position: int
    deleted_files: list[Path] = field(default_factory=list)
    truncated_file: Path | None = None
    attached_files: list[Path] = field(default_factory=list)


# --------------------------------------------------------------------------- segment files

def segment_files(archive_dir: str | os.PathLike, recording_id: int) -> dict[int, Path]:
    """``{base position: path}`` of the recording's ``<id>-<base>.rec`` files, by base."""
    return {f.base_position: f.path for f in segment.list_segment_files(archive_dir, recording_id)}


def _pending_deletes(archive_dir: str | os.PathLike[str], recording_id: int) -> list[Path]:
    """``<id>-<base>.rec.del`` files a crash left between rename and unlink."""
    prefix = f"{recording_id}-"
    suffix = positions.SEGMENT_FILE_SUFFIX + segment.DELETE_SUFFIX
    return [Path(e.path) for e in os.scandir(archive_dir)
            if e.name.startswith(prefix) and e.name.endswith(suffix)
            and e.name[len(prefix):-len(suffix)].isdigit()]


def _segment_base(d: RecordingDescriptor, position: int) -> int:
    return positions.segment_file_base_position(d.start_position, position, d.term_buffer_length,
                                                d.segment_file_length)


# --------------------------------------------------------------------------- checks

def _stopped_recording(catalog: Catalog, recording_id: int, action: str) -> RecordingDescriptor:
    descriptor = _recording(catalog, recording_id)
    if descriptor.is_active:
        raise MaintenanceError(recording_id, f"cannot {action} an active recording; stop it first")
    return descriptor


def _recording(catalog: Catalog, recording_id: int) -> RecordingDescriptor:
    descriptor = catalog.descriptor(recording_id)
    if descriptor is None:
        raise UnknownRecordingError(recording_id)
    return descriptor


def is_frame_boundary(archive_dir: str | os.PathLike, d: RecordingDescriptor, position: int) -> bool:
    """Whether a frame of the recording starts (or the recording ends) exactly at ``position``.

    Term boundaries are always frame boundaries, so the frames are walked from the start of the
    position's term (or the recording's start, if later).
    """
    if position in (d.start_position, d.stop_position):
        return True
    term_mask = d.term_buffer_length - 1
    walk_from = max(position - (position & term_mask), d.start_position)
    if walk_from == position:
        return True
    base = _segment_base(d, position)
    path = Path(archive_dir) / positions.segment_file_name(d.recording_id, base)
    try:
        with open(path, "rb") as f:
            f.seek(walk_from - base)
            data = f.read(position - walk_from)
    except FileNotFoundError:
        return False
    if len(data) != position - walk_from:
        return False
    return frame.scan_frames(data).end == len(data)


# --------------------------------------------------------------------------- operations

def truncate_recording(catalog: Catalog, archive_dir: str | os.PathLike, recording_id: int,
                       position: int) -> MaintenanceResult:
    """Shortens a stopped recording to ``position`` (a frame boundary in [start, stop]).

    To its start position the recording becomes empty and all its segment files go. Otherwise
    segments wholly past the position are deleted and the one holding it is cut there.
    """
    d = _stopped_recording(catalog, recording_id, "truncate")
    if position % frame.FRAME_ALIGNMENT:
        raise MaintenanceError(recording_id, f"truncate position {position} is not aligned to "
                                             f"{frame.FRAME_ALIGNMENT} bytes")
    if not d.start_position <= position <= d.stop_position:
        raise MaintenanceError(recording_id, f"truncate position {position} is outside the "
                                             f"recording [{d.start_position}, {d.stop_position}]")
    if not is_frame_boundary(archive_dir, d, position):
        raise MaintenanceError(recording_id, f"truncate position {position} is not at the start of "
                                             f"a recorded frame")
    truncated = None
    holding, offset = None, 0
    if position == d.start_position:
        first_doomed = 0
    else:
        base = _segment_base(d, position)
        offset = position - base
        first_doomed = base + (d.segment_file_length if offset else 0)
        holding = segment.segment_file_path(archive_dir, recording_id, base)
    deleted = [f.path for f in segment.list_segment_files(archive_dir, recording_id)
               if f.base_position >= first_doomed]
    staged = [segment.stage_delete(path) for path in deleted]
    fault_point("truncate-staged")
    catalog.update_stop_position(recording_id, position)
    fault_point("truncate-committed")
    for path in staged:
        path.unlink(missing_ok=True)
    if offset and holding is not None and holding.exists():
        segment.truncate_segment_file(holding, offset, d.segment_file_length,
                                      file_sync=catalog.file_sync)
        truncated = holding
    log.info("recording %d truncated from %d to %d: %d segment files deleted%s", recording_id,
             d.stop_position, position, len(deleted),
             f", {truncated.name} cut at {position - _segment_base(d, position)}" if truncated else "")
    return MaintenanceResult(recording_id, d.start_position, position, deleted, truncated)


def purge_recording(catalog: Catalog, archive_dir: str | os.PathLike,
                    recording_id: int) -> MaintenanceResult:
    """Marks a stopped recording's entry DELETED and deletes all its segment files."""
    d = _stopped_recording(catalog, recording_id, "purge")
    deleted = [f.path for f in segment.list_segment_files(archive_dir, recording_id)]
    staged = [segment.stage_delete(path) for path in deleted]
    fault_point("purge-staged")
    catalog.delete(recording_id)
    fault_point("purge-committed")
    for path in staged:
        path.unlink(missing_ok=True)
    for leftover in _pending_deletes(archive_dir, recording_id):
        leftover.unlink(missing_ok=True)
        deleted.append(leftover)
    log.info("recording %d purged: %d files deleted", recording_id, len(deleted))
    return MaintenanceResult(recording_id, d.start_position, d.stop_position, deleted)


def detach_segments(catalog: Catalog, archive_dir: str | os.PathLike, recording_id: int,
                    new_start_position: int, *,
                    recorded_position: int | None = None) -> MaintenanceResult:
    """Moves the start position forward to a segment base; the segments below stay on disk.

    For an active recording pass its current ``recorded_position``. The segment holding the
    stop (or recorded) position always stays attached: a segment base at or below that position
    is at or below that segment's base.
    """
    d = _recording(catalog, recording_id)
    end = d.stop_position
    if d.is_active:
        if recorded_position is None:
            raise MaintenanceError(recording_id, "is active: detaching needs its recorded position")
        end = recorded_position
    if new_start_position < d.start_position:
        raise MaintenanceError(recording_id, f"detach position {new_start_position} is below the "
                                             f"start position {d.start_position}")
    if new_start_position > end:
        raise MaintenanceError(recording_id, f"detach position {new_start_position} is beyond the "
                                             f"{'stop' if not d.is_active else 'recorded'} position {end}")
    if _segment_base(d, new_start_position) != new_start_position:
        raise MaintenanceError(
            recording_id, f"detach position {new_start_position} is not a segment base (segments "
                          f"of {d.segment_file_length} bytes from {_segment_base(d, d.start_position)})")
    if new_start_position != d.start_position:
        catalog.update_start_position(recording_id, new_start_position)
        log.info("recording %d: segments below %d detached (start was %d)", recording_id,
                 new_start_position, d.start_position)
    return MaintenanceResult(recording_id, new_start_position, d.stop_position)


def delete_detached_segments(catalog: Catalog, archive_dir: str | os.PathLike,
                             recording_id: int) -> MaintenanceResult:
    """Deletes the segment files wholly below the segment holding the start position."""
    d = _recording(catalog, recording_id)
    first_base = _segment_base(d, d.start_position)
    deleted = segment.delete_segment_files_below(archive_dir, recording_id, first_base)
    log.info("recording %d: %d detached segment files deleted", recording_id, len(deleted))
    return MaintenanceResult(recording_id, d.start_position, d.stop_position, deleted)


def attach_segments(catalog: Catalog, archive_dir: str | os.PathLike,
                    recording_id: int) -> MaintenanceResult:
    """Re-attaches detached segments: walks back from the start while a full-length
    ``<id>-<base>.rec`` exists, then starts the recording at the first frame in the earliest one."""
    d = _recording(catalog, recording_id)
    directory = Path(archive_dir)
    segment_length = d.segment_file_length
    base = _segment_base(d, d.start_position) - segment_length
    attached: list[Path] = []
    while base >= 0:
        path = directory / positions.segment_file_name(recording_id, base)
        try:
            if path.stat().st_size != segment_length:
                log.warning("recording %d: %s is %d bytes, not the segment length %d; not attached",
                            recording_id, path.name, path.stat().st_size, segment_length)
                break
        except FileNotFoundError:
            break
        attached.append(path)
        base -= segment_length
    if not attached:
        return MaintenanceResult(recording_id, d.start_position, d.stop_position)
    earliest = attached[-1]
    earliest_base = positions.parse_segment_file_name(earliest.name)[1]
    new_start = earliest_base + _first_frame_offset(earliest, segment_length)
    catalog.update_start_position(recording_id, new_start)
    log.info("recording %d: %d segments attached, start moved from %d to %d", recording_id,
             len(attached), d.start_position, new_start)
    return MaintenanceResult(recording_id, new_start, d.stop_position, attached_files=attached[::-1])


def _first_frame_offset(path: Path, segment_length: int) -> int:
    """Offset of the first written frame: bytes before a recording's first frame are zero."""
    chunk = 1024 * 1024
    with open(path, "rb") as f:
        for offset in range(0, segment_length, chunk):
            data = f.read(chunk)
            slots = len(data) // frame.HEADER_LENGTH
            lengths = np.frombuffer(data, dtype="<i4", count=slots * 8).reshape(slots, 8)[:, 0]
            written = np.flatnonzero(lengths)
            if len(written):
                return offset + int(written[0]) * frame.HEADER_LENGTH
    return 0


# --------------------------------------------------------------------------- verification

@dataclass
class VerifyResult:
    """What `verify_recording` found. ``data_end``: where the chain of complete frames from the
    start position ends (the recomputed stop position of an active recording)."""

    recording_id: int
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # odd but harmless (restart repair fixes them)
    data_end: int = 0
    frames: int = 0
    segments: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors


def verify_recording(archive_dir: str | os.PathLike, d: RecordingDescriptor, *,
                     checksum: Callable[[memoryview], int] | None = None) -> VerifyResult:
    """Checks a recording's positions and every frame of its segment files.

    Start and stop must be 32-aligned with stop >= start; the frames from the start must chain
    without gaps up to the stop position (for an active recording: as far as they go) with each
    header's termOffset, termId and streamId matching its position; with ``checksum``, each DATA
    frame's session-id field must hold the checksum of its payload (aligned length - 32 bytes).
    Missing or short segment files are errors. Nothing is changed.
    """
    result = VerifyResult(d.recording_id, data_end=d.start_position)
    if d.start_position < 0 or d.start_position % frame.FRAME_ALIGNMENT:
        result.errors.append(f"start position {d.start_position} is negative or not 32-byte aligned")
    if not d.is_active and (d.stop_position < d.start_position or d.stop_position % frame.FRAME_ALIGNMENT):
        result.errors.append(f"stop position {d.stop_position} is below the start position "
                             f"{d.start_position} or not 32-byte aligned")
    try:
        positions.validate_segment_length(d.segment_file_length, d.term_buffer_length)
    except ValueError as error:
        result.errors.append(str(error))
    if result.errors:
        return result
    files = segment_files(archive_dir, d.recording_id)
    bits = positions.position_bits_to_shift(d.term_buffer_length)
    position = d.start_position
    while d.is_active or position < d.stop_position:
        base = _segment_base(d, position)
        path = files.get(base)
        if path is None:
            if not d.is_active or any(b > base for b in files):
                result.errors.append(f"segment file {positions.segment_file_name(d.recording_id, base)} "
                                     f"is missing (needed from position {position})")
            break
        result.segments += 1
        window_end = d.segment_file_length if d.is_active else min(d.segment_file_length, d.stop_position - base)
        end = _verify_segment(path, base, position - base, window_end, d, bits, checksum, result)
        position = base + end
        if end < window_end or end == 0:
            break
    result.data_end = position
    if not d.is_active and position < d.stop_position and not any("missing" in e for e in result.errors):
        result.errors.append(f"recorded frames end at position {position}, before the stop position "
                             f"{d.stop_position}")
    return result


def _verify_segment(path: Path, base: int, start: int, end: int, d: RecordingDescriptor, bits: int,
                    checksum, result: VerifyResult) -> int:
    """Verifies frames in [start, end) of one segment file; returns where the chain stopped."""
    size = path.stat().st_size
    if size != d.segment_file_length:
        # A short file holding every byte the recording needs (a kill inside truncate) replays
        # correctly: a note, not a reason to invalidate the recording.
        message = f"{path.name} is {size} bytes, expected the segment length {d.segment_file_length}"
        if d.is_active or size < end:
            result.errors.append(message)
        else:
            result.notes.append(message + " (holds all recorded data; restart repair extends it)")
        end = min(end, size - size % frame.FRAME_ALIGNMENT)
        if end <= start:
            return start
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        scan = frame.scan_frames(mapped, start, end)
        offsets = scan.offsets
        result.frames += len(offsets)
        if len(offsets):
            _check_headers(mapped, offsets, base, d, bits, path, result)
            if checksum is not None:
                _check_checksums(mapped, offsets, base, path, checksum, result)
        if scan.end < end and not d.is_active:
            result.errors.append(
                f"{path.name}: frame chain breaks at position {base + scan.end} "
                f"({scan.stop_reason.value}; frame_length {scan.stop_frame_length})")
        del offsets
        return scan.end


def _check_headers(mapped, offsets: np.ndarray, base: int, d: RecordingDescriptor, bits: int,
                   path: Path, result: VerifyResult) -> None:
    words = np.frombuffer(mapped, dtype="<i4")
    slots = offsets // 4
    frame_positions = base + offsets
    expected_term_offsets = frame_positions & (d.term_buffer_length - 1)
    expected_term_ids = ((frame_positions >> bits) + d.initial_term_id + (1 << 31)) % (1 << 32) - (1 << 31)
    for name, field_word, expected in (
            ("termOffset", frame.TERM_OFFSET_OFFSET // 4, expected_term_offsets),
            ("termId", frame.TERM_ID_OFFSET // 4, expected_term_ids),
            ("streamId", frame.STREAM_ID_OFFSET // 4, np.full(len(offsets), d.stream_id))):
        actual = words[slots + field_word].astype(np.int64)
        bad = np.flatnonzero(actual != expected)
        if len(bad):
            first = int(bad[0])
            result.errors.append(
                f"{path.name}: {len(bad)} frame(s) with a wrong {name}, first at position "
                f"{int(frame_positions[first])}: {int(actual[first])}, expected {int(expected[first])}")
    del words


def _check_checksums(mapped, offsets: np.ndarray, base: int, path: Path, checksum,
                     result: VerifyResult) -> None:
    view = memoryview(mapped)
    bad = []
    for offset in offsets.tolist():
        header = frame.DataFrameHeader.unpack(view, offset)
        if not header.is_data:
            continue
        payload = view[offset + frame.HEADER_LENGTH:offset + header.aligned_length]
        if checksum(payload) != header.session_id:
            bad.append(base + offset)
    view.release()
    if bad:
        result.errors.append(f"{path.name}: {len(bad)} DATA frame(s) fail the checksum, first at "
                             f"position {bad[0]}")


def migrate_segments(catalog: Catalog, archive_dir: str | os.PathLike, src_recording_id: int,
                     dst_recording_id: int) -> MaintenanceResult:
    """Moves the stopped ``src`` recording's segment files to ``dst`` (Aeron's migrateSegments):
    the two must be contiguous (src ends where dst starts, or starts where dst ends) at a segment
    base of both, with the same segment length, term length, initial term id, stream and MTU.

    Each ``<src>-<base>.rec`` is renamed ``<dst>-<base>.rec`` (an empty segment file at src's stop
    position is deleted instead), then dst's start (or stop) takes src's and src's stop becomes its
    start: src is left empty. A crash between the renames and the catalog update leaves dst-named
    files outside dst's range, which attach (or restart repair's orphan report) sees.
    ``attached_files`` are the moved files, ``deleted_files`` the removed empty one.
    """
    src = _stopped_recording(catalog, src_recording_id, "migrate")
    dst = _recording(catalog, dst_recording_id)
    for name in ("segment_file_length", "term_buffer_length", "initial_term_id", "stream_id", "mtu_length"):
        if getattr(src, name) != getattr(dst, name):
            raise MaintenanceError(src_recording_id, f"invalid migrate: src {name}={getattr(src, name)} "
                                                     f"dst {name}={getattr(dst, name)}")
    if src.stop_position == dst.start_position:
        join = src.stop_position
    elif src.start_position == dst.stop_position:
        join = src.start_position
    else:
        raise MaintenanceError(
            src_recording_id, "invalid migrate: src and dst are not contiguous"
                              f" srcStartPosition={src.start_position} srcStopPosition={src.stop_position}"
                              f" dstStartPosition={dst.start_position} dstStopPosition={dst.stop_position}")
    for label, d in (("src", src), ("dst", dst)):
        if _java_segment_base(d, join) != join:
            raise MaintenanceError(src_recording_id, f"invalid migrate: join position is not on segment boundary "
                                                     f"of {label} recording seamPosition={join}")
    directory = Path(archive_dir)
    length = src.segment_file_length
    first, last = _java_segment_base(src, src.start_position), _java_segment_base(src, src.stop_position)
    moves: list[tuple[Path, Path]] = []
    empty_following: list[Path] = []
    for base in range(first, last + 1, length):
        source = directory / positions.segment_file_name(src_recording_id, base)
        if base == src.stop_position:
            if source.exists():
                empty_following.append(source)
            continue
        target = directory / positions.segment_file_name(dst_recording_id, base)
        if not source.exists():
            raise MaintenanceError(src_recording_id, f"missing src segment file {source}")
        if target.exists():
            raise MaintenanceError(src_recording_id, f"preexisting dst segment file {target}")
        moves.append((source, target))
    prepend = src.stop_position == dst.start_position
    if not prepend:
        # Appending: dst's new stop first, so restart repair (which deletes a stopped recording's
        # files past its stop) never deletes a file already renamed to dst.
        catalog.update_stop_position(dst_recording_id, src.stop_position)
    for source, target in moves:
        os.rename(source, target)
    for path in empty_following:
        segment.stage_delete(path).unlink(missing_ok=True)
    if prepend:
        # Prepending: the files are renamed first; below dst's start they are detached segments
        # until this write (repair keeps them; attach-segments would take them back).
        catalog.update_start_position(dst_recording_id, src.start_position)
    catalog.update_stop_position(src_recording_id, src.start_position)
    log.info("recording %d: %d segment files migrated to recording %d", src_recording_id, len(moves),
             dst_recording_id)
    return MaintenanceResult(src_recording_id, src.start_position, src.start_position,
                             deleted_files=empty_following, attached_files=[target for _, target in moves])


def _java_segment_base(d: RecordingDescriptor, position: int) -> int:
    """Aeron's segmentFileBasePosition with Java's masking (defined below the start's term too)."""
    start_term_base = d.start_position - (d.start_position & (d.term_buffer_length - 1))
    length = position - start_term_base
    return start_term_base + length - (length & (d.segment_file_length - 1))
