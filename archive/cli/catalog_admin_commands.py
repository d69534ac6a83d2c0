"""`aeron-archive describe-all | capacity-report | compact | delete-orphaned-segments | mark-valid | mark-invalid`.

Aeron ArchiveTool's catalog administration, offline on an archive directory:

* ``describe-all``: the mark file, the catalog capacity and every entry with its state
  (Aeron prints ``<descriptor>|<STATE>``, so does this);
* ``capacity-report``: the catalog's bytes used and free, entries by state, the segment files'
  bytes and the file system's free space (no Aeron counterpart: Aeron's ``capacity`` prints only
  the catalog length, which our ``capacity`` does);
* ``compact``: drops INVALID and DELETED entries and their segment files (`storage.catalog_compaction`);
* ``delete-orphaned-segments [ID]``: deletes segment files outside each recording's range;
* ``mark-valid ID`` / ``mark-invalid ID``: INVALID <-> VALID, Aeron's messages and refusals.

The four that change files refuse while an archive runs on the directory (Aeron's tool takes no
such care for these; here every file-changing command holds `mark_file.maintenance_lock`).
``compact`` and ``delete-orphaned-segments`` ask "Continue? (y/n)" as Aeron does (an empty answer
is yes); ``--yes`` skips the question. Exit codes: 0 ok (and a declined question), 2 bad input, an
unknown recording, a refused state change, or a running archive.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from aeron_spark.archive.cli.inspect_commands import (
    format_descriptor,
    open_catalog_read_only,
    recording_id_argument,
)
from aeron_spark.archive.cli.output import EXIT_OK, Output, ToolError
from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage import catalog_compaction, mark_file
from aeron_spark.archive.storage.catalog import CATALOG_FILE_NAME, DELETED, INVALID, VALID, Catalog
from aeron_spark.driver_integration import position as positions


# --------------------------------------------------------------------------- read-only

def describe_all(args: argparse.Namespace, output: Output) -> int:
    """Mark file, catalog capacity, then every entry as ``<descriptor>|<STATE>``."""
    with open_catalog_read_only(args.dir) as catalog:
        capacity = catalog.capacity()
        entries = list(catalog.entries())
    try:
        mark = mark_file.read_mark_file(args.dir)
    except mark_file.MarkFileError:
        mark = None
    if mark is None:
        output.line(f"no {mark_file.MARK_FILE_NAME} in {args.dir}")
    else:
        state = "running" if mark.is_live() else "not running"
        output.line(f"MarkFile ({state}): " + ", ".join(
            f"{k}={v}" for k, v in mark.to_dict().items() if k not in ("path", "live")))
    output.line(f"Catalog capacity in bytes: {capacity}")
    for entry in entries:
        output.line(f"{format_descriptor(entry.descriptor)}|{entry.state_name}")
    return EXIT_OK


def capacity_report(args: argparse.Namespace, output: Output) -> int:
    """How full the catalog file and the archive's file system are."""
    directory: Path = args.dir
    path = directory / CATALOG_FILE_NAME
    with open_catalog_read_only(directory) as catalog:
        capacity = catalog.capacity()
        entries = list(catalog.entries())
        used = _used_catalog_bytes(catalog)
    by_state = {name: sum(1 for e in entries if e.state == state)
                for state, name in ((VALID, "VALID"), (INVALID, "INVALID"), (DELETED, "DELETED"))}
    segment_bytes = 0
    segment_count = 0
    for entry in os.scandir(directory):
        if entry.name.endswith(positions.SEGMENT_FILE_SUFFIX):
            segment_count += 1
            segment_bytes += entry.stat().st_blocks * 512  # on disk: segments may be sparse
    disk = shutil.disk_usage(directory)
    output.line(f"Catalog: {path}")
    output.line(f"Catalog capacity in bytes: {capacity}")
    output.line(f"Catalog used bytes: {used}")
    output.line(f"Catalog free bytes: {capacity - used}")
    output.line("Entries: " + ", ".join(f"{name}={count}" for name, count in by_state.items())
                + f", total={len(entries)}")
    output.line(f"Reclaimable by compact: {by_state['INVALID'] + by_state['DELETED']} entries")
    output.line(f"Segment files: {segment_count}, {segment_bytes} bytes on disk")
    output.line(f"File system: total={disk.total} used={disk.used} free={disk.free} bytes")
    return EXIT_OK


