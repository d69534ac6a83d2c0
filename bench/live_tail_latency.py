"""Benchmark: live-tail latency of `readStream.format("aeron-archive")`, against Spark's own floor.

One command, one local[2] Spark session, one sidecar (`aeron-archive serve`, embedded driver):

1. a publisher thread offers one 32-byte message every ``--interval-ms`` (5 ms) on ``aeron:ipc``,
   recorded LOCAL by the sidecar; bytes 0-8 of each payload are its publish time (epoch ns),
   bytes 8-16 its sequence number;
2. **visible**: ``readStream`` (default trigger, startingPositions latest) → ``foreach`` (default:
   the executor's ForeachWriter notes the time it processes each row; latency = that time − publish
   time), or with ``--visible-sink foreachBatch`` a function that collects the batch's payloads
   (latency = the time the rows are in hand on the driver − publish time; a second Spark job),
   or with ``--visible-sink memory`` Spark's ``memory`` sink (no Python worker on the write side):
   its rows can be queried once the batch's ``addBatch`` has ended, which Spark's progress gives as
   the batch's begin + ``triggerExecution`` − ``commitOffsets`` (a little late, so an upper bound);
   each message belongs to the batch whose source offsets cover its position;
3. **committed**: the same ``readStream`` → ``writeStream.format("aeron-archive")`` (IPC sink). A
   watcher thread polls the sink recording's descriptor every ms; a batch is committed (readable)
   when the recording stops at a new position (its commit marker is recorded and the recording
   sealed, docs/exactly-once.md). Latency = the time the watcher saw the new stop − publish time
   of each message in it (the new range is replayed afterwards, off the clock, to read them);
4. **Spark's floor**, same session, same trigger and settings: ``rate`` (``--rate`` rows/s, one
   partition) → ``noop``, the median ``triggerExecution`` of its batches; and the same query shape
   over ``rate`` → the visible query's sink (``foreach`` / ``foreachBatch`` / ``memory``).

``--async-progress`` sets ``asyncProgressTrackingEnabled`` on the queries whose sink Spark allows it
for (foreach, noop; not foreachBatch, and not the aeron-archive sink: Spark refuses a Python sink,
and overriding that would reuse batch ids for different offsets after a crash, which breaks the
sink's exactly-once) and adds the plain floor, so each latency is compared with the floor of its
own settings.

Each query runs ``--warmup`` s unmeasured, then ``--seconds`` s measured. Printed: p50/p95/p99/max of
both latencies, the ratios of their p99 to the floor (targets: visible ≤ 2.5×, committed ≤ 3×),
and per query the median of each of Spark's progress ``durationMs`` parts over batches with rows.
With ``AERON_SPARK_TIMINGS`` set to a file path, the connector's driver-side and executor-side
steps append their timings there (connector/step_timings.py) and their medians are printed too.

Run (under the shared benchmark lock; it takes about 4 × (warm-up + seconds) plus ~30 s)::

    flock $BENCH_LOCK .venv/bin/python bench/live_tail_latency.py --seconds 60
    .venv/bin/python bench/live_tail_latency.py --seconds 15 --warmup 5      # a quick look
    .venv/bin/python bench/live_tail_latency.py --conf spark.sql.streaming.noDataMicroBatches.enabled=false

Every process started here is stopped by PID, also on failure.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from spark_bench_support import (
    exit_on_sigterm,
    local_spark,
    progress,
    running_sidecar,
    spark_jvm_pid,
    spark_processes_stopped,
    stop_session,
)

SOURCE_CHANNEL = "aeron:ipc"
SOURCE_STREAM_ID = 7101
SINK_STREAM_ID = 7102
SINK_ID = "live-tail-latency"
REPLAY_STREAM_ID = 7199
TIMINGS_VARIABLE = "AERON_SPARK_TIMINGS"  # connector/step_timings.py TIMINGS_FILE_VARIABLE
MESSAGE_BYTES = 32
ASYNC_PROGRESS_SINKS = ("foreach", "memory")  # of the visible sinks, those Spark allows async progress for
PROGRESS_PARTS = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets",
                  "triggerExecution")


# --- the publisher ------------------------------------------------------------------------------


class Publisher:
    """One message every ``interval_s`` on a recorded IPC stream: publish time (ns) + sequence."""

    def __init__(self, archive_dir: Path, interval_s: float) -> None:
        from aeron_spark.archive.client.archive_client import ArchiveClient, SourceLocation

        self.interval_s = interval_s
        self.archive = ArchiveClient.from_mark_file(archive_dir)
        self.archive.start_recording(SOURCE_CHANNEL, SOURCE_STREAM_ID, SourceLocation.LOCAL)
        self.publication = self.archive.aeron.add_exclusive_publication(SOURCE_CHANNEL, SOURCE_STREAM_ID)
        self.sent = 0
        self.late = 0  # offers made more than one interval after their slot (the publisher fell behind)
        # per message (sequence = index): (publish ns, end position in the source recording, ms late)
        self.messages: list[tuple[int, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="publisher", daemon=True)

    def start(self) -> None:
        deadline = time.monotonic() + 30
        while not self.archive.list_recordings_for_uri(0, None, SOURCE_CHANNEL, SOURCE_STREAM_ID):
            if time.monotonic() > deadline:
                raise RuntimeError("the sidecar did not start recording the publisher's stream")
            time.sleep(0.01)
        self._thread.start()

    def _run(self) -> None:
        payload = bytearray(MESSAGE_BYTES)
        next_slot = time.monotonic()
        sequence = 0
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_slot:
                time.sleep(next_slot - now)
                now = time.monotonic()
            elif now - next_slot > self.interval_s:
                self.late += 1
            published_ns = time.time_ns()
            struct.pack_into("<qq", payload, 0, published_ns, sequence)
            position = self.publication.offer_with_retry(bytes(payload))
            self.messages.append((published_ns, position, (now - next_slot) * 1000.0))
            sequence += 1
            self.sent = sequence
            next_slot += self.interval_s

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.publication.close()
        self.archive.close()


def publish_time_ns(payload: bytes) -> int:
    return struct.unpack_from("<q", payload, 0)[0]


# --- what each query measures ----------------------------------------------------------------


@dataclass
class LatencySamples:
    """Publish → seen latencies (ms) of messages published inside the measured window."""

    window_start_ns: int = 0
    window_end_ns: int = 1 << 62
    values_ms: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, published_ns: int, seen_ns: int) -> None:
        if self.window_start_ns <= published_ns < self.window_end_ns:
            with self.lock:
                self.values_ms.append((seen_ns - published_ns) / 1e6)

    def summary(self) -> dict[str, float]:
        values = sorted(self.values_ms)
        if not values:
            return {}

        def pct(p: float) -> float:
            return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]
        return {"n": len(values), "p50": pct(50), "p95": pct(95), "p99": pct(99), "max": values[-1]}


def summary_line(name: str, summary: dict[str, float]) -> str:
    if not summary:
        return f"  {name:<34} no samples"
    return (f"  {name:<34} p50 {summary['p50']:6.0f} ms  p95 {summary['p95']:6.0f} ms  "
            f"p99 {summary['p99']:6.0f} ms  max {summary['max']:6.0f} ms  (n={summary['n']})")


class SinkWatcher:
    """Notes each commit of the sink as (start, stop, time seen): every ms it looks whether the sink
    recording's ``rec-pos`` counter is there (a read of the driver's counters, no request to the
    archive); when the counter goes (the commit sealed and stopped the recording, catalog first,
    counter last), one ListRecording reads the new stop position. Polling the descriptor every ms
    instead was ~500 control requests/s to the sidecar, CPU the Spark query then lacked.
    After the query, one replay of everything committed gives each message's publish time, matched
    to the commit whose range holds it (replaying in the polling thread would delay the next polls)."""

    def __init__(self, archive_dir: Path, samples: LatencySamples, sink_id: str = SINK_ID,
                 stream_id: int = SINK_STREAM_ID) -> None:
        from aeron_spark.archive.client.archive_client import ArchiveClient

        self.archive = ArchiveClient.from_mark_file(archive_dir)
        self.samples = samples
        self.sink_id = sink_id  # the watched sink: each committed query its own, so batch ids never repeat
        self.stream_id = stream_id
        self.commits: list[tuple[int, int, int]] = []  # (start, stop, seen ns)
        self.commit_batch_ids: dict[int, int] = {}  # commit index -> batch id (from its marker)
        self.message_commits: list[tuple[int, int]] = []  # (sequence, commit index) per committed message
        self._matched = False
        self.recording_id: int | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sink-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._watch()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error

    def _watch(self) -> None:
        from aeron_spark.archive.client.live_positions import counter_ids_by_recording

        counters = self.archive.aeron.counters_reader
        archive_id = self.archive.archive_id
        recording_id, seen_stop, was_active = None, None, True
        while not self._stop.wait(0.001):
            if recording_id is None:
                found = self.archive.list_recordings_for_uri(0, None, f"alias=aeron-spark-sink:{self.sink_id}",
                                                             self.stream_id)
                if not found:
                    self._stop.wait(0.01)
                    continue
                recording_id, seen_stop = found[0].recording_id, found[0].start_position
            active = recording_id in counter_ids_by_recording(counters, archive_id)
            if active or not was_active:
                was_active = active
                continue
            was_active = False
            descriptor = self.archive.list_recording(recording_id)
            if descriptor is None or descriptor.is_active or descriptor.stop_position <= seen_stop:
                was_active = True  # not stopped in the catalog yet: look again
                continue
            self.commits.append((seen_stop, descriptor.stop_position, time.time_ns()))
            seen_stop = descriptor.stop_position
            self.recording_id = recording_id

    def stop(self) -> None:
        """Stops polling, then matches every committed message to the commit that made it visible."""
        self._stop.set()
        self._thread.join(10)
        if self.error is None and self.commits and not self._matched:
            self._matched = True
            self._match_messages()

    def close(self) -> None:
        self.stop()
        self.archive.close()

    def _match_messages(self) -> None:
        import bisect

        first, last = self.commits[0][0], self.commits[-1][1]
        stops = [stop for _, stop, _ in self.commits]
        with self.archive.replay(self.recording_id, first, last - first, "aeron:ipc", REPLAY_STREAM_ID) as replay:
            for message in replay.messages(idle_timeout=10):
                index = bisect.bisect_left(stops, message.next_position)
                if len(message.payload) == MESSAGE_BYTES:  # not a commit marker (64 bytes)
                    self.samples.add(publish_time_ns(message.payload), self.commits[index][2])
                    self.message_commits.append((struct.unpack_from("<q", message.payload, 8)[0], index))
                else:
                    from aeron_spark.connector.commit_markers import CommitMarker

                    self.commit_batch_ids[index] = CommitMarker.decode(message.payload).batch_id
            if len(self.commit_batch_ids) != len(self.commits):
                progress(f"  watcher: {len(self.commits)} stops seen, {len(self.commit_batch_ids)} markers: "
                         "some stops were not seen separately (two commits between two polls)")


class ForeachLatencyWriter:
    """A ForeachWriter run on the executors: the time each row is processed, minus its publish
    time, appended per partition and epoch to a file under ``directory`` (read by the bench)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.lines = []
        self.name = f"{self.directory}/{epoch_id}-{partition_id}-{os.getpid()}.txt"
        return True

    def process(self, row) -> None:
        seen_ns = time.time_ns()
        self.lines.append(f"{publish_time_ns(bytes(row[0]))} {seen_ns}\n")

    def close(self, error) -> None:
        if self.lines:
            with open(self.name, "a", encoding="ascii") as out:
                out.writelines(self.lines)


