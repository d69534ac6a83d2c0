"""What every `aeron-archive` command shares: its output streams, its usage error, the exit codes.

A command is ``run(args, output) -> exit code``; it prints through `Output` and raises `ToolError`
for bad input, which `aeron_spark.archive.cli.main` prints to stderr with exit code 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

PROGRAM = "aeron-archive"

EXIT_OK = 0
EXIT_VERIFICATION_FAILED = 1
EXIT_USAGE = 2


class ToolError(Exception):
    """Bad input or an unusable directory: printed to stderr, exit code 2."""


@dataclass
class Output:
    out: TextIO
    err: TextIO

    def line(self, text: str = "") -> None:
        print(text, file=self.out)

    def error(self, text: str) -> None:
        print(f"{PROGRAM}: error: {text}", file=self.err)
