"""Benchmark: what one partition of a live micro-batch costs around its data, step by step.

The live comparison with Kafka (bench/kafka_live.py) shows our ``addBatch`` 20-30 ms longer than
the Kafka source's per batch, and the connector's step timings put it in the partition's read
(``source.read``: describe, replay set-up, replay close) rather than in the read itself. This
benchmark takes that path apart without Spark, in the cluster layout's shape: the real sidecar on
its own embedded driver reached over a UDP control channel, and this process on an embedded driver
of its own (as an executor's Python worker: ``AERON_DIR`` naming a directory with no driver), so
control responses and replays cross UDP. A publisher appends one 32-byte message every
``--interval-ms`` to a recorded IPC stream on the sidecar's driver; every ``--batch-ms`` this process
reads what was recorded since its previous read with the partition reader (``read_range``, the
executor's code, over one cached connection), as a live micro-batch does. Each step of each read is
timed by wrapping the calls the reader makes:

* ``describe``: ListRecording (partition_reader's data-loss check),
* ``subscribe``: the replay's subscription and the port its driver bound (replay_endpoint),
* ``start replay``: the StartReplay request and its response,
* ``await image``: until the replay's Image is there (the archive's publication connected over UDP),
* ``read``: the replayed blocks to Arrow batches,
* ``stop replay``: the StopReplay request and its response (only for a replay not read to its end:
  the archive ends a bounded replay itself), then closing the subscription.

``--ab-stop-replay`` alternates the reads between the connector as it is (no StopReplay after a
replay read to its end) and one that always sends it, and prints both: a same-run A/B.
``--concurrent-readers N`` adds N-1 readers on connections of their own, reading the same recording
at the same cadence on threads of this process (as the partitions of one micro-batch on several
executors): their StartReplays reach the sidecar's conductor at about the same time. Only the
first reader is timed.

Run::

    .venv/bin/python bench/replay_setup_cost.py                 # 200 reads, one every 100 ms
    .venv/bin/python bench/replay_setup_cost.py --reads 500 --batch-ms 50
    .venv/bin/python bench/replay_setup_cost.py --reads 300 --ab-stop-replay
    .venv/bin/python bench/replay_setup_cost.py --reads 200 --concurrent-readers 3

Prints per step the median and p90 ms. Every process started here is stopped by PID.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from live_tail_latency import SOURCE_CHANNEL, SOURCE_STREAM_ID, Publisher
from spark_bench_support import exit_on_sigterm, loopback_udp_channel, progress, running_sidecar

STEPS = ("describe", "subscribe", "start replay", "await image", "read", "stop replay", "close subscription")


ALWAYS_STOP = "StopReplay after every read (as before)"
AS_IS = "the connector as it is"


class StepClock:
    """Milliseconds per named step, per read; each read is counted under the current ``variant``."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}
        self.variant = AS_IS
        self.reads_by_variant: dict[str, list[dict[str, float]]] = {}
        self.owner = threading.get_ident()  # the timed reader; other readers' calls are not counted

    @property
    def reads(self) -> list[dict[str, float]]:
        return [read for reads in self.reads_by_variant.values() for read in reads]

    def timed(self, step: str, call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self.owner:
                return call(*args, **kwargs)
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.current[step] = self.current.get(step, 0.0) + (time.perf_counter() - started) * 1000.0
        return wrapper

    def finish(self, total_ms: float) -> None:
        timed = sum(self.current.values())
        self.current["read"] = total_ms - timed  # the rest: blocks to Arrow, and the generator's own work
        self.current["total"] = total_ms
        self.reads_by_variant.setdefault(self.variant, []).append(self.current)
        self.current = {}

    def lines(self) -> list[str]:
        lines = []
        for variant, reads in self.reads_by_variant.items():
            if len(self.reads_by_variant) > 1:
                lines.append(f" {variant} ({len(reads)} reads):")
            lines.extend(self._variant_lines(reads))
        return lines

    @staticmethod
    def _variant_lines(reads: list[dict[str, float]]) -> list[str]:
        lines = []
        for step in (*STEPS, "total"):
            values = sorted(read.get(step, 0.0) for read in reads)
            if not values:
                continue
            lines.append(f"  {step:<20} median {statistics.median(values):7.2f} ms   p90 "
                         f"{values[int(0.9 * (len(values) - 1))]:7.2f} ms")
        return lines


def instrument(access: Any, clock: StepClock) -> None:
    """Wraps the calls read_range makes on one ClientArchiveAccess (this benchmark's only use of its
    private parts: the steps have no timing of their own)."""
    from aeron_spark.connector import archive_reading

    client = access._client
    access.describe = clock.timed("describe", access.describe)
    for name in ("start_replay", "start_bounded_replay"):
        setattr(client, name, clock.timed("start replay", getattr(client, name)))
    client.stop_replay = clock.timed("stop replay", client.stop_replay)
    archive_reading.await_udp_image = clock.timed("await image", archive_reading.await_udp_image)
    endpoints = access.replay_endpoints
    subscribe = endpoints.subscribe

    def timed_subscribe(*args: Any, **kwargs: Any) -> Any:
        receiver = clock.timed("subscribe", subscribe)(*args, **kwargs)
        subscription = receiver.subscription
        close = subscription.close
        with contextlib.suppress(AttributeError):  # a pooled subscription may not let it be replaced
            subscription.close = clock.timed("close subscription", close)
        return receiver
    endpoints.subscribe = timed_subscribe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--batch-ms", type=float, default=100.0, help="time between two reads (default 100 ms)")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="publish interval (default 5 ms)")
    parser.add_argument("--shared-subscription", action=argparse.BooleanOptionalAction, default=None,
                        help="replays share one subscription per connection (replay_endpoint."
                             "SharedReplaySubscriptions) or bind a port each (default: the connector's default)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="sample the sidecar and this process (py-spy, perf) over the reads; summary in DIR")
    parser.add_argument("--replay-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra source option for the reads (e.g. replay.mtu=recording)")
    parser.add_argument("--concurrent-readers", type=int, default=1, metavar="N",
                        help="readers reading at once, each on its own connection; only the first is timed")
    parser.add_argument("--ab-stop-replay", action="store_true",
                        help="alternate reads as they are and with a StopReplay after every read (same-run A/B)")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    work = Path(tempfile.mkdtemp(prefix="replay-setup-cost-"))
    previous = os.environ.get("AERON_DIR")
    try:
        with running_sidecar(work / "archive", "--control-channel", loopback_udp_channel(),
                             "--log-level", "WARNING") as sidecar:
            publisher = Publisher(sidecar.archive_dir, args.interval_ms / 1000.0)
            try:
                publisher.start()
                os.environ["AERON_DIR"] = str(work / "worker-aeron")  # no driver there: an embedded one starts
                profiling: Any = contextlib.nullcontext()
                if args.profile:
                    from profile_processes import SamplingProfiler, Target

                    profiler = SamplingProfiler(args.profile)
                    profiling = profiler.profiling("replay set-up", [Target("sidecar", sidecar.pid, True),
                                                                     Target("this reader", os.getpid(), True)])
                with profiling:
                    clock = run_reads(sidecar, args)
            finally:
                publisher.close()
    finally:
        if previous is None:
            os.environ.pop("AERON_DIR", None)
        else:
            os.environ["AERON_DIR"] = previous
        shutil.rmtree(work, ignore_errors=True)
    others = (f", beside {args.concurrent_readers - 1} other readers on their own connections"
              if args.concurrent_readers > 1 else "")
    print(f"\none partition's live read, {len(clock.reads)} reads one every {args.batch_ms:.0f} ms "
          f"(sidecar on its own driver over UDP, this process on an embedded driver{others}):")
    print("\n".join(clock.lines()))
    return 0


def run_reads(sidecar, args) -> StepClock:
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.connector import archive_reading
    from aeron_spark.connector.options import ReadMode
    from aeron_spark.connector.source.archive_access import open_archive
    from aeron_spark.connector.source.options import SourceOptions
    from aeron_spark.connector.source.partition_planner import ReplayRange
    from aeron_spark.connector.source.partition_reader import read_range

    with contextlib.closing(ArchiveClient.from_mark_file(sidecar.archive_dir)) as local:
        recording_id = local.list_recordings_for_uri(0, None, SOURCE_CHANNEL, SOURCE_STREAM_ID)[0].recording_id
    raw = {"recordingIds": str(recording_id), "archive.controlChannel": sidecar.control_channel,
           **dict(item.split("=", 1) for item in args.replay_option)}
    options = SourceOptions.parse(raw, ReadMode.BATCH)
    access = open_archive(options.connection)
    clock = StepClock()
    delivered_to = getattr(archive_reading, "delivered_to", None)  # absent before the StopReplay skip
    stop_others = threading.Event()
    others = [threading.Thread(target=read_beside, args=(recording_id, options, args.batch_ms, stop_others),
                               name=f"reader-{index}", daemon=True)
              for index in range(1, args.concurrent_readers)]
    try:
        if args.shared_subscription is not None:
            from aeron_spark.connector.replay_endpoint import SharedReplaySubscriptions

            endpoints = access.replay_endpoints
            endpoints.shared = (SharedReplaySubscriptions(access._client.aeron, access._client.timeout)
                                if args.shared_subscription else None)
        progress(f"replays share a subscription: {access.replay_endpoints.shared is not None}")
        instrument(access, clock)
        for other in others:
            other.start()
        start = access.live_position(recording_id) or 0
        rows = 0
        for index in range(args.reads + 5):
            time.sleep(args.batch_ms / 1000.0)
            end = access.live_position(recording_id) or start
            if end <= start:
                continue
            clock.current = {}
            always_stop = args.ab_stop_replay and index % 2 == 1
            clock.variant = ALWAYS_STOP if always_stop else AS_IS
            # the B side: the timed reader never counts a replay as read to its end, so it stops each one
            if delivered_to is not None:
                archive_reading.delivered_to = (
                    (lambda image, end: False if threading.get_ident() == clock.owner else delivered_to(image, end))
                    if always_stop else delivered_to)
            started = time.perf_counter()
            for batch in read_range(ReplayRange(recording_id, start, end), options, access):
                rows += batch.num_rows
            if index >= 5:  # the first reads warm the connection's caches
                clock.finish((time.perf_counter() - started) * 1000.0)
            start = end
        progress(f"read {rows} rows of recording {recording_id}")
    finally:
        stop_others.set()
        for other in others:
            other.join(timeout=30)
        if delivered_to is not None:
            archive_reading.delivered_to = delivered_to
        access.close()
    return clock


def read_beside(recording_id: int, options: Any, batch_ms: float, stop: threading.Event) -> None:
    """Another partition's reader: same recording, same cadence, its own connection; untimed."""
    from aeron_spark.connector.source.archive_access import open_archive
    from aeron_spark.connector.source.partition_planner import ReplayRange
    from aeron_spark.connector.source.partition_reader import read_range

    access = open_archive(options.connection)
    try:
        start = access.live_position(recording_id) or 0
        while not stop.wait(batch_ms / 1000.0):
            end = access.live_position(recording_id) or start
            if end > start:
                for _batch in read_range(ReplayRange(recording_id, start, end), options, access):
                    pass
                start = end
    finally:
        access.close()


if __name__ == "__main__":
    sys.exit(main())
