"""The chaos pipeline's query, in its own process: a live ``readStream`` of one channel and stream
(discovery of the recordings that start later, from the earliest position) written by the
exactly-once sink (``writeStream.format("aeron-archive")``) into a sink recording of the same
archive, on a processing-time trigger.

    python -m tests.support.sink_tail_query_process --control-channel CH --channel FRAGMENT
        --stream-id N --sink-channel CH --sink-stream-id N --sink-id ID --checkpoint DIR
        --stop-file FILE [--master local[2]] [--trigger-ms MS] [--option NAME=VALUE ...]

Each sink row is the source row's ``payload`` prefixed with its recording id and position (two
big-endian int64: ``source_key_of``), so the sink recording alone says which recorded message
each row is (the chaos test's exactly-once check). The archive is reached by its control
channel only (the query runs on the media driver of ``AERON_DIR``). It runs until
``--stop-file`` exists (``QUERY STOPPED``) or the query fails (``QUERY FAILED <error>``, exit
code 3). Lines on stdout (flushed), times in epoch seconds::

    STARTED at=<t>                                     query.start() returned
    PROGRESS batch=<id> rows=<n> start=<t> end=<t> ms: <durationMs key=value ...>
    QUERY STOPPED / QUERY FAILED <error>

``SinkTailQuery`` runs it in a session of its own and kills its whole process tree by PID.
"""

from __future__ import annotations

import argparse
import datetime
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.process_tree import descendant_pids, kill_tree
from tests.support.query_watch import watch_query

REPOSITORY = Path(__file__).resolve().parents[2]
SOURCE_KEY = struct.Struct(">qq")  # recording id, position: the prefix of every sink row's payload


def source_key_of(sink_payload: bytes) -> tuple[int, int, bytes]:
    """(source recording id, source position, source payload) of one sink row's payload."""
    recording_id, position = SOURCE_KEY.unpack_from(sink_payload)
    return recording_id, position, sink_payload[SOURCE_KEY.size:]


def _say(line: str) -> None:
    print(line, flush=True)


def _epoch_of(timestamp: str) -> float:
    """Spark's progress timestamp (ISO-8601, UTC, ``Z``) as epoch seconds."""
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control-channel", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--stream-id", required=True)
    parser.add_argument("--sink-channel", required=True)
    parser.add_argument("--sink-stream-id", required=True)
    parser.add_argument("--sink-id", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--trigger-ms", type=int, default=500)
    parser.add_argument("--spark-log-level", default="ERROR")
    parser.add_argument("--event-log", default=None, help="a directory for Spark's event log (job/stage/task times)")
    parser.add_argument("--option", action="append", default=[], help="NAME=VALUE, a source and sink option")
    args = parser.parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(args.master).appName("sink-tail-query-process")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.sql.catalogImplementation", "in-memory")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
    if args.event_log:
        Path(args.event_log).mkdir(parents=True, exist_ok=True)
        builder = (builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", args.event_log)
                   .config("spark.eventLog.compress", "false"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(args.spark_log_level)
    from aeron_spark.connector import register
    register(spark)  # explicit: the lookup of pyspark_* modules on sys.path can miss it on a loaded host
    extra = dict(option.partition("=")[::2] for option in args.option)
    archive = {"archive.controlChannel": args.control_channel, **extra}
    query = (spark.readStream.format("aeron-archive").options(**archive)
             .option("channel", args.channel).option("streamId", args.stream_id)
             .option("startingPositions", "earliest").option("discoveryIntervalMs", "200").load()
             .selectExpr("concat(unhex(lpad(hex(recording_id), 16, '0')), unhex(lpad(hex(position), 16, '0')), "
                         "payload) AS payload")
             .writeStream.format("aeron-archive").options(**archive)
             .option("channel", args.sink_channel).option("streamId", args.sink_stream_id)
             .option("sink.id", args.sink_id).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=f"{args.trigger_ms} milliseconds").start())
    _say(f"STARTED at={time.time():.3f}")

    def describe(progress: Any) -> str:
        durations = progress.durationMs
        start = _epoch_of(progress.timestamp)
        end = start + durations.get("triggerExecution", 0) / 1000.0
        timings = " ".join(f"{key}={value}" for key, value in sorted(durations.items()))
        return f"batch={progress.batchId} rows={progress.numInputRows} start={start:.3f} end={end:.3f} ms: {timings}"

    return watch_query(spark, query, Path(args.stop_file), _say, describe)


# --- the test's side ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    batch_id: int
    rows: int
    start: float  # epoch seconds
    end: float
    ms: dict[str, int]


def parse_progress(line: str) -> Progress:
    head, _, timings = line.partition(" ms: ")
    fields = dict(token.partition("=")[::2] for token in head.split()[1:])
    ms = {key: int(value) for key, value in (token.partition("=")[::2] for token in timings.split())}
    return Progress(int(fields["batch"]), int(fields["rows"]), float(fields["start"]), float(fields["end"]), ms)


class SinkTailQuery:
    """This module as a process in a session of its own (``command_prefix`` runs it elsewhere, e.g.
    in a namespace), its stdout collected with arrival times; killed by PID, with its whole tree."""

    def __init__(self, args: Sequence[str], env: dict[str, str], command_prefix: Sequence[str] = ()) -> None:
        command = [*command_prefix, sys.executable, "-m", "tests.support.sink_tail_query_process", *args]
        self.launched_at = time.time()
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True,
                                        env={**env, "PYSPARK_PYTHON": sys.executable})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def output(self, last: int = 60) -> str:
        return "\n".join(line for _, line in self.lines[-last:])

    def progress(self) -> list[Progress]:
        return [parse_progress(line) for _, line in list(self.lines) if line.startswith("PROGRESS ")]

    def started_at(self) -> float | None:
        return next((float(line.split("=")[1]) for _, line in list(self.lines) if line.startswith("STARTED ")), None)

    def failure(self) -> str | None:
        return next((line for _, line in list(self.lines) if line.startswith("QUERY FAILED")), None)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def python_workers(self) -> list[int]:
        """PIDs of the query's Python workers: the Python processes below its JVM (pyspark's daemon's
        forks, the streaming source's and the commit's driver-side workers), not the daemon itself."""
        workers = []
        for pid in descendant_pids(self.process.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as file:
                    command = file.read().split(b"\0")
                with open(f"/proc/{pid}/stat") as stat:
                    parent = int(stat.read().rpartition(")")[2].split()[1])
                with open(f"/proc/{parent}/cmdline", "rb") as file:
                    parent_command = file.read()
            except (OSError, ValueError, IndexError):
                continue
            if not command or b"python" not in command[0]:
                continue
            daemon = b"pyspark.daemon" in b" ".join(command)
            forked_by_daemon = b"pyspark.daemon" in parent_command
            if forked_by_daemon or (not daemon and b"java" in parent_command):
                workers.append(pid)
        return workers

    def wait_exit(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the query process did not end within {timeout} s:\n" + self.output()) from None
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL the query's whole process tree (driver, JVM, Python workers) by PID, and reap it."""
        if self.process.poll() is None:
            kill_tree(self.process.pid)
        self.process.wait(30)
        self._reader.join(10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
