"""Record and replay throughput: OUR archive sidecar vs the real Java Aeron Archive 1.51.0, one
publisher program feeding both, in the same run.

Run from the repository root (a benchmark, not a test; ~25 minutes with the defaults, quiet machine)::

    .venv/bin/python bench/modern_java_archive.py [--transport ipc|udp|both] [--repeats 5] [--seed N]
        [--messages default|small] [--ipc-messages 32=6000000,1024=500000] [--udp-messages 32=1000000,1024=100000]
        [--publisher per-message|block] [--java-threading shared|dedicated] [--our-args "..."]
        [--ab-our-args "..."] [--ab-our-env KEY=VALUE,...] [--json RUN.json] [--profile DIR] [--write-docs]

**A verdict that holds from run to run** (issue 34). Every (transport, size) case of every repeat
starts each archive afresh and runs it alone, the two archives back to back in a seeded random
order (balanced per case: as many repeats with Java first as with ours first), the cases shuffled
within a repeat; the seed is printed and kept in the JSON (``--seed`` replays the same order). Each
cell (transport, size, record or replay) gets the median of its per-repeat ratios ours/Java with a
seeded bootstrap 95 % interval (``bench/ratio_verdicts.py``), and a verdict only where that interval
lies entirely above 1.0 ("faster") or below ("slower"), else "not proven". ``--json`` keeps every
per-repeat number; ``bench/compare_runs.py A.json B.json`` says whether two runs agree on every
verdict.

**The causes of the spread, per repeat and archive** (``bench/spread_causes.py``): run-queue wait
per thread of the archive process and of the client's threads (publisher, subscriber), the
publisher's refused offers and the time it spent retrying them, the replay subscriber's time on
empty polls (waiting for the archive), page cache (Cached/Dirty at the start, MiB written back
during the window, the share of the recording's segment files resident before its replay), other
programs' CPU, steal, CPU pressure and the load average, over exactly the timed window where the
client can read them there (``--watch-pid``). The spread table puts them beside each repeat's ratio.
``--ab-our-args``/``--ab-our-env`` add a third archive, ours with other options (an A/B in the same
interleaved run); ``bench/profile_replay.py`` profiles our sidecar over one record and one replay.

The Java archive is the modern peer's ``archive`` (``tests/interop/peer/modern_peer.py``: Archive
+ its own Java 1.51.0 MediaDriver in one JVM, Java 17), ours is ``aeron-archive serve`` with its
embedded C driver. Both: fresh process and archive directory per case and repeat, 128 MiB
segments, no checksums, no file sync; an untimed warm-up (a quarter of the messages) first.

**One program feeds both archives: ``bench/python_bench_client.py``** (our Aeron 1.53 C client).
Since both drivers write CnC 0.2.0 (docs/interop.md, "Mixed drivers"), it attaches to the Java
1.51 driver as well as to ours, so over IPC the publisher, the position probe and the replay
subscriber are the same code, the same client library, on the same two cores, for both archives:
only the archive (and its driver) differ. It speaks the modern control protocol to both (the Java
archive's local control stream ``aeron:ipc?term-length=64k``/10, ours ``aeron:ipc``/11). Why not the
Java peer's ``publish``: it is a fresh JVM per command that cannot watch the recording position
while it publishes, and it would put a JVM's start-up and JIT inside the timed window; our client
measures exactly what ``bench/archive_throughput.py`` measures (same code). The publisher offers
one message at a time through the C loop (``bench/per_message_publisher.py``, ``--publisher
per-message``, the default: what a user's application does); ``--publisher block`` appends
pre-framed blocks instead, a cheaper publisher that leaves more CPU to the archives. Either is
identical for both archives; the back-pressured column says whether the archive or the publisher
set the pace (≈ 0 % on both sides: publisher-bound, the ratio then says little).

Transports:

* ``ipc``: the client on the archive's own driver, LOCAL recording of ``aeron:ipc`` (term 16 MiB),
  replay to ``aeron:ipc``: measures the archives.
* ``udp``: the client runs a C driver of its own (``--embedded-driver``), publishes to a UDP
  endpoint the archive records REMOTE, and receives the replay over UDP: includes each archive's
  driver network path (Java driver vs C driver receiving, then sending).

Measured (the ``bench/archive_throughput.py`` definitions): record = bytes between the probe's
first position past the start and its first sight of the end, over that time; replay = bytes after
the first block over the time to the last; MB/s = 10^6 log bytes/s (32-byte headers + payload,
32-byte aligned), messages/s = MB/s / framed length. **Archive CPU** = the archive process's
user+system seconds over the client command (``/proc/<pid>/stat``, all threads, its driver
included), which counts its idle strategies while the client starts too, and the same **per named
thread** with each thread's run-queue wait (``schedstat``: on a shared machine, how long it was
runnable without a CPU), which says which agent did the work and how much the scheduler held it
back. ``--our-args`` passes ``serve`` options to our sidecar (e.g. idle strategies for an A/B). A
run whose load average exceeds ~1 per core is marked provisional: compare ratios measured side by
side, never absolute figures across runs.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the peers are test code

from archive_throughput import DOC, Sample, machine_notes, parse_messages, process_cpu_seconds, rate
from bench_processes import (
    PYTHON_BENCH_CLIENT,
    RunningArchive,
    py_spy_recording,
    run_bench_client,
    running_modern_java_archive_process,
    running_our_sidecar,
    summarize_profile,
    thread_cpu_delta,
    thread_cpu_seconds,
    thread_names,
    thread_run_queue_wait_seconds,
)
from fair_recording import cpu_per_gb, idle_cpu_share, offer_rate, refused_share, select, spread
from ratio_verdicts import FASTER, MIN_REPEATS, SLOWER, CellVerdict, verdict
from spread_causes import recording_residency, snapshot, window

from tests.interop.peer.modern_peer import MODERN_AERON_VERSION, ModernPeerInstallation, ensure_modern_peer_built
from tests.interop.peer.interop_peer import framed_length
from tests.support.ports import free_udp_port, udp_channel

REPO = Path(__file__).resolve().parent.parent
ARCHIVES = ("java", "ours")
VARIANT = "ours-b"  # our sidecar with --ab-our-args/--ab-our-env: an A/B in the same interleaved run
LABELS = {"java": "Java", "ours": "ours", VARIANT: "ours-b"}
TERM_LENGTH = 16 * 1024 * 1024
STREAM_ID = 1001
REPLAY_STREAM_ID = 2002
IPC_TARGET = 1.0  # ours / Java, every cell (ratio_verdicts compares the interval with 1.0): met only when "faster"
PUBLISHER_BOUND_SHARE = 0.05  # below this share of refused offers on both sides, the publisher set the pace
JSON_SCHEMA = "modern-java-archive/2"
MESSAGE_PRESETS = {  # --messages: "small" is a smoke run (seconds per case), not a measurement
    "default": {"ipc": "32=6000000,1024=500000", "udp": "32=1000000,1024=100000"},
    "small": {"ipc": "32=300000,1024=30000", "udp": "32=100000,1024=10000"},
}
SECTION_TITLE = "## Against the modern Java archive (Aeron 1.51.0)"
BEGIN_MARK = "<!-- modern-java-archive results: generated by bench/modern_java_archive.py --write-docs -->"
END_MARK = "<!-- end of modern-java-archive results -->"


@contextlib.contextmanager
def started(archive: str, installation: ModernPeerInstallation, work_dir: Path, java_threading: str,
            our_args: tuple[str, ...] = (), our_env: dict[str, str] | None = None):
    """One archive, fresh directory; ``our_env`` is added to our sidecar's environment only (e.g.
    ``AERON_*`` settings of its embedded C driver), the Java archive never sees it."""
    archive_dir = work_dir / f"{archive}-archive"
    shutil.rmtree(archive_dir, ignore_errors=True)
    try:
        if archive == "java":
            manager = running_modern_java_archive_process(installation, archive_dir, threading_mode=java_threading)
            with manager as running:
                yield running
        else:
            with contextlib.ExitStack() as stack:
                with environment(our_env or {}):  # read by the child at its start only
                    running = stack.enter_context(running_our_sidecar(archive_dir, extra_args=our_args))
                yield running
    finally:
        shutil.rmtree(archive_dir, ignore_errors=True)  # recordings are large; keep the disk tidy


@contextlib.contextmanager
def environment(extra: dict[str, str]):
    """``extra`` in os.environ while the block runs (a child started inside inherits it)."""
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def local_control(running: RunningArchive) -> tuple[str, int]:
    """The archive's local IPC control channel and stream (the two ready lines name them differently)."""
    if running.name == "java":
        return running.details["localControlChannel"], int(running.details["localControlStreamId"])
    return running.details["localControl"], int(running.details["localControlStreamId"])


