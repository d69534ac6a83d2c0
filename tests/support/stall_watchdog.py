"""A watchdog that catches a media driver that stops ticking, with its threads' native stacks (issue 33).

Run beside a test or a benchmark (``python -m tests.support.stall_watchdog --root-pid PID --out DIR``,
or ``watching_for_stalls(root_pid, out_dir)`` from a test): every 0.5 s it finds the media drivers
of ``root_pid``'s process tree (each process's mapped ``cnc.dat`` whose driver pid, read from the
CnC header, belongs to the tree) and every 50 ms reads each one's keepalive (the to-driver ring
buffer's consumer heartbeat, which the driver conductor stamps once a second). When a keepalive is
older than the threshold (2 s: the stamp is due every second) it writes ``stall-<pid>-<n>.txt``:

* every thread of the driver's process: scheduler state, kernel wait channel, CPU time, time
  spent runnable without a CPU (``schedstat``), at the start of the stall and again after the
  stacks, so a starved thread (run-queue wait grows) is told from a blocked one (it does not);
* every thread's native stack (``gdb -batch -ex 'thread apply all bt'``; the driver's functions
  are exported ``aeron_*`` symbols, so stripped wheels still name them);
* the Python stacks (py-spy, when installed).

When the stall ends, one line says how old the keepalive got and how long the stall lasted
(``watchdog.log``). ``--threshold-ms`` sets the threshold; ``--no-gdb`` skips the native stacks
(gdb stops the process while it reads them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.stall_diagnostics import (
    CNC_METADATA_LENGTH,
    RING_CONSUMER_HEARTBEAT_OFFSET,
    RING_TRAILER_LENGTH,
    python_stacks,
)

SAMPLE_INTERVAL_S = 0.05
DISCOVERY_INTERVAL_S = 0.5
DEFAULT_THRESHOLD_MS = 2_000
GDB_TIMEOUT_S = 60.0
_CNC_PID_OFFSET = 40
_TO_DRIVER_LENGTH = struct.Struct("<i")


@dataclass
class WatchedDriver:
    cnc_path: str
    driver_pid: int
    fd: int
    heartbeat_offset: int
    stalls: int = 0
    stall_started_ms: int | None = None
    worst_age_ms: int = 0
    thread_snapshot: dict[str, tuple[str, float, float]] = field(default_factory=dict)

    def heartbeat_age_ms(self) -> int:
        """0 while the driver closes (it clears its stamp then)."""
        (heartbeat_ms,) = struct.unpack("<q", os.pread(self.fd, 8, self.heartbeat_offset))
        return int(time.time() * 1000) - heartbeat_ms if heartbeat_ms > 0 else 0


def descendants(root_pid: int) -> set[int]:
    """``root_pid`` and every process below it (from /proc's parent pids)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, frontier = {root_pid}, [root_pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def mapped_cnc_files(pid: int) -> set[str]:
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return {line.split(None, 5)[5].strip() for line in maps
                    if line.rstrip().endswith("/cnc.dat") and len(line.split(None, 5)) == 6}
    except OSError:
        return set()


def open_driver(cnc_path: str) -> WatchedDriver | None:
    try:
        fd = os.open(cnc_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        header = os.pread(fd, CNC_METADATA_LENGTH, 0)
        (to_driver_length,) = _TO_DRIVER_LENGTH.unpack_from(header, 4)
        (driver_pid,) = struct.unpack_from("<q", header, _CNC_PID_OFFSET)
    except (OSError, struct.error):
        os.close(fd)
        return None
    offset = CNC_METADATA_LENGTH + to_driver_length - RING_TRAILER_LENGTH + RING_CONSUMER_HEARTBEAT_OFFSET
    return WatchedDriver(cnc_path, driver_pid, fd, offset)


def thread_table(pid: int) -> dict[str, tuple[str, float, float]]:
    """tid -> (``name state wchan``, CPU seconds, run-queue wait seconds)."""
    table: dict[str, tuple[str, float, float]] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return table
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            name = Path(f"{base}/comm").read_text().strip()
            stat = Path(f"{base}/stat").read_text().rsplit(")", 1)[1].split()
            wchan = Path(f"{base}/wchan").read_text().strip() or "-"
            schedstat = Path(f"{base}/schedstat").read_text().split()
        except OSError:
            continue
        cpu_s = (int(stat[11]) + int(stat[12])) / ticks
        table[tid] = (f"{name!r} state {stat[0]} wchan {wchan}", cpu_s, int(schedstat[1]) / 1e9)
    return table


def describe_threads(before: dict[str, tuple[str, float, float]], after: dict[str, tuple[str, float, float]]) -> str:
    lines = []
    for tid in sorted(after, key=int):
        text, cpu, waited = after[tid]
        _, cpu0, waited0 = before.get(tid, (text, cpu, waited))
        lines.append(f"  tid {tid} {text}: cpu {cpu:.2f} s (+{cpu - cpu0:.2f}), runnable without a CPU "
                     f"+{waited - waited0:.2f} s")
    return "\n".join(lines)


def native_stacks(pid: int) -> str:
    gdb = shutil.which("gdb")
    if gdb is None:
        return "  (gdb not installed)"
    try:
        done = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                               "-ex", "thread apply all bt 40"], capture_output=True, text=True,
                              timeout=GDB_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"  (gdb failed: {error})"
    return "\n".join(line for line in done.stdout.splitlines()
                     if line.startswith(("Thread ", "#")) or not line.strip())


class StallWatchdog:
    def __init__(self, root_pid: int, out_dir: Path, threshold_ms: int = DEFAULT_THRESHOLD_MS,
                 with_gdb: bool = True, with_py_spy: bool = False) -> None:
        self.root_pid = root_pid
        self.out_dir = out_dir
        self.threshold_ms = threshold_ms
        self.with_gdb = with_gdb
        self.with_py_spy = with_py_spy
        self.drivers: dict[str, WatchedDriver] = {}
        self.worst_age_ms = 0
        out_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(out_dir / "watchdog.log", "a", buffering=1)

    def note(self, text: str) -> None:
        self.log.write(f"{time.strftime('%H:%M:%S')} {text}\n")

    def discover(self) -> None:
        tree = descendants(self.root_pid)
        seen: set[str] = set()
        for pid in tree:
            seen |= mapped_cnc_files(pid)
        for path in seen - set(self.drivers):
            driver = open_driver(path)
            if driver is not None and driver.driver_pid in tree:
                self.drivers[path] = driver
                self.note(f"watching {path} (driver pid {driver.driver_pid})")
            elif driver is not None:
                os.close(driver.fd)
        for path, driver in list(self.drivers.items()):
            if driver.driver_pid not in tree:
                self.finish_stall(driver, "its process ended")
                os.close(driver.fd)
                del self.drivers[path]

    def sample(self, driver: WatchedDriver) -> None:
        try:
            age_ms = driver.heartbeat_age_ms()
        except (OSError, struct.error):
            return
        if age_ms <= self.threshold_ms:
            if driver.stall_started_ms is not None:
                self.finish_stall(driver, "the keepalive is fresh again")
            return
        driver.worst_age_ms = max(driver.worst_age_ms, age_ms)
        self.worst_age_ms = max(self.worst_age_ms, age_ms)
        if driver.stall_started_ms is None:
            driver.stall_started_ms = int(time.time() * 1000) - age_ms
            driver.stalls += 1
            self.dump(driver, age_ms)

    def dump(self, driver: WatchedDriver, age_ms: int) -> None:
        before = thread_table(driver.driver_pid)
        driver.thread_snapshot = before
        path = self.out_dir / f"stall-{driver.driver_pid}-{driver.stalls}.txt"
        self.note(f"STALL driver pid {driver.driver_pid} ({driver.cnc_path}): keepalive {age_ms} ms old; "
                  f"stacks in {path.name}")
        with open(path, "w") as out:
            out.write(f"driver {driver.cnc_path} pid {driver.driver_pid}: keepalive {age_ms} ms old at "
                      f"{time.strftime('%H:%M:%S')}; load {os.getloadavg()}\n")
            try:
                out.write(f"cpu pressure: {Path('/proc/pressure/cpu').read_text()}")
            except OSError:
                pass
            out.write("threads at the stall:\n" + describe_threads(before, before) + "\n")
            if self.with_gdb:
                out.write("native stacks (gdb):\n" + native_stacks(driver.driver_pid) + "\n")
            if self.with_py_spy:
                out.write("python stacks:\n" + python_stacks(driver.driver_pid) + "\n")
            out.write("threads after the stacks (deltas since the stall):\n"
                      + describe_threads(before, thread_table(driver.driver_pid)) + "\n")
            try:
                out.write(f"keepalive age after the stacks: {driver.heartbeat_age_ms()} ms\n")
            except (OSError, struct.error):
                pass

    def finish_stall(self, driver: WatchedDriver, why: str) -> None:
        if driver.stall_started_ms is None:
            return
        lasted_ms = int(time.time() * 1000) - driver.stall_started_ms
        threads = describe_threads(driver.thread_snapshot, thread_table(driver.driver_pid))
        self.note(f"stall {driver.stalls} of driver pid {driver.driver_pid} ended ({why}): keepalive up to "
                  f"{driver.worst_age_ms} ms old, ~{lasted_ms} ms without a stamp\n{threads}")
        driver.stall_started_ms = None
        driver.worst_age_ms = 0

    def run(self, stop_after_s: float | None = None) -> None:
        ends = None if stop_after_s is None else time.monotonic() + stop_after_s
        next_discovery = 0.0
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        while not stopping and (ends is None or time.monotonic() < ends):
            if time.monotonic() >= next_discovery:
                self.discover()
                next_discovery = time.monotonic() + DISCOVERY_INTERVAL_S
            for driver in list(self.drivers.values()):
                self.sample(driver)
            time.sleep(SAMPLE_INTERVAL_S)
        for driver in self.drivers.values():
            self.finish_stall(driver, "the watchdog stopped")
        self.note(f"stopped; oldest keepalive seen above the threshold: {self.worst_age_ms} ms")


def stall_files(out_dir: Path) -> list[Path]:
    return sorted(out_dir.glob("stall-*.txt"))


@contextmanager
def watching_for_stalls(root_pid: int, out_dir: Path, threshold_ms: int = DEFAULT_THRESHOLD_MS,
                        with_gdb: bool = True) -> Iterator[Path]:
    """Run the watchdog over ``root_pid``'s tree in its own process (a stalled test process cannot
    stall it); stopped by its PID on exit. Yields ``out_dir``: ``watchdog.log`` and ``stall-*.txt``."""
    command = [sys.executable, "-m", "tests.support.stall_watchdog", "--root-pid", str(root_pid),
               "--out", str(out_dir), "--threshold-ms", str(threshold_ms)]
    if not with_gdb:
        command.append("--no-gdb")
    repository = Path(__file__).resolve().parents[2]
    watchdog = subprocess.Popen(command, cwd=repository)
    try:
        yield out_dir
    finally:
        watchdog.send_signal(signal.SIGTERM)
        try:
            watchdog.wait(GDB_TIMEOUT_S + 10)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root-pid", type=int, required=True, help="watch the drivers of this process tree")
    parser.add_argument("--out", type=Path, required=True, help="directory for watchdog.log and stall-*.txt")
    parser.add_argument("--threshold-ms", type=int, default=DEFAULT_THRESHOLD_MS)
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (default: SIGTERM)")
    parser.add_argument("--no-gdb", dest="gdb", action="store_false")
    parser.add_argument("--py-spy", action="store_true")
    args = parser.parse_args(argv)
    StallWatchdog(args.root_pid, args.out, args.threshold_ms, args.gdb, args.py_spy).run(args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