class IgnoreRows:
    """The ForeachWriter of the rate shape: touches each row, keeps nothing."""

    def open(self, partition_id: int, epoch_id: int) -> bool:
        return True

    def process(self, row) -> None:
        row[0]

    def close(self, error) -> None:
        pass


def memory_sink_latencies(result: "QueryResult", publisher: "Publisher", samples: LatencySamples) -> None:
    """The memory sink's rows are queryable when its batch's ``addBatch`` ends: that is the batch's
    begin + ``triggerExecution`` − ``commitOffsets`` (Spark logs the commit after ``addBatch``; the
    few steps between make this a little late, an upper bound). A message is in the batch whose
    source offsets (one recording) cover its end position."""
    batches = []
    for record in result.progress_records:
        start, end = _single_position(record["startOffset"]), _single_position(record["endOffset"])
        parts = record["durationMs"]
        if end is None or start is None or end <= start or "triggerExecution" not in parts:
            continue
        visible_ns = record["begin_ns"] + (parts["triggerExecution"] - parts.get("commitOffsets", 0)) * 1_000_000
        batches.append((start, end, visible_ns))
    batches.sort()
    ends = [end for _, end, _ in batches]
    for published_ns, position, _late in list(publisher.messages):
        index = bisect.bisect_left(ends, position)
        if index < len(batches) and batches[index][0] < position:
            samples.add(published_ns, batches[index][2])