def client_options(running: RunningArchive, transport: str) -> tuple[list[str], list[str], list[str]]:
    """(connection, record-only, replay-only) options of python_bench_client.py for one case."""
    if transport == "ipc":
        control_channel, control_stream_id = local_control(running)
        connection = ["--aeron-dir", str(running.details["aeronDir"]), "--control-channel", control_channel,
                      "--control-stream-id", str(control_stream_id), "--response-channel", "aeron:ipc"]
        recorded = ["--channel", "aeron:ipc", "--publication-channel", f"aeron:ipc?term-length={TERM_LENGTH}"]
        return [*connection, "--protocol", "modern"], recorded, ["--replay-channel", "aeron:ipc"]
    port = free_udp_port()
    connection = ["--embedded-driver", "--control-channel", running.control_channel, "--control-stream-id", "10",
                  "--response-channel", udp_channel(free_udp_port()), "--protocol", "modern"]
    recorded = ["--channel", udp_channel(port),
                "--publication-channel", f"aeron:udp?endpoint=localhost:{port}|term-length={TERM_LENGTH}"]
    return connection, recorded, ["--replay-channel", udp_channel(free_udp_port())]


class ArchiveProbe:
    """Per-thread CPU and run-queue wait of the archive process, and the machine-wide snapshot,
    read at each boundary of a timed client command."""

    def __init__(self, running: RunningArchive) -> None:
        self.running = running
        self.cpu = process_cpu_seconds(running.pid)
        self.threads = thread_cpu_seconds(running.pid)
        self.waits = thread_run_queue_wait_seconds(running.pid)
        self.machine = snapshot()

    def since(self, earlier: ArchiveProbe) -> dict[str, Any]:
        """What the archive and the machine did between ``earlier`` and this probe."""
        names = self.running.details["threadNames"]
        archive_cpu = self.cpu - earlier.cpu
        waits = thread_cpu_delta(earlier.waits, self.waits, names, floor_s=0.001)
        return {"archiveCpuSeconds": archive_cpu,
                "archiveThreadCpu": thread_cpu_delta(earlier.threads, self.threads, names),
                "archiveThreadWait": waits,
                "archiveRunQueueWaitSeconds": round(sum(self.waits.values()) - sum(
                    earlier.waits.get(tid, 0.0) for tid in self.waits), 3),
                "machine": window(earlier.machine, self.machine, archive_cpu)}


