"""`aeron-archive describe | count-entries | max-entries | capacity | pid | dump | verify | checksum`.

The offline commands: they read (and `verify`/`checksum` repair or stamp) an archive directory's
files, ``archive.catalog``, ``archive-mark.dat`` and the ``<id>-<base>.rec`` segments, without
talking to an archive. Each is a ``run(args, output)`` with its ``configure(parser)``; the
command table in `aeron_spark.archive.cli.main` names them and adds ``--dir DIR``.

Exit codes: 0 ok, 1 verification failed, 2 usage or bad input.

Works whether or not an archive runs on the directory: while one runs (per the mark file) the
catalog is opened read-only and commands that change files refuse to run.
"""

from __future__ import annotations

import argparse
import json
import mmap
from collections.abc import Callable
from pathlib import Path

from aeron_spark.archive.cli.output import EXIT_OK, EXIT_VERIFICATION_FAILED, Output, ToolError
from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.archive.storage import checksum
from aeron_spark.archive.storage import maintenance
from aeron_spark.archive.storage import mark_file
from aeron_spark.archive.storage import recovery
from aeron_spark.archive.storage.catalog import CATALOG_FILE_NAME, Catalog, CatalogEntry
from aeron_spark.driver_integration import frame, position as positions


# --------------------------------------------------------------------------- helpers

def archive_is_running(directory: Path) -> mark_file.ArchiveMarkInfo | None:
    return mark_file.running_archive(directory)


def open_catalog_read_only(directory: Path) -> Catalog:
    if not (directory / CATALOG_FILE_NAME).exists():
        raise ToolError(f"no archive in {directory}: {CATALOG_FILE_NAME} is missing")
    return Catalog.open(directory, read_only=True)


def format_descriptor(descriptor: RecordingDescriptor, valid: bool = True, state_name: str | None = None) -> str:
    fields = descriptor.to_aeron_dict()
    text = ", ".join(f"{name}={value}" for name, value in fields.items())
    prefix = "" if valid else f"{state_name or 'INVALID'}, "
    return f"RecordingDescriptor{{{prefix}{text}}}"


def _descriptor_json(entry: CatalogEntry) -> dict:
    return dict(entry.descriptor.to_aeron_dict(), valid=entry.valid, state=entry.state_name)


def recording_id_argument(value: str) -> int:
    try:
        recording_id = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"recording id must be a non-negative integer, got {value!r}") from None
    if recording_id < 0:
        raise argparse.ArgumentTypeError(f"recording id must be a non-negative integer, got {value!r}")
    return recording_id


def require_entry(catalog: Catalog, recording_id: int) -> CatalogEntry:
    entry = catalog.entry(recording_id)
    if entry is None:
        raise ToolError(f"unknown recording {recording_id} in {catalog.path} "
                        f"(known ids: 0..{catalog.next_recording_id - 1})"
                        if catalog.next_recording_id else f"unknown recording {recording_id}: "
                                                          f"{catalog.path} is empty")
    return entry


# --------------------------------------------------------------------------- commands

def configure_describe(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", nargs="?", type=recording_id_argument, metavar="ID",
                        help="describe only this recording")
    parser.add_argument("--all", action="store_true", help="include INVALID and DELETED (purged) recordings")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def describe(args: argparse.Namespace, output: Output) -> int:
    """Mark file header and every valid descriptor, or one descriptor."""
    directory: Path = args.dir
    with open_catalog_read_only(directory) as catalog:
        if args.recording_id is None:
            output_catalog = (f"Catalog: version={layout.version_text(catalog.version)}, "
                              f"layout={'1 KiB slots' if catalog.old_layout else 'variable-length'}, "
                              f"alignment={catalog.alignment}, nextRecordingId={catalog.next_recording_id}, "
                              f"capacity={catalog.capacity()}")
        if args.recording_id is not None:
            entries = [require_entry(catalog, args.recording_id)]
        else:
            entries = [e for e in catalog.entries() if e.valid or args.all]
        problems = list(catalog.problems)
    try:
        mark = mark_file.read_mark_file(directory)
    except mark_file.MarkFileError:
        mark = None
    if args.json:
        document = {"markFile": mark.to_dict() if mark else None,
                    "recordings": [_descriptor_json(e) for e in entries],
                    "problems": [str(p) for p in problems]}
        output.line(json.dumps(document, indent=2))
        return EXIT_OK
    if args.recording_id is None:
        if mark is None:
            output.line(f"no {mark_file.MARK_FILE_NAME} in {directory}")
        else:
            state = "running" if mark.is_live() else "not running"
            output.line(f"MarkFile ({state}): " + ", ".join(
                f"{k}={v}" for k, v in mark.to_dict().items() if k not in ("path", "live")))
        output.line(output_catalog)
    for entry in entries:
        output.line(format_descriptor(entry.descriptor, entry.valid, entry.state_name))
    for problem in problems:
        output.line(f"PROBLEM: {problem}")
    return EXIT_OK


