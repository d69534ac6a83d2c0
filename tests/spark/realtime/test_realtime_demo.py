"""The real-time demo (``./run-demo --realtime``, examples/realtime_demo.py): Aeron -> Spark real-time
mode (JVM source) -> Aeron (JVM sink) reads every message back, and without a JDK's javac or Maven
the flag is one clear line. The demo runs as a subprocess leading its own session, stopped by PID
(SIGTERM, then SIGKILL to its process group) if it outlives the timeout; it stops its Spark and its
sidecar itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.jvm_module import JvmModule

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[3]
RUN_TIMEOUT_S = 420
STOP_GRACE_S = 30


def run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # it leads its own session: pgid == pid
            stdout, stderr = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_the_realtime_demo_reads_every_message_back_through_spark(jvm_module: JvmModule) -> None:
    result = run([sys.executable, "examples/realtime_demo.py", "--messages", "300", "--rate", "100"])

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "read back 300 of 300 messages; latency publish -> read back through Spark: p50" in result.stdout
    assert "the sidecar recorded the sink's stream: recording" in result.stdout, result.stdout[-4000:]


def path_without(bin_dir: Path, *prefixes: str) -> str:
    """A PATH of symlinks to every executable on the real PATH except those named ``prefix*``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = bin_dir / entry.name
            if entry.name.startswith(prefixes) or link.exists() or not os.access(entry.path, os.X_OK):
                continue
            link.symlink_to(entry.path)
    return str(bin_dir)


def test_run_demo_realtime_without_javac_or_maven_is_one_clear_line(tmp_path: Path) -> None:
    environment = {name: value for name, value in os.environ.items() if name != "JAVA_HOME"}
    environment["PATH"] = path_without(tmp_path / "bin", "javac", "mvn")

    result = run([str(REPO / "run-demo"), "--realtime"], environment)

    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "[run-demo] --realtime needs a JDK 17 (javac) and Maven (mvn) on the PATH to build the JVM module; "
        "./run-demo without it needs only Python")