def foreach_rows(directory: Path) -> list[tuple[int, int, int]]:
    """(batch id, publish ns, seen ns) of every row ForeachLatencyWriter noted (its files are named
    ``<epoch = batch id>-<partition>-<pid>.txt``)."""
    rows = []
    for path in directory.glob("*.txt"):
        batch_id = int(path.name.split("-", 1)[0])
        for line in path.read_text(encoding="ascii").splitlines():
            published, seen = line.split()
            rows.append((batch_id, int(published), int(seen)))
    return rows


def explain_visible(result: QueryResult, rows: list[tuple[int, int, int]]) -> dict:
    """Where the visible latency of the window's messages goes, per message across batch boundaries:
    ``wait`` = the begin of the batch that read it − its publish time (Spark's progress timestamp: the
    trigger, before latestOffset), ``in batch`` = seen − that begin. A message published before the
    *previous* batch began was there when that batch asked for its latest offset but was not in it:
    it "missed a batch". Prints the tail (messages at or above p95 / p99) and the batches' begin-to-begin
    intervals; returns the figures."""
    window_start, window_end = result.window_ns
    begins: dict[int, int] = {}
    for record in sorted(result.progress_records, key=lambda r: (not r["rows"], r["begin_ns"])):
        begins.setdefault(record["batchId"], record["begin_ns"])  # the run that read rows, not a no-data report
    ordered = sorted(begins.items())
    previous_begin = {batch: ordered[index - 1][1] for index, (batch, _) in enumerate(ordered) if index}
    messages = []
    for batch_id, published, seen in rows:
        if not window_start <= published < window_end or batch_id not in begins:
            continue
        begin = begins[batch_id]
        before = previous_begin.get(batch_id)
        messages.append({"batch": batch_id, "latency_ms": (seen - published) / 1e6, "wait_ms": (begin - published) / 1e6,
                         "in_batch_ms": (seen - begin) / 1e6,
                         "missed_a_batch": before is not None and published < before})
    if not messages:
        return {}
    latencies = sorted(m["latency_ms"] for m in messages)
    intervals = sorted((b - a) / 1e6 for (_, a), (_, b) in zip(ordered, ordered[1:])
                       if window_start <= a < window_end)
    figures: dict = {"messages": len(messages),
                     "missed a batch": sum(m["missed_a_batch"] for m in messages) / len(messages)}
    for label, q in (("p95", 0.95), ("p99", 0.99)):
        cut = latencies[int(q * (len(latencies) - 1))]
        tail = [m for m in messages if m["latency_ms"] >= cut]
        figures[label] = {"latency_ms": cut, "n": len(tail),
                          "mean wait_ms": statistics.mean(m["wait_ms"] for m in tail),
                          "mean in-batch_ms": statistics.mean(m["in_batch_ms"] for m in tail),
                          "missed a batch": sum(m["missed_a_batch"] for m in tail) / len(tail)}
    everyone = {"mean wait_ms": statistics.mean(m["wait_ms"] for m in messages),
                "mean in-batch_ms": statistics.mean(m["in_batch_ms"] for m in messages)}
    figures["all"] = everyone
    figures["rows"] = [[batch_id, published, seen] for batch_id, published, seen in rows
                       if window_start <= published < window_end]  # (batch id, publish ns, seen ns)
    figures["batches"] = result.progress_records
    if intervals:
        figures["batch begin-to-begin_ms"] = {"median": statistics.median(intervals),
                                              "p99": intervals[int(0.99 * (len(intervals) - 1))],
                                              "max": intervals[-1]}
    progress(f"  {result.name}: per message, {len(messages)} in the window: mean wait for its batch to begin "
             f"{everyone['mean wait_ms']:.0f} ms, then in the batch {everyone['mean in-batch_ms']:.0f} ms; "
             f"{100 * figures['missed a batch']:.1f} % missed a batch (published before the previous batch began)")
    for label in ("p95", "p99"):
        tail = figures[label]
        progress(f"    at or above {label} ({tail['latency_ms']:.0f} ms, {tail['n']} messages): wait "
                 f"{tail['mean wait_ms']:.0f} ms, in batch {tail['mean in-batch_ms']:.0f} ms, "
                 f"{100 * tail['missed a batch']:.0f} % missed a batch")
    if intervals:
        spacing = figures["batch begin-to-begin_ms"]
        progress(f"    batches begin every {spacing['median']:.0f} ms (median), p99 {spacing['p99']:.0f} ms, "
                 f"max {spacing['max']:.0f} ms")
    return figures


