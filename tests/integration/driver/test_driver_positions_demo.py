"""examples/driver_positions_demo.py runs end to end and reports agreement with position.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

DEMO = Path(__file__).resolve().parents[3] / "examples" / "driver_positions_demo.py"


def test_demo_exits_zero_and_every_position_agrees():
    result = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=50)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all positions agree with position.py" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.rstrip().endswith(("yes", "NO"))]
    assert len(rows) == 8 and all(row.rstrip().endswith("yes") for row in rows)
