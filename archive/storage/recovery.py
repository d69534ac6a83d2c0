"""Crash recovery of recordings left active (stop position unknown) when the archive opens.

:func:`recover_recording` is a read-only function of (descriptor parameters, files in the archive
directory): it finds the recording's last segment file, walks its frames from the start of the
data in that file to the last *complete* frame and returns the recovered stop position plus a
report of everything odd it saw (missing or misnamed segment files, wrong file lengths, torn or
corrupt frames, stale bytes after the stop). Nothing found is silently ignored. The caller
updates the catalog; :func:`apply_recovery` zeroes stale bytes after the stop so a later
extension cannot chain into them.

Rules (those of Aeron's Catalog when it recovers a recording left active), and where this is
stricter than Aeron:

* The walk stops at the first frame_length <= 0 (Aeron's rule), and also - stricter - at a frame
  whose length is below the header length, whose aligned length runs past the bytes the file
  holds or the segment end (torn), that crosses a term boundary, whose type is not DATA/PAD, or
  whose term offset (and, when given, term id / stream id) does not match its position
  (corrupt header). The stop position is the end of the last good frame before it.
* Page-straddle rule for the last complete frame, as Aeron: if it crosses a 4 KiB page boundary
  it counts only if its stored checksum verifies (when a checksum is given) or every page after
  the straddle point holds at least one non-zero 8-byte word. Aeron then refuses to start; here
  the default is to exclude the frame from the recording (stop before it) and report it, which
  never exposes a half-written frame; ``on_unverified_straddle="raise"`` gives Aeron's refusal.
  PAD frames are exempt: only their 32-byte header is ever written, and a header never crosses a
  page (Aeron would refuse a recording whose last frame is a padding frame).
* ``stop = max(segmentBase + endOffset, startPosition)``; no segment file at all gives
  ``stop = startPosition`` (reported).
"""

from __future__ import annotations

import enum
import errno
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from aeron_spark.archive.storage.checksum import FrameChecksum, frame_checksum_matches
from aeron_spark.archive.configuration import DEFAULT_FILE_SYNC
from aeron_spark.archive.storage.segment import (
    DELETE_SUFFIX, SegmentFile, list_segment_files, segment_file_path, truncate_segment_file)
from aeron_spark.driver_integration.frame import (
    FRAME_ALIGNMENT, HDR_TYPE_DATA, HDR_TYPE_PAD, HEADER_LENGTH, StopReason, aligned_frame_length,
    scan_frames)
from aeron_spark.driver_integration.position import (
    parse_segment_file_name, position_bits_to_shift, start_term_base_position,
    validate_segment_length)

PAGE_SIZE = 4096
SCAN_CHUNK = 16 * 1024 * 1024
_INT32 = struct.Struct("<i")
_UINT16 = struct.Struct("<H")


class RecoveryError(Exception):
    """Recovery refused to guess (``on_unverified_straddle="raise"``) or bad parameters."""


class FindingKind(enum.Enum):
    NO_SEGMENT_FILES = "no segment file exists for the recording"
    MISSING_SEGMENT = "a segment file between the first and the last one is missing"
    OFF_GRID_SEGMENT = "segment file base position is not on the recording's segment grid"
    DETACHED_SEGMENT = "segment file below the start position (detached, not yet deleted)"
    DELETE_LEFTOVER = "a '.rec.del' file left by an interrupted delete"
    ZERO_LENGTH_FILE = "the last segment file is empty (length 0)"
    WRONG_FILE_LENGTH = "segment file length differs from the segment length"
    TORN_FRAME = "the frame after the stop position is incomplete (torn write)"
    CORRUPT_FRAME = "the frame after the stop position has an impossible header"
    UNVERIFIED_PAGE_STRADDLE = "the last frame straddles a page boundary and could not be verified"
    STALE_DATA_AFTER_STOP = "non-zero bytes remain in the last segment after the stop position"

    @property
    def is_damage(self) -> bool:
        """Whether this kind means recorded data may be lost or damaged (vs. housekeeping)."""
        return self not in (FindingKind.DETACHED_SEGMENT, FindingKind.DELETE_LEFTOVER)


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    detail: str
    path: Path | None = None
    position: int | None = None

    def __str__(self) -> str:
        where = f" at position {self.position}" if self.position is not None else ""
        return f"{self.kind.name}{where}: {self.detail}"


