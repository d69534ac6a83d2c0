"""Opening an archive directory for the service: the catalog for writing, recordings a crash left
active recovered, interrupted maintenance repaired, and a report of everything found.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aeron_spark.archive.codecs.catalog_layout import DEFAULT_CAPACITY
from aeron_spark.archive.configuration import DEFAULT_FILE_SYNC
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.catalog_entries import CatalogProblem
from aeron_spark.archive.storage import recovery
from aeron_spark.archive.storage.checksum import FrameChecksum
from aeron_spark.archive.storage.catalog_file import CATALOG_FILE_NAME, now_ms as _now_ms

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiveOpenReport:
    """What `open_archive_directory` found and repaired; nothing found is left unreported."""

    catalog_created: bool
    catalog_problems: tuple[CatalogProblem, ...]
    recovered: tuple[recovery.RecoveryReport, ...]  # per recording that was left active
    orphan_segment_files: tuple[Path, ...]

    @property
    def is_clean(self) -> bool:
        return (not self.catalog_problems and not self.orphan_segment_files
                and all(report.is_clean for report in self.recovered))

    def describe(self, *, with_recordings: bool = True) -> str:
        """Everything found, a line each; ``with_recordings=False`` leaves out the recovered
        recordings' reports (`open_archive_directory` logs those one by one as it recovers them)."""
        lines = [f"catalog {'created' if self.catalog_created else 'opened'}; "
                 f"{len(self.recovered)} recording(s) recovered"]
        lines += [f"catalog problem: {problem}" for problem in self.catalog_problems]
        if with_recordings:
            lines += [report.describe() for report in self.recovered]
        lines += [f"orphan segment file (no catalog entry): {path.name}"
                  for path in self.orphan_segment_files]
        return "\n".join(lines)


def open_archive_directory(archive_dir: str | os.PathLike, *, file_sync: int = DEFAULT_FILE_SYNC,
                           catalog_file_sync: int | None = None,
                           capacity: int = DEFAULT_CAPACITY, checksum: FrameChecksum | None = None,
                           on_unverified_straddle: Literal["exclude", "raise"] = "exclude",
                           now_ms: int | None = None) -> tuple[Catalog, ArchiveOpenReport]:
    """Opens the catalog for writing and repairs recordings a crash left active.

    For the archive service, after it has claimed the directory with the mark file. Every valid
    recording with stop position -1 gets the stop position recovered from its last segment
    (`recovery.recover_recording`; bytes after it are zeroed) and stop timestamp ``now``;
    maintenance a crash interrupted is repaired (`recovery.repair_archive`). ``file_sync`` is
    the segment files' sync level, ``catalog_file_sync`` the catalog's (None: ``file_sync``).
    ``checksum`` is the record checksum (`checksum.FrameChecksum`) used for the page-straddle
    check. Returns the catalog and a report; each recovery and repair is logged as it happens,
    then the rest of the report.
    """
    directory = Path(archive_dir)
    created = not (directory / CATALOG_FILE_NAME).exists()
    catalog = Catalog.open(directory, file_sync=file_sync if catalog_file_sync is None else catalog_file_sync,
                           capacity=capacity, checksum=checksum)
    try:
        now = _now_ms() if now_ms is None else now_ms
        reports: list[recovery.RecoveryReport] = []
        files = recovery.ArchiveFiles(directory)
        for recording_id in catalog.active_recording_ids():
            d = catalog.descriptor(recording_id)
            if d is None:  # listed as active and valid a moment ago; nothing to recover now
                continue
            recovered = recovery.recover_recording(
                directory, d.recording_id, d.start_position, d.term_buffer_length,
                d.segment_file_length, initial_term_id=d.initial_term_id, stream_id=d.stream_id,
                checksum=checksum, on_unverified_straddle=on_unverified_straddle, files=files)
            recovery.apply_recovery(recovered, file_sync=file_sync)
            catalog.recording_stopped(d.recording_id, recovered.stop_position, now)
            log.log(logging.INFO if recovered.is_clean else logging.WARNING,
                    "crash recovery: %s", recovered.describe())
            reports.append(recovered)
        for repair in recovery.repair_archive(catalog, directory, file_sync=file_sync):
            log.warning("crash recovery: %s: maintenance interrupted by a crash repaired: %s", directory, repair)
        report = ArchiveOpenReport(created, tuple(catalog.problems), tuple(reports),
                                   tuple(_orphan_segment_files(directory, catalog)))
    except BaseException:
        catalog.close()
        raise
    log.log(logging.INFO if report.is_clean else logging.WARNING,
            "%s: %s", directory, report.describe(with_recordings=False))
    return catalog, report


def _orphan_segment_files(directory: Path, catalog: Catalog) -> list[Path]:
    """``<id>-<base>.rec`` files whose id has no catalog entry (valid or invalid)."""
    orphans = []
    for entry in os.scandir(directory):
        if not entry.name.endswith(".rec"):
            continue
        head, _, tail = entry.name[:-4].partition("-")
        if head.isdigit() and tail.isdigit() and catalog.entry(int(head)) is None:
            orphans.append(Path(entry.path))
    return sorted(orphans)