def read_foreach_latencies(directory: Path, samples: LatencySamples) -> None:
    for path in directory.glob("*.txt"):
        for line in path.read_text(encoding="ascii").splitlines():
            published, seen = line.split()
            samples.add(int(published), int(seen))


def progress_medians(query, window_start_ns: int, window_end_ns: int) -> tuple[int, dict[str, float]]:
    """Batches with rows that began inside the window: their count and the median of each part."""
    parts: dict[str, list[float]] = {}
    batches = 0
    for update in query.recentProgress:
        begun = _iso_to_ns(update.timestamp)
        if not window_start_ns <= begun < window_end_ns or not update.numInputRows:
            continue
        batches += 1
        for key, value in update.durationMs.items():
            parts.setdefault(key, []).append(value)
    summary = {key: statistics.median(values) for key, values in parts.items()}
    durations = sorted(parts.get("triggerExecution", []))
    if durations:
        summary["batch p99"] = durations[min(len(durations) - 1, int(round(0.99 * (len(durations) - 1))))]
        summary["batch max"] = durations[-1]
    return batches, summary


def _iso_to_ns(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)


def parts_line(name: str, batches: int, medians: dict[str, float]) -> str:
    shown = [f"{key} {medians[key]:.0f}" for key in PROGRESS_PARTS if key in medians]
    others = [f"{key} {value:.0f}" for key, value in sorted(medians.items())
              if key not in PROGRESS_PARTS and not key.startswith("batch ")]
    if "batch p99" in medians:
        others.append(f"(triggerExecution p99 {medians['batch p99']:.0f}, max {medians['batch max']:.0f})")
    return f"  {name:<26} {batches:4d} batches, median ms: {', '.join(shown + others)}"


# --- the queries --------------------------------------------------------------------------------


@dataclass
class QueryResult:
    name: str
    batches: int
    medians: dict[str, float]
    latency: dict[str, float] | None = None
    window_ns: tuple[int, int] = (0, 0)
    progress_records: list[dict] = field(default_factory=list)  # every batch: see batch_records


def batch_records(query) -> list[dict]:
    """Every batch Spark reported: id, begin (epoch ns), durationMs parts, rows, the source's offsets."""
    records = []
    for update in query.recentProgress:
        source = update.sources[0] if update.sources else None
        records.append({"batchId": update.batchId, "begin_ns": _iso_to_ns(update.timestamp),
                        "durationMs": dict(update.durationMs), "rows": update.numInputRows,
                        "startOffset": source.startOffset if source is not None else None,
                        "endOffset": source.endOffset if source is not None else None})
    return records