@dataclass(frozen=True)
class RecoveryReport:
    recording_id: int
    stop_position: int
    segment_length: int
    last_segment: SegmentFile | None = None
    end_offset: int = 0  # in the last segment file: where the last good frame ends
    # Why the frame walk stopped; None when it stopped on a corrupt header (see findings) or
    # nothing was walked.
    stop_reason: StopReason | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def is_clean(self) -> bool:
        return not any(f.kind.is_damage for f in self.findings)

    @property
    def has_stale_data_after_stop(self) -> bool:
        return any(f.kind is FindingKind.STALE_DATA_AFTER_STOP for f in self.findings)

    def describe(self) -> str:
        lines = [f"recording {self.recording_id}: recovered stop position {self.stop_position}"]
        lines += [f"  {finding}" for finding in self.findings]
        return "\n".join(lines)



class ArchiveFiles:
    """The archive directory's segment file names (``.rec`` and ``.rec.del``) grouped by recording
    id, from one listing. Start-up looks at every recording; listing the directory for each one
    made it quadratic in the number of recordings."""

    def __init__(self, archive_dir: str | os.PathLike) -> None:
        self.directory = Path(archive_dir)
        self._names: dict[int, list[str]] = {}
        with os.scandir(self.directory) as entries:
            for entry in entries:
                head, dash, _ = entry.name.partition("-")
                if dash and head.isdigit() and entry.name.endswith((".rec", ".rec" + DELETE_SUFFIX)):
                    self._names.setdefault(int(head), []).append(entry.name)

    def segment_files(self, recording_id: int) -> list[SegmentFile]:
        """As `segment.list_segment_files`, from the listing."""
        found = []
        for name in self._names.get(recording_id, ()):
            if name.endswith(".rec"):
                try:
                    file_recording_id, base = parse_segment_file_name(name)
                except ValueError:
                    continue
                if file_recording_id == recording_id:
                    found.append(SegmentFile(base, self.directory / name))
        return sorted(found)

    def staged_deletes(self, recording_id: int) -> list[str]:
        """The recording's ``<id>-<base>.rec.del`` names, sorted."""
        found = []
        for name in self._names.get(recording_id, ()):
            if name.endswith(".rec" + DELETE_SUFFIX):
                try:
                    if parse_segment_file_name(name[: -len(DELETE_SUFFIX)])[0] == recording_id:
                        found.append(name)
                except ValueError:
                    continue
        return sorted(found)

@dataclass(frozen=True)
class _Layout:
    recording_id: int
    start_position: int
    term_length: int
    segment_length: int
    bits: int
    initial_term_id: int | None
    stream_id: int | None


def _classify_files(archive_dir: Path, layout: _Layout, findings: list[Finding],
                    files: ArchiveFiles) -> list[SegmentFile]:
    """On-grid segment files at or above the first segment; everything else becomes a finding."""
    start_base = start_term_base_position(layout.start_position, layout.term_length)
    grid: list[SegmentFile] = []
    for segment in files.segment_files(layout.recording_id):
        if (segment.base_position - start_base) % layout.segment_length:
            findings.append(Finding(FindingKind.OFF_GRID_SEGMENT,
                                    f"{segment.path.name}: segments start at {start_base} + k * "
                                    f"{layout.segment_length}", segment.path, segment.base_position))
        elif segment.base_position < start_base:
            findings.append(Finding(FindingKind.DETACHED_SEGMENT, segment.path.name, segment.path,
                                    segment.base_position))
        else:
            grid.append(segment)
    for name in files.staged_deletes(layout.recording_id):
        findings.append(Finding(FindingKind.DELETE_LEFTOVER, name, archive_dir / name))
    if grid:
        present = {segment.base_position for segment in grid}
        for base in range(start_base, grid[-1].base_position, layout.segment_length):
            if base not in present:
                path = segment_file_path(archive_dir, layout.recording_id, base)
                findings.append(Finding(FindingKind.MISSING_SEGMENT,
                                        f"{path.name} does not exist", path, base))
    return grid


