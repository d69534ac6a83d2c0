"""The `aeron-archive` command: its entry point, its argument parser and its one command table.

`COMMANDS` lists every subcommand with its help line and the ``configure(parser)`` and
``run(args, output)`` functions of the module that implements it:

* `inspect_commands`: offline inspection and maintenance of an archive directory (``describe``,
  ``count-entries``, ``max-entries``, ``capacity``, ``pid``, ``dump``, ``verify``, ``checksum``);
* `catalog_admin_commands`: Aeron ArchiveTool's catalog administration (``describe-all``,
  ``capacity-report``, ``compact``, ``delete-orphaned-segments``, ``mark-valid``, ``mark-invalid``);
* `errors_command`: ``errors``, the archive's and its driver's error logs;
* `migrate_command`: ``migrate``, the in-place upgrade of an older directory to 3.1.0;
* `serve_command`: ``serve``, the archive sidecar;
* `client_commands`: ``recordings``, ``replay``, ``stat`` against a running archive;
* `replicate_command`: ``replicate``, a running archive replicating a recording from another one.

Adding a command means adding its row here. No command module imports this one.

Run as ``aeron-archive ...`` (the console script) or ``python -m aeron_spark.archive.cli.main ...``.
Exit codes: 0 ok, 1 verification failed (client commands: the archive reported an error), 2 usage
or bad input (client commands: 3 the archive did not answer in time; replicate: 130 stopped by
SIGINT).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from aeron_spark.archive.cli import (
    catalog_admin_commands,
    client_commands,
    errors_command,
    inspect_commands,
    migrate_command,
    replicate_command,
    serve_command,
)
from aeron_spark.archive.cli.output import EXIT_USAGE, PROGRAM, Output, ToolError
from aeron_spark.archive.storage.catalog import CatalogError
from aeron_spark.archive.storage.mark_file import MarkFileError

@dataclass(frozen=True)
class Command:
    help: str
    run: Callable[[argparse.Namespace, Output], int]
    configure: Callable[[argparse.ArgumentParser], None] | None = None  # adds the command's arguments
    needs_archive_dir: bool = True  # adds ``--dir DIR`` (default: the current directory), checked to exist


COMMANDS: dict[str, Command] = {
    # offline: an archive directory's files
    "describe": Command("print the mark file header and the recording descriptors (or one descriptor)",
                        inspect_commands.describe, inspect_commands.configure_describe),
    "count-entries": Command("print the number of valid recordings", inspect_commands.count_entries),
    "max-entries": Command("print how many recordings the catalog file holds (at the smallest entry size)",
                           inspect_commands.max_entries),
    "capacity": Command("print the catalog file's length in bytes", inspect_commands.capacity),
    "pid": Command("print the archive's pid from the mark file", inspect_commands.pid),
    "dump": Command("print a recording's descriptor and its frames",
                    inspect_commands.dump, inspect_commands.configure_dump),
    "verify": Command("check recordings' positions, frames and (optionally) checksums; exit 1 on errors",
                      inspect_commands.verify, inspect_commands.configure_verify),
    "checksum": Command("recompute and store frame checksums (only while no archive runs)",
                        inspect_commands.checksum_command, inspect_commands.configure_checksum),
    "describe-all": Command("print the mark file, the catalog capacity and every recording descriptor "
                            "with its state (VALID, INVALID, DELETED)", catalog_admin_commands.describe_all),
    "capacity-report": Command("print the catalog's used and free bytes, entries by state, segment "
                               "files' size and the file system's free space",
                               catalog_admin_commands.capacity_report),
    "errors": Command("print the archive's and its media driver's error logs", errors_command.errors),
    "compact": Command("remove INVALID and DELETED entries from the catalog and delete their segment files "
                       "(asks first; only while no archive runs)",
                       catalog_admin_commands.compact, catalog_admin_commands.configure_confirmed),
    "delete-orphaned-segments": Command(
        "delete segment files outside each recording's start..stop segments (asks first; only while no "
        "archive runs)", catalog_admin_commands.delete_orphaned_segments,
        catalog_admin_commands.configure_delete_orphaned_segments),
    "mark-valid": Command("mark an INVALID recording VALID (only while no archive runs)",
                          catalog_admin_commands.mark_valid, catalog_admin_commands.configure_state_change),
    "mark-invalid": Command("mark a VALID recording INVALID (only while no archive runs)",
                            catalog_admin_commands.mark_invalid, catalog_admin_commands.configure_state_change),
    "migrate": Command("upgrade the directory in place to catalog/mark file version 3.1.0 (Aeron 1.32+); "
                       "only while no archive runs", migrate_command.run, migrate_command.configure),
    # the archive sidecar
    "serve": Command("run the archive sidecar (control protocol, recorder, replayer) until SIGTERM/SIGINT",
                     serve_command.run, serve_command.configure, needs_archive_dir=False),
    # a running archive
    "recordings": Command("list a running archive's recordings (JSON lines, Aeron's field names)",
                          client_commands.recordings, client_commands.configure_recordings,
                          needs_archive_dir=False),
    "replay": Command("replay a recording from a running archive (one JSON line per message)",
                      client_commands.replay, client_commands.configure_replay, needs_archive_dir=False),
    "stat": Command("print the archive's counters from the media driver (AeronStat-style)",
                    client_commands.stat, client_commands.configure_stat, needs_archive_dir=False),
    "replicate": Command("ask a running archive to replicate a recording from another archive; follow it "
                         "(signals, progress) until it ends, Ctrl-C stops it",
                         replicate_command.run, replicate_command.configure, needs_archive_dir=False),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Inspect and maintain an Aeron archive directory "
                                  "(archive.catalog, archive-mark.dat, <id>-<base>.rec segments).",
        epilog="exit codes: 0 ok, 1 verification failed, 2 usage or bad input")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        if command.needs_archive_dir:
            sub.add_argument("--dir", type=Path, default=Path("."), metavar="DIR",
                             help="archive directory (default: the current directory)")
        if command.configure is not None:
            command.configure(sub)
        sub.set_defaults(_command=command)
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Runs one command and returns its exit code (``--help`` and usage errors included: argparse's
    SystemExit becomes the return value)."""
    output = Output(stdout or sys.stdout, stderr or sys.stderr)
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(output.out), contextlib.redirect_stderr(output.err):
            args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return int(exit_.code) if isinstance(exit_.code, int) else EXIT_USAGE
    command: Command = args._command
    try:
        if command.needs_archive_dir and not args.dir.is_dir():
            raise ToolError(f"archive directory {args.dir} does not exist or is not a directory")
        return command.run(args, output)
    except (ToolError, CatalogError, MarkFileError, ValueError, OSError) as error:
        output.error(str(error))
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
