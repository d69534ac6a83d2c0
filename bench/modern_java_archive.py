"""Record and replay throughput: OUR archive sidecar vs the real Java Aeron Archive 1.51.0, one
publisher program feeding both, in the same run.

Run from the repository root (a benchmark, not a test; ~5 minutes with the defaults)::

    .venv/bin/python bench/modern_java_archive.py [--transport ipc|udp|both] [--repeats 3]
        [--ipc-messages 32=6000000,1024=500000] [--udp-messages 32=1000000,1024=100000]
        [--publisher per-message|block] [--java-threading shared|dedicated] [--our-args "..."] [--profile DIR]
        [--write-docs]

The Java archive is the modern peer's ``archive`` (``tests/interop/peer/modern_peer.py``: Archive
+ its own Java 1.51.0 MediaDriver in one JVM, Java 17), ours is ``aeron-archive serve`` with its
embedded C driver. Both: fresh process and archive directory per repeat, 128 MiB segments, no
checksums, no file sync; repeats alternate which archive goes first.

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
back. ``--our-args`` passes ``serve`` options to our sidecar (e.g. idle strategies for an A/B). Each case records the
1-minute load average when it starts: the machine is shared, so figures from a loaded machine are
provisional; compare the ratios measured side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
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

from tests.interop.peer.modern_peer import MODERN_AERON_VERSION, ModernPeerInstallation, ensure_modern_peer_built
from tests.interop.peer.interop_peer import framed_length
from tests.support.ports import free_udp_port, udp_channel

REPO = Path(__file__).resolve().parent.parent
ARCHIVES = ("java", "ours")
TERM_LENGTH = 16 * 1024 * 1024
STREAM_ID = 1001
REPLAY_STREAM_ID = 2002
IPC_TARGET = 1.0  # ours / Java on IPC, record and replay, both sizes
PUBLISHER_BOUND_SHARE = 0.05  # below this share of refused offers on both sides, the publisher set the pace
SECTION_TITLE = "## Against the modern Java archive (Aeron 1.51.0)"
BEGIN_MARK = "<!-- modern-java-archive results: generated by bench/modern_java_archive.py --write-docs -->"
END_MARK = "<!-- end of modern-java-archive results -->"


@contextlib.contextmanager
def started(archive: str, installation: ModernPeerInstallation, work_dir: Path, java_threading: str,
            our_args: tuple[str, ...] = ()):
    archive_dir = work_dir / f"{archive}-archive"
    shutil.rmtree(archive_dir, ignore_errors=True)
    manager = (running_modern_java_archive_process(installation, archive_dir, threading_mode=java_threading)
               if archive == "java" else running_our_sidecar(archive_dir, extra_args=our_args))
    try:
        with manager as running:
            yield running
    finally:
        shutil.rmtree(archive_dir, ignore_errors=True)  # recordings are large; keep the disk tidy


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


def run_case(running: RunningArchive, transport: str, size: int, messages: int,
             publisher: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One recording and its whole replay on one archive, by the one client program; each result
    line gets ``archiveCpuSeconds`` (the archive process over that command), ``archiveThreadCpu``
    (the same per named thread: which agent did the work) and ``loadAverage``."""
    load = os.getloadavg()[0]
    client = [sys.executable, str(PYTHON_BENCH_CLIENT)]
    connection, record_options, replay_options = client_options(running, transport)
    cpu_before, threads_before = process_cpu_seconds(running.pid), thread_cpu_seconds(running.pid)
    waits_before = thread_run_queue_wait_seconds(running.pid)
    recorded = run_bench_client([*client, "record", *connection, *record_options, "--stream-id", str(STREAM_ID),
                                 "--messages", str(messages), "--size", str(size), "--publisher", publisher])
    cpu_after_record, threads_after_record = process_cpu_seconds(running.pid), thread_cpu_seconds(running.pid)
    waits_after_record = thread_run_queue_wait_seconds(running.pid)
    replayed = run_bench_client([*client, "replay", *connection, *replay_options,
                                 "--recording-id", str(recorded["recordingId"]),
                                 "--replay-stream-id", str(REPLAY_STREAM_ID)])
    cpu_after_replay, threads_after_replay = process_cpu_seconds(running.pid), thread_cpu_seconds(running.pid)
    waits_after_replay = thread_run_queue_wait_seconds(running.pid)
    recorded["archiveCpuSeconds"] = cpu_after_record - cpu_before
    replayed["archiveCpuSeconds"] = cpu_after_replay - cpu_after_record
    names = running.details["threadNames"]
    recorded["archiveThreadCpu"] = thread_cpu_delta(threads_before, threads_after_record, names)
    replayed["archiveThreadCpu"] = thread_cpu_delta(threads_after_record, threads_after_replay, names)
    recorded["archiveThreadWait"] = thread_cpu_delta(waits_before, waits_after_record, names)
    replayed["archiveThreadWait"] = thread_cpu_delta(waits_after_record, waits_after_replay, names)
    recorded["loadAverage"] = replayed["loadAverage"] = load
    length = recorded["stopPosition"] - recorded["startPosition"]
    if recorded["stopPosition"] != recorded["publicationPosition"] or length < messages * framed_length(size):
        raise RuntimeError(f"{running.name}: recording stopped at {recorded['stopPosition']}, expected the "
                           f"publication position {recorded['publicationPosition']}")
    if replayed["countedBytes"] != length:
        raise RuntimeError(f"{running.name}: replay delivered {replayed['countedBytes']} bytes of {length}")
    return recorded, replayed