def _pread_exact(fd: int, buffer: memoryview, offset: int) -> int:
    done = 0
    while done < len(buffer):
        count = os.preadv(fd, [buffer[done:]], offset + done)
        if count == 0:
            break
        done += count
    return done


def _first_bad_header(chunk: memoryview, offsets: np.ndarray, chunk_position: int,
                      layout: _Layout) -> tuple[int, str] | None:
    """Index and description of the first frame whose header contradicts its position."""
    words = np.frombuffer(chunk, dtype="<i4", count=len(chunk) // 4)
    slots = offsets // 4
    lengths = words[slots].astype(np.int64)
    types = words[slots + 1].astype(np.int64) >> 16 & 0xFFFF
    positions = chunk_position + offsets
    term_offsets = positions & (layout.term_length - 1)
    bad_offset = words[slots + 2] != term_offsets
    bad_type = (types != HDR_TYPE_DATA) & (types != HDR_TYPE_PAD)
    crosses = term_offsets + ((lengths + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT) > layout.term_length
    bad = bad_offset | bad_type | crosses
    bad_term_id = bad_stream = None
    if layout.initial_term_id is not None:
        expected = ((positions >> layout.bits) + layout.initial_term_id + (1 << 31)) % (1 << 32) - (1 << 31)
        bad_term_id = words[slots + 5] != expected
        bad |= bad_term_id
    if layout.stream_id is not None:
        bad_stream = words[slots + 4] != layout.stream_id
        bad |= bad_stream
    hits = np.flatnonzero(bad)
    if len(hits) == 0:
        return None
    index = int(hits[0])
    slot = int(slots[index])
    reasons = []
    if bad_offset[index]:
        reasons.append(f"term_offset {int(words[slot + 2])} != {int(term_offsets[index])}")
    if bad_type[index]:
        reasons.append(f"frame type {int(types[index])} is neither DATA nor PAD")
    if crosses[index]:
        reasons.append(f"frame of length {int(lengths[index])} crosses the term end")
    if bad_term_id is not None and bad_term_id[index]:
        reasons.append(f"term_id {int(words[slot + 5])} does not match the position")
    if bad_stream is not None and bad_stream[index]:
        reasons.append(f"stream_id {int(words[slot + 4])} != {layout.stream_id}")
    return index, "; ".join(reasons)


@dataclass
class _Walk:
    end_offset: int
    stop_reason: StopReason | None
    last_frame_offset: int | None
    finding: Finding | None


def _walk_segment(fd: int, path: Path, base: int, first_offset: int, limit: int,
                  layout: _Layout) -> _Walk:
    """Walk frames in ``[first_offset, limit)`` of one file up to the last complete, sane frame."""
    buffer = memoryview(bytearray(min(SCAN_CHUNK, max(limit - first_offset, HEADER_LENGTH))))
    offset, last_frame = first_offset, None
    while True:
        chunk_length = _pread_exact(fd, buffer[: min(len(buffer), limit - offset)], offset)
        chunk = buffer[:chunk_length]
        scan = scan_frames(chunk)
        bad = _first_bad_header(chunk, scan.offsets, base + offset, layout) if len(scan.offsets) else None
        if bad is not None:
            index, why = bad
            if index:
                last_frame = offset + int(scan.offsets[index - 1])
            bad_offset = offset + int(scan.offsets[index])
            return _Walk(bad_offset, None, last_frame,
                         Finding(FindingKind.CORRUPT_FRAME, f"{path.name} offset {bad_offset}: {why}",
                                 path, base + bad_offset))
        if len(scan.offsets):
            last_frame = offset + int(scan.offsets[-1])
        end = offset + scan.end
        if end >= limit or scan.stop_reason in (StopReason.ZERO_LENGTH, StopReason.NEGATIVE_LENGTH,
                                                StopReason.TOO_SHORT) or offset + chunk_length >= limit:
            return _finish_walk(path, base, end, limit, scan, last_frame)
        # The chunk ended mid-frame (or on a frame boundary): continue from the frame at ``end``.
        header = bytearray(HEADER_LENGTH)
        _pread_exact(fd, memoryview(header), end)
        length = _INT32.unpack_from(header, 0)[0]
        aligned = aligned_frame_length(length)
        if length >= HEADER_LENGTH and end + aligned <= limit and aligned > len(buffer):
            if _UINT16.unpack_from(header, 6)[0] == HDR_TYPE_PAD:
                bad = _first_bad_header(memoryview(header), np.zeros(1, dtype=np.int64), base + end, layout)
                if bad is None:  # a long PAD: only its header matters, skip its (zero) body
                    last_frame, offset = end, end + aligned
                    if offset >= limit:
                        return _Walk(offset, StopReason.END, last_frame, None)
                    continue
            buffer = memoryview(bytearray(aligned))  # an oversized DATA frame: read it whole
        offset = end


def _finish_walk(path: Path, base: int, end: int, limit: int, scan, last_frame: int | None) -> _Walk:
    reason = scan.stop_reason
    if end >= limit:
        return _Walk(end, StopReason.END, last_frame, None)
    if reason is StopReason.ZERO_LENGTH:
        return _Walk(end, reason, last_frame, None)
    if reason is StopReason.TOO_SHORT:
        finding = Finding(FindingKind.CORRUPT_FRAME,
                          f"{path.name} offset {end}: frame_length {scan.stop_frame_length} is below "
                          f"the {HEADER_LENGTH}-byte header", path, base + end)
    else:
        shown = "" if scan.stop_frame_length is None else f" (frame_length {scan.stop_frame_length})"
        finding = Finding(FindingKind.TORN_FRAME,
                          f"{path.name} offset {end}: {reason.value}{shown}; the file holds data "
                          f"up to offset {limit}", path, base + end)
    return _Walk(end, reason, last_frame, finding)


def _straddle_ok(fd: int, frame_offset: int, checksum: FrameChecksum | None) -> tuple[bool, int, bool]:
    """(verified, aligned length, straddles) for the last frame, by Aeron's page-straddle rule."""
    header = bytearray(HEADER_LENGTH)
    _pread_exact(fd, memoryview(header), frame_offset)
    aligned = aligned_frame_length(_INT32.unpack_from(header, 0)[0])
    frame_type = _UINT16.unpack_from(header, 6)[0]
    end = frame_offset + aligned
    straddles = frame_offset // PAGE_SIZE != (end - 1) // PAGE_SIZE
    if not straddles or frame_type == HDR_TYPE_PAD:
        return True, aligned, straddles
    frame = bytearray(aligned)
    _pread_exact(fd, memoryview(frame), frame_offset)
    if checksum is not None and frame_checksum_matches(frame, checksum):
        return True, aligned, straddles
    page = (frame_offset // PAGE_SIZE + 1) * PAGE_SIZE
    while page < end:
        words = np.frombuffer(frame, dtype="<u8", count=(min(page + PAGE_SIZE, end) - page) // 8,
                              offset=page - frame_offset)
        if not words.any():
            return False, aligned, straddles
        page += PAGE_SIZE
    return True, aligned, straddles


def _has_data_after(fd: int, offset: int, limit: int) -> bool:
    """Whether any non-zero byte lies in ``[offset, limit)``; skips holes with SEEK_DATA."""
    buffer = memoryview(bytearray(min(SCAN_CHUNK, max(limit - offset, 8))))
    while offset < limit:
        try:
            data_start = os.lseek(fd, offset, os.SEEK_DATA)
            data_end = min(os.lseek(fd, data_start, os.SEEK_HOLE), limit)
        except OSError as error:
            if error.errno == errno.ENXIO:  # only a hole remains
                return False
            data_start, data_end = offset, limit
        while data_start < data_end:
            count = _pread_exact(fd, buffer[: min(len(buffer), data_end - data_start)], data_start)
            if count == 0:
                return False
            if np.frombuffer(buffer[:count], dtype=np.uint8).any():
                return True
            data_start += count
        offset = max(data_end, offset + 1)
    return False


def recover_recording(archive_dir: str | os.PathLike, recording_id: int, start_position: int,
                      term_length: int, segment_length: int, *, initial_term_id: int | None = None,
                      stream_id: int | None = None, checksum: FrameChecksum | None = None,
                      on_unverified_straddle: Literal["exclude", "raise"] = "exclude",
                      files: ArchiveFiles | None = None) -> RecoveryReport:
    """Recovered stop position of an active recording and a report of what was found.

    Read-only. ``initial_term_id``/``stream_id`` (from the descriptor) enable the term id and
    stream id header checks; ``checksum`` is the record checksum the recording was written with.
    ``files``: the directory's listing when recovering many recordings (default: listed here).
    """
    if on_unverified_straddle not in ("exclude", "raise"):
        raise ValueError(f"on_unverified_straddle {on_unverified_straddle!r} is invalid: accepted "
                         f"values are 'exclude', 'raise'")
    validate_segment_length(segment_length, term_length)
    if start_position < 0 or start_position % FRAME_ALIGNMENT:
        raise ValueError(f"start position {start_position} of recording {recording_id} must be "
                         f"non-negative and {FRAME_ALIGNMENT}-byte aligned")
    archive_dir = Path(archive_dir)
    layout = _Layout(recording_id, start_position, term_length, segment_length,
                     position_bits_to_shift(term_length), initial_term_id, stream_id)
    findings: list[Finding] = []
    segments = _classify_files(archive_dir, layout, findings, files or ArchiveFiles(archive_dir))
    if not segments:
        findings.append(Finding(FindingKind.NO_SEGMENT_FILES,
                                f"no '{recording_id}-<base>.rec' file in {archive_dir}; stop = start"))
        return RecoveryReport(recording_id, start_position, segment_length, findings=tuple(findings))

    last = segments[-1]
    first_offset = max(0, start_position - last.base_position)
    fd = os.open(last.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            findings.append(Finding(FindingKind.ZERO_LENGTH_FILE, last.path.name, last.path,
                                    last.base_position))
        elif size != segment_length:
            findings.append(Finding(FindingKind.WRONG_FILE_LENGTH,
                                    f"{last.path.name} is {size} bytes, segment length is {segment_length}",
                                    last.path, last.base_position))
        limit = min(size, segment_length)
        if first_offset >= limit:
            walk = _Walk(first_offset, StopReason.END if limit == segment_length else None, None, None)
        else:
            walk = _walk_segment(fd, last.path, last.base_position, first_offset, limit, layout)
        if walk.finding is not None:
            findings.append(walk.finding)
        end_offset = walk.end_offset
        if walk.last_frame_offset is not None and walk.last_frame_offset + HEADER_LENGTH <= end_offset:
            verified, aligned, _ = _straddle_ok(fd, walk.last_frame_offset, checksum)
            if not verified and walk.last_frame_offset + aligned == end_offset:
                message = (f"{last.path.name} offset {walk.last_frame_offset}: last frame of "
                           f"{aligned} bytes crosses a {PAGE_SIZE}-byte page and a page after the "
                           f"straddle point is all zeros"
                           + ("" if checksum is None else f" and its {checksum.name} does not match"))
                if on_unverified_straddle == "raise":
                    raise RecoveryError(f"recording {recording_id}: found potentially incomplete last "
                                        f"fragment straddling page boundary: {message}")
                findings.append(Finding(FindingKind.UNVERIFIED_PAGE_STRADDLE,
                                        message + "; excluded from the recording", last.path,
                                        last.base_position + walk.last_frame_offset))
                end_offset = walk.last_frame_offset
        if end_offset < limit and _has_data_after(fd, end_offset, limit):
            findings.append(Finding(FindingKind.STALE_DATA_AFTER_STOP,
                                    f"{last.path.name}: non-zero bytes between offset {end_offset} and "
                                    f"{limit}; apply_recovery zeroes them", last.path,
                                    last.base_position + end_offset))
    finally:
        os.close(fd)
    stop_position = max(last.base_position + end_offset, start_position)
    return RecoveryReport(recording_id, stop_position, segment_length, last, end_offset,
                          walk.stop_reason, tuple(findings))


def apply_recovery(report: RecoveryReport, *, file_sync: int = DEFAULT_FILE_SYNC) -> bool:
    """Zero the last segment after the recovered stop (keeping its length); True if it did."""
    if report.last_segment is None or not report.has_stale_data_after_stop:
        return False
    truncate_segment_file(report.last_segment.path, report.end_offset, report.segment_length,
                          file_sync=file_sync)
    return True


# --------------------------------------------------------------------------- restart repair

@dataclass(frozen=True)
class Repair:
    """One change `repair_recording` made, for the log."""

    recording_id: int
    action: str
    path: Path

    def __str__(self) -> str:
        return f"recording {self.recording_id}: {self.action} {self.path.name}"


def repair_recording(archive_dir: str | os.PathLike, descriptor, valid: bool, *,
                     file_sync: int = DEFAULT_FILE_SYNC, files: ArchiveFiles | None = None) -> list[Repair]:
    """Brings a recording's files to what its catalog entry says, after a crash in maintenance.

    ``.rec.del`` files (a delete in progress) are renamed back when the valid entry still needs
    them (the operation had not committed) and unlinked otherwise (it had). For a stopped valid
    recording, segment files past the one holding the stop are deleted and that one is given its
    full length again (a kill between truncate's two ``ftruncate`` calls leaves it short) and
    zeroed past the stop if a frame is found there. Active recordings must be recovered first
    (`recover_recording`); invalid ones only lose their ``.del`` files (their ``.rec`` files are
    the offline tool's business). Cheap: at most one 4-byte read per recording, and one listing
    of the directory (``files``; `repair_archive` lists it once for every recording).
    """
    d = descriptor
    directory = Path(archive_dir)
    repairs: list[Repair] = []
    length = d.segment_file_length
    first_base = start_term_base_position(d.start_position, d.term_buffer_length)
    stopped = not d.is_active
    holding = (first_base + (d.stop_position - first_base) // length * length) if stopped else None

    def needed(base: int) -> bool:
        if not valid or base < first_base:
            return False
        return not stopped or (d.start_position < d.stop_position and base < d.stop_position)

    files = files or ArchiveFiles(directory)
    staged_deletes = files.staged_deletes(d.recording_id)
    for name in staged_deletes:
        base = parse_segment_file_name(name[: -len(DELETE_SUFFIX)])[1]
        staged = directory / name
        original = staged.with_name(name[: -len(DELETE_SUFFIX)])
        if needed(base) and not original.exists():
            os.replace(staged, original)
            repairs.append(Repair(d.recording_id, "restored (delete not committed)", original))
        else:
            staged.unlink(missing_ok=True)
            repairs.append(Repair(d.recording_id, "deleted (delete committed)", staged))
    if not valid or holding is None:  # holding is None exactly when the recording is active
        return repairs
    # A restored .del file is a segment again: list afresh (rare) rather than patch the listing.
    segments = list_segment_files(directory, d.recording_id) if staged_deletes else files.segment_files(d.recording_id)
    for segment in segments:
        if segment.base_position > holding:
            os.unlink(segment.path)
            repairs.append(Repair(d.recording_id, "deleted (past the stop position)", segment.path))
    path = segment_file_path(directory, d.recording_id, holding)
    offset = d.stop_position - holding
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return repairs
    if offset <= size < length:
        with open(path, "r+b") as f:
            os.ftruncate(f.fileno(), length)
            if file_sync:
                os.fsync(f.fileno())
        repairs.append(Repair(d.recording_id, f"extended from {size} to {length} bytes", path))
    elif size < offset:
        return repairs  # data below the stop is missing: damage, left for verify to report
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        stale = offset < length and any(os.pread(fd, 4, offset))
    finally:
        os.close(fd)
    if stale:
        truncate_segment_file(path, offset, length, file_sync=file_sync)
        repairs.append(Repair(d.recording_id, f"zeroed past the stop position (offset {offset})", path))
    return repairs


def repair_archive(catalog, archive_dir: str | os.PathLike, *, file_sync: int = DEFAULT_FILE_SYNC) -> list[Repair]:
    """`repair_recording` for every readable catalog entry; run at start, after active recovery."""
    repairs: list[Repair] = []
    files = ArchiveFiles(archive_dir)
    for entry in list(catalog.entries()):
        repairs += repair_recording(archive_dir, entry.descriptor, entry.valid, file_sync=file_sync, files=files)
    return repairs
