"""What the Kafka comparisons share: the broker beside our sidecar, the Spark session that has
Spark's Kafka connector, and the options that name the broker.

The broker is tests/support/kafka_broker.py's (a real KRaft broker+controller on localhost, its own
data directory, fetched and pinned by tests/support/kafka/fetch-kafka, stopped by PID); the connector
(spark-sql-kafka-0-10 4.2.0 on our pyspark 4.3.0) is given to Spark as local jars. Imported by
bench/kafka_read.py and bench/kafka_write.py (run as scripts, so bench/ is on sys.path; the
repository root is added here for tests.support). Nothing of Kafka is in the package.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spark_bench_support import CLUSTER_MASTER, LAYOUTS, ClusterHosts, progress, spark_for_layout

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

from tests.support.kafka_broker import (  # noqa: E402 - needs the repository root on sys.path
    KafkaBroker,
    KafkaInstallation,
    ensure_kafka_fetched,
    running_kafka_broker,
)

__all__ = ["KafkaBroker", "KafkaInstallation", "add_kafka_layout_argument", "kafka_broker_for_bench",
           "kafka_options", "spark_with_kafka", "streamed_rows"]


def add_kafka_layout_argument(parser: argparse.ArgumentParser) -> None:
    """``--layout``, cluster by default: the issue's comparisons are in the cluster layout."""
    parser.add_argument("--layout", choices=LAYOUTS, default="cluster",
                        help=f"cluster: the sidecar, the Spark driver and {CLUSTER_MASTER} executors on separate "
                             "media drivers, archive.controlChannel only (default); single-host: local[2], archive.dir")


@contextlib.contextmanager
def kafka_broker_for_bench(work: Path) -> Iterator[tuple[KafkaInstallation, KafkaBroker]]:
    """Fetches (cached) and starts the broker with its data under ``work``; stopped by PID on exit."""
    installation = ensure_kafka_fetched()
    started = time.perf_counter()
    with running_kafka_broker(installation, data_dir=work / "kafka") as broker:
        progress(f"Kafka {installation.kafka_version} broker pid {broker.pid} ready on {broker.bootstrap_servers} "
                 f"in {time.perf_counter() - started:.1f} s")
        try:
            yield installation, broker
        finally:
            progress(f"stopping the Kafka broker pid {broker.pid}")


def spark_with_kafka(app_name: str, layout: str, hosts: ClusterHosts | None, installation: KafkaInstallation,
                     **config: str) -> Any:
    """The layout's session (spark_bench_support.spark_for_layout) with the Kafka connector's jars."""
    return spark_for_layout(app_name, layout, hosts, **{"spark.jars": installation.spark_jars, **config})


def kafka_options(broker: KafkaBroker) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker.bootstrap_servers}


def streamed_rows(query: Any) -> int:
    """Rows a finished streaming query read, from its progress (every batch's numInputRows)."""
    return sum(int(progress_entry["numInputRows"]) for progress_entry in query.recentProgress)
