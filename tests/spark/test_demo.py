"""Smoke test of the README's demo: examples/demo.py runs end to end in a short configuration.

The demo is run as a subprocess (it starts its own sidecar and Spark session). On timeout or
failure it is stopped by PID: SIGTERM first (it then stops Spark and the sidecar itself), then
SIGKILL to its whole process group (the sidecar, the JVM and Python workers are its children).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(330)]

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"
RUN_TIMEOUT_S = 270
STOP_GRACE_S = 30
RESULT_LINE = re.compile(r"result recording (\d+): startPosition=(\d+) stopPosition=(\d+)")
READ_BACK_LINE = re.compile(r"read back (\d+) rows? of recording (\d+)")
PROGRESS_LINE = re.compile(r"batch \d+: \d+ rows .* end offset \{")


def run_demo(*args: str) -> subprocess.CompletedProcess:
    process = subprocess.Popen([sys.executable, str(DEMO), *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            _stop(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM (the demo then stops Spark and its sidecar), then SIGKILL to its process group."""
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the demo leads its own session: pgid == pid
        except ProcessLookupError:
            pass
        process.communicate()


def test_demo_prints_the_result_recording_and_its_rows():
    result = run_demo("--trades", "2000", "--seconds", "10")
    output = result.stdout
    assert result.returncode == 0, output[-4000:] + result.stderr[-4000:]

    assert PROGRESS_LINE.search(output), output[-4000:]
    described = RESULT_LINE.search(output)
    assert described, output[-4000:]
    recording_id, start, stop = map(int, described.groups())
    assert stop > start >= 0 and stop % 32 == 0

    read_back = READ_BACK_LINE.search(output)
    assert read_back, output[-4000:]
    rows, read_recording = map(int, read_back.groups())
    assert rows > 0 and read_recording == recording_id
    # The rows are shown (a Spark table with the VWAP columns) after the read-back line.
    table = output[read_back.end():]
    assert re.search(r"\|\s*window_start\s*\|\s*symbol\s*\|\s*vwap\s*\|", table), table[:2000]
    assert any(symbol in table for symbol in ("AAPL", "MSFT", "NVDA", "AMZN"))
