"""`aeron-archive migrate`: upgrade an archive directory in place to archive file version 3.1.0.

Sources: the fixed 1 KiB slot catalogs of Aeron <= 1.31 (and of this project before it wrote
3.1.0): version 0 (Aeron 1.15-1.21, segments ``<id>-<segmentIndex>.rec``), 1.0.0 (1.22, segment
bases multiples of the segment length), 2.0.0 and 2.1.0 (1.23-1.31, bases relative to the
recording's start term: the modern naming). The result is what Aeron 1.32-1.52 and this
project's archive serve: a variable-length catalog (`catalog`), ``<id>-<base>.rec`` segments with
``base = startTermBase + k * segmentLength`` for the recording's k-th segment file (the file's
bytes are unchanged: file k of every version holds ``[startTermBase + k*len, +len)``), and a
1.47+ mark file stamped 3.1.0.

Crash safety (kill -9 at any point leaves the old catalog or the new one, never neither):

1. ``archive.catalog.migration`` (the journal: source version and every segment rename) is
   written to a temporary file, fsynced and renamed into place;
2. each renamed segment gets its new name as a **hard link** (same inode; the old name stays);
3. the new catalog is written to ``archive.catalog.migrating``, fsynced and renamed over
   ``archive.catalog``, then the directory is fsynced. **This rename is the commit point.**
4. the old segment names in the journal are unlinked;
5. the mark file (if any) is rewritten in the 1.47+ layout, version 3.1.0, "terminated";
6. the journal is removed.

Before the commit the old catalog is intact and every old segment name exists (the extra links
are harmless to it); after it the new catalog is in place and every new name exists. While the
journal exists the catalog is not opened for writing (`Catalog.open` refuses: "run migrate
again"); running ``migrate`` again redoes steps 2-6 (links and unlinks are idempotent).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage import mark_file
from aeron_spark.archive.storage.catalog import CATALOG_FILE_NAME, Catalog, CatalogEntry, sync_directory
from aeron_spark.archive.storage.checksum import FrameChecksum
from aeron_spark.archive.storage.fault_injection import fault_point
from aeron_spark.archive.codecs import descriptor_body

log = logging.getLogger(__name__)

JOURNAL_FILE_NAME = layout.MIGRATION_JOURNAL_FILE_NAME
NEW_CATALOG_FILE_NAME = "archive.catalog.migrating"
_SEGMENT_SUFFIX = ".rec"


class MigrationError(Exception):
    """A directory that cannot be migrated as asked."""


@dataclass(frozen=True, slots=True)
class Rename:
    old: str
    new: str


@dataclass
class MigrationReport:
    from_version: int
    to_version: int = layout.ARCHIVE_FILE_VERSION
    entries: int = 0
    renamed: list[Rename] = field(default_factory=list)
    mark_file_rewritten: bool = False
    resumed: bool = False
    already_current: bool = False

    def describe(self) -> str:
        if self.already_current and not self.resumed:
            return (f"catalog is already {layout.version_text(self.to_version)}; nothing to migrate"
                    + ("; mark file rewritten" if self.mark_file_rewritten else ""))
        lines = [f"migrated {layout.version_text(self.from_version)} -> {layout.version_text(self.to_version)}"
                 f"{' (resumed an interrupted migration)' if self.resumed else ''}: {self.entries} "
                 f"catalog entries, {len(self.renamed)} segment file(s) renamed"
                 + ("; mark file rewritten" if self.mark_file_rewritten else "")]
        lines += [f"  {r.old} -> {r.new}" for r in self.renamed]
        return "\n".join(lines)


def new_segment_base(d, name_number: int, from_version: int) -> int:
    """The 3.x base of a segment named ``<id>-<name_number>.rec`` by a ``from_version`` archive."""
    segment_length = d.segment_file_length
    start_term_base = d.start_position - (d.start_position & (d.term_buffer_length - 1))
    if from_version == layout.OLD_VERSION_0:  # the segment index
        return start_term_base + name_number * segment_length
    if from_version >> 16 == 1:  # 1.0.0: k * segmentLength + startPosition rounded down to segmentLength
        first = d.start_position - d.start_position % segment_length
        index, rest = divmod(name_number - first, segment_length)
        if rest or index < 0:
            raise MigrationError(f"segment {d.recording_id}-{name_number}.rec is not a 1.0.0 segment "
                                 f"name of recording {d.recording_id} (start {d.start_position})")
        return start_term_base + index * segment_length
    return name_number  # 2.x names are already the modern ones


def plan_renames(archive_dir: Path, entries: list[CatalogEntry], from_version: int) -> list[Rename]:
    """Every segment rename a ``from_version`` directory needs (none from 2.x); checks that no new
    name is another file's old name."""
    if from_version >> 16 >= 2:
        return []
    by_id = {e.descriptor.recording_id: e.descriptor for e in entries}
    names = {entry.name for entry in os.scandir(archive_dir)}
    renames = []
    for name in sorted(names):
        if not name.endswith(_SEGMENT_SUFFIX):
            continue
        head, _, tail = name[:-len(_SEGMENT_SUFFIX)].partition("-")
        if not (head.isdigit() and tail.isdigit()) or int(head) not in by_id:
            continue
        base = new_segment_base(by_id[int(head)], int(tail), from_version)
        new = f"{head}-{base}{_SEGMENT_SUFFIX}"
        if new != name:
            renames.append(Rename(name, new))
    olds = {r.old for r in renames}
    for r in renames:
        if r.new in olds:
            raise MigrationError(f"cannot rename {r.old} to {r.new}: that name is another segment's "
                                 f"old name; migrate by hand")
    return renames


