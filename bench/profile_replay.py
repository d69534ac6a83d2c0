"""What holds our sidecar's record and replay back: a sampling profile of one timed record and of
the replays of that recording, in bench/modern_java_archive.py's setting (the same client program,
the same channels), each operation in a window of its own.

Run from the repository root (a benchmark tool, not a test)::

    .venv/bin/python bench/profile_replay.py [--transport ipc|udp] [--size 1024] [--messages 1000000]
        [--replays 3] [--publisher per-message|block] [--our-args "..."] [--out DIR]

Needs py-spy in the venv (``.venv/bin/python -m pip install py-spy``; a benchmark tool, not a
dependency of the package) and/or ``perf``. The sidecar is started once (``aeron-archive serve``,
its embedded C driver), warmed up with a small record and replay, then:

1. **record**: py-spy (``--threads``, Python frames; idle-strategy and wait frames counted apart)
   and perf (native symbols of every thread, the C driver's included, grouped into idle, page
   faults, copies, Aeron C, interpreter) sample the sidecar while the client records
   ``--messages`` of ``--size`` bytes;
2. **replay**: the same while the client replays that recording ``--replays`` times (one replay of
   1 GB lasts about a second: too few samples alone).

The reports (``DIR/record.txt``, ``DIR/replay.txt``; summaries by ``bench/profile_processes.py``)
are printed: the top frames with their share of the process's busy samples name what the replay
path spends on (e.g. ``offer_block``, the replay's second copy into the publication's term, named
earlier as its largest single cost). Shares, not times: valid on a busy machine too, although on a
quiet one the idle shares mean more. The rates printed beside them are not measurements.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the peers are test code

from archive_throughput import rate
from bench_processes import PYTHON_BENCH_CLIENT, RunningArchive, run_bench_client, running_our_sidecar
from modern_java_archive import REPLAY_STREAM_ID, STREAM_ID, client_options
from profile_processes import SamplingProfiler, Target

WARMUP_MESSAGES = 50_000


def record(running: RunningArchive, transport: str, size: int, messages: int, publisher: str) -> dict:
    connection, record_options, _ = client_options(running, transport)
    return run_bench_client([sys.executable, str(PYTHON_BENCH_CLIENT), "record", *connection, *record_options,
                             "--stream-id", str(STREAM_ID), "--messages", str(messages), "--size", str(size),
                             "--publisher", publisher])


def replay(running: RunningArchive, transport: str, recording_id: int) -> dict:
    connection, _, replay_options = client_options(running, transport)
    return run_bench_client([sys.executable, str(PYTHON_BENCH_CLIENT), "replay", *connection, *replay_options,
                             "--recording-id", str(recording_id), "--replay-stream-id", str(REPLAY_STREAM_ID)])


def profile(args: argparse.Namespace, work_dir: Path) -> list[Path]:
    profiler = SamplingProfiler(args.out)
    with running_our_sidecar(work_dir / "ours-archive", extra_args=tuple(args.our_args.split())) as running:
        target = [Target("sidecar", running.pid, python=True)]
        warm = record(running, args.transport, args.size, WARMUP_MESSAGES, args.publisher)
        replay(running, args.transport, warm["recordingId"])
        with profiler.profiling(f"record {args.transport} {args.size} B x {args.messages}", target):
            recorded = record(running, args.transport, args.size, args.messages, args.publisher)
        print(f"record: {rate(recorded):,.0f} MB/s, back-pressured {recorded['backPressuredOffers']:,} offers "
              f"({recorded.get('backPressuredSeconds', 0.0):.2f} s)", flush=True)
        with profiler.profiling(f"replay {args.transport} {args.size} B x {args.messages}", target):
            for _ in range(args.replays):
                replayed = replay(running, args.transport, recorded["recordingId"])
                print(f"replay: {rate(replayed):,.0f} MB/s, subscriber starved "
                      f"{replayed.get('starvedSeconds', 0.0):.2f} s", flush=True)
    return profiler.written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="py-spy + perf profile of our sidecar over one record and its replays")
    parser.add_argument("--transport", choices=("ipc", "udp"), default="ipc")
    parser.add_argument("--size", type=int, choices=(32, 1024), default=1024, help="payload bytes (default 1024)")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages recorded (default 1,000,000)")
    parser.add_argument("--replays", type=int, default=3, help="replays of the recording in the replay window")
    parser.add_argument("--publisher", choices=("per-message", "block"), default="per-message")
    parser.add_argument("--our-args", default="", help="extra `aeron-archive serve` options for our sidecar")
    parser.add_argument("--out", type=Path, default=None, help="where the raw samples and reports go "
                                                                "(default: a new temp dir, kept)")
    args = parser.parse_args(argv)
    if args.messages <= 0 or args.replays <= 0:
        parser.error(f"--messages and --replays must be positive, got {args.messages} and {args.replays}")
    args.out = args.out or Path(tempfile.mkdtemp(prefix="profile-replay-"))
    work_dir = Path(tempfile.mkdtemp(prefix="profile-replay-archive-", dir="/var/tmp"))
    try:
        reports = profile(args, work_dir)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    for report in reports:
        print()
        print(report.read_text())
    print(f"raw samples and reports in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
