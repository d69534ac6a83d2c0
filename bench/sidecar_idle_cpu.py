"""How much CPU an idle sidecar burns: ``aeron-archive serve`` with nothing to do, measured over a window.

Run from the repository root (a benchmark, not a test)::

    .venv/bin/python bench/sidecar_idle_cpu.py [--seconds 10] [--settle 2] [-- SERVE_ARGS...]

Starts one sidecar (embedded C driver, a fresh archive directory), waits ``--settle`` seconds
for start-up work to end, then reads the process's user+system CPU (``/proc/<pid>/stat``, all
threads: the agents and the embedded driver) at the start and the end of ``--seconds`` and prints
CPU seconds per wall second, overall and per thread (``/proc/<pid>/task``). Extra arguments go to
``serve`` (e.g. ``--idle-strategy yield``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from archive_throughput import process_cpu_seconds  # noqa: E402

from aeron_spark.archive.cli.sidecar_process import SidecarProcess  # noqa: E402


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds per thread, keyed by ``name/tid`` (names repeat: the C threads)."""
    ticks = os.sysconf("SC_CLK_TCK")
    threads: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rpartition(")")[2].split()
        threads[f"{name}/{task.name}"] = (int(fields[11]) + int(fields[12])) / ticks
    return threads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("serve_args", nargs="*", help="passed to aeron-archive serve (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="idle-cpu-") as directory:
        with SidecarProcess.start(Path(directory) / "archive", "--control-channel", "off",
                                  *args.serve_args) as sidecar:
            time.sleep(args.settle)
            before, threads_before = process_cpu_seconds(sidecar.pid), thread_cpu_seconds(sidecar.pid)
            start = time.monotonic()
            time.sleep(args.seconds)
            after, threads_after = process_cpu_seconds(sidecar.pid), thread_cpu_seconds(sidecar.pid)
            wall = time.monotonic() - start
    print(f"sidecar idle CPU: {(after - before) / wall:.1%} of a core over {wall:.1f} s "
          f"(serve args: {' '.join(args.serve_args) or 'defaults'}; load {os.getloadavg()[0]:.1f})")
    for name, seconds in sorted(threads_after.items()):
        used = seconds - threads_before.get(name, 0.0)
        if used > 0:
            print(f"  {name:32s} {used / wall:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