def migrate(archive_dir: str | os.PathLike, *, checksum: FrameChecksum | None = None,
            now_ms: int | None = None) -> MigrationReport:
    """Upgrades ``archive_dir`` in place to catalog/mark file version 3.1.0 (see the module doc).

    Refuses (`mark_file.ArchiveRunningError`) while an archive runs on the directory and holds
    the directory's lock meanwhile. ``checksum`` stamps each descriptor's checksum (Aeron's
    record checksum, if the archive will run with one).
    """
    directory = Path(archive_dir)
    if not (directory / CATALOG_FILE_NAME).exists():
        raise MigrationError(f"no archive in {directory}: {CATALOG_FILE_NAME} is missing")
    with mark_file.maintenance_lock(directory, now_ms):
        journal = _read_journal(directory)
        with Catalog.open(directory, read_only=True, checksum=checksum) as current:
            entries = list(current.entries())
            old_layout, version = current.old_layout, current.version
            problems = list(current.problems)
        if not old_layout:
            report = MigrationReport(from_version=journal[0] if journal else version,
                                     already_current=True, entries=len(entries))
            if journal is not None:  # committed: finish steps 4-6
                report.resumed = True
                report.renamed = journal[1]
                _finish(directory, journal[1], report)
            else:
                report.mark_file_rewritten = mark_file.rewrite_as_current(directory)
                if report.mark_file_rewritten:
                    sync_directory(directory)
            return report
        if problems:
            raise MigrationError(f"{directory}: the old catalog has problems; run `aeron-archive verify` "
                                 f"and fix them first: " + "; ".join(map(str, problems)))
        renames = plan_renames(directory, entries, version) if journal is None else journal[1]
        report = MigrationReport(from_version=version, entries=len(entries), renamed=renames,
                                 resumed=journal is not None)
        _write_journal(directory, version, renames)                      # 1
        fault_point("migrate-journaled")
        for rename in renames:                                           # 2
            _link(directory, rename)
        sync_directory(directory)
        fault_point("migrate-linked")
        _write_new_catalog(directory, entries, checksum)                 # 3: commit point
        fault_point("migrate-committed")
        _finish(directory, renames, report)                              # 4-6
        log.info("%s: %s", directory, report.describe())
        return report


def _finish(directory: Path, renames: list[Rename], report: MigrationReport) -> None:
    for rename in renames:                                               # 4
        old, new = directory / rename.old, directory / rename.new
        if old.exists() and new.exists() and os.path.samefile(old, new):
            old.unlink()
    sync_directory(directory)
    fault_point("migrate-unlinked")
    report.mark_file_rewritten = mark_file.rewrite_as_current(directory)  # 5
    fault_point("migrate-marked")
    (directory / JOURNAL_FILE_NAME).unlink(missing_ok=True)              # 6
    sync_directory(directory)


def _link(directory: Path, rename: Rename) -> None:
    old, new = directory / rename.old, directory / rename.new
    if new.exists():
        if old.exists() and not os.path.samefile(old, new):
            raise MigrationError(f"{new} exists and is not {old}; refusing to overwrite a segment file")
        return
    if not old.exists():
        raise MigrationError(f"{old} is missing (and so is {new})")
    os.link(old, new)


def _write_new_catalog(directory: Path, entries: list[CatalogEntry], checksum: FrameChecksum | None) -> None:
    frames = []
    for entry in sorted(entries, key=lambda e: e.descriptor.recording_id):
        body = descriptor_body.encode_descriptor_body(entry.descriptor)
        padded_length = layout.frame_length(len(body)) - layout.DESCRIPTOR_HEADER_LENGTH
        descriptor_bytes = body + bytes(padded_length - len(body))
        value = 0 if checksum is None else checksum.compute(descriptor_bytes)
        frames.append(layout.encode_frame(body, entry.state, value))
    next_id = max((e.descriptor.recording_id for e in entries), default=-1) + 1
    data = layout.encode_catalog_header(next_id) + b"".join(frames)
    capacity = max(layout.DEFAULT_CAPACITY, len(data) + layout.DESCRIPTOR_HEADER_LENGTH)
    temporary = directory / NEW_CATALOG_FILE_NAME
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.ftruncate(fd, capacity)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, directory / CATALOG_FILE_NAME)
    sync_directory(directory)


def _write_journal(directory: Path, version: int, renames: list[Rename]) -> None:
    text = json.dumps({"fromVersion": version, "toVersion": layout.ARCHIVE_FILE_VERSION,
                       "renames": [[r.old, r.new] for r in renames]}, indent=1)
    temporary = directory / (JOURNAL_FILE_NAME + ".tmp")
    with open(temporary, "w", encoding="ascii") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, directory / JOURNAL_FILE_NAME)
    sync_directory(directory)


def _read_journal(directory: Path) -> tuple[int, list[Rename]] | None:
    (directory / (JOURNAL_FILE_NAME + ".tmp")).unlink(missing_ok=True)  # cut short before step 1 ended
    path = directory / JOURNAL_FILE_NAME
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text(encoding="ascii"))
        return int(document["fromVersion"]), [Rename(old, new) for old, new in document["renames"]]
    except (ValueError, KeyError, TypeError) as error:
        raise MigrationError(f"{path} is unreadable ({error}); inspect the directory by hand") from None