def count_entries(args: argparse.Namespace, output: Output) -> int:
    """Number of valid recordings in the catalog."""
    with open_catalog_read_only(args.dir) as catalog:
        output.line(str(catalog.count_entries()))
    return EXIT_OK


def max_entries(args: argparse.Namespace, output: Output) -> int:
    """Entries the catalog file holds now plus the smallest ones that fit before it next grows
    (a 3.x catalog's real bound is its byte `capacity`; Aeron's ArchiveTool says "use capacity")."""
    with open_catalog_read_only(args.dir) as catalog:
        output.line(str(catalog.max_entries()))
    return EXIT_OK


def capacity(args: argparse.Namespace, output: Output) -> int:
    """The catalog file's length in bytes (it grows by x1.5 when an entry does not fit)."""
    with open_catalog_read_only(args.dir) as catalog:
        output.line(str(catalog.capacity()))
    return EXIT_OK


def pid(args: argparse.Namespace, output: Output) -> int:
    """The pid recorded in the mark file."""
    info = mark_file.read_mark_file(args.dir)
    output.line(str(info.pid))
    return EXIT_OK





def configure_dump(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", type=recording_id_argument, metavar="ID")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="print at most N frames (default: all)")


def dump(args: argparse.Namespace, output: Output) -> int:
    """The descriptor, then one line per recorded frame from start to stop (or to the data end)."""
    with open_catalog_read_only(args.dir) as catalog:
        entry = require_entry(catalog, args.recording_id)
    d = entry.descriptor
    output.line(format_descriptor(d, entry.valid))
    files = maintenance.segment_files(args.dir, d.recording_id)
    printed = 0
    position = d.start_position
    while (args.limit is None or printed < args.limit) and (d.is_active or position < d.stop_position):
        base = positions.segment_file_base_position(d.start_position, position, d.term_buffer_length,
                                                    d.segment_file_length)
        path = files.get(base)
        if path is None:
            output.line(f"segment file {positions.segment_file_name(d.recording_id, base)} is missing")
            break
        end = d.segment_file_length if d.is_active else min(d.segment_file_length, d.stop_position - base)
        end = min(end, path.stat().st_size)
        if end <= position - base:
            break
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            offset = position - base
            for offset, header in frame.walk_frames(view, position - base, end):
                if args.limit is not None and printed >= args.limit:
                    break
                payload = bytes(view[offset + frame.HEADER_LENGTH:
                                     offset + min(header.frame_length, frame.HEADER_LENGTH + 16)])
                output.line(
                    f"position={base + offset} length={header.frame_length} "
                    f"type={_FRAME_TYPES.get(header.frame_type, hex(header.frame_type))} "
                    f"flags=0x{header.flags:02x} termOffset={header.term_offset} "
                    f"session={header.session_id} stream={header.stream_id} termId={header.term_id} "
                    f"reserved={header.reserved_value} payload={header.payload_length}"
                    f"{' ' + payload.hex() if payload else ''}"
                    f"{'...' if header.payload_length > 16 else ''}")
                printed += 1
                offset += header.aligned_length
            view.release()
        if offset < end or end < d.segment_file_length:
            break
        position = base + end
    output.line(f"{printed} frames")
    return EXIT_OK


_FRAME_TYPES = {frame.HDR_TYPE_PAD: "PAD", frame.HDR_TYPE_DATA: "DATA"}


def configure_verify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", nargs="?", type=recording_id_argument, metavar="ID",
                        help="verify only this recording")
    parser.add_argument("--checksum", nargs="?", const=checksum.CRC32C.name, default=None, metavar="NAME",
                        help=f"also check each DATA frame's checksum (default algorithm {checksum.CRC32C.name})")
    parser.add_argument("--dry-run", action="store_true",
                        help="report only: change nothing even when no archive is running")


def verify(args: argparse.Namespace, output: Output) -> int:
    """Checks positions and frames of every recording (valid and invalid); exit 1 on any error.

    With no archive running (and without --dry-run) it acts like Aeron's ArchiveTool verify:
    failing recordings are marked invalid, invalid ones that pass are marked valid again, and an
    active recording left by a crash gets its stop position from the data.
    """
    checksum_function = None
    if args.checksum is not None:
        checksum_function = checksum.checksum_from_name(args.checksum).compute
    running = archive_is_running(args.dir)
    if running is not None or args.dry_run:
        if running is not None:
            output.line(f"archive pid {running.pid} is running on {args.dir}: verifying read-only")
        with open_catalog_read_only(args.dir) as catalog:
            return _verify_catalog(catalog, args, output, checksum_function, fix=False,
                                   archive_running=running is not None)
    with mark_file.maintenance_lock(args.dir):
        if not (args.dir / CATALOG_FILE_NAME).exists():
            raise ToolError(f"no archive in {args.dir}: {CATALOG_FILE_NAME} is missing")
        with Catalog.open(args.dir) as catalog:
            return _verify_catalog(catalog, args, output, checksum_function, fix=True,
                                   archive_running=False)


