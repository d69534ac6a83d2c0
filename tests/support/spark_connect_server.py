"""The Spark Connect server pyspark ships, as a real subprocess for tests, stopped by PID.

``running_connect_server`` starts ``spark-submit --class SparkConnectServer`` from the installed
pyspark (its jars hold ``spark-connect_2.13``) on a free localhost port, with the given Spark
settings, and this interpreter as the Python of its workers (``PYSPARK_PYTHON``): they import
``aeron_spark`` and find ``format("aeron-archive")`` through ``pyspark_aeron_archive`` on their
``sys.path``, as any Spark session of this venv does. The server's log goes to ``server.log`` in
the work directory (``log_tail()`` for failure messages).

On exit, also on failure: SIGTERM to the server's JVM, SIGKILL to it and every process below it
(the Python worker daemons sit in process groups of their own) if it does not stop in time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.process_tree import descendant_pids, kill_tree

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY_LINE = "Spark Connect server started at"  # what SparkConnectServer logs once it listens
# Spark's warning when listing the `pyspark_*` data sources in a Python worker failed.
LOOKUP_SKIPPED_LINE = "Skipping the lookup of Python Data Sources"
STARTUP_TIMEOUT_S = 120.0  # a JVM and a SparkContext on a busy 2-core machine
STOP_TIMEOUT_S = 20.0


def free_tcp_port() -> int:
    """A localhost TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def spark_home() -> Path:
    """The installed pyspark's folder: its ``bin/spark-submit`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class ConnectServer:
    """One running Spark Connect server."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        """What ``SparkSession.builder.remote(...)`` takes."""
        return f"sc://localhost:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def data_source_lookup_failure(self) -> str:
        """The server's warning (and traceback) if its Python workers failed to list the data sources
        (then ``format("aeron-archive")`` is not found), else ""."""
        log = self.log_path.read_text(errors="replace")
        start = log.find(LOOKUP_SKIPPED_LINE)
        return "" if start < 0 else log[start:start + 3000]

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with {self.process.returncode} before "
                                   f"listening on port {self.port}:\n{self.log_tail()}")
            if READY_LINE in self.log_path.read_text(errors="replace"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not listen on port {self.port} within "
                                   f"{timeout} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a clean Spark shutdown); SIGKILL to the whole tree if it is not gone in time."""
        if self.process.poll() is not None:
            return
        workers = descendant_pids(self.pid)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.pid)
            self.process.wait(timeout)
        for pid in workers:  # a worker daemon the JVM's exit did not take down
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def launch(work_dir: Path, settings: Mapping[str, str], port: int | None = None) -> ConnectServer:
    """Starts the server (not yet listening: ``wait_ready()``); its working directory is ``work_dir``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_tcp_port() if port is None else port
    home = spark_home()
    conf = {**settings, "spark.connect.grpc.binding.address": "localhost",
            "spark.connect.grpc.binding.port": str(port)}
    command = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS]
    for name, value in conf.items():
        command += ["--conf", f"{name}={value}"]
    environment = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable}
    log_path = work_dir / "server.log"
    with open(log_path, "wb") as log:
        # spark-submit execs the JVM, so this PID is the server's.
        process = subprocess.Popen(command, cwd=work_dir, env=environment, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return ConnectServer(port, process, log_path)


@contextmanager
def running_connect_server(work_dir: Path, settings: Mapping[str, str]) -> Iterator[ConnectServer]:
    """A listening Spark Connect server for the block, stopped by PID on exit (also on failure)."""
    server = launch(work_dir, settings)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
