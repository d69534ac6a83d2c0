"""Processes the archive benchmarks start: the bench clients, our sidecar, the Java archives (1.15.1 and 1.51.0).

Everything here is stopped by PID (SIGTERM, then SIGKILL) by the context manager that started it,
also when the benchmark fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aeron_spark.archive.cli.sidecar_process import SidecarProcess

# The interop peer is test code: bench/archive_throughput.py puts the repository root on sys.path.
from tests.interop.peer.interop_peer import (
    JVM_OPTIONS,
    PeerError,
    PeerInstallation,
    _start_server,
    parse_events,
    shm_tempdir,
    stop_process,
)
from tests.interop.peer.modern_peer import ModernPeerInstallation, start_modern_java_archive
from tests.support.ports import free_udp_port, udp_channel

BENCH_CLIENT_CLASS = "io.aeronspark.bench.ArchiveBenchClient"
BENCH_JAVA_SOURCES = Path(__file__).resolve().parent / "java"
SIDECAR_STARTUP_TIMEOUT_S = 60.0


# ---------------------------------------------------------------------------------------------
# The Java bench client: compiled once against the 1.15.1 jar, cached next to the interop peer


def _sources() -> list[Path]:
    return sorted(BENCH_JAVA_SOURCES.rglob("*.java"))


def build_bench_client(installation: PeerInstallation) -> Path:
    """Compiles bench/java with ``javac --release 11`` into the peer cache; returns the classes dir.

    Skipped when the stamp (hash of the sources and the jar path) matches.
    """
    sources = _sources()
    if not sources:
        raise FileNotFoundError(f"no Java sources under {BENCH_JAVA_SOURCES}")
    digest = hashlib.sha256(str(installation.aeron_jar).encode())
    for source in sources:
        digest.update(source.read_bytes())
    out = installation.cache_dir / "bench-client"
    stamp = out / "stamp"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return out / "classes"
    javac = _find_javac()
    shutil.rmtree(out, ignore_errors=True)
    (out / "classes").mkdir(parents=True)
    compiled = subprocess.run([javac, "--release", "11", "-cp", str(installation.aeron_jar), "-d",
                               str(out / "classes"), *map(str, sources)], capture_output=True, text=True)
    if compiled.returncode != 0:
        raise JavacError(f"{javac} failed to build the benchmark's Java client (exit code {compiled.returncode}); "
                         f"it needs a JDK 17 (javac --release 11):\n{compiled.stderr.strip()[-3000:]}")
    stamp.write_text(digest.hexdigest())
    return out / "classes"


class JavacError(RuntimeError):
    """``javac`` is missing or could not build the benchmark's Java client; the message says what to install."""


def _find_javac() -> str:
    """JAVA_HOME's javac, else the PATH's (JAVA_HOME may name a runtime without one, as
    tests/interop/peer/fetch-modern-java-peer also allows)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "javac"), os.X_OK):
        return os.path.join(java_home, "bin", "javac")
    javac = shutil.which("javac")
    if javac is None:
        raise JavacError("javac not found (a JDK 17, in JAVA_HOME or on the PATH): it compiles the benchmark's "
                         "Java client; install a JDK 17 (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)")
    return javac


PYTHON_BENCH_CLIENT = Path(__file__).resolve().parent / "python_bench_client.py"


def java_udp_connection(control_channel: str) -> list[str]:
    """The Java bench client in its own embedded Java driver, reaching the archive over UDP."""
    return ["--embedded-driver", "--control-channel", control_channel,
            "--response-channel", udp_channel(free_udp_port())]


def java_ipc_connection(aeron_dir: str) -> list[str]:
    """The Java bench client attached to the Java archive's own driver, local control over IPC."""
    return ["--aeron-dir", aeron_dir, "--control-channel", "aeron:ipc", "--control-stream-id", "11",
            "--response-channel", "aeron:ipc"]


@dataclass(frozen=True)
class BenchClients:
    """Runs one bench client command (a fresh process each) and returns its one JSON result line:
    ``ArchiveBenchClient`` (Java 1.15.1) or ``python_bench_client.py`` (ours over IPC)."""

    installation: PeerInstallation
    classes: Path
    timeout_s: float = 600.0

    def java(self, command: str, connection: list[str], *args: str) -> dict[str, Any]:
        driver_dir = shm_tempdir("aeron-bench-client-") if "--embedded-driver" in connection else None
        extra = ["--embedded-driver-dir", str(driver_dir)] if driver_dir is not None else []
        try:
            return self._run([str(self.installation.java), *JVM_OPTIONS, "-cp",
                              f"{self.classes}{os.pathsep}{self.installation.aeron_jar}", BENCH_CLIENT_CLASS,
                              command, *connection, *extra, *args])
        finally:
            if driver_dir is not None:
                shutil.rmtree(driver_dir, ignore_errors=True)

    def python(self, command: str, aeron_dir: str, *args: str) -> dict[str, Any]:
        return self._run([sys.executable, str(PYTHON_BENCH_CLIENT), command, "--aeron-dir", aeron_dir, *args])

    def _run(self, argv: list[str]) -> dict[str, Any]:
        return run_bench_client(argv, self.timeout_s)


