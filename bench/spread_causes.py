"""What moved a benchmark repeat: machine-wide snapshots taken around each timed client command.

The archive benchmarks' per-repeat ratios spread widely on a 2-core VM (0.53-1.47x in issue 34)
while CPU per GB stays equal, so the spread is scheduling and waiting, not work. This module
measures, per timed command, the usual suspects, so that a repeat far from the others can be
explained rather than averaged away:

* **others' CPU**: all CPU time the kernel counted (``/proc/stat``, every CPU) minus the archive's
  and the client's: work of other programs (another build, a test run) during the window;
* **steal**: time the hypervisor ran another guest on our virtual CPUs (``/proc/stat``);
* **CPU pressure**: share of the window in which at least one task was runnable without a CPU
  (``/proc/pressure/cpu`` "some"; counts the benchmark's own processes competing as well);
* **page cache**: ``Cached``/``Dirty``/``Writeback`` (``/proc/meminfo``) at the start, pages the
  kernel wrote back during the window (``/proc/vmstat`` ``nr_written``: another case's dirty pages
  written while this one runs), and how much of a recording's segment files was resident in the
  page cache (``mincore``) before it is replayed;
* **load average** at the start (1 minute).

The archive's own per-thread run-queue wait comes from ``bench_processes.thread_run_queue_wait_seconds``,
the client's per-thread CPU and wait from the client's JSON line (``clientThreads``), back-pressure
from the publisher (``backPressuredOffers``, ``backPressuredSeconds``).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = mmap.PAGESIZE
_MEMINFO_FIELDS = ("MemAvailable", "Cached", "Dirty", "Writeback")


@dataclass(frozen=True)
class MachineSnapshot:
    """One reading of the machine-wide counters (cumulative ones are differenced by :func:`window`)."""

    monotonic_s: float
    busy_cpu_s: float  # every CPU, user+nice+system+irq+softirq (not idle, iowait, steal)
    steal_s: float
    cpu_pressure_some_s: float | None  # None: no PSI in this kernel
    pages_written: int  # /proc/vmstat nr_written
    children_cpu_s: float  # waited-for children (the bench clients): RUSAGE_CHILDREN user+system
    load_1min: float
    meminfo_mib: dict[str, float]


def snapshot() -> MachineSnapshot:
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in cpu[:8])
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return MachineSnapshot(
        monotonic_s=time.monotonic(),
        busy_cpu_s=(user + nice + system + irq + softirq) / _TICKS,
        steal_s=steal / _TICKS,
        cpu_pressure_some_s=_cpu_pressure_some_s(),
        pages_written=_vmstat("nr_written"),
        children_cpu_s=children.ru_utime + children.ru_stime,
        load_1min=os.getloadavg()[0],
        meminfo_mib=_meminfo_mib())


def _cpu_pressure_some_s() -> float | None:
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except OSError:
        return None
    return int(some.rpartition("total=")[2]) / 1e6


def _vmstat(name: str) -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    return 0


def _meminfo_mib() -> dict[str, float]:
    values: dict[str, float] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in _MEMINFO_FIELDS:
            values[key] = round(int(rest.split()[0]) / 1024, 1)  # kB -> MiB
    return values


def window(before: MachineSnapshot, after: MachineSnapshot, archive_cpu_s: float,
           client_cpu_s: float | None = None) -> dict[str, Any]:
    """What happened on the machine between two snapshots.

    ``archive_cpu_s`` is the archive process's CPU over the same window; ``client_cpu_s`` the
    client's, by default the children's CPU delta (around one client command, the only child waited
    for in between).
    """
    seconds = max(after.monotonic_s - before.monotonic_s, 1e-9)
    client_cpu = after.children_cpu_s - before.children_cpu_s if client_cpu_s is None else client_cpu_s
    busy = after.busy_cpu_s - before.busy_cpu_s
    pressure = (None if before.cpu_pressure_some_s is None or after.cpu_pressure_some_s is None
                else after.cpu_pressure_some_s - before.cpu_pressure_some_s)
    return {
        "windowSeconds": round(seconds, 3),
        "othersCpuSeconds": round(max(0.0, busy - archive_cpu_s - client_cpu), 3),
        "clientCpuSeconds": round(client_cpu, 3),
        "stealSeconds": round(after.steal_s - before.steal_s, 3),
        "cpuPressureShare": None if pressure is None else round(pressure / seconds, 3),
        "writtenBackMiB": round((after.pages_written - before.pages_written) * _PAGE / 2**20, 1),
        "loadAverage": before.load_1min,
        "meminfoMiB": before.meminfo_mib,
    }


def task_times(pid: int) -> dict[int, tuple[float, float]]:
    """(CPU seconds, run-queue wait seconds) of each live thread of ``pid`` (``/proc/<pid>/task``)."""
    times: dict[int, tuple[float, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()
            wait = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile, or no schedstats in this kernel
        times[int(tid)] = ((int(stat[11]) + int(stat[12])) / _TICKS, wait)
    return times


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _own_main_thread_wait_s() -> float:
    """Run-queue wait of this process's main thread (the client's publisher or replay subscriber)."""
    try:
        return int(Path(f"/proc/self/task/{os.getpid()}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


class TimedWindow:
    """The causes over exactly the timed part of a client command (not its start-up): the client
    calls :meth:`begin` at the measurement's first observation and :meth:`end` at its last, with the
    archive's pid (``python_bench_client.py --watch-pid``)."""

    def __init__(self, archive_pid: int) -> None:
        self.archive_pid = archive_pid
        self._before: tuple[MachineSnapshot, dict[int, tuple[float, float]], float, float] | None = None
        self.result: dict[str, Any] | None = None

    def begin(self) -> None:
        self._before = (snapshot(), task_times(self.archive_pid), _own_cpu_s(), _own_main_thread_wait_s())

    def end(self) -> None:
        if self._before is None:
            return
        machine, tasks, own_cpu, own_wait = self._before
        after_tasks = task_times(self.archive_pid)
        after = snapshot()
        main_wait = _own_main_thread_wait_s() - own_wait
        archive_cpu = sum(cpu - tasks.get(tid, (0.0, 0.0))[0] for tid, (cpu, _) in after_tasks.items())
        archive_wait = sum(wait - tasks.get(tid, (0.0, 0.0))[1] for tid, (_, wait) in after_tasks.items())
        self.result = {"archiveCpuSeconds": round(archive_cpu, 3), "archiveRunQueueWaitSeconds": round(archive_wait, 3),
                       "clientMainRunQueueWaitSeconds": round(main_wait, 3),
                       "machine": window(machine, after, archive_cpu, _own_cpu_s() - own_cpu)}


