"""`aeron-archive migrate [DIR]`: upgrade an archive directory in place to file version 3.1.0.

Runs `aeron_spark.archive.storage.migration.migrate` (its module doc describes the steps and the
commit point that make it safe to kill at any moment: re-run it to finish). Refuses while an
archive runs on the directory. Exit codes: 0 migrated (or nothing to do), 2 refused or failed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aeron_spark.archive.cli.output import EXIT_OK, EXIT_USAGE, Output
from aeron_spark.archive.storage import checksum, migration
from aeron_spark.archive.storage.mark_file import ArchiveRunningError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", nargs="?", type=Path, metavar="DIR",
                        help="archive directory (default: --dir, else the current directory)")
    parser.add_argument("--checksum", default=None, metavar="NAME",
                        help="store each descriptor's checksum with this record checksum (e.g. CRC-32C), "
                             "as the archive will run with; default: 0 (none)")


def run(args: argparse.Namespace, output: Output) -> int:
    directory: Path = args.directory if args.directory is not None else args.dir
    if not directory.is_dir():
        output.error(f"archive directory {directory} does not exist or is not a directory")
        return EXIT_USAGE
    algorithm = checksum.checksum_from_name(args.checksum) if args.checksum else None
    try:
        report = migration.migrate(directory, checksum=algorithm)
    except ArchiveRunningError as error:
        output.error(f"{error}; stop it before migrating")
        return EXIT_USAGE
    except migration.MigrationError as error:
        output.error(str(error))
        return EXIT_USAGE
    output.line(report.describe())
    return EXIT_OK
