"""The README names exactly two commands (``./run-demo``, ``./run-tests``); ``.ci/run`` is exactly
the test one; the test command is idempotent on a set-up checkout and refuses a run that collects
no tests."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[3]


def clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH, so only the installed packages are importable."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_readme_names_exactly_two_setup_commands_and_ci_runs_the_test_one():
    readme = (REPO / "README.md").read_text()
    quickstart = readme[readme.index("## Quickstart"):]
    block = quickstart[quickstart.index("```bash"):]
    block = block[:block.index("```", 3)]
    commands = [line.split("#")[0].strip() for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["./run-demo", "./run-tests"]
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci[-1].strip() == "exec ./run-tests"


def test_readme_test_command_is_idempotent_and_refuses_a_run_without_tests():
    """On the set-up checkout a run reinstalls nothing, and a selection that collects no tests
    fails (exit 5, pytest's status passed through) with a message instead of passing."""
    started = time.monotonic()
    result = subprocess.run([str(REPO / "run-tests"), "tests/unit/driver_integration/test_position.py", "-q",
                             "-p", "no:cacheprovider", "-k", "no_test_is_called_this"],
                            cwd=REPO, env=clean_env(), capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "pytest collected no tests; a run without tests proves nothing" in result.stderr
    assert "[setup] installing" not in result.stderr  # already set up: nothing reinstalled
    assert time.monotonic() - started < 120
