"""The `aeron-archive` command: inspect and maintain an archive directory.

Every subcommand is a `ToolCommand` in one registry. Other modules add theirs (``serve``,
``recordings``, ``replay``, ...) with `register_command`; `main` imports every module of the
`aeron_spark.archive` package named ``*_command`` or ``*_commands``, so adding a command means
adding such a module and never editing this one.

Exit codes: 0 ok, 1 verification failed, 2 usage or bad input.

Works whether or not an archive runs on the directory: while one runs (per the mark file) the
catalog is opened read-only and commands that change files refuse to run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import pkgutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from aeron_spark.archive import mark_file
from aeron_spark.archive.catalog import CATALOG_FILE_NAME, Catalog, CatalogEntry, CatalogError
from aeron_spark.archive.recording_descriptor import RecordingDescriptor

EXIT_OK = 0
EXIT_VERIFICATION_FAILED = 1
EXIT_USAGE = 2

PROGRAM = "aeron-archive"


class ToolError(Exception):
    """Bad input or an unusable directory: printed to stderr, exit code 2."""


@dataclass(frozen=True)
class ToolCommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, "Output"], int]
    needs_archive_dir: bool = True


@dataclass
class Output:
    out: TextIO
    err: TextIO

    def line(self, text: str = "") -> None:
        print(text, file=self.out)

    def error(self, text: str) -> None:
        print(f"{PROGRAM}: error: {text}", file=self.err)


_COMMANDS: dict[str, ToolCommand] = {}

# Further commands live in modules of this package named `*_command` or `*_commands` (e.g.
# `serve_command.py`); `main` imports them all, and each calls `register_command` at import.
COMMAND_MODULE_SUFFIXES = ("_command", "_commands")


def register_command(name: str, *, help: str, run: Callable[[argparse.Namespace, "Output"], int],
                     configure: Callable[[argparse.ArgumentParser], None] = lambda parser: None,
                     needs_archive_dir: bool = True) -> None:
    """Adds a subcommand. ``configure(parser)`` adds its arguments; ``run(args, output)`` returns
    the exit code and raises `ToolError` for bad input. ``needs_archive_dir`` adds ``--dir DIR``."""
    if name in _COMMANDS:
        raise ValueError(f"aeron-archive command {name!r} is already registered")
    _COMMANDS[name] = ToolCommand(name, help, configure, run, needs_archive_dir)


def registered_commands() -> dict[str, ToolCommand]:
    return dict(_COMMANDS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Inspect and maintain an Aeron archive directory "
                                  "(archive.catalog, archive-mark.dat, <id>-<base>.rec segments).",
        epilog="exit codes: 0 ok, 1 verification failed, 2 usage or bad input")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in _COMMANDS.values():
        sub = subparsers.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        if cmd.needs_archive_dir:
            sub.add_argument("--dir", type=Path, default=Path("."), metavar="DIR",
                             help="archive directory (default: the current directory)")
        cmd.configure(sub)
        sub.set_defaults(_command=cmd)
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    output = Output(stdout or sys.stdout, stderr or sys.stderr)
    _load_command_modules()
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(output.out), contextlib.redirect_stderr(output.err):
            args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return int(exit_.code) if isinstance(exit_.code, int) else EXIT_USAGE
    cmd: ToolCommand = args._command
    try:
        if cmd.needs_archive_dir and not args.dir.is_dir():
            raise ToolError(f"archive directory {args.dir} does not exist or is not a directory")
        return cmd.run(args, output)
    except (ToolError, CatalogError, mark_file.MarkFileError, ValueError, OSError) as error:
        output.error(str(error))
        return EXIT_USAGE


def _load_command_modules() -> None:
    package = importlib.import_module("aeron_spark.archive")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.endswith(COMMAND_MODULE_SUFFIXES):
            importlib.import_module(f"{package.__name__}.{module.name}")


# --------------------------------------------------------------------------- shared helpers

def archive_is_running(directory: Path) -> mark_file.ArchiveMarkInfo | None:
    return mark_file.running_archive(directory)


def open_catalog_read_only(directory: Path) -> Catalog:
    if not (directory / CATALOG_FILE_NAME).exists():
        raise ToolError(f"no archive in {directory}: {CATALOG_FILE_NAME} is missing")
    return Catalog.open(directory, read_only=True)


def format_descriptor(descriptor: RecordingDescriptor, valid: bool = True) -> str:
    fields = descriptor.to_aeron_dict()
    text = ", ".join(f"{name}={value}" for name, value in fields.items())
    return f"RecordingDescriptor{{{'' if valid else 'INVALID, '}{text}}}"


def _descriptor_json(entry: CatalogEntry) -> dict:
    return dict(entry.descriptor.to_aeron_dict(), valid=entry.valid)


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

def _describe_configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording_id", nargs="?", type=recording_id_argument, metavar="ID",
                        help="describe only this recording")
    parser.add_argument("--all", action="store_true", help="include invalid (purged) recordings")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def describe(args: argparse.Namespace, output: Output) -> int:
    """Mark file header and every valid descriptor, or one descriptor."""
    directory: Path = args.dir
    with open_catalog_read_only(directory) as catalog:
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
    for entry in entries:
        output.line(format_descriptor(entry.descriptor, entry.valid))
    for problem in problems:
        output.line(f"PROBLEM: {problem}")
    return EXIT_OK


def count_entries(args: argparse.Namespace, output: Output) -> int:
    """Number of valid recordings in the catalog."""
    with open_catalog_read_only(args.dir) as catalog:
        output.line(str(catalog.count_entries()))
    return EXIT_OK


def max_entries(args: argparse.Namespace, output: Output) -> int:
    """Recordings the catalog file holds before it next grows."""
    with open_catalog_read_only(args.dir) as catalog:
        output.line(str(catalog.max_entries()))
    return EXIT_OK


def pid(args: argparse.Namespace, output: Output) -> int:
    """The pid recorded in the mark file."""
    info = mark_file.read_mark_file(args.dir)
    output.line(str(info.pid))
    return EXIT_OK


register_command("describe", help="print the mark file header and the recording descriptors "
                                  "(or one descriptor)", configure=_describe_configure, run=describe)
register_command("count-entries", help="print the number of valid recordings", run=count_entries)
register_command("max-entries", help="print how many recordings the catalog file holds",
                 run=max_entries)
register_command("pid", help="print the archive's pid from the mark file", run=pid)


if __name__ == "__main__":
    sys.exit(main())
