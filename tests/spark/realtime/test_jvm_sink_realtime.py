"""format("aeron-archive-jvm") as a SINK (issue 32, deliver 2): rows are published on an Aeron stream
as they arrive and our sidecar records that stream (the sink asks it to when the query starts).

* real time: a live recording on our sidecar -> the JVM source in real-time mode -> the JVM sink ->
  a recording of the sink's stream on the same sidecar: every row present once, in order;
* micro-batch: Spark's rate source (two partitions) -> the sink: every row present, in order per
  partition (each value carries its partition and its per-partition sequence);
* bad input: no ``value`` column, a value of the wrong type, a missing ``channel``: the query fails
  naming the column / option.

Each query runs in its own process (tests/support/jvm_sink_query_process.py, its own Spark session
with our jar and aeron-all on spark.jars); the sidecar and the publisher are real processes. Every
process is stopped or killed by PID, also when a test fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aeron_spark.archive.client import ArchiveClient
from tests.support.jvm_module import JvmModule
from tests.support.jvm_sink_query_process import JvmSinkQuery
from tests.support.live_publisher import LivePublisher, sequence_of
from tests.support.ports import free_udp_port
from tests.support.recorded_stream import recorded
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

INPUT_STREAM_ID = 4501
SINK_STREAM_ID = 4502
#: What real-time mode into our sink needs (docs/exactly-once.md): the session's allowlist check off, and
#: on the writeStream the override of async progress tracking's sink check (real-time mode tracks
#: progress asynchronously and lets only Spark's own sinks do that unless told).
REAL_TIME = {"spark.sql.streaming.realTimeMode.allowlistCheck": "false"}
REAL_TIME_SINK_OPTIONS = {"_asyncProgressTrackingOverrideSinkSupportCheck": "true"}


def settings(jvm_module: JvmModule, work: Path, source: dict, select: list[str], sink: dict[str, str],
             trigger: dict, conf: dict[str, str] | None = None) -> dict:
    return {"jars": jvm_module.spark_jars, "source": source, "select": select, "sink": sink, "trigger": trigger,
            "conf": conf or {}, "checkpoint": str(work / "checkpoint"), "stop_file": str(work / "stop")}


def count_recorded(archive: ArchiveClient, stream_id: int) -> int:
    return sum(len(found) for found in recorded(archive, stream_id).values())


def test_real_time_query_publishes_every_row_in_order_into_a_sidecar_recording(
        sidecar: Sidecar, archive: ArchiveClient, jvm_module: JvmModule, tmp_path: Path) -> None:
    messages = 300
    input_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    sink_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    publisher = LivePublisher((), "--channel", input_channel, "--stream-id", str(INPUT_STREAM_ID),
                              "--messages", str(messages), "--rate", "200", "--control-channel",
                              sidecar.control_channel, "--aeron-dir", sidecar.driver_dir)
    query = None
    try:
        publisher.wait_until(lambda: publisher.recordings(), "the input recording started", 30)
        query = JvmSinkQuery(settings(
            jvm_module, tmp_path,
            {"format": "aeron-archive-jvm", "options": {
                "archive.controlChannel": sidecar.control_channel, "channel": input_channel,
                "streamId": str(INPUT_STREAM_ID), "startingPositions": "earliest"}},
            ["payload AS value"],
            {"archive.controlChannel": sidecar.control_channel, "channel": sink_channel,
             "streamId": str(SINK_STREAM_ID), **REAL_TIME_SINK_OPTIONS},
            {"realTime": "5 seconds"}, REAL_TIME))
        publisher.wait_until(publisher.done, "every input message published and recorded", 120)
        # The rows reach the sink's recording while the real-time batch is still running.
        query.wait_for(lambda: count_recorded(archive, SINK_STREAM_ID) >= messages, f"{messages} recorded rows", 180)
        query.stop()
        assert query.failure() is None, query.output()
        by_recording = recorded(archive, SINK_STREAM_ID)
        # One publishing session (the one executor JVM of local[2]), so one recording, in input order.
        assert len([rows for rows in by_recording.values() if rows]) == 1, by_recording.keys()
        (rows,) = [rows for rows in by_recording.values() if rows]
        assert [sequence_of(row) for row in rows] == list(range(messages))
    finally:
        if query is not None:
            query.kill()
        publisher.stop()


def test_micro_batch_query_publishes_every_row_in_order_per_partition(
        sidecar: Sidecar, archive: ArchiveClient, jvm_module: JvmModule, tmp_path: Path) -> None:
    stream_id = SINK_STREAM_ID + 10
    sink_channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    query = JvmSinkQuery(settings(
        jvm_module, tmp_path, {"format": "rate", "options": {"rowsPerSecond": "200", "numPartitions": "2"}},
        ["CAST(concat(spark_partition_id(), ':', value) AS BINARY) AS value"],
        {"archive.controlChannel": sidecar.control_channel, "channel": sink_channel, "streamId": str(stream_id)},
        {"processingTime": "500 milliseconds"}))
    try:
        query.wait_for(lambda: sum(p["numOutputRows"] for p in query.progress()) >= 400, "400 rows written", 180)
        query.stop()
        assert query.failure() is None, query.output()
        written = sum(p["numOutputRows"] for p in query.progress())
        rows = [row.decode() for found in recorded(archive, stream_id).values() for row in found]
        # Every row of every committed batch is in the recording (each task's commit waited for it).
        assert len(rows) >= written
        per_partition: dict[str, list[int]] = {}
        for row in rows:
            partition, value = row.split(":")
            per_partition.setdefault(partition, []).append(int(value))
        assert set(per_partition) == {"0", "1"}
        for partition, values in per_partition.items():
            assert values == sorted(set(values)), f"partition {partition}: rows out of order or repeated"
        # Rate's values are one sequence across its partitions: none missing up to the last written.
        everything = sorted(value for values in per_partition.values() for value in values)
        assert everything == list(range(len(everything)))
    finally:
        query.kill()


BAD_INPUTS = [  # (select, sink options changed (None: left out), what the error says)
    (["timestamp AS time"], {}, "needs a column named value of type binary or string"),
    (["value"], {}, "column value has type bigint; accepted: binary or string"),
    (["CAST(value AS STRING) AS value"], {"channel": None}, "option channel is required"),
    # The sink's own streamId entry (one int32), not the source's (an int list) of the same name.
    (["CAST(value AS STRING) AS value"], {"streamId": "x"},
     "option streamId='x' is not valid; accepted: a stream id, an int32 (-2147483648..2147483647)"),
    (["CAST(value AS STRING) AS value"], {"streamId": "1001,1002"},
     "option streamId='1001,1002' is not valid; accepted: a stream id, an int32"),
    (["CAST(value AS STRING) AS value"], {"sink.offerTimeoutMs": "0"}, "option sink.offerTimeoutMs='0' is not valid"),
    (["CAST(value AS STRING) AS value"], {"sink.offerTimeout": "5"}, "Did you mean 'sink.offerTimeoutMs'?"),
]


def test_bad_input_fails_the_query_naming_the_column_or_option(
        sidecar: Sidecar, jvm_module: JvmModule, tmp_path: Path) -> None:
    attempts = []
    for select, changes, _ in BAD_INPUTS:
        sink: dict[str, str] = {"archive.controlChannel": sidecar.control_channel,
                                "channel": f"aeron:udp?endpoint=localhost:{free_udp_port()}",
                                "streamId": str(SINK_STREAM_ID + 20)}
        for name, value in changes.items():
            if value is None:
                sink.pop(name)
            else:
                sink[name] = value
        attempts.append({"select": select, "sink": sink})
    run = settings(jvm_module, tmp_path, {"format": "rate", "options": {"rowsPerSecond": "10"}}, [], {},
                   {"processingTime": "500 milliseconds"})
    query = JvmSinkQuery({**run, "attempts": attempts})
    try:
        query.wait_for(lambda: len([line for line in query.lines if line.startswith("ATTEMPT ")]) == len(attempts)
                       or query.process.poll() is not None, "every attempt", 300)
        query.process.wait(timeout=120)
        query._reader.join(timeout=5)
        outcomes = [line for line in query.lines if line.startswith("ATTEMPT ")]
        assert len(outcomes) == len(attempts), query.output()
        for (select, changes, expected), outcome in zip(BAD_INPUTS, outcomes, strict=True):
            assert "FAILED" in outcome and expected in outcome, (select, changes, outcome)
    finally:
        query.kill()