def run_query(name: str, start_query, warmup_s: float, seconds: float,
              samples: LatencySamples | None, collect=None, window=None) -> QueryResult:
    """``window``: a context manager factory held over the measured seconds (a sampling profile)."""
    query = start_query()
    try:
        time.sleep(warmup_s)
        waited = _await_steady(query)
        if waited:
            progress(f"  {name}: the first batches took longer than the warm-up; measuring starts {waited:.1f} s later")
        window_start = time.time_ns()
        cpu_start = spark_cpu_seconds(JVM_PID)
        if samples is not None:
            samples.window_start_ns = window_start
        with window() if window is not None else contextlib.nullcontext():
            time.sleep(seconds)
        window_end = time.time_ns()
        cpu_end = spark_cpu_seconds(JVM_PID)
        if samples is not None:
            samples.window_end_ns = window_end
            time.sleep(min(5.0, max(1.0, seconds / 10)))  # the window's last messages reach the end
        if query.exception() is not None:
            raise RuntimeError(f"{name}: the query failed: {query.exception()}")
    finally:
        query.stop()
    if collect is not None:
        collect()
    batches, medians = progress_medians(query, window_start, window_end)
    result = QueryResult(name, batches, medians, samples.summary() if samples is not None else None,
                         (window_start, window_end), batch_records(query))
    progress(parts_line(name, batches, medians))
    if batches and JVM_PID is not None:
        jvm_s, python_s = cpu_used(cpu_start, cpu_end, JVM_PID)
        jvm_ms, python_ms = jvm_s * 1000 / batches, python_s * 1000 / batches
        medians["cpu per batch: JVM"], medians["cpu per batch: Python"] = jvm_ms, python_ms
        progress(f"  {name:<26} CPU per batch in the window: Spark's JVM {jvm_ms:.0f} ms, "
                 f"its Python processes {python_ms:.0f} ms")
    if result.latency is not None:
        progress(summary_line(name, result.latency))
    return result


def _single_position(offset_json: str | None) -> int | None:
    """The position in a one-recording source offset ``{"<id>": position}``."""
    if not offset_json:
        return None
    positions = json.loads(offset_json)  # "null" before the first batch
    return next(iter(positions.values())) if isinstance(positions, dict) and len(positions) == 1 else None


def explain_committed(result: QueryResult, watcher: SinkWatcher, publisher: Publisher) -> dict:
    """Per batch of the committed query: Spark's progress, the watcher's detection of its commit, and
    where its messages' latency went: waiting for the batch that read them to begin, then that batch
    up to the commit being seen. Prints the batches holding the slowest messages; returns it all."""
    window_start, window_end = result.window_ns
    by_batch = {record["batchId"]: record for record in result.progress_records}
    commits = [{"start": start, "stop": stop, "seen_ns": seen, "batchId": watcher.commit_batch_ids.get(index)}
               for index, (start, stop, seen) in enumerate(watcher.commits)]
    messages = []
    for sequence, index in watcher.message_commits:
        if sequence >= len(publisher.messages):
            continue
        published, position, late_ms = publisher.messages[sequence]
        if not window_start <= published < window_end:
            continue
        commit = commits[index]
        batch = by_batch.get(commit["batchId"])
        messages.append({"seq": sequence, "published_ns": published, "position": position, "late_ms": late_ms,
                         "commit": index, "batchId": commit["batchId"],
                         "latency_ms": (commit["seen_ns"] - published) / 1e6,
                         "wait_ms": (batch["begin_ns"] - published) / 1e6 if batch else None})
    if not messages:
        return {"batches": result.progress_records, "commits": commits, "messages": []}
    latencies = sorted(m["latency_ms"] for m in messages)
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    per_batch: dict[int, list[dict]] = {}
    for message in messages:
        per_batch.setdefault(message["batchId"], []).append(message)
    seen_by_batch = {c["batchId"]: c["seen_ns"] for c in commits}
    rows = []
    previous_end = None
    for record in sorted(result.progress_records, key=lambda r: r["batchId"]):
        parts = record["durationMs"]
        begin = record["begin_ns"]
        end = begin + parts.get("triggerExecution", 0) * 1_000_000
        own = per_batch.get(record["batchId"], [])
        seen = seen_by_batch.get(record["batchId"])
        rows.append({"batchId": record["batchId"], "begin_s": (begin - window_start) / 1e9,
                     "gap_ms": (begin - previous_end) / 1e6 if previous_end is not None else None,
                     **{k: parts.get(k) for k in PROGRESS_PARTS}, "rows": record["rows"],
                     "messages": len(own),
                     "max_latency_ms": max((m["latency_ms"] for m in own), default=None),
                     "max_wait_ms": max((m["wait_ms"] for m in own if m["wait_ms"] is not None), default=None),
                     "seen_after_begin_ms": (seen - begin) / 1e6 if seen else None,
                     "seen_after_end_ms": (seen - end) / 1e6 if seen else None})
        previous_end = end
    slow = [m for m in messages if m["latency_ms"] >= p95]
    progress(f"  committed, per batch: {len(messages)} messages in the window, p95 {p95:.0f} ms; the {len(slow)} at "
             f"or above it: mean wait for their batch to begin {statistics.mean(m['wait_ms'] or 0 for m in slow):.0f} ms, "
             f"then to the commit seen {statistics.mean(m['latency_ms'] - (m['wait_ms'] or 0) for m in slow):.0f} ms; "
             f"in {len({m['batchId'] for m in slow})} batches; publisher late > 1 interval on "
             f"{sum(1 for m in messages if m['late_ms'] > publisher.interval_s * 1000)} of the window's messages")
    worst = sorted((r for r in rows if r["max_latency_ms"] is not None), key=lambda r: -r["max_latency_ms"])[:12]
    progress("    batch  begin s  gap  latestOffset planning walCommit addBatch commitOffsets trigger  rows  "
             "max wait  seen-begin seen-end  max latency")
    for r in sorted(worst, key=lambda r: r["batchId"]):
        progress(f"    {r['batchId']:5d} {r['begin_s']:7.2f} {r['gap_ms'] or 0:5.0f} {r['latestOffset'] or 0:8.0f} "
                 f"{r['queryPlanning'] or 0:8.0f} {r['walCommit'] or 0:8.0f} {r['addBatch'] or 0:8.0f} "
                 f"{r['commitOffsets'] or 0:8.0f} {r['triggerExecution'] or 0:8.0f} {r['rows']:5d} "
                 f"{r['max_wait_ms'] or 0:8.0f} {r['seen_after_begin_ms'] or 0:9.0f} {r['seen_after_end_ms'] or 0:8.0f} "
                 f"{r['max_latency_ms']:9.0f}")
    return {"window_ns": result.window_ns, "batches": rows, "progress": result.progress_records, "commits": commits,
            "messages": messages}


