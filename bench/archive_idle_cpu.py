"""What an idle archive costs, ours and the Java 1.51 archive, in both threading modes.

Run from the repository root (a benchmark, not a test)::

    .venv/bin/python bench/archive_idle_cpu.py [--seconds 10] [--settle 3] [--repeats 3] [--no-java]

Each case starts one archive with nothing to do (UDP control channel on a free port, no client),
waits until it is serving (our ready line, the Java peer's ``ready`` event: JVM start-up is not in
the window) plus ``--settle`` seconds, then reads the CPU time (user + system, all threads,
``/proc/<pid>/stat``) of the measured process at the start and the end of a ``--seconds`` window:
CPU seconds per wall second, i.e. the share of one core. Default idle strategies on both sides
(Agrona's BackoffIdleStrategy; ours has the same name and settings). The cases, each in
``dedicated`` and ``shared`` threading mode:

* ``ours + embedded C driver``: ``aeron-archive serve --threading-mode M``, one process holding the
  archive's agents and the C media driver it embeds (what a deployment runs).
* ``ours alone``: the same sidecar attached (``--aeron-dir``) to a standalone C media driver
  process; only the sidecar process is measured (the archive's own cost).
* ``Java + Java driver``: the Java 1.51 ``ArchivingMediaDriver`` (the modern interop peer's
  ``archive``), archive and driver both in mode M, one JVM.
* ``Java alone``: the Java 1.51 ``Archive`` in mode M attached (``--external-driver``) to a
  standalone C media driver process; only the JVM is measured.

The cases run in turn, alternating their order between repeats; the table shows the median and
the range. Every process is stopped by PID, also on failure. The Java cases need the modern peer
(``tests/interop/peer/fetch-modern-java-peer``; built on first use) and are left out with
``--no-java``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from archive_throughput import process_cpu_seconds  # noqa: E402
from bench_processes import running_modern_java_archive_process, running_our_sidecar  # noqa: E402

from tests.interop.peer.interop_peer import shm_tempdir  # noqa: E402
from tests.interop.peer.modern_peer import ensure_modern_peer_built, start_modern_java_archive  # noqa: E402
from tests.support.driver_process import running_driver_process  # noqa: E402
from tests.support.ports import free_udp_port, udp_channel  # noqa: E402

MODES = ("dedicated", "shared")


@dataclass(frozen=True)
class Case:
    archive: str  # "ours" or "Java 1.51"
    driver: str  # what the measured process holds besides the archive
    mode: str
    start: Callable[[Path], contextlib.AbstractContextManager[int]]  # yields the measured PID

    @property
    def label(self) -> str:
        return f"{self.archive} | {self.driver} | {self.mode}"


@contextlib.contextmanager
def ours_embedded(work: Path, mode: str) -> Iterator[int]:
    with running_our_sidecar(work / "archive", extra_args=("--threading-mode", mode)) as running:
        yield running.pid


@contextlib.contextmanager
def standalone_c_driver() -> Iterator[Path]:
    aeron_dir = Path(shm_tempdir("aeron-idle-bench-"))
    shutil.rmtree(aeron_dir, ignore_errors=True)  # the driver creates it
    with running_driver_process(aeron_dir):
        yield aeron_dir


@contextlib.contextmanager
def ours_alone(work: Path, mode: str) -> Iterator[int]:
    with standalone_c_driver() as aeron_dir, \
            running_our_sidecar(work / "archive", extra_args=("--threading-mode", mode, "--aeron-dir",
                                                              str(aeron_dir))) as running:
        yield running.pid


def java_cases(peer_cache: Path | None) -> list[Case]:
    installation = ensure_modern_peer_built(peer_cache)

    @contextlib.contextmanager
    def java_with_driver(work: Path, mode: str) -> Iterator[int]:
        with running_modern_java_archive_process(installation, work / "archive", threading_mode=mode) as running:
            yield running.pid

    @contextlib.contextmanager
    def java_alone(work: Path, mode: str) -> Iterator[int]:
        with standalone_c_driver() as aeron_dir:
            server = start_modern_java_archive(installation, archive_dir=work / "archive", aeron_dir=aeron_dir,
                                               control_channel=udp_channel(free_udp_port()),
                                               threading=mode,  # type: ignore[arg-type]
                                               external_driver=True, log_dir=work)
            try:
                yield server.pid
            finally:
                server.stop()

    return [Case("Java 1.51", "+ its Java driver (ArchivingMediaDriver)", mode,
                 lambda work, mode=mode: java_with_driver(work, mode)) for mode in MODES] + \
           [Case("Java 1.51", "alone (C driver in another process)", mode,
                 lambda work, mode=mode: java_alone(work, mode)) for mode in MODES]


def our_cases() -> list[Case]:
    return [Case("ours", "+ its embedded C driver", mode, lambda work, mode=mode: ours_embedded(work, mode))
            for mode in MODES] + \
           [Case("ours", "alone (C driver in another process)", mode, lambda work, mode=mode: ours_alone(work, mode))
            for mode in MODES]


def measure(case: Case, seconds: float, settle: float) -> float:
    """The measured process's CPU seconds per wall second over the window."""
    with tempfile.TemporaryDirectory(prefix="idle-cpu-") as directory, case.start(Path(directory)) as pid:
        time.sleep(settle)
        before, start = process_cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        after, wall = process_cpu_seconds(pid), time.monotonic() - start
    return (after - before) / wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window per case (default 10)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="wait after the archive serves, before the window (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of every case (default 3)")
    parser.add_argument("--no-java", action="store_true", help="our sidecar only")
    parser.add_argument("--peer-cache", type=Path, default=None,
                        help="the Java peers' cache root (default: the fetch script's rule)")
    args = parser.parse_args()
    if args.seconds <= 0 or args.settle < 0 or args.repeats < 1:
        parser.error("--seconds must be > 0, --settle >= 0 and --repeats >= 1")
    cases = our_cases() + ([] if args.no_java else java_cases(args.peer_cache))
    shares: dict[str, list[float]] = {case.label: [] for case in cases}
    loads: list[float] = []
    for repeat in range(args.repeats):
        for case in cases if repeat % 2 == 0 else list(reversed(cases)):
            loads.append(os.getloadavg()[0])
            share = measure(case, args.seconds, args.settle)
            shares[case.label].append(share)
            print(f"  run {repeat + 1}: {case.label}: {share:.2%}", file=sys.stderr, flush=True)
    print(f"Idle CPU, share of one core (median [min-max] of {args.repeats} x {args.seconds:.0f} s windows, "
          f"{args.settle:.0f} s after serving; 1-min load average at the cases' starts "
          f"{min(loads):.1f}-{max(loads):.1f}; {os.cpu_count()} CPUs)")
    print()
    print("| archive | measured process | threading | idle CPU |")
    print("|---|---|---|---|")
    for case in cases:
        values = shares[case.label]
        print(f"| {case.archive} | {case.driver} | {case.mode} | {statistics.median(values):.1%} "
              f"[{min(values):.1%}-{max(values):.1%}] |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
