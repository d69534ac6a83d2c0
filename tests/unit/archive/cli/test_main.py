"""The aeron-archive entry point: its one command table, --help for every command, and the
module layout (no command module imports the entry point back)."""

import ast
import io
import subprocess
import sys
from pathlib import Path

import pytest

from aeron_spark.archive.cli import main as cli

CLI_DIR = Path(cli.__file__).parent


def test_the_table_holds_every_command():
    assert set(cli.COMMANDS) == {"describe", "count-entries", "max-entries", "capacity", "pid", "dump", "verify",
                                 "checksum", "migrate", "serve", "recordings", "replay", "stat", "replicate",
                                 # ArchiveTool parity (issue 26)
                                 "describe-all", "capacity-report", "errors", "compact", "delete-orphaned-segments",
                                 "mark-valid", "mark-invalid"}


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_has_help(name):
    out, err = io.StringIO(), io.StringIO()
    # main() returns argparse's exit code instead of raising SystemExit
    assert cli.main([name, "--help"], stdout=out, stderr=err) == 0
    assert out.getvalue().startswith(f"usage: aeron-archive {name}") and "--dir DIR" in out.getvalue()
    assert err.getvalue() == ""
    assert cli.COMMANDS[name].help in " ".join(out.getvalue().split())


def test_top_level_help_lists_every_command():
    out = io.StringIO()
    assert cli.main(["--help"], stdout=out) == 0
    for name in cli.COMMANDS:
        assert name in out.getvalue()


def test_runs_as_a_module():
    for argv in (["--help"], ["serve", "--help"]):
        completed = subprocess.run([sys.executable, "-m", "aeron_spark.archive.cli.main", *argv],
                                   capture_output=True, text=True, timeout=60)
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout.startswith("usage: aeron-archive")


def test_no_module_imports_the_entry_point():
    for path in CLI_DIR.glob("*.py"):
        if path.name == "main.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            assert "aeron_spark.archive.cli.main" not in names, f"{path.name} imports the entry point"
