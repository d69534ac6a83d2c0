"""A small local helper for the catalog 3.1 interop tests: the real Java Aeron 1.51.0
(`io.aeron:aeron-all:1.51.0`, fetched with Maven) as an ArchivingMediaDriver and as ArchiveTool.

Used instead of ``tests/interop/peer/modern_peer.py`` while that peer is not on main; it only
needs the jar and Java 17. Every process started here is stopped by PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

AERON_VERSION = "1.51.0"
JAR = Path.home() / ".m2/repository/io/aeron/aeron-all" / AERON_VERSION / f"aeron-all-{AERON_VERSION}.jar"
JVM_OPTIONS = ["--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
               "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
               "--add-opens", "java.base/java.nio=ALL-UNNAMED",
               "--add-opens", "java.base/java.util.zip=ALL-UNNAMED"]


def ensure_jar(timeout: float = 300.0) -> Path:
    """The aeron-all 1.51.0 jar, fetched into ~/.m2 with ``mvn dependency:get`` when missing."""
    if not JAR.exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise FileNotFoundError("mvn is not installed: cannot fetch io.aeron:aeron-all:" + AERON_VERSION)
        subprocess.run([mvn, "-q", "dependency:get", f"-Dartifact=io.aeron:aeron-all:{AERON_VERSION}",
                        "-Dtransitive=false"], check=True, timeout=timeout, capture_output=True)
    return JAR


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise FileNotFoundError("java is not installed")
    return found


def archive_tool(archive_dir: Path, *args: str, input: str | None = None,
                 timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``java io.aeron.archive.ArchiveTool <archive_dir> args...`` (1.51.0)."""
    return subprocess.run([java(), *JVM_OPTIONS, "-cp", str(ensure_jar()), "io.aeron.archive.ArchiveTool",
                           str(archive_dir), *args], input=input, capture_output=True, text=True,
                          timeout=timeout)


@dataclass
class JavaArchive:
    process: subprocess.Popen
    archive_dir: Path
    aeron_dir: Path
    control_channel: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode


@contextmanager
def running_java_archive(archive_dir: Path, aeron_dir: Path, control_port: int, *,
                         startup_timeout: float = 60.0, checksum: str | None = None,
                         extra: dict[str, str] | None = None) -> Iterator[JavaArchive]:
    """The Java 1.51 ArchivingMediaDriver (its own Java media driver in ``aeron_dir``) with control
    on ``localhost:<control_port>`` and the recording events channel off; stopped by PID after."""
    archive_dir.mkdir(parents=True, exist_ok=True)
    control_channel = f"aeron:udp?endpoint=localhost:{control_port}"
    properties = {
        "aeron.dir": str(aeron_dir), "aeron.dir.delete.on.start": "true",
        "aeron.dir.delete.on.shutdown": "true",
        "aeron.archive.dir": str(archive_dir), "aeron.archive.control.channel": control_channel,
        "aeron.archive.replication.channel": "aeron:udp?endpoint=localhost:0",
        "aeron.archive.recording.events.enabled": "false", "aeron.archive.id": "51",
        "aeron.archive.segment.file.length": str(128 * 1024), "aeron.archive.threading.mode": "SHARED",
        "aeron.threading.mode": "SHARED", "aeron.print.configuration": "false",
    }
    if checksum:
        properties["aeron.archive.record.checksum"] = checksum
    properties.update(extra or {})
    log_path = archive_dir.parent / f"java-archive-{control_port}.log"
    with open(log_path, "w") as log_file:
        process = subprocess.Popen(
            [java(), *JVM_OPTIONS, *[f"-D{k}={v}" for k, v in properties.items()], "-cp", str(ensure_jar()),
             "io.aeron.archive.ArchivingMediaDriver"],
            stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    archive = JavaArchive(process, archive_dir, aeron_dir, control_channel, log_path)
    try:
        deadline = time.monotonic() + startup_timeout
        mark = archive_dir / "archive-mark.dat"
        while not (mark.exists() and _mark_ready(mark)):
            if process.poll() is not None:
                raise RuntimeError(f"the Java archive exited with {process.returncode}:\n{archive.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Java archive did not start in {startup_timeout} s:\n{archive.log()}")
            time.sleep(0.1)
        time.sleep(0.5)
        yield archive
    finally:
        archive.stop()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def _mark_ready(path: Path) -> bool:
    data = path.read_bytes()[:16]
    return len(data) >= 12 and int.from_bytes(data[8:12], "little") == (3 << 16) | (1 << 8)