def run_case(running: RunningArchive, transport: str, size: int, messages: int,
             publisher: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One recording and its whole replay on one archive, by the one client program. Each result
    line gets the archive's CPU and run-queue wait (process and per named thread) and the machine's
    state over that command (:class:`ArchiveProbe`); the replay also the page-cache residency of
    the recording before it starts."""
    client = [sys.executable, str(PYTHON_BENCH_CLIENT)]
    connection, record_options, replay_options = client_options(running, transport)
    before_record = ArchiveProbe(running)
    watch = ["--watch-pid", str(running.pid)]  # the causes over exactly the timed window too (timedWindow)
    recorded = run_bench_client([*client, "record", *connection, *record_options, "--stream-id", str(STREAM_ID),
                                 "--messages", str(messages), "--size", str(size), "--publisher", publisher, *watch])
    after_record = ArchiveProbe(running)
    length = recorded["stopPosition"] - recorded["startPosition"]
    residency = recording_residency(running.archive_dir, recorded["recordingId"], length)
    before_replay = ArchiveProbe(running)
    replayed = run_bench_client([*client, "replay", *connection, *replay_options,
                                 "--recording-id", str(recorded["recordingId"]),
                                 "--replay-stream-id", str(REPLAY_STREAM_ID), *watch])
    after_replay = ArchiveProbe(running)
    recorded.update(after_record.since(before_record))
    replayed.update(after_replay.since(before_replay))
    replayed["pageCacheBeforeReplay"] = residency
    recorded["loadAverage"] = recorded["machine"]["loadAverage"]
    replayed["loadAverage"] = replayed["machine"]["loadAverage"]
    if recorded["stopPosition"] != recorded["publicationPosition"] or length < messages * framed_length(size):
        raise RuntimeError(f"{running.name}: recording stopped at {recorded['stopPosition']}, expected the "
                           f"publication position {recorded['publicationPosition']}")
    if replayed["countedBytes"] != length:
        raise RuntimeError(f"{running.name}: replay delivered {replayed['countedBytes']} bytes of {length}")
    return recorded, replayed


def balanced_orders(rng: random.Random, repeats: int, archives: tuple[str, ...] = ARCHIVES) -> list[tuple[str, ...]]:
    """The archives' order in each repeat of one case: the rotations of a drawn order, each used
    equally often (the remainder drawn), shuffled, so each archive goes first, second, ... equally
    often and none always inherits another's after-effects."""
    base = tuple(rng.sample(archives, len(archives)))
    rotations = [base[i:] + base[:i] for i in range(len(base))]
    orders = rotations * (repeats // len(rotations)) + rng.sample(rotations, repeats % len(rotations))
    rng.shuffle(orders)
    return orders


def client_wait(result: dict[str, Any]) -> float:
    """The client's main thread's run-queue wait (the publisher, or the replay subscriber): over the
    timed window when measured there, else over the whole client command."""
    if "timedWindow" in result:
        return result["timedWindow"]["clientMainRunQueueWaitSeconds"]
    return result.get("clientThreads", {}).get("main (publisher / subscriber)", [0.0, 0.0])[1]


def timed_causes(result: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """(machine readings, archive run-queue wait s) over the timed window when the client measured
    them there (``timedWindow``), else over the whole client command."""
    timed = result.get("timedWindow")
    if timed is not None:
        return timed["machine"], timed["archiveRunQueueWaitSeconds"]
    return result["machine"], result["archiveRunQueueWaitSeconds"]


def cause_text(operation: str, result: dict[str, Any]) -> str:
    """One archive's side of a timed command: what held it back, in one line (over the timed window)."""
    machine, archive_wait = timed_causes(result)
    pressure = machine["cpuPressureShare"]
    parts = [f"timed {machine['windowSeconds']:.2f} s: archive run-queue wait {archive_wait:.2f} s",
             f"client wait {client_wait(result):.2f} s"]
    if operation == "record":
        parts.append(f"back-pressured {result['backPressuredOffers']:,} offers "
                     f"{result.get('backPressuredSeconds', 0.0):.2f} s")
    else:
        residency = result["pageCacheBeforeReplay"]
        share = residency["residentShare"]
        parts.append(f"subscriber starved {result.get('starvedSeconds', 0.0):.2f} s, "
                     f"segments resident {'-' if share is None else f'{share:.0%}'}")
    parts.append(f"others' CPU {machine['othersCpuSeconds']:.2f} s, steal {machine['stealSeconds']:.2f} s, "
                 f"CPU pressure {'-' if pressure is None else f'{pressure:.0%}'}, "
                 f"written back {machine['writtenBackMiB']:.0f} MiB, load {machine['loadAverage']:.1f}, "
                 f"Cached {machine['meminfoMiB'].get('Cached', 0) / 1024:.1f} GiB "
                 f"Dirty {machine['meminfoMiB'].get('Dirty', 0):.0f} MiB")
    return "; ".join(parts)


def run(args: argparse.Namespace, samples: list[Sample]) -> dict[str, list[float]]:
    """Runs every case of every repeat, appending to ``samples`` as they come (a failed run keeps
    what it measured); returns the archives' idle CPU shares."""
    installation = ensure_modern_peer_built()
    transports = ("ipc", "udp") if args.transport == "both" else (args.transport,)
    rng = random.Random(args.seed)
    cases = [(transport, size, messages) for transport in transports
             for size, messages in args.messages[transport].items()]
    archives = archives_of(args)
    orders = {case: balanced_orders(rng, args.repeats, archives) for case in cases}
    idle: dict[str, list[float]] = {archive: [] for archive in archives}
    for repeat in range(args.repeats):
        for case in rng.sample(cases, len(cases)):
            transport, size, messages = case
            order = orders[case][repeat]
            rates: dict[tuple[str, str], float] = {}
            for position, archive in enumerate(order):
                if args.sync:
                    os.sync()  # the previous archive's dirty pages are not written back inside this window
                variant = archive == VARIANT
                with started(archive, installation, args.work_dir, args.java_threading,
                             tuple((args.ab_our_args if variant else args.our_args).split()),
                             args.ab_our_env if variant else None) as running:
                    idle[archive].append(idle_cpu_share(running.pid))
                    running.details["threadNames"] = thread_names(running.pid)
                    if args.warmup:  # JIT-compile the Java archive's paths before timing them
                        run_case(running, transport, size, max(1, messages // 4), args.publisher)
                    profiling: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
                    if archive != "java" and args.profile is not None:
                        args.profile.mkdir(parents=True, exist_ok=True)
                        profiling = py_spy_recording(running.pid, args.profile / f"{archive}-{repeat}-{transport}-{size}.txt",
                                                     idle=args.profile_idle)
                    with profiling:
                        recorded, replayed = run_case(running, transport, size, messages, args.publisher)
                for operation, result in (("record", recorded), ("replay", replayed)):
                    result["order"] = position
                    sample = Sample(archive, transport, size, operation, rate(result), result, repeat)
                    samples.append(sample)
                    rates[(archive, operation)] = sample.mb_per_s
                    print(f"repeat {repeat + 1}/{args.repeats} {transport} {size:5} B {archive:4} "
                          f"({('1st', '2nd', '3rd')[position]}) {operation}: {sample.mb_per_s:8.1f} MB/s, "
                          f"archive CPU {result['archiveCpuSeconds']:.2f} s | {cause_text(operation, result)}",
                          flush=True)
            for numerator, denominator in comparisons(archives):
                print(f"repeat {repeat + 1}/{args.repeats} {transport} {size:5} B "
                      f"{LABELS[numerator]}/{LABELS[denominator]}: "
                      f"record {rates[(numerator, 'record')] / rates[(denominator, 'record')]:.2f}x, "
                      f"replay {rates[(numerator, 'replay')] / rates[(denominator, 'replay')]:.2f}x", flush=True)
    return idle


def archives_of(args: argparse.Namespace) -> tuple[str, ...]:
    return (*ARCHIVES, VARIANT) if args.ab_our_args or args.ab_our_env else ARCHIVES


def comparisons(archives: tuple[str, ...]) -> list[tuple[str, str]]:
    """(numerator, denominator) of the ratios reported: ours/Java, and with a variant ours-b/Java and ours-b/ours."""
    return [("ours", "java"), *([(VARIANT, "java"), (VARIANT, "ours")] if VARIANT in archives else [])]


def cells(samples: list[Sample]) -> list[tuple[str, int, str]]:
    """(transport, size, operation) of every cell, in the order the cases were configured."""
    return list(dict.fromkeys((s.transport, s.size, s.operation) for s in sorted(
        samples, key=lambda s: (s.transport, s.size, s.operation))))


def paired_ratios(samples: list[Sample], transport: str, size: int, operation: str,
                  numerator: str = "ours", denominator: str = "java") -> dict[int, float]:
    """numerator/denominator (default ours/Java) of each repeat of one cell (the archives ran that
    case back to back)."""
    below = {s.repeat: s.mb_per_s for s in select(samples, archive=denominator, transport=transport, size=size,
                                                    operation=operation)}
    return {s.repeat: s.mb_per_s / below[s.repeat]
            for s in select(samples, archive=numerator, transport=transport, size=size, operation=operation)
            if s.repeat in below}


def verdicts(samples: list[Sample], seed: int, numerator: str = "ours",
             denominator: str = "java") -> dict[tuple[str, int, str], CellVerdict]:
    return {cell: verdict(list(paired_ratios(samples, *cell, numerator, denominator).values()), seed)
            for cell in cells(samples)}


def ab_table(samples: list[Sample], seed: int, args: argparse.Namespace) -> str:
    """The variant (--ab-our-args/--ab-our-env) against Java and against ours, same run."""
    against_java, against_ours = verdicts(samples, seed, VARIANT, "java"), verdicts(samples, seed, VARIANT, "ours")
    lines = [f"A/B in the same run: ours-b = ours with serve args {args.ab_our_args!r}, environment "
             f"{args.ab_our_env or {}}", "",
             "| transport | payload | operation | **ours-b/ours** median [95 % interval] | verdict | per-repeat "
             "| ours-b/Java median [95 % interval] | verdict |", "|---|---|---|---|---|---|---|---|"]
    for cell in cells(samples):
        b, j = against_ours[cell], against_java[cell]
        ratios = paired_ratios(samples, *cell, VARIANT, "ours")
        lines.append(f"| {cell[0]} | {cell[1]} B | {cell[2]} | **{b.median:.2f}x** [{b.low:.2f}, {b.high:.2f}] "
                     f"| {b.verdict} | {', '.join(f'{ratios[r]:.2f}' for r in sorted(ratios))} "
                     f"| {j.median:.2f}x [{j.low:.2f}, {j.high:.2f}] | {j.verdict} |")
    return "\n".join(lines)


def table(samples: list[Sample], messages: dict[str, dict[int, int]], judged: dict[tuple[str, int, str], CellVerdict]) -> str:
    lines = [f"| transport | payload | messages | operation | Java {MODERN_AERON_VERSION} MB/s (M msg/s) [min–max] "
             "| ours MB/s (M msg/s) [min–max] | **ours/Java** median [95 % interval] | verdict | per-repeat ratios "
             "| target | archive CPU s Java / ours (CPU s per GB) | back-pressured Java / ours (publisher M offers/s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for transport, size, operation in cells(samples):
        java = select(samples, archive="java", transport=transport, size=size, operation=operation)
        ours = select(samples, archive="ours", transport=transport, size=size, operation=operation)
        if not java or not ours:
            continue
        frame = framed_length(size)
        java_rate = statistics.median(s.mb_per_s for s in java)
        ours_rate = statistics.median(s.mb_per_s for s in ours)
        cell = judged[(transport, size, operation)]
        ratios = paired_ratios(samples, transport, size, operation)
        target = f"≥ {IPC_TARGET}x: " + ("met" if cell.verdict == FASTER else "MISSED" if cell.verdict == SLOWER
                                          else "not proven")
        cpu = (f"{statistics.median(s.detail['archiveCpuSeconds'] for s in java):.2f} / "
               f"{statistics.median(s.detail['archiveCpuSeconds'] for s in ours):.2f} "
               f"({statistics.median(map(cpu_per_gb, java)):.2f} / {statistics.median(map(cpu_per_gb, ours)):.2f})")
        pressure = ""
        if operation == "record":
            java_share = statistics.median(map(refused_share, java))
            ours_share = statistics.median(map(refused_share, ours))
            pressure = (f"{java_share:.1%} / {ours_share:.1%} ({statistics.median(map(offer_rate, java)):.2f} / "
                        f"{statistics.median(map(offer_rate, ours)):.2f})")
            if max(java_share, ours_share) < PUBLISHER_BOUND_SHARE:
                pressure += " publisher-bound"
        lines.append(
            f"| {transport} | {size} B | {messages[transport][size]:,} | {operation} "
            f"| {java_rate:,.0f} ({java_rate / frame:.2f}) [{min(s.mb_per_s for s in java):,.0f}–"
            f"{max(s.mb_per_s for s in java):,.0f}] "
            f"| {ours_rate:,.0f} ({ours_rate / frame:.2f}) [{min(s.mb_per_s for s in ours):,.0f}–"
            f"{max(s.mb_per_s for s in ours):,.0f}] "
            f"| **{cell.median:.2f}x** [{cell.low:.2f}, {cell.high:.2f}] | {cell.verdict} "
            f"| {', '.join(f'{ratios[r]:.2f}' for r in sorted(ratios))} | {target} | {cpu} | {pressure} |")
    return "\n".join(lines)


def _side(sample: Sample) -> str:
    """The causes columns of one archive's side of a repeat, compact."""
    detail = sample.detail
    machine, archive_wait = timed_causes(detail)
    waited = (f"{detail.get('backPressuredSeconds', 0.0):.2f}" if sample.operation == "record"
              else f"{detail.get('starvedSeconds', 0.0):.2f}")
    resident = ""
    if sample.operation == "replay":
        share = detail["pageCacheBeforeReplay"]["residentShare"]
        resident = f", res {'-' if share is None else f'{share:.0%}'}"
    return (f"{sample.mb_per_s:,.0f} MB/s; rq {archive_wait:.2f}/{client_wait(detail):.2f}; "
            f"held {waited}; others {machine['othersCpuSeconds']:.2f}, steal {machine['stealSeconds']:.2f}"
            f"{resident}; wb {machine['writtenBackMiB']:.0f}")


def spread_table(samples: list[Sample]) -> str:
    """Per cell and repeat: the ratio, who went first, and each side's causes of spread."""
    lines = ["| transport | payload | operation | repeat | first | ours/Java | Java: MB/s; run-queue wait s archive/client; "
             "held s (publisher retrying or subscriber starved); others' CPU s, steal s[, resident]; written back MiB "
             "| ours: same | load |", "|---|---|---|---|---|---|---|---|---|"]
    for transport, size, operation in cells(samples):
        ratios = paired_ratios(samples, transport, size, operation)
        for repeat in sorted(ratios):
            java, ours = (select(samples, archive=a, transport=transport, size=size, operation=operation,
                                 repeat=repeat)[0] for a in ARCHIVES)
            first = next((LABELS[s.archive] for s in samples if s.detail["order"] == 0 and s.repeat == repeat
                          and (s.transport, s.size, s.operation) == (transport, size, operation)), "?")
            lines.append(f"| {transport} | {size} B | {operation} | {repeat + 1} | {first} | {ratios[repeat]:.2f} "
                         f"| {_side(java)} | {_side(ours)} | {java.detail['loadAverage']:.1f} / "
                         f"{ours.detail['loadAverage']:.1f} |")
    return "\n".join(lines)


def median_by_thread(chosen: list[Sample], key: str) -> dict[str, float]:
    """Median seconds per thread name (``#tid`` dropped) of ``detail[key]`` over the samples."""
    names = dict.fromkeys(name.split("#")[0] for s in chosen for name in s.detail[key])
    return {name: statistics.median(sum(v for k, v in s.detail[key].items() if k.split("#")[0] == name)
                                    for s in chosen) for name in names}


def thread_table(samples: list[Sample], top: int = 4) -> str:
    """Where each archive's time went per case: median CPU seconds of its busiest named threads,
    and (in brackets) how long each waited runnable for a CPU."""
    lines = ["| transport | payload | operation | Java: CPU s by thread (run-queue wait s) "
             "| ours: CPU s by thread (run-queue wait s) |", "|---|---|---|---|---|"]
    for transport, size, operation in cells(samples):
        row = []
        for archive in ARCHIVES:
            chosen = select(samples, archive=archive, transport=transport, size=size, operation=operation)
            cpu = median_by_thread(chosen, "archiveThreadCpu")
            wait = median_by_thread(chosen, "archiveThreadWait")
            busiest = sorted(cpu.items(), key=lambda item: -item[1])[:top]
            row.append(", ".join(f"{name} {seconds:.2f} ({wait.get(name, 0.0):.2f})" for name, seconds in busiest
                                 if seconds >= 0.01) or "-")
        lines.append(f"| {transport} | {size} B | {operation} | {row[0]} | {row[1]} |")
    return "\n".join(lines)


QUIET_LOAD_AVERAGE = 2.5


def run_notes(work_dir: Path, samples: list[Sample], idle: dict[str, list[float]], args: argparse.Namespace) -> str:
    loads = [s.detail["loadAverage"] for s in samples]
    publishers = ", ".join(dict.fromkeys(s.detail["publisher"] for s in samples if s.operation == "record"))
    idle_text = ", ".join(f"{LABELS[archive]} {spread(shares, '.1%')}"
                          for archive, shares in idle.items() if shares)
    # Above about one runnable task per core something else competed for the two cores.
    quietness = "quiet" if max(loads) <= QUIET_LOAD_AVERAGE else "other work competed for the cores: figures provisional"
    return (f"{machine_notes(work_dir, java=f'Java archive: aeron-all {MODERN_AERON_VERSION} on the machine JDK 17')}; "
            f"1-min load average at the cases' starts {min(loads):.1f}–{max(loads):.1f} ({quietness}); "
            f"Java archive threading {args.java_threading}; publisher {publishers}; seed {args.seed}; "
            f"{args.repeats} interleaved repeats; archives' idle CPU share (1 s after each start) {idle_text}")


def write_docs(results: str, command_line: str, notes: str) -> None:
    block = (f"{BEGIN_MARK}\n\nReproduce: `{command_line}`\n\nMachine: {notes}. "
             f"Run finished {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.\n\n{results}\n\n{END_MARK}")
    text = DOC.read_text()
    if BEGIN_MARK in text and END_MARK in text:
        text = re.sub(re.escape(BEGIN_MARK) + ".*?" + re.escape(END_MARK), lambda _: block, text, flags=re.DOTALL)
    elif SECTION_TITLE in text:
        head, _, tail = text.partition(SECTION_TITLE)
        text = head + SECTION_TITLE + "\n\n" + block + "\n" + tail
    else:
        text = text.rstrip() + f"\n\n{SECTION_TITLE}\n\n{block}\n"
    DOC.write_text(text)


def run_record(args: argparse.Namespace, argv: list[str], samples: list[Sample], judged: dict[tuple[str, int, str], CellVerdict],
               notes: str, started_at: datetime.datetime) -> dict[str, Any]:
    """Everything a later comparison needs (bench/compare_runs.py): configuration, verdicts, and
    every per-repeat sample with its causes."""
    return {
        "schema": JSON_SCHEMA, "command": ["bench/modern_java_archive.py", *argv], "seed": args.seed,
        "started": f"{started_at:%Y-%m-%dT%H:%M:%SZ}",
        "finished": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%dT%H:%M:%SZ}",
        "config": {"transport": args.transport, "repeats": args.repeats, "publisher": args.publisher,
                   "javaThreading": args.java_threading, "ourArgs": args.our_args, "warmup": args.warmup,
                   "abOurArgs": args.ab_our_args, "abOurEnv": args.ab_our_env,
                   "sync": args.sync, "messages": {t: {str(k): v for k, v in m.items()}
                                                   for t, m in args.messages.items()}},
        "machine": notes,
        "cells": [{"comparison": f"{numerator}/{denominator}", "transport": t, "size": size, "operation": op,
                   "median": v.median, "low": v.low, "high": v.high, "verdict": v.verdict,
                   "ratios": [r for _, r in sorted(paired_ratios(samples, t, size, op, numerator, denominator).items())]}
                  for numerator, denominator in comparisons(archives_of(args))
                  for (t, size, op), v in (judged if numerator == "ours" else
                                           verdicts(samples, args.seed, numerator, denominator)).items()],
        "samples": sample_records(samples),
    }


def sample_records(samples: list[Sample]) -> list[dict[str, Any]]:
    return [{"archive": s.archive, "transport": s.transport, "size": s.size, "operation": s.operation,
             "repeat": s.repeat, "mbPerSecond": s.mb_per_s, "detail": s.detail} for s in samples]


def parse_environment(text: str) -> dict[str, str]:
    """``"A=1,B=x"`` -> {"A": "1", "B": "x"}."""
    pairs: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE...], got {item!r}")
        pairs[key.strip()] = value
    return pairs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=f"Record/replay: our archive vs Java Aeron Archive "
                                                 f"{MODERN_AERON_VERSION}, one publisher program for both")
    parser.add_argument("--transport", choices=("ipc", "udp", "both"), default="both")
    parser.add_argument("--messages", choices=tuple(MESSAGE_PRESETS), default="default",
                        help="message counts of every case: default (~0.2-0.5 GB per IPC case), or small "
                             "(a smoke run: proves the harness, measures nothing); --ipc-messages/--udp-messages override")
    # ~0.4-0.5 GB per IPC case: long enough to time, short of the GB-sized recordings whose rate this
    # VM's first touch of fresh page-cache memory sets (~0.3 GB/s, measured-limits.md) for both archives.
    parser.add_argument("--ipc-messages", type=parse_messages, default=None,
                        help="IPC payload sizes and message counts, SIZE=COUNT,... "
                             f"(default {MESSAGE_PRESETS['default']['ipc']})")
    parser.add_argument("--udp-messages", type=parse_messages, default=None,
                        help=f"UDP payload sizes and message counts (default {MESSAGE_PRESETS['default']['udp']})")
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS,
                        help=f"interleaved repeats of every case (default {MIN_REPEATS}; 7 lets one outlier "
                             "on each side pass without deciding the interval)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the archives' and cases' order and of the bootstrap (default: drawn and printed)")
    parser.add_argument("--publisher", choices=("per-message", "block"), default="per-message",
                        help="one C offer per message (default), or pre-framed blocks")
    parser.add_argument("--java-threading", choices=("shared", "dedicated"), default="shared",
                        help="the Java archive's threading (driver and archive agents); default shared, as ours on 2 cores")
    parser.add_argument("--our-args", default="",
                        help="extra `aeron-archive serve` options for our sidecar, e.g. '--recorder-idle-strategy yield'")
    parser.add_argument("--ab-our-args", default="",
                        help="A/B in the same run: a third archive, our sidecar with these serve options instead of "
                             "--our-args, interleaved with the other two; reported against ours and against Java")
    parser.add_argument("--ab-our-env", type=parse_environment, default={},
                        help="A/B: KEY=VALUE[,KEY=VALUE...] added to the third archive's environment (e.g. "
                             "AERON_TERM_BUFFER_SPARSE_FILE=true for its embedded C driver)")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="skip the untimed warm-up recording+replay (1/4 of the messages) per case")
    parser.add_argument("--no-sync", dest="sync", action="store_false",
                        help="skip the sync(2) before each archive starts (it keeps the previous case's writeback "
                             "out of the timed window)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the archive directories go (default: a new temp dir under /var/tmp, removed after)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write the run (configuration, verdicts, every per-repeat number and cause) to this file")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy our sidecar; raw stacks go here")
    parser.add_argument("--profile-idle", action="store_true",
                        help="with --profile: also sample threads off the CPU (py-spy --idle), to see where they wait")
    parser.add_argument("--write-docs", action="store_true", help=f"write the table into {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1 (>= {MIN_REPEATS} for a verdict), got {args.repeats}")
    preset = MESSAGE_PRESETS[args.messages]
    args.messages = {"ipc": args.ipc_messages or parse_messages(preset["ipc"]),
                     "udp": args.udp_messages or parse_messages(preset["udp"])}
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    return args


def main(argv: list[str] | None = None) -> int:
    shown = list(argv if argv is not None else sys.argv[1:])
    args = parse_args(argv)
    if "--seed" not in shown:
        shown += ["--seed", str(args.seed)]
    print(f"seed {args.seed} (rerun the same order with --seed {args.seed})", flush=True)
    if args.repeats < MIN_REPEATS:
        print(f"note: {args.repeats} repeats: intervals this short prove only unanimous repeats; "
              f"use >= {MIN_REPEATS} for verdicts", flush=True)
    started_at = datetime.datetime.now(datetime.UTC)
    own_work_dir = args.work_dir is None
    args.work_dir = Path(tempfile.mkdtemp(prefix="modern-java-bench-", dir="/var/tmp")) if own_work_dir else args.work_dir
    args.work_dir.mkdir(parents=True, exist_ok=True)
    samples: list[Sample] = []
    try:
        try:
            idle = run(args, samples)
        except BaseException as error:
            if args.json is not None:  # what was measured before the failure, for the record
                partial = {"schema": JSON_SCHEMA, "command": ["bench/modern_java_archive.py", *shown],
                           "seed": args.seed, "failed": f"{type(error).__name__}: {error}"[-3000:],
                           "samples": sample_records(samples)}
                args.json.write_text(json.dumps(partial, indent=1))
                print(f"failed; the {len(samples)} samples measured so far are in {args.json}", file=sys.stderr)
            raise
        judged = verdicts(samples, args.seed)
        results = (table(samples, args.messages, judged) + "\n\nWhere each archive's time went (median CPU seconds "
                   "per thread over the client command, and its run-queue wait; Python agents named by py-spy when "
                   "installed):\n\n" + thread_table(samples))
        if VARIANT in archives_of(args):
            results += "\n\n" + ab_table(samples, args.seed, args)
        notes = run_notes(args.work_dir, samples, idle, args)
    finally:
        if own_work_dir:
            shutil.rmtree(args.work_dir, ignore_errors=True)
    print()
    print(results)
    print("\nWhat moved each repeat (over the timed window: rq = run-queue wait of the archive's threads, summed / "
          "of the client's publishing or subscribing thread; others = other programs' CPU; wb = MiB written back; "
          "over the client command: held = publisher retrying refused offers / replay subscriber polling nothing; "
          "res = recording resident in the page cache before its replay):\n")
    print(spread_table(samples))
    print()
    print("Machine:", notes)
    if args.json is not None:
        args.json.write_text(json.dumps(run_record(args, shown, samples, judged, notes, started_at), indent=1))
        print(f"\nrun written to {args.json} (compare two runs: .venv/bin/python bench/compare_runs.py A.json B.json)")
    if args.profile is not None:
        print("\nWhere our sidecar's py-spy samples land:")
        print(summarize_profile(sorted(args.profile.glob("ours-[0-9]*.txt"))))  # not ours-b-*
    if args.write_docs:
        command = [a for a in shown if a != "--write-docs"]
        write_docs(results, " ".join([".venv/bin/python bench/modern_java_archive.py", *command]), notes)
        print(f"\nwritten to {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
