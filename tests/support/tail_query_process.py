"""A streaming query that tails a live stream, in its own process, for the survival tests that kill
or cut off the archive under it: aeron-archive source (``channel`` + ``streamId``, discovery of the
recordings that start later, from the earliest position) -> ``foreachBatch`` writing each
micro-batch's rows to ``<out>/batch-<batchId>.jsonl`` (written whole, then renamed: a replayed batch
overwrites its own file with the same rows, so the files hold every batch exactly once).

    python -m tests.support.tail_query_process --control-channel CH --channel FRAGMENT --stream-id N
        --checkpoint DIR --out DIR --stop-file FILE [--master local[2]] [--option NAME=VALUE ...]

The archive is reached by its control channel only (the query runs on its own media driver:
``AERON_DIR`` in its environment). It runs until ``--stop-file`` exists (then stops the query and
prints ``QUERY STOPPED``) or the query fails (``QUERY FAILED <error>``, exit code 3). Lines on
stdout (flushed)::

    PROGRESS batch=<batchId> rows=<numInputRows>     once per finished micro-batch
    QUERY STOPPED / QUERY FAILED <error>

``TailQuery`` runs it and kills its whole process tree by PID (tests/support/process_tree.py);
``TailRun`` restarts it from its checkpoint after a failure; ``delivered_rows`` reads what it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.process_tree import kill_tree
from tests.support.query_watch import watch_query

REPOSITORY = Path(__file__).resolve().parents[2]
MAX_QUERY_RUNS = 4
_SPARK_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ ")  # log4j2's default layout in Spark


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control-channel", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--stream-id", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--trigger-ms", type=int, default=500)
    parser.add_argument("--spark-log-level", default="ERROR", help="WARN shows each lost task and its error")
    parser.add_argument("--option", action="append", default=[], help="NAME=VALUE, a source option")
    args = parser.parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("tail-query-process")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.sql.catalogImplementation", "in-memory")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel(args.spark_log_level)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def write_batch(frame, batch_id: int) -> None:
        rows = frame.select("recording_id", "position", "payload").collect()
        temporary = out / f".batch-{batch_id:08d}.tmp"
        with temporary.open("w") as file:
            for row in rows:
                file.write(json.dumps([row.recording_id, row.position, bytes(row.payload).hex()]) + "\n")
        os.replace(temporary, out / f"batch-{batch_id:08d}.jsonl")

    reader = (spark.readStream.format("aeron-archive").option("archive.controlChannel", args.control_channel)
              .option("channel", args.channel).option("streamId", args.stream_id)
              .option("startingPositions", "earliest").option("discoveryIntervalMs", "200"))
    for option in args.option:
        name, _, value = option.partition("=")
        reader = reader.option(name, value)
    query = (reader.load().writeStream.foreachBatch(write_batch).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=f"{args.trigger_ms} milliseconds").start())
    return watch_query(spark, query, Path(args.stop_file), _say,
                       lambda progress: f"batch={progress.batchId} rows={progress.numInputRows}")


# --- the test's side ------------------------------------------------------------------------------


class TailQuery:
    """This module as a process in its own session, its stdout collected by a thread."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        command = [sys.executable, "-m", "tests.support.tail_query_process", *args]
        self.lines: list[str] = []
        self.process = subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True,
                                        env={**env, "PYSPARK_PYTHON": sys.executable})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self, last: int = 60) -> str:
        return "\n".join(self.lines[-last:])

    def finished_batches(self) -> list[int]:
        return [int(line.split()[1].partition("=")[2]) for line in self.lines if line.startswith("PROGRESS ")]

    def failure(self) -> str | None:
        return next((line for line in self.lines if line.startswith("QUERY FAILED")), None)

    def lost_tasks(self) -> list[str]:
        """Each task failure Spark logged (``--spark-log-level WARN``): its WARN line and the
        traceback after it, up to the next log line."""
        blocks: list[str] = []
        current: list[str] | None = None
        for line in self.lines:
            if _SPARK_LOG_LINE.match(line) or line.startswith(("PROGRESS ", "QUERY ")):
                if current is not None:
                    blocks.append("\n".join(current))
                current = [line] if "Lost task" in line else None
            elif current is not None and len(current) < 300:
                current.append(line)
        if current is not None:
            blocks.append("\n".join(current))
        return blocks

    def reconnects(self) -> list[str]:
        """The source's warnings that a driver-side call was made again on a fresh connection."""
        return [line for line in self.lines if "once more on a new archive connection" in line]

    @property
    def running(self) -> bool:
        return self.process.poll() is None

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


class TailRun:
    """The tail query over one checkpoint and output directory, on the media driver at
    ``driver_host``; restarted from its checkpoint after a failure (as a supervisor would), each
    failure kept in ``failures``; at most MAX_QUERY_RUNS runs."""

    def __init__(self, tmp: Path, control_channel: str, channel_fragment: str, stream_id: int, driver_host: Path,
                 *extra: str) -> None:
        self.out = tmp / "out"
        self.stop_file = tmp / "stop-query"
        self.args = ("--control-channel", control_channel, "--channel", channel_fragment, "--stream-id",
                     str(stream_id), "--checkpoint", str(tmp / "checkpoint"), "--out", str(self.out),
                     "--stop-file", str(self.stop_file), *extra)
        self.env = {**os.environ, "AERON_DIR": str(driver_host)}  # the Spark host's media driver
        self.queries: list[TailQuery] = []
        self.failures: list[str] = []

    @property
    def current(self) -> TailQuery:
        return self.queries[-1]

    def start(self) -> TailQuery:
        self.queries.append(TailQuery(*self.args, env=self.env))
        return self.current

    def restart_if_failed(self) -> None:
        if self.current.running:
            return
        self.current.wait_exit(30)
        failure = self.current.failure()
        assert failure is not None, "the query ended without failing:\n" + self.current.output()
        self.failures.append(failure)
        assert len(self.queries) < MAX_QUERY_RUNS, "the query failed again and again:\n" + "\n".join(self.failures)
        self.start()

    def wait_for(self, condition, what: str, timeout: float, restart: bool = True) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if restart:
                self.restart_if_failed()
            elif not self.current.running and not condition():
                raise AssertionError(f"the query ended before {what}:\n" + self.current.output())
            assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}:\n" + \
                self.current.output()
            time.sleep(0.2)

    def stop(self) -> None:
        self.stop_file.touch()
        if self.current.running:
            code = self.current.wait_exit(120)
            assert code == 0, self.current.output()

    def kill_all(self) -> None:
        for query in self.queries:
            query.kill()


def delivered_rows(out: Path) -> list[tuple[int, int, bytes]]:
    """Every row the query's batches delivered, as (recording id, position, payload), batch by batch."""
    rows: list[tuple[int, int, bytes]] = []
    for path in sorted(out.glob("batch-*.jsonl")):
        for line in path.read_text().splitlines():
            recording_id, position, payload = json.loads(line)
            rows.append((recording_id, position, bytes.fromhex(payload)))
    return rows


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
