"""Spark's Kafka connector beside our source and sink, against a real KRaft broker and a real sidecar.

Keeps the Kafka fixture (tests/support/kafka_broker.py) working for the benchmarks that compare us
with Kafka. One streaming query unions the Kafka source with our source and writes to our
exactly-once sink; a second writes our source to Kafka's sink. The rows are checked by reading
both sides back.

Spark's Kafka connector is given to Spark as local jars (``spark.jars``), which a session takes only
when it starts; the tests' shared session has started without them, so the queries run in a
Spark driver program of their own (this module run as a script), stopped by PID by the test.
The connector is 4.2.0 (the newest Maven Central serves) on our pyspark 4.3.0: this test is the
proof that the pair works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# A first run fetches the broker and the connector with mvn (a minute or two) before Spark starts.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_MESSAGES = 300
AERON_MESSAGES = 500
QUERY_TIMEOUT_S = 420.0


def aeron_payload(index: int) -> bytes:
    return f"aeron-{index:05d}".encode()


def kafka_payload(index: int) -> bytes:
    return f"kafka-{index:05d}".encode()


def test_a_query_reads_kafka_and_our_archive_and_writes_our_sink_and_kafka(archive, tmp_path: Path) -> None:
    from tests.support.kafka_broker import ensure_kafka_fetched, running_kafka_broker
    from tests.support.process_tree import kill_tree

    installation = ensure_kafka_fetched()
    stream_id = archive.new_stream_id()
    archive.record([aeron_payload(index) for index in range(AERON_MESSAGES)], stream_id=stream_id, stop=True)
    with running_kafka_broker(installation, data_dir=tmp_path / "kafka") as broker:
        broker.create_topic("kafka-in", partitions=2)
        broker.create_topic("kafka-out", partitions=2)
        plan = {"bootstrap": broker.bootstrap_servers, "archive_dir": archive.archive_dir, "stream_id": stream_id,
                "spark_jars": installation.spark_jars, "work": str(tmp_path / "spark"),
                "kafka_messages": KAFKA_MESSAGES}
        driver = subprocess.Popen([sys.executable, __file__, json.dumps(plan)], cwd=REPO_ROOT,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYSPARK_PYTHON": sys.executable,
                                       "PYSPARK_DRIVER_PYTHON": sys.executable})
        try:
            stdout, stderr = driver.communicate(timeout=QUERY_TIMEOUT_S)
        finally:
            if driver.poll() is None:
                kill_tree(driver.pid)  # the program, its Spark JVM and the workers below it, by PID
                driver.communicate()
    assert driver.returncode == 0, f"the Spark driver program failed:\n{stderr[-4000:]}"
    result = json.loads(stdout.strip().splitlines()[-1])

    expected_union = sorted([aeron_payload(i).decode() for i in range(AERON_MESSAGES)]
                            + [kafka_payload(i).decode() for i in range(KAFKA_MESSAGES)])
    assert sorted(result["our_sink_payloads"]) == expected_union
    assert len(result["our_sink_payloads"]) == len(expected_union)  # exactly once: no duplicates
    assert sorted(result["kafka_out_payloads"]) == sorted(aeron_payload(i).decode() for i in range(AERON_MESSAGES))


# --- the Spark driver program (runs in its own process: the connector jars need a new session) ----


def run_queries(plan: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col

    from aeron_spark.connector import register

    work = Path(plan["work"])
    spark = (SparkSession.builder.master("local[2]").appName("kafka-beside-aeron")
             .config("spark.jars", plan["spark_jars"])
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    kafka_options = {"kafka.bootstrap.servers": plan["bootstrap"]}
    try:
        # Kafka's batch sink fills the input topic.
        (spark.createDataFrame([(kafka_payload(i),) for i in range(plan["kafka_messages"])], "value binary")
         .write.format("kafka").options(**kafka_options).option("topic", "kafka-in").save())

        ours = (spark.readStream.format("aeron-archive").option("archive.dir", plan["archive_dir"])
                .option("channel", "aeron:ipc").option("streamId", str(plan["stream_id"]))
                .option("startingPositions", "earliest")
                .option("checkpointLocation", str(work / "source-checkpoint")).load().select("payload"))
        kafka = (spark.readStream.format("kafka").options(**kafka_options).option("subscribe", "kafka-in")
                 .option("startingOffsets", "earliest").load().select(col("value").alias("payload")))
        # Query 1: the Kafka source and ours, unioned, into our exactly-once sink.
        into_ours = (ours.unionByName(kafka).writeStream.format("aeron-archive")
                     .option("archive.dir", plan["archive_dir"]).option("channel", "aeron:ipc")
                     .option("streamId", str(plan["stream_id"] + 500))
                     .option("checkpointLocation", str(work / "union-checkpoint"))
                     .trigger(availableNow=True).start())
        # Query 2: our source into Kafka's sink.
        into_kafka = (spark.readStream.format("aeron-archive").option("archive.dir", plan["archive_dir"])
                      .option("channel", "aeron:ipc").option("streamId", str(plan["stream_id"]))
                      .option("startingPositions", "earliest")
                      .option("checkpointLocation", str(work / "source2-checkpoint")).load()
                      .select(col("payload").alias("value")).writeStream.format("kafka").options(**kafka_options)
                      .option("topic", "kafka-out").option("checkpointLocation", str(work / "kafka-checkpoint"))
                      .trigger(availableNow=True).start())
        for query in (into_ours, into_kafka):
            if not query.awaitTermination(300):
                raise RuntimeError(f"query {query.name or query.id} did not finish within 300 s")
            if query.exception() is not None:
                raise RuntimeError(f"query failed: {query.exception()}")

        sink_rows = (spark.read.format("aeron-archive").option("archive.dir", plan["archive_dir"])
                     .option("channel", f"alias=aeron-spark-sink:{into_ours.id}")
                     .option("streamId", str(plan["stream_id"] + 500)).load().select("payload").collect())
        kafka_rows = (spark.read.format("kafka").options(**kafka_options).option("subscribe", "kafka-out")
                      .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
                      .select("value").collect())
        return {"our_sink_payloads": [bytes(row.payload).decode() for row in sink_rows],
                "kafka_out_payloads": [bytes(row.value).decode() for row in kafka_rows]}
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(run_queries(json.loads(sys.argv[1]))))