def run_bench_client(argv: list[str], timeout_s: float = 600.0) -> dict[str, Any]:
    """Runs one bench client command (Java or ``python_bench_client.py``) and returns its one
    ``recorded`` / ``replayed`` JSON line; PeerError with its stderr when it fails."""
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                               stdin=subprocess.DEVNULL, check=False)
    events = [e for e in parse_events(completed.stdout) if e.get("event") in ("recorded", "replayed")]
    if completed.returncode != 0 or len(events) != 1:
        raise PeerError(f"bench client {argv[-1] if not argv else ' '.join(argv[-12:])} failed "
                        f"(exit {completed.returncode}): {completed.stderr.strip()[-3000:]}",
                        command=argv, exit_code=completed.returncode, error=None, stderr=completed.stderr)
    return events[0]


# ---------------------------------------------------------------------------------------------
# The archives


@dataclass
class RunningArchive:
    name: str
    control_channel: str
    archive_dir: Path
    pid: int
    details: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def running_our_sidecar(archive_dir: Path, *, segment_length: str = "128m",
                        extra_args: tuple[str, ...] = ()) -> Iterator[RunningArchive]:
    """`aeron-archive serve` with its embedded C driver, logging at WARNING (INFO per request would
    be noise here); stopped by PID on exit."""
    control_channel = udp_channel(free_udp_port())
    stderr_path = archive_dir.parent / f"{archive_dir.name}.stderr"
    archive_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(stderr_path, "w") as stderr:
        try:
            sidecar = SidecarProcess.start(archive_dir, "--control-channel", control_channel,
                                           "--segment-length", segment_length, "--log-level", "WARNING",
                                           *extra_args, stderr=stderr, timeout_s=SIDECAR_STARTUP_TIMEOUT_S)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {stderr_path.read_text()[-3000:]}") from None
    try:
        yield RunningArchive("ours", control_channel, archive_dir, sidecar.pid, dict(sidecar.ready))
    finally:
        if sidecar.stop(grace_s=30.0) != 0:
            sidecar.kill(remove_embedded_driver_dir=True)  # a SIGKILLed sidecar leaves its driver dir


@contextlib.contextmanager
def running_java_archive_process(installation: PeerInstallation, archive_dir: Path, *,
                                 segment_length: int = 128 * 1024 * 1024,
                                 threading_mode: str = "shared") -> Iterator[RunningArchive]:
    """The real 1.15.1 ArchivingMediaDriver (the peer's ``archive``), stopped by PID.

    ``threading_mode`` is the peer's ``--threading``: ``shared`` (one thread for the driver, one
    for conductor+recorder+replayer) or ``dedicated`` (a thread per agent).
    """
    if threading_mode not in ("shared", "dedicated"):
        raise ValueError(f"threading mode {threading_mode!r} is invalid: 'shared' or 'dedicated'")
    aeron_dir = shm_tempdir("aeron-bench-java-")
    control_channel = udp_channel(free_udp_port())
    server = None
    try:
        args = ["--archive-dir", str(archive_dir), "--aeron-dir", str(aeron_dir),
                "--control-channel", control_channel, "--control-stream-id", "10",
                "--recording-events-channel", udp_channel(free_udp_port()),
                "--segment-length", str(segment_length), "--threading", threading_mode]
        # start_java_archive has no threading parameter; this is the same start, by PID.
        server = _start_server(installation, "archive", args, archive_dir.parent, 60.0)
        yield RunningArchive("java", control_channel, archive_dir, server.pid, dict(server.ready))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(aeron_dir, ignore_errors=True)