def _verify_catalog(catalog: Catalog, args: argparse.Namespace, output: Output,
                    checksum_function: Callable[[memoryview], int] | None,
                    *, fix: bool, archive_running: bool) -> int:
    failed = False
    for problem in catalog.problems:
        output.line(f"ERROR: {problem}")
        failed = True
    entries = ([require_entry(catalog, args.recording_id)] if args.recording_id is not None
               else list(catalog.entries()))
    if fix:  # finish or undo maintenance a crash interrupted, as the archive does when it starts
        for repair in recovery.repair_archive(catalog, args.dir):
            output.line(f"repaired: {repair}")
    for entry in entries:
        d = entry.descriptor
        state = "" if entry.valid else f" ({entry.state_name.lower()})"
        if entry.deleted:  # Aeron's verify skips DELETED entries
            output.line(f"recording {d.recording_id}{state}: purged, skipped")
            continue
        if not entry.valid and not maintenance.segment_files(args.dir, d.recording_id):
            output.line(f"recording {d.recording_id}{state}: purged, no segment files")
            continue
        result = maintenance.verify_recording(args.dir, d, checksum=checksum_function)
        for note in result.notes:
            output.line(f"recording {d.recording_id}{state}: note: {note}")
        if result.ok:
            output.line(f"recording {d.recording_id}{state}: OK, {result.frames} frames in "
                        f"{result.segments} segments, positions [{d.start_position}, {result.data_end})")
        for error in result.errors:
            output.line(f"recording {d.recording_id}{state}: ERROR: {error}")
        failed |= not result.ok
        if not fix:
            continue
        if d.is_active and result.ok and entry.valid:
            # Left active by a crash: the same recovery the archive runs when it opens.
            report = recovery.recover_recording(
                args.dir, d.recording_id, d.start_position, d.term_buffer_length,
                d.segment_file_length, initial_term_id=d.initial_term_id, stream_id=d.stream_id,
                checksum=checksum.checksum_from_name(args.checksum) if args.checksum else None)
            recovery.apply_recovery(report)
            catalog.recording_stopped(d.recording_id, report.stop_position)
            output.line(f"recording {d.recording_id}: was left active; stop position set to "
                        f"{report.stop_position}")
            for finding in report.findings:
                output.line(f"recording {d.recording_id}: recovery: {finding}")
        if entry.valid and not result.ok:
            catalog.invalidate(d.recording_id)
            output.line(f"recording {d.recording_id}: marked INVALID")
        elif not entry.valid and result.ok and maintenance.segment_files(args.dir, d.recording_id):
            catalog.mark_valid(d.recording_id)
            output.line(f"recording {d.recording_id}: marked VALID again")
    return EXIT_VERIFICATION_FAILED if failed else EXIT_OK


def configure_checksum(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", nargs="?", type=recording_id_argument, metavar="ID",
                        help="only this recording")
    parser.add_argument("--checksum", default=checksum.CRC32C.name, metavar="NAME",
                        help=f"checksum algorithm (default {checksum.CRC32C.name})")


def checksum_command(args: argparse.Namespace, output: Output) -> int:
    """Recomputes each DATA frame's checksum and stores it in the frame's session-id field."""
    algorithm = checksum.checksum_from_name(args.checksum)
    with mark_file.maintenance_lock(args.dir):
        with open_catalog_read_only(args.dir) as catalog:
            # Invalid entries too: a recording that `verify --checksum` failed before checksums
            # were written becomes valid again at the next verify.
            entries = ([require_entry(catalog, args.recording_id)] if args.recording_id is not None
                       else list(catalog.entries()))
        for entry in entries:
            if entry.deleted:
                continue
            stamped = _stamp_recording(args.dir, entry.descriptor, algorithm)
            output.line(f"recording {entry.descriptor.recording_id}: {stamped} segment(s) "
                        f"checksummed with {algorithm.name}")
        with Catalog.open(args.dir, checksum=algorithm) as writable:  # and each descriptor's checksum
            count = writable.restamp_checksums()
        output.line(f"catalog: {count} descriptor checksum(s) stored with {algorithm.name}")
    return EXIT_OK


def _stamp_recording(directory: Path, d: RecordingDescriptor, algorithm: checksum.FrameChecksum) -> int:
    stamped = 0
    for base, path in maintenance.segment_files(directory, d.recording_id).items():
        segment_end = base + d.segment_file_length
        if segment_end <= d.start_position or (not d.is_active and base >= d.stop_position):
            continue
        start = max(d.start_position, base) - base
        end = d.segment_file_length if d.is_active else min(d.stop_position, segment_end) - base
        end = min(end, path.stat().st_size)
        if end <= start:
            continue
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mapped:
            view = memoryview(mapped)
            whole = frame.scan_frames(view, start, end).end  # only complete frames
            if whole > start:
                checksum.stamp_checksums(view[start:whole], algorithm)
                mapped.flush()
            view.release()
        stamped += 1
    return stamped



