"""A real Apache Kafka broker for tests and benchmarks: one KRaft broker+controller on localhost.

``tests/support/kafka/fetch-kafka`` fetches (``mvn``, pinned SHA-256s, cached under ``.cache/kafka``)
the broker's classpath and Spark's Kafka connector jars; this module runs the broker:

* :func:`ensure_kafka_fetched` -> :class:`KafkaInstallation` (the broker classpath, the connector jars);
* :func:`running_kafka_broker` formats a fresh data directory with a random cluster id, starts the
  broker on free ports, waits until it serves and stops it by PID on the way out, even on failure;
* :meth:`KafkaBroker.create_topic` makes a topic with N partitions.

Test and bench code only: nothing of Kafka is in the package. A missing ``java`` or ``mvn`` fails
the calling test with the fetch script's one line (``[fetch-kafka] error: mvn not found ...``).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "KafkaBroker", "KafkaError", "KafkaInstallation", "ensure_kafka_fetched", "fetch_script",
    "free_tcp_port", "running_kafka_broker", "start_kafka_broker", "stop_kafka_broker",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
MISSING_TOOL_PREFIX = "[fetch-kafka] error:"
# A small heap and the serial collector: the broker shares a 2-core machine with Spark and the sidecar.
BROKER_JVM_OPTIONS: tuple[str, ...] = ("-Xms256m", "-Xmx768m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true")
TOOL_JVM_OPTIONS: tuple[str, ...] = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class KafkaError(RuntimeError):
    """The fetch script, the storage format, the broker or a topic command failed."""


def fetch_script() -> Path:
    return Path(__file__).resolve().parent / "kafka" / "fetch-kafka"


@dataclass(frozen=True)
class KafkaInstallation:
    """Where the fetched broker classpath and Spark's Kafka connector jars are."""

    java: Path
    kafka_version: str
    spark_kafka_version: str
    broker_jars_dir: Path
    connector_jars: tuple[Path, ...]

    @property
    def broker_classpath(self) -> str:
        return str(self.broker_jars_dir / "*")

    @property
    def spark_jars(self) -> str:
        """The value for Spark's ``spark.jars``: the connector as local jars."""
        return ",".join(str(jar) for jar in self.connector_jars)

    def java_command(self, main_class: str, *args: str, jvm_options: Sequence[str] = TOOL_JVM_OPTIONS) -> list[str]:
        return [str(self.java), *jvm_options, "-cp", self.broker_classpath, main_class, *args]


def default_cache_root() -> Path:
    """Same rule as the fetch script: ``AERON_SPARK_KAFKA_CACHE``, else the repository's ``.cache``."""
    explicit = os.environ.get("AERON_SPARK_KAFKA_CACHE")
    return Path(explicit) if explicit else REPO_ROOT / ".cache"


def ensure_kafka_fetched(cache_root: Path | None = None, *, timeout: float = 900.0) -> KafkaInstallation:
    """Runs the fetch script (idempotent, cached) and returns what it fetched. A missing tool
    fails the calling test with the script's one line when pytest runs; elsewhere (benchmarks) it
    raises :class:`KafkaError` with that line."""
    return _ensure_kafka_fetched(str(cache_root if cache_root is not None else default_cache_root()), timeout)


@functools.cache
def _ensure_kafka_fetched(cache_root: str, timeout: float) -> KafkaInstallation:
    completed = subprocess.run(["bash", str(fetch_script()), "--quiet", "--cache-dir", cache_root],
                               capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    if completed.returncode != 0:
        lines = completed.stderr.strip().splitlines()
        last = lines[-1] if lines else f"fetch-kafka failed with exit code {completed.returncode}"
        if last.startswith(MISSING_TOOL_PREFIX) and ("not found" in last or "too old" in last):
            _fail_test_if_under_pytest(last)
        raise KafkaError(f"{last}\n{completed.stderr.strip()[-2000:]}")
    facts = json.loads((Path(cache_root) / "kafka" / "kafka.json").read_text())
    return KafkaInstallation(
        java=Path(facts["java"]), kafka_version=facts["kafka_version"],
        spark_kafka_version=facts["spark_kafka_version"], broker_jars_dir=Path(facts["broker_jars_dir"]),
        connector_jars=tuple(Path(jar) for jar in facts["connector_jars"]))


def _fail_test_if_under_pytest(line: str) -> None:
    # A missing tool is the machine's, not the test's: its one line says which and how to get it.
    try:
        import pytest
    except ImportError:
        return
    if os.environ.get("PYTEST_CURRENT_TEST"):
        pytest.fail(line, pytrace=False)


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("localhost", 0))
        return int(probe.getsockname()[1])


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid form).
    Never one starting with '-': kafka-storage's argument parser would take it for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass
class KafkaBroker:
    """A running broker+controller; ``bootstrap_servers`` is what clients and Spark's connector take."""

    installation: KafkaInstallation
    process: subprocess.Popen[Any]
    broker_port: int
    controller_port: int
    data_dir: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    @property
    def bootstrap_servers(self) -> str:
        return f"localhost:{self.broker_port}"

    def create_topic(self, name: str, partitions: int = 1, *, timeout: float = 90.0) -> None:
        """Creates ``name`` with ``partitions`` partitions (replication factor 1) and returns once it exists."""
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        self._topic_command(["--create", "--topic", name, "--partitions", str(partitions),
                             "--replication-factor", "1"], timeout)

    def describe_topic(self, name: str, *, timeout: float = 90.0) -> str:
        return self._topic_command(["--describe", "--topic", name], timeout)

    def _topic_command(self, args: list[str], timeout: float) -> str:
        command = self.installation.java_command("org.apache.kafka.tools.TopicCommand",
                                                 "--bootstrap-server", self.bootstrap_servers, *args)
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL, check=False)
        if completed.returncode != 0:
            raise KafkaError(f"TopicCommand {' '.join(args)} failed (exit {completed.returncode}): "
                             f"{(completed.stderr or completed.stdout).strip()[-1500:]}")
        return completed.stdout

    def cpu_seconds(self) -> float:
        """User+system CPU-seconds the broker has used so far (from /proc, while it runs)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_properties(node_id: int, broker_port: int, controller_port: int, data_dir: Path) -> str:
    return "\n".join([
        "process.roles=broker,controller",
        f"node.id={node_id}",
        f"controller.quorum.voters={node_id}@localhost:{controller_port}",
        f"listeners=PLAINTEXT://localhost:{broker_port},CONTROLLER://localhost:{controller_port}",
        f"advertised.listeners=PLAINTEXT://localhost:{broker_port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={data_dir / 'logs'}",
        # One broker: every internal topic has one replica, and a consumer group starts at once.
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        # Topics exist only when a test or benchmark creates them, with the partitions it asks for.
        "auto.create.topics.enable=false",
        "num.network.threads=2",
        "num.io.threads=2",
        "",
    ])


def start_kafka_broker(installation: KafkaInstallation, data_dir: Path, *, startup_timeout: float = 120.0) -> KafkaBroker:
    """Formats ``data_dir`` (random cluster id) and starts a broker+controller on free ports; returns
    once the broker accepts connections and answers a topic listing. Stops it again if it never does."""
    data_dir.mkdir(parents=True, exist_ok=True)
    broker_port, controller_port = free_tcp_port(), free_tcp_port()
    while controller_port == broker_port:
        controller_port = free_tcp_port()
    properties = data_dir / "server.properties"
    properties.write_text(_server_properties(1, broker_port, controller_port, data_dir))
    formatted = subprocess.run(
        installation.java_command("kafka.tools.StorageTool", "format", "-t", random_cluster_id(),
                                  "-c", str(properties), "--ignore-formatted"),
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False)
    if formatted.returncode != 0:
        raise KafkaError(f"kafka-storage format failed (exit {formatted.returncode}): "
                         f"{(formatted.stderr or formatted.stdout).strip()[-1500:]}")
    log_path = data_dir / "broker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(installation.java), *BROKER_JVM_OPTIONS, f"-Dkafka.logs.dir={data_dir / 'server-logs'}",
             "-cp", installation.broker_classpath, "kafka.Kafka", str(properties)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    broker = KafkaBroker(installation, process, broker_port, controller_port, data_dir, log_path)
    try:
        _wait_until_serving(broker, startup_timeout)
    except BaseException:
        stop_kafka_broker(broker)
        raise
    return broker


def _wait_until_serving(broker: KafkaBroker, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if broker.process.poll() is not None:
            raise KafkaError(f"the Kafka broker exited with {broker.process.returncode} while starting; "
                             f"log {broker.log_path}: {broker.log_path.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("localhost", broker.broker_port), timeout=1.0):
            break
        if time.monotonic() > deadline:
            raise KafkaError(f"the Kafka broker did not listen on {broker.bootstrap_servers} within {timeout:.0f} s "
                             f"(log {broker.log_path})")
        time.sleep(0.25)
    # Listening is not serving: the listing answers only once the broker has joined its own quorum.
    broker._topic_command(["--list"], max(10.0, deadline - time.monotonic()))


def stop_kafka_broker(broker: KafkaBroker, timeout: float = 30.0) -> int:
    """Stops the broker by its PID: SIGTERM (a controlled shutdown), wait, then SIGKILL."""
    process = broker.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(timeout=timeout)
    return int(process.returncode)


@contextlib.contextmanager
def running_kafka_broker(installation: KafkaInstallation | None = None, *, data_dir: Path | None = None,
                         startup_timeout: float = 120.0) -> Iterator[KafkaBroker]:
    """A broker for the ``with`` block, with its own data directory (a temporary one unless given),
    stopped by PID on the way out whatever happened inside."""
    chosen = installation if installation is not None else ensure_kafka_fetched()
    with contextlib.ExitStack() as stack:
        root = data_dir if data_dir is not None else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="aeron-spark-kafka-")))
        broker = start_kafka_broker(chosen, root, startup_timeout=startup_timeout)
        try:
            yield broker
        finally:
            stop_kafka_broker(broker)