# ---------------------------------------------------------------------------------------------
# Page-cache residency of a recording's segment files

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache now (``mincore`` on a read-only mapping, which itself
    faults nothing in); 0 for an empty file."""
    size = path.stat().st_size
    if size == 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            pages = (size + _PAGE - 1) // _PAGE
            vector = (ctypes.c_ubyte * pages)()
            if _libc.mincore(ctypes.c_void_p(address), size, vector) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
            return sum(byte & 1 for byte in vector) * _PAGE
        finally:
            _libc.munmap(ctypes.c_void_p(address), size)
    finally:
        os.close(fd)


def recording_residency(archive_dir: Path, recording_id: int, recorded_bytes: int) -> dict[str, Any]:
    """How much of a recording's segment files (``<id>-<base>.rec``, both archives' layout) the page
    cache holds: resident MiB and that as a share of the recorded bytes (segments are preallocated,
    so the file size says nothing)."""
    resident = 0
    files = sorted(archive_dir.glob(f"{recording_id}-*.rec"))
    for segment in files:
        try:
            resident += resident_bytes(segment)
        except OSError:
            continue  # removed meanwhile
    return {"segmentFiles": len(files), "residentMiB": round(resident / 2**20, 1),
            "residentShare": round(min(1.0, resident / recorded_bytes), 3) if recorded_bytes > 0 else None}