def spark_cpu_seconds(jvm_pid: int | None) -> dict[int, float]:
    """CPU seconds (user + system) so far, per process: Spark's JVM and every process below it (the
    daemons' reused workers, the source runner, the commit workers), from /proc."""
    if jvm_pid is None:
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    found = {jvm_pid: cpu[jvm_pid]} if jvm_pid in cpu else {}
    for pid in cpu:
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1, jvm_pid):
            ancestor = parents.get(ancestor)
        if ancestor == jvm_pid:
            found[pid] = cpu[pid]
    return found


def cpu_used(start: dict[int, float], end: dict[int, float], jvm_pid: int) -> tuple[float, float]:
    """(JVM, processes below it) CPU seconds between two snapshots; a process that ended meanwhile
    (e.g. the previous query's source runner) is left out, one that began counts from zero."""
    jvm = end.get(jvm_pid, 0.0) - start.get(jvm_pid, 0.0)
    below = sum(used - start.get(pid, 0.0) for pid, used in end.items() if pid != jvm_pid)
    return jvm, below


JVM_PID: int | None = None  # set once the session is up; run_query samples its CPU


STEADY_AFTER_BATCH = 2  # batch 0 starts the Python workers, batch 1 reads what was published meanwhile


def _await_steady(query, timeout_s: float = 300.0) -> float:
    """Waits (after the warm-up) until batch ``STEADY_AFTER_BATCH`` has completed, so the measured
    window never holds the query's start-up: its first batch starts every Python worker (11.9 s at
    load 4 in session 6) and the next one reads the backlog published meanwhile. Returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        last = query.lastProgress
        if (last is not None and last.batchId >= STEADY_AFTER_BATCH) or query.exception() is not None:
            break
        time.sleep(0.05)
    return time.monotonic() - started if time.monotonic() - started > 0.1 else 0.0


def aeron_stream(spark, archive_dir: Path, checkpoint: Path):
    return (spark.readStream.format("aeron-archive").option("archive.dir", str(archive_dir))
            .option("channel", SOURCE_CHANNEL).option("streamId", str(SOURCE_STREAM_ID))
            .option("startingPositions", "latest").option("checkpointLocation", str(checkpoint)).load())


def with_options(writer, trigger_ms: int | None, query_options: dict[str, str], async_progress: bool = False):
    if async_progress:
        writer = writer.option("asyncProgressTrackingEnabled", "true")
    for key, value in query_options.items():
        writer = writer.option(key, value)
    return writer.trigger(processingTime=f"{trigger_ms} milliseconds") if trigger_ms else writer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per query (default 60)")
    parser.add_argument("--warmup", type=float, default=10.0, help="unmeasured seconds per query first (default 10)")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="publish interval (default 5 ms)")
    parser.add_argument("--rate", type=int, default=200, help="rows/s of the rate source for the floor (default 200)")
    parser.add_argument("--trigger-ms", type=int, default=None,
                        help="processingTime trigger for every query (default: the default trigger)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark session config (repeatable)")
    parser.add_argument("--query-option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra writeStream option for every query (repeatable)")
    parser.add_argument("--visible-sink", choices=("foreach", "foreachBatch", "memory"), default="foreach",
                        help="how the visible query sees rows (default foreach, see above)")
    parser.add_argument("--async-progress", action="store_true",
                        help="asyncProgressTrackingEnabled on the queries whose sink allows it (see above)")
    parser.add_argument("--only", choices=("visible", "committed", "floor"), action="append",
                        help="run only these parts (repeatable; default all)")
    parser.add_argument("--per-batch", metavar="FILE",
                        help="write every query's batches (Spark's progress) and, for the committed query, each "
                             "commit and message with where its latency went, as JSON to FILE")
    args = parser.parse_args(argv)
    parts = set(args.only or ("visible", "committed", "floor"))
    exit_on_sigterm()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    config = dict(item.split("=", 1) for item in args.conf)
    config.setdefault("spark.sql.streaming.numRecentProgressUpdates", "100000")
    config.setdefault("spark.sql.shuffle.partitions", "1")
    query_options = dict(item.split("=", 1) for item in args.query_option)
    work = Path(tempfile.mkdtemp(prefix="live-tail-latency-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    timings_file = os.environ.get("AERON_SPARK_TIMINGS")
    progress(f"load before: {os.getloadavg()}; work dir {work}; Spark config {config}; query options {query_options}")
    results: list[QueryResult] = []
    try:
        with running_sidecar(work / "archive") as _sidecar, spark_processes_stopped():
            spark = local_spark("live-tail-latency", **config)
            global JVM_PID
            JVM_PID = spark_jvm_pid(spark)
            try:
                results = run_all(spark, work, args, parts, query_options, timings_file)
            finally:
                stop_session(spark)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results, args)
    progress(f"load after: {os.getloadavg()}")
    return 0


def run_all(spark, work: Path, args, parts: set[str], query_options: dict[str, str],
            timings_file: str | None) -> list[QueryResult]:
    from aeron_spark.connector import register

    register(spark)
    archive_dir = work / "archive"
    results = []
    per_batch: dict[str, dict] = {}
    publisher = Publisher(archive_dir, args.interval_ms / 1000)
    publisher.start()
    try:
        if "visible" in parts:
            samples = LatencySamples()
            seen_dir = work / "visible-rows"
            seen_dir.mkdir()

            def on_batch(dataframe, _batch_id) -> None:
                rows = dataframe.select("payload").collect()
                seen_ns = time.time_ns()
                for row in rows:
                    samples.add(publish_time_ns(bytes(row[0])), seen_ns)

            def start_visible():
                stream = aeron_stream(spark, archive_dir, work / "chk-visible").select("payload").writeStream
                if args.visible_sink == "foreach":
                    writer = stream.foreach(ForeachLatencyWriter(str(seen_dir)))
                elif args.visible_sink == "memory":
                    writer = stream.format("memory").queryName("visible_tail").outputMode("append")
                else:
                    writer = stream.foreachBatch(on_batch)
                writer = writer.option("checkpointLocation", str(work / "chk-visible"))
                return with_options(writer, args.trigger_ms, query_options,
                                    args.async_progress and args.visible_sink in ASYNC_PROGRESS_SINKS).start()

            mark = _timings_mark(timings_file)
            collect = (lambda: None) if args.visible_sink == "memory" else \
                (lambda: read_foreach_latencies(seen_dir, samples))
            results.append(run_query(f"visible ({args.visible_sink})", start_visible, args.warmup, args.seconds,
                                     samples, collect=collect))
            if args.visible_sink == "memory":  # known only from the batches' progress, after the query
                memory_sink_latencies(results[-1], publisher, samples)
                results[-1].latency = samples.summary()
                progress(summary_line(results[-1].name, results[-1].latency))
            _timings_report(timings_file, mark)
            batch_timeline(results[-1], _timing_records(timings_file, mark))
        if "committed" in parts:
            samples = LatencySamples()
            watcher = SinkWatcher(archive_dir, samples)

            def start_committed():
                writer = (aeron_stream(spark, archive_dir, work / "chk-sink").select("payload").writeStream
                          .format("aeron-archive").option("archive.dir", str(archive_dir))
                          .option("channel", "aeron:ipc").option("streamId", str(SINK_STREAM_ID))
                          .option("sink.id", SINK_ID).option("checkpointLocation", str(work / "chk-sink")))
                return with_options(writer, args.trigger_ms, query_options).start()

            mark = _timings_mark(timings_file)
            try:
                results.append(run_query("committed (aeron-archive sink)", start_committed, args.warmup,
                                         args.seconds, samples, collect=watcher.stop))
            finally:
                watcher.close()
            if watcher.error is not None:
                raise RuntimeError(f"the sink watcher failed: {watcher.error!r}") from watcher.error
            per_batch["committed"] = explain_committed(results[-1], watcher, publisher)
            _timings_report(timings_file, mark)
            per_batch["committed"]["timeline"] = batch_timeline(results[-1], _timing_records(timings_file, mark))
        if "floor" in parts:  # the publisher and the recording go on: the same background load
            def rate():
                return (spark.readStream.format("rate").option("rowsPerSecond", str(args.rate))
                        .option("numPartitions", "1").load())

            def start_noop(async_progress: bool, name: str):
                writer = rate().writeStream.format("noop").option("checkpointLocation", str(work / name))
                return with_options(writer, args.trigger_ms, query_options, async_progress).start()

            def start_rate_shape():
                if args.visible_sink == "foreach":
                    writer = rate().writeStream.foreach(IgnoreRows())
                elif args.visible_sink == "memory":
                    writer = rate().writeStream.format("memory").queryName("rate_shape").outputMode("append")
                else:
                    writer = rate().writeStream.foreachBatch(lambda df, _id: df.select("value").collect())
                return with_options(writer.option("checkpointLocation", str(work / "chk-rate-shape")), args.trigger_ms,
                                    query_options, args.async_progress and args.visible_sink in ASYNC_PROGRESS_SINKS).start()

            results.append(run_query("floor: rate -> noop", lambda: start_noop(False, "chk-noop"), args.warmup,
                                     args.seconds, None))
            if args.async_progress:
                results.append(run_query("floor-async: rate -> noop", lambda: start_noop(True, "chk-noop-async"),
                                         args.warmup, args.seconds, None))
            results.append(run_query(f"rate -> {args.visible_sink}", start_rate_shape, args.warmup, args.seconds, None))
        progress(f"publisher: {publisher.sent} messages sent, {publisher.late} late by more than one interval")
    finally:
        publisher.close()
    if args.per_batch:
        for result in results:
            per_batch.setdefault(result.name, {"window_ns": result.window_ns, "progress": result.progress_records})
        Path(args.per_batch).write_text(json.dumps(per_batch))
        progress(f"per-batch records: {args.per_batch}")
    return results


def _timing_records(path: str | None, mark: int) -> list[dict]:
    if not path or not os.path.exists(path):
        return []
    with open(path, "rb") as lines:
        lines.seek(mark)
        return [json.loads(line) for line in lines]


def batch_timeline(result: QueryResult, records: list[dict]) -> dict[str, float]:
    """Medians over the window's batches of where addBatch's time goes, from the connector's step
    timings placed on Spark's timeline (each record's start and total): Spark's work before the first
    task, the tasks, the gap from the tasks to the commit call, the commit, and what follows it."""
    window_start, window_end = result.window_ns
    gaps: dict[str, list[float]] = {}
    for batch in result.progress_records:
        parts = batch["durationMs"]
        begin = batch["begin_ns"] / 1e9
        if not window_start <= batch["begin_ns"] < window_end or not batch["rows"]:
            continue
        add_start = begin + sum(parts.get(k, 0) for k in ("latestOffset", "walCommit", "getBatch",
                                                          "queryPlanning")) / 1000
        add_end = add_start + parts.get("addBatch", 0) / 1000
        inside = [r for r in records if begin <= r.get("at", 0) <= add_end + 0.05]
        spans = {}
        for what in ("source.task", "sink.task", "sink.commit call"):
            found = [r for r in inside if r["what"] == what]
            if found:
                spans[what] = (min(r["at"] for r in found), max(r["at"] + r["ms"]["total"] / 1000 for r in found))
        if "source.task" not in spans:
            continue
        marks = {"addBatch start -> first task starts": spans["source.task"][0] - add_start,
                 "source task": spans["source.task"][1] - spans["source.task"][0]}
        if "sink.commit call" in spans:
            tasks_end = spans["sink.task"][1] if "sink.task" in spans else spans["source.task"][1]
            marks["sink task after the source's read"] = tasks_end - spans["source.task"][1]
            marks["tasks end -> commit call starts"] = spans["sink.commit call"][0] - tasks_end
            marks["commit call (our commit)"] = spans["sink.commit call"][1] - spans["sink.commit call"][0]
            marks["commit call ends -> addBatch ends"] = add_end - spans["sink.commit call"][1]
        else:
            marks["task ends -> addBatch ends"] = add_end - spans["source.task"][1]
        for key, value in marks.items():
            gaps.setdefault(key, []).append(value * 1000)
    summary = {key: statistics.median(values) for key, values in gaps.items()}
    for key, value in summary.items():
        progress(f"    timeline: {key:<40} median {value:7.1f} ms  (n {len(gaps[key])})")
    return summary


def _timings_mark(path: str | None) -> int:
    return os.path.getsize(path) if path and os.path.exists(path) else 0


def _timings_report(path: str | None, mark: int) -> None:
    """Medians of the connector's step timings appended since ``mark`` (connector/step_timings.py)."""
    if not path or not os.path.exists(path):
        return
    steps: dict[str, list[float]] = {}
    with open(path, "rb") as lines:
        lines.seek(mark)
        for line in lines:
            record = json.loads(line)
            for key, value in record["ms"].items():
                steps.setdefault(f"{record['what']}.{key}", []).append(value)
    for key, values in sorted(steps.items()):
        values.sort()
        progress(f"    {key:<40} n {len(values):5d}  median {statistics.median(values):7.2f} ms  "
                 f"p90 {values[int(0.9 * (len(values) - 1))]:7.2f} ms")