@contextlib.contextmanager
def running_modern_java_archive_process(installation: ModernPeerInstallation, archive_dir: Path, *,
                                        segment_length: int = 128 * 1024 * 1024,
                                        threading_mode: str = "shared") -> Iterator[RunningArchive]:
    """The real modern (1.51.0) Archive with its own Java media driver (the modern peer's
    ``archive``), stopped by PID. ``details`` has the peer's ready line (``aeronDir``,
    ``localControlChannel``, ``localControlStreamId``, ...)."""
    if threading_mode not in ("shared", "dedicated"):
        raise ValueError(f"threading mode {threading_mode!r} is invalid: 'shared' or 'dedicated'")
    aeron_dir = shm_tempdir("aeron-bench-modern-java-")
    server = None
    try:
        server = start_modern_java_archive(installation, archive_dir=archive_dir, aeron_dir=Path(aeron_dir),
                                           control_channel=udp_channel(free_udp_port()),
                                           segment_length=segment_length, threading=threading_mode,  # type: ignore[arg-type]
                                           log_dir=archive_dir.parent)
        yield RunningArchive("java", server.ready["controlChannel"], archive_dir, server.pid, dict(server.ready))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(aeron_dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Profiling our sidecar


@contextlib.contextmanager
def py_spy_recording(pid: int, output: Path, *, rate: int = 250, idle: bool = False) -> Iterator[None]:
    """Samples ``pid`` with py-spy (all threads; raw collapsed stacks) while the block runs. Threads
    the OS has off the CPU (a blocking call, waiting for the GIL) are sampled too only with
    ``idle`` (py-spy ``--idle``); the agents' idle-strategy frames are in the samples either way."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(py_spy):
        raise FileNotFoundError("py-spy is not installed: pip install py-spy (into the venv)")
    process = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                                "--threads", "--output", str(output), "--nonblocking", *(["--idle"] if idle else [])],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # let it attach
        yield
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop_process(process)


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """User + system CPU seconds of each live thread of ``pid`` (``/proc/<pid>/task/<tid>/stat``)."""
    seconds: dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # the thread ended meanwhile
        seconds[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def thread_run_queue_wait_seconds(pid: int) -> dict[int, float]:
    """Seconds each live thread of ``pid`` spent runnable but waiting for a CPU (the second field
    of ``/proc/<pid>/task/<tid>/schedstat``): on a shared 2-core machine, the time the scheduler,
    not the program, took."""
    seconds: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            seconds[int(tid)] = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile, or no schedstats in this kernel
    return seconds


def thread_names(pid: int) -> dict[int, str]:
    """Each thread's name: its ``comm`` (the JVM and Aeron's C agents name theirs), and for a Python
    process the ``threading`` names py-spy reports (Python 3.12 leaves its OS threads named
    ``python``), when py-spy is installed. Unnamed threads get ``comm#tid``."""
    names: dict[int, str] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            names[int(tid)] = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if os.path.exists(py_spy) and "python" in names.values():
        dump = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False,
                              timeout=30).stdout
        for tid, name in re.findall(r'^Thread (\d+) \([^)]*\): "([^"]+)"', dump, re.MULTILINE):
            if int(tid) in names:
                names[int(tid)] = name
    return {tid: f"{name}#{tid}" if name in ("python", "java") else _readable_thread_name(name)
            for tid, name in names.items()}


def _readable_thread_name(comm: str) -> str:
    # comm keeps 15 characters: the Java driver's shared agent is named after its directory
    # ("/dev/shm/aeron-"), the C driver's after its agents ("[conductor, sen").
    if comm.startswith("/") or comm.startswith("[conductor"):
        return "driver (shared agent)"
    return comm


def thread_cpu_delta(before: dict[int, float], after: dict[int, float], names: dict[int, str],
                     floor_s: float = 0.005) -> dict[str, float]:
    """Seconds per named thread between two snapshots of :func:`thread_cpu_seconds` (or of
    :func:`thread_run_queue_wait_seconds`); threads below ``floor_s`` left out, one name summed."""
    spent: dict[str, float] = {}
    for tid, seconds in after.items():
        name = names.get(tid, f"thread#{tid}")
        spent[name] = spent.get(name, 0.0) + seconds - before.get(tid, 0.0)
    return {name: round(value, 3) for name, value in sorted(spent.items(), key=lambda item: -item[1])
            if value >= floor_s}


IDLE_FRAMES = ("BackoffIdleStrategy.idle", "YieldingIdleStrategy.idle", "SleepingIdleStrategy.idle")
DORMANT_FRAME = "AgentRunner.wait_while_dormant"  # its innermost frames are threading's Event.wait


def summarize_profile(raw_files: list[Path], top: int = 20) -> str:
    """Where py-spy's samples (raw collapsed stacks, ``--threads``) of our sidecar land.

    Samples whose innermost frame is the agents' idle strategy are waiting, not working: they are
    counted per thread as idle and left out of the function ranking. Shares are of all samples.
    """
    by_thread: dict[str, list[int]] = {}  # thread -> [busy, idle]
    self_counts: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for raw in raw_files:
        for line in raw.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            total += count
            frames = stack.split(";")
            thread = frames[0].split(":", 1)[-1].strip() if frames[0].startswith("thread") else "?"
            idle = frames[-1].startswith(IDLE_FRAMES) or any(f.startswith(DORMANT_FRAME) for f in frames[-4:])
            by_thread.setdefault(thread, [0, 0])[1 if idle else 0] += count
            if idle:
                continue
            self_counts[frames[-1]] = self_counts.get(frames[-1], 0) + count
            for frame in set(frames[1:]):
                inclusive[frame] = inclusive.get(frame, 0) + count
    if total == 0:
        return "(no samples)"
    lines = ["per thread (busy / idle-strategy share of all samples):"]
    for thread, (busy, idle) in sorted(by_thread.items(), key=lambda item: -item[1][0]):
        lines.append(f"  {thread:40} {busy / total:6.1%} busy {idle / total:6.1%} idle")
    lines.append("busiest functions (self, inclusive):")
    for name, count in sorted(self_counts.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"  {count / total:6.1%} {inclusive.get(name, count) / total:6.1%}  {name}")
    return "\n".join(lines)


def dump_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1))