def run(args: argparse.Namespace) -> tuple[list[Sample], dict[str, list[float]]]:
    installation = ensure_modern_peer_built()
    transports = ("ipc", "udp") if args.transport == "both" else (args.transport,)
    samples: list[Sample] = []
    idle: dict[str, list[float]] = {archive: [] for archive in ARCHIVES}
    for repeat in range(args.repeats):
        order = ARCHIVES if repeat % 2 == 0 else tuple(reversed(ARCHIVES))
        for archive in order:
            with started(archive, installation, args.work_dir, args.java_threading,
                         tuple(args.our_args.split())) as running:
                idle[archive].append(idle_cpu_share(running.pid))
                running.details["threadNames"] = thread_names(running.pid)
                profiling = contextlib.nullcontext()
                if archive == "ours" and args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    profiling = py_spy_recording(running.pid, args.profile / f"ours-{repeat}.txt",
                                                 idle=args.profile_idle)
                with profiling:
                    for transport in transports:
                        for size, messages in args.messages[transport].items():
                            if args.warmup:  # JIT-compile the Java archive's paths before timing them
                                run_case(running, transport, size, max(1, messages // 4), args.publisher)
                            recorded, replayed = run_case(running, transport, size, messages, args.publisher)
                            for operation, result in (("record", recorded), ("replay", replayed)):
                                sample = Sample(archive, transport, size, operation, rate(result), result, repeat)
                                samples.append(sample)
                                print(f"repeat {repeat + 1}/{args.repeats} {archive:4} {transport} {size:5} B "
                                      f"{operation}: {sample.mb_per_s:8.1f} MB/s, archive CPU "
                                      f"{result['archiveCpuSeconds']:.2f} s, load {result['loadAverage']:.1f}"
                                      + (f", back-pressured {refused_share(sample):.1%}" if operation == "record"
                                         else ""), flush=True)
    return samples, idle


def table(samples: list[Sample], messages: dict[str, dict[int, int]]) -> str:
    lines = [f"| transport | payload | messages | operation | Java {MODERN_AERON_VERSION} MB/s (M msg/s) "
             "| ours MB/s (M msg/s) | **ours/Java** [per-repeat] | target | archive CPU s Java / ours "
             "(CPU s per GB) | back-pressured Java / ours (publisher M offers/s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for transport in dict.fromkeys(s.transport for s in samples):
        for size, count in messages[transport].items():
            frame = framed_length(size)
            for operation in ("record", "replay"):
                java = select(samples, archive="java", transport=transport, size=size, operation=operation)
                ours = select(samples, archive="ours", transport=transport, size=size, operation=operation)
                if not java or not ours:
                    continue
                java_rate = statistics.median(s.mb_per_s for s in java)
                ours_rate = statistics.median(s.mb_per_s for s in ours)
                ratio = ours_rate / java_rate
                java_by_repeat = {s.repeat: s.mb_per_s for s in java}
                ratios = [s.mb_per_s / java_by_repeat[s.repeat] for s in ours if s.repeat in java_by_repeat]
                target = (f"≥ {IPC_TARGET}x: {'met' if ratio >= IPC_TARGET else 'MISSED'}" if transport == "ipc"
                          else "-")
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
                    f"| {transport} | {size} B | {count:,} | {operation} "
                    f"| {java_rate:,.0f} ({java_rate / frame:.2f}) [{min(s.mb_per_s for s in java):,.0f}–"
                    f"{max(s.mb_per_s for s in java):,.0f}] "
                    f"| {ours_rate:,.0f} ({ours_rate / frame:.2f}) [{min(s.mb_per_s for s in ours):,.0f}–"
                    f"{max(s.mb_per_s for s in ours):,.0f}] "
                    f"| **{ratio:.2f}x** [{', '.join(f'{r:.2f}' for r in ratios)}] | {target} | {cpu} | {pressure} |")
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
    for transport, size, operation in dict.fromkeys((s.transport, s.size, s.operation) for s in samples):
        cells = []
        for archive in ARCHIVES:
            chosen = select(samples, archive=archive, transport=transport, size=size, operation=operation)
            cpu = median_by_thread(chosen, "archiveThreadCpu")
            wait = median_by_thread(chosen, "archiveThreadWait")
            busiest = sorted(cpu.items(), key=lambda item: -item[1])[:top]
            cells.append(", ".join(f"{name} {seconds:.2f} ({wait.get(name, 0.0):.2f})" for name, seconds in busiest
                                   if seconds >= 0.01) or "-")
        lines.append(f"| {transport} | {size} B | {operation} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


QUIET_LOAD_AVERAGE = 2.5


def run_notes(work_dir: Path, samples: list[Sample], idle: dict[str, list[float]], args: argparse.Namespace) -> str:
    loads = [s.detail["loadAverage"] for s in samples]
    publishers = ", ".join(dict.fromkeys(s.detail["publisher"] for s in samples if s.operation == "record"))
    idle_text = ", ".join(f"{'Java' if archive == 'java' else 'ours'} {spread(shares, '.1%')}"
                          for archive, shares in idle.items() if shares)
    # Above about one runnable task per core something else competed for the two cores.
    quietness = "quiet" if max(loads) <= QUIET_LOAD_AVERAGE else "other work competed for the cores: figures provisional"
    return (f"{machine_notes(work_dir, java=f'Java archive: aeron-all {MODERN_AERON_VERSION} on the machine JDK 17')}; "
            f"1-min load average at the cases' starts {min(loads):.1f}–{max(loads):.1f} ({quietness}); "
            f"Java archive threading {args.java_threading}; publisher {publishers}; "
            f"archives' idle CPU share (1 s after each start) {idle_text}")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Record/replay: our archive vs Java Aeron Archive "
                                                 f"{MODERN_AERON_VERSION}, one publisher program for both")
    parser.add_argument("--transport", choices=("ipc", "udp", "both"), default="both")
    # ~0.4-0.5 GB per IPC case: long enough to time, short of the GB-sized recordings whose rate this
    # VM's first touch of fresh page-cache memory sets (~0.3 GB/s, measured-limits.md) for both archives.
    parser.add_argument("--ipc-messages", type=parse_messages, default=parse_messages("32=6000000,1024=500000"),
                        help="IPC payload sizes and message counts, SIZE=COUNT,... (default 32=6000000,1024=500000)")
    parser.add_argument("--udp-messages", type=parse_messages, default=parse_messages("32=1000000,1024=100000"),
                        help="UDP payload sizes and message counts (default 32=1000000,1024=100000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--publisher", choices=("per-message", "block"), default="per-message",
                        help="one C offer per message (default), or pre-framed blocks")
    parser.add_argument("--java-threading", choices=("shared", "dedicated"), default="shared",
                        help="the Java archive's threading (driver and archive agents); default shared, as ours on 2 cores")
    parser.add_argument("--our-args", default="",
                        help="extra `aeron-archive serve` options for our sidecar, e.g. '--recorder-idle-strategy yield'")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="skip the untimed warm-up recording+replay (1/4 of the messages) per case")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the archive directories go (default: a new temp dir under /var/tmp, removed after)")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy our sidecar; raw stacks go here")
    parser.add_argument("--profile-idle", action="store_true",
                        help="with --profile: also sample threads off the CPU (py-spy --idle), to see where they wait")
    parser.add_argument("--write-docs", action="store_true", help=f"write the table into {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    args.messages = {"ipc": args.ipc_messages, "udp": args.udp_messages}
    own_work_dir = args.work_dir is None
    args.work_dir = Path(tempfile.mkdtemp(prefix="modern-java-bench-", dir="/var/tmp")) if own_work_dir else args.work_dir
    args.work_dir.mkdir(parents=True, exist_ok=True)
    try:
        samples, idle = run(args)
        results = (table(samples, args.messages) + "\n\nWhere each archive's time went (median CPU seconds per "
                   "thread over the client command, and its run-queue wait; Python agents named by py-spy when "
                   "installed):\n\n" + thread_table(samples))
        notes = run_notes(args.work_dir, samples, idle, args)
    finally:
        if own_work_dir:
            shutil.rmtree(args.work_dir, ignore_errors=True)
    print()
    print(results)
    print()
    print("Machine:", notes)
    if args.profile is not None:
        print("\nWhere our sidecar's py-spy samples land:")
        print(summarize_profile(sorted(args.profile.glob("ours-*.txt"))))
    if args.write_docs:
        shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--write-docs"]
        write_docs(results, " ".join([".venv/bin/python bench/modern_java_archive.py", *shown]), notes)
        print(f"\nwritten to {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