def report(results: list[QueryResult], args) -> None:
    by_name = {r.name.split(" ")[0].rstrip(":"): r for r in results}
    print("\nLive-tail latency: publish every %.1f ms, %s trigger, %.0f s measured per query" % (
        args.interval_ms, f"{args.trigger_ms} ms" if args.trigger_ms else "default", args.seconds))
    for result in results:
        if result.latency is not None:
            print(summary_line(result.name, result.latency))
    for result in results:
        print(parts_line(result.name, result.batches, result.medians))
    floor = by_name.get("floor")
    if floor is None or "triggerExecution" not in floor.medians:
        return
    floor_ms = floor.medians["triggerExecution"]
    print(f"  Spark's floor (rate -> noop, median triggerExecution): {floor_ms:.0f} ms")
    floor_async = by_name.get("floor-async")
    if floor_async is not None and "triggerExecution" in floor_async.medians:
        print(f"  Spark's floor with async progress tracking: {floor_async.medians['triggerExecution']:.0f} ms")
    for key, target in (("visible", 2.5), ("committed", 3.0)):
        result = by_name.get(key)
        if result is not None and result.latency:
            own_floor = floor_ms
            if key == "visible" and floor_async is not None and args.visible_sink in ASYNC_PROGRESS_SINKS:
                own_floor = floor_async.medians.get("triggerExecution", floor_ms)
            ratio = result.latency["p99"] / own_floor
            print(f"  {key} p99 / floor = {ratio:.2f}x (target <= {target}x): {'met' if ratio <= target else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
