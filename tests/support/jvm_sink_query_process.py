"""A streaming query INTO format("aeron-archive-jvm") (the JVM sink) in a process of its own: its
own Spark session with our jar and aeron-all on ``spark.jars``, for the sink's tests, the real-time
demo and the real-time latency bench.

    python -m tests.support.jvm_sink_query_process '<json settings>'

Settings: ``jars`` (spark.jars); ``source``: ``{"format": "aeron-archive-jvm" | "rate" | "kafka" ...,
"options": {...}}``; ``select``: selectExpr expressions making the sink's input (default
``["payload AS value"]``); ``sink``: the sink's options; ``trigger`` (``{"realTime": "5 seconds"}``,
``{"processingTime": "500 milliseconds"}``); ``checkpoint``; ``stop_file``; optional ``master``
(default local[2]), ``conf`` (more Spark settings), ``sink_format`` (default aeron-archive-jvm),
``log_level``; or ``attempts`` instead of ``select``/``sink`` (a list of {select, sink}: each started in
turn, one ``ATTEMPT <i> FAILED <error>`` / ``ATTEMPT <i> RAN`` line each, for bad-input checks in one
Spark session). Real-time mode needs ``spark.sql.streaming.realTimeMode.allowlistCheck=false`` in
``conf`` for our sink (Spark 4.3 allowlists only its own sinks). Lines on stdout (flushed)::

    STARTED                                                              the query started
    PROGRESS <json: batchId, numInputRows, numOutputRows (sink),         once per finished batch
                   timestamp (trigger start), durationMs>
    QUERY STOPPED / QUERY FAILED <error>                                 at the end

It runs until ``stop_file`` exists or the query fails (exit code 3). ``JvmSinkQuery`` runs it and
kills its whole process tree by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.jvm_query_process import jvm_query_session
from tests.support.process_tree import kill_tree
from tests.support.query_watch import failure_line, watch_query

REPOSITORY = Path(__file__).resolve().parents[2]


def _say(line: str) -> None:
    print(line, flush=True)


def main(settings: dict[str, Any]) -> int:
    spark = jvm_query_session(settings, "jvm-sink-query-process")
    if "attempts" in settings:
        return _attempt_each(spark, settings)
    try:
        query = _writer(spark, settings, settings["select"], settings["sink"], settings["checkpoint"]).start()
    except Exception as error:  # noqa: BLE001 - the test reads the message
        _say(failure_line(error))
        return 3
    _say("STARTED")
    return watch_query(spark, query, Path(settings["stop_file"]), _say, lambda progress: json.dumps({
        "batchId": progress.batchId, "numInputRows": progress.numInputRows,
        "numOutputRows": progress.sink.numOutputRows, "timestamp": progress.timestamp,
        "durationMs": dict(progress.durationMs or {})}))


def _writer(spark: Any, settings: dict[str, Any], select: list[str], sink: dict[str, str], checkpoint: str) -> Any:
    source = settings["source"]
    reader = spark.readStream.format(source["format"])
    for name, value in source.get("options", {}).items():
        reader = reader.option(name, value)
    frame = reader.load().selectExpr(*select)
    writer = frame.writeStream.format(settings.get("sink_format", "aeron-archive-jvm")).outputMode("update")
    for name, value in sink.items():
        writer = writer.option(name, value)
    return writer.option("checkpointLocation", checkpoint).trigger(**settings["trigger"])


def _attempt_each(spark: Any, settings: dict[str, Any]) -> int:
    """``attempts``: a list of {select, sink}; each query is started and runs until its first batch
    ended or it failed; one line each: ``ATTEMPT <i> FAILED <error>`` or ``ATTEMPT <i> RAN``."""
    for index, attempt in enumerate(settings["attempts"]):
        try:
            query = _writer(spark, settings, attempt["select"], attempt["sink"],
                            f"{settings['checkpoint']}-{index}").start()
            while query.isActive and not query.recentProgress:
                time.sleep(0.1)
            problem: Any = query.exception()
            query.stop()
        except Exception as failure:  # noqa: BLE001 - the test reads the message
            problem = failure
        outcome = "RAN" if problem is None else f"FAILED {str(problem)[:3000]}".replace("\n", " | ")
        _say(f"ATTEMPT {index} {outcome}")
    spark.stop()
    return 0


# --- the caller's side -----------------------------------------------------------------------------


class JvmSinkQuery:
    """This module as a process in its own session, stdout collected by a thread, killed by PID."""

    def __init__(self, settings: dict[str, Any], env: dict[str, str] | None = None) -> None:
        environment = {k: v for k, v in (env or os.environ).items() if k != "AERON_DIR"}
        environment["PYSPARK_PYTHON"] = sys.executable
        self.settings = settings
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.jvm_sink_query_process", json.dumps(settings)],
            cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, env=environment)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self, last: int = 80) -> str:
        return "\n".join(self.lines[-last:])

    def failure(self) -> str | None:
        return next((line for line in list(self.lines) if line.startswith("QUERY FAILED")), None)

    def started(self) -> bool:
        return "STARTED" in self.lines

    def progress(self) -> list[dict[str, Any]]:
        return [json.loads(line[len("PROGRESS "):]) for line in list(self.lines) if line.startswith("PROGRESS ")]

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.failure() is not None or self.process.poll() is not None:
                raise AssertionError(f"the query ended while waiting for {what}:\n{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n{self.output()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 120.0) -> None:
        """Asks the query to stop (the stop file) and waits for the process to end."""
        Path(self.settings["stop_file"]).touch()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(timeout=5)

    def kill(self) -> None:
        if self.process.poll() is None:
            kill_tree(self.process.pid)
            self.process.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