def _used_catalog_bytes(catalog: Catalog) -> int:
    """Header plus frames; an old 1 KiB-slot catalog uses one slot per id plus its header slot."""
    if catalog.old_layout:
        return layout.OLD_ENTRY_LENGTH * (catalog.next_recording_id + 1)
    return catalog_compaction.used_catalog_bytes(catalog.path.parent)


# --------------------------------------------------------------------------- changing files

def configure_confirmed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", "-y", action="store_true",
                        help="do not ask \"Continue? (y/n)\" (for scripts)")


def configure_delete_orphaned_segments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", nargs="?", type=recording_id_argument, metavar="ID",
                        help="only this recording's orphaned segment files")
    configure_confirmed(parser)


def configure_state_change(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", type=recording_id_argument, metavar="ID")


def compact(args: argparse.Namespace, output: Output) -> int:
    """Removes INVALID and DELETED entries and their segment files (asks first)."""
    if not _confirmed(args, output, "WARNING: Compacting the Catalog is non-recoverable operation! All "
                                    "non-ACTIVE recordings will be deleted along with the corresponding "
                                    "segment files."):
        return EXIT_OK
    with mark_file.maintenance_lock(args.dir):
        result = catalog_compaction.compact_catalog(args.dir)
    output.line(f"Compaction result: deleted {result.deleted_records} records and reclaimed "
                f"{result.reclaimed_bytes} bytes")
    return EXIT_OK


def delete_orphaned_segments(args: argparse.Namespace, output: Output) -> int:
    """Deletes segment files outside each recording's [start, stop] segments (asks first)."""
    warning = ("WARNING: All orphaned segment files will be deleted." if args.recording_id is None else
               f"WARNING: All orphaned segment files owned by the RecordingId[{args.recording_id}] "
               f"will be deleted.")
    if not _confirmed(args, output, warning):
        return EXIT_OK
    with mark_file.maintenance_lock(args.dir):
        with open_catalog_read_only(args.dir) as catalog:
            deleted = catalog_compaction.delete_orphaned_segments(args.dir, catalog, args.recording_id)
    for path in deleted:
        output.line(f"deleted {path.name}")
    output.line(f"{len(deleted)} orphaned segment file(s) deleted")
    return EXIT_OK


def mark_valid(args: argparse.Namespace, output: Output) -> int:
    """INVALID -> VALID (a VALID recording stays as it is)."""
    return _change_state(args, output, expected=INVALID, target=VALID)


def mark_invalid(args: argparse.Namespace, output: Output) -> int:
    """VALID -> INVALID (an INVALID recording stays as it is)."""
    return _change_state(args, output, expected=VALID, target=INVALID)


def _change_state(args: argparse.Namespace, output: Output, *, expected: int, target: int) -> int:
    recording_id: int = args.recording_id
    target_name = layout.STATE_NAMES[target]
    with mark_file.maintenance_lock(args.dir):
        if not (args.dir / CATALOG_FILE_NAME).exists():
            raise ToolError(f"no archive in {args.dir}: {CATALOG_FILE_NAME} is missing")
        with Catalog.open(args.dir) as catalog:
            entry = catalog.entry(recording_id)
            if entry is None:
                raise ToolError(f"no recording found with recordingId: {recording_id}")
            if entry.state == target:
                return EXIT_OK  # as Aeron: nothing to change, nothing printed
            if entry.state != expected:
                raise ToolError(f"(recordingId={recording_id}) state transition {entry.state_name} -> "
                                f"{target_name} is not allowed")
            if target == VALID:
                catalog.mark_valid(recording_id)
            else:
                catalog.invalidate(recording_id)
    output.line(f"(recordingId={recording_id}) changed state to {target_name}")
    return EXIT_OK


def _confirmed(args: argparse.Namespace, output: Output, warning: str) -> bool:
    """Aeron's prompt: the warning, then "Continue? (y/n): "; empty, y or yes (any case) is yes."""
    output.line(warning)
    if args.yes:
        return True
    output.out.write("Continue? (y/n): ")
    output.out.flush()
    answer = sys.stdin.readline()
    if not answer:
        raise ToolError("no answer on stdin to \"Continue? (y/n)\"; pass --yes to run without asking")
    accepted = answer.strip().lower() in ("", "y", "yes")
    if not accepted:
        output.line("not confirmed: nothing changed")
    return accepted
