"""A streaming query over format("aeron-archive-jvm") in a process of its own (its own Spark session
with our jar and aeron-all on ``spark.jars``), for the JVM source's tests.

    python -m tests.support.jvm_query_process '<json settings>'

Settings: ``jars`` (spark.jars), ``options`` (source options), ``trigger`` (``{"realTime": "5 seconds"}``,
``{"processingTime": "500 milliseconds"}`` or ``{"availableNow": true}``), ``checkpoint``, ``out``,
``stop_file``, optional ``master`` (default local[2]) and ``conf`` (more Spark settings). The sink is
``foreach``: each row is appended as ``<recording_id> <position> <payload hex>`` to
``<out>/rows-<partition>-<epoch>.txt`` (a file per task and batch, so a replayed batch is told apart),
in the order the task saw the rows. Lines on stdout (flushed)::

    PROGRESS <json: batchId, numInputRows, metrics of the source, endOffset>   once per finished batch
    QUERY STOPPED / QUERY FAILED <error>                                        at the end

It runs until ``stop_file`` exists or the query fails (exit code 3). ``JvmQuery`` runs it and kills its
whole process tree by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.process_tree import kill_tree
from tests.support.query_watch import failure_line, watch_query

REPOSITORY = Path(__file__).resolve().parents[2]
# Java 17 + Aeron 1.5x (the list of tests/interop/peer/modern_peer.py).
AERON_JVM_OPTIONS = ("--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED --add-opens=java.base/java.util.zip=ALL-UNNAMED "
                     "--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED "
                     "-XX:+UseSerialGC -Djava.net.preferIPv4Stack=true")


def _say(line: str) -> None:
    print(line, flush=True)


class RowFiles:
    """foreach's writer: one file per task and batch (pickled to the Python workers)."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.file: Any = None

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.file = open(os.path.join(self.out, f"rows-{partition_id}-{epoch_id:06d}.txt"), "a")
        return True

    def process(self, row: Any) -> None:
        self.file.write(f"{row.recording_id} {row.position} {bytes(row.payload).hex()}\n")
        self.file.flush()

    def close(self, error: BaseException | None) -> None:
        if self.file is not None:
            self.file.close()


def jvm_query_session(settings: dict[str, Any], app_name: str) -> Any:
    """The small Spark session a JVM query process runs in: ``settings["jars"]`` on ``spark.jars``,
    ``master`` (local[2] unless given), the JVM options Aeron needs, ``conf`` on top."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(settings.get("master", "local[2]")).appName(app_name)
               .config("spark.jars", settings["jars"])
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.sql.catalogImplementation", "in-memory")
               .config("spark.driver.extraJavaOptions", AERON_JVM_OPTIONS + " -XX:TieredStopAtLevel=1")
               .config("spark.executor.extraJavaOptions", AERON_JVM_OPTIONS))
    for key, value in settings.get("conf", {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.get("log_level", "ERROR"))
    return spark


def main(settings: dict[str, Any]) -> int:
    spark = jvm_query_session(settings, "jvm-query-process")
    if "probes" in settings:
        return _probe(spark, settings)
    out = Path(settings["out"])
    out.mkdir(parents=True, exist_ok=True)
    reader = spark.readStream.format("aeron-archive-jvm")
    for name, value in settings["options"].items():
        reader = reader.option(name, value)
    writer = (reader.load().writeStream.foreach(RowFiles(str(out))).outputMode("update")
              .option("checkpointLocation", settings["checkpoint"]).trigger(**settings["trigger"]))
    try:
        query = writer.start()
    except Exception as error:  # noqa: BLE001 - the test reads the message
        _say(failure_line(error))
        return 3

    def describe(progress: Any) -> str:
        source = progress.sources[0] if progress.sources else None
        return json.dumps({
            "batchId": progress.batchId, "numInputRows": progress.numInputRows,
            "metrics": dict(source.metrics) if source is not None and source.metrics else {},
            "endOffset": source.endOffset if source is not None else None})

    return watch_query(spark, query, Path(settings["stop_file"]), _say, describe)


def _probe(spark: Any, settings: dict[str, Any]) -> int:
    """Starts one query per option set of ``probes`` (console sink) and prints how each ended:
    ``PROBE <json: index, error, seconds>`` (seconds from start() to the failure)."""
    for index, options in enumerate(settings["probes"]):
        started = time.monotonic()
        error: str | None = None
        try:
            reader = spark.readStream.format("aeron-archive-jvm")
            for name, value in options.items():
                reader = reader.option(name, value)
            query = (reader.load().writeStream.format("console").option("checkpointLocation",
                     os.path.join(settings["checkpoint"], str(index))).trigger(processingTime="1 second").start())
            query.awaitTermination(settings.get("probe_timeout_s", 60))  # still running then: no error
            failure = query.exception()
            error = None if failure is None else str(failure)
            if query.isActive:
                query.stop()
        except Exception as failure:  # noqa: BLE001 - the test reads the message
            error = str(failure)
        _say("PROBE " + json.dumps({"index": index, "error": error, "seconds": time.monotonic() - started}))
    spark.stop()
    return 0


def probe_results(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line[len("PROBE "):]) for line in lines if line.startswith("PROBE ")]


# --- the test's side ------------------------------------------------------------------------------


class JvmQuery:
    """This module as a process in its own session, stdout collected by a thread, killed by PID."""

    def __init__(self, settings: dict[str, Any], env: dict[str, str] | None = None) -> None:
        environment = {k: v for k, v in (env or os.environ).items() if k != "AERON_DIR"}
        environment["PYSPARK_PYTHON"] = sys.executable
        self.settings = settings
        self.lines: list[str] = []
        self.process = subprocess.Popen([sys.executable, "-m", "tests.support.jvm_query_process", json.dumps(settings)],
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

    def progress(self) -> list[dict[str, Any]]:
        return [json.loads(line[len("PROGRESS "):]) for line in list(self.lines) if line.startswith("PROGRESS ")]

    def failure(self) -> str | None:
        return next((line for line in list(self.lines) if line.startswith("QUERY FAILED")), None)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def wait_for(self, condition, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if not self.running:
                self._reader.join(5)
                if condition():
                    return
                raise AssertionError(f"the query process ended before {what}:\n" + self.output())
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n" + self.output())
            time.sleep(0.2)

    def stop(self, timeout: float = 120.0) -> int:
        """Touches the stop file and waits; killed by PID if it does not end in time."""
        Path(self.settings["stop_file"]).touch()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the query did not stop in time:\n" + self.output()) from None
        finally:
            self._reader.join(10)

    def kill(self) -> None:
        """SIGKILL the whole process tree (driver program, Spark JVM, Python workers) by PID."""
        if self.process.poll() is None:
            kill_tree(self.process.pid)
        self.process.wait(30)
        self._reader.join(10)


def delivered_rows(out: Path) -> dict[str, list[tuple[int, int, bytes]]]:
    """The rows each task file holds, in the order written: file name -> [(recording, position, payload)]."""
    rows: dict[str, list[tuple[int, int, bytes]]] = {}
    for path in sorted(out.glob("rows-*.txt")):
        parsed = []
        for line in path.read_text().splitlines():
            recording_id, position, payload = line.split(" ")
            parsed.append((int(recording_id), int(position), bytes.fromhex(payload)))
        rows[path.name] = parsed
    return rows


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
