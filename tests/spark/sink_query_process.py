"""One streaming query in its own process, for tests that kill it: aeron-archive source -> aeron-archive sink.

    python tests/spark/sink_query_process.py --archive-dir DIR --checkpoint DIR --recording-id N \
        --sink-id ID --stream-id N [--max-bytes-per-trigger SIZE] [--staging-dir PATH_OR_URI]
        [--fault POINT:BATCH:FILE] [--read-back]

Reads one recording from its start (``recordingIds``, AvailableNow, ``maxBytesPerTrigger`` small so
the input becomes several micro-batches) and writes ``payload`` plus the input message's ``position``
as ``reserved_value`` to the sink ``sink.id`` (IPC), staging in ``--staging-dir`` (``sink.stagingDir``,
e.g. an s3:// URI) or by default under the checkpoint. The mapping is deterministic, so a replayed
batch produces the same rows. ``--fault`` sets the sink's fault-injection hook
(``AERON_SPARK_SINK_FAULT``, ``connector/sink/fault_injection.py``) before Spark starts, so the
driver-side commit worker inherits it. Lines printed (stdout, flushed), for the test to follow:

    PROGRESS batch=<batchId> rows=<numInputRows> ms: <durationMs>   once per finished micro-batch
    QUERY DONE                                        AvailableNow consumed everything
    QUERY FAILED <error>                              the query stopped with an error (exit code 3)
    SINK ROWS count=<n> sha256=<hex>                  --read-back: spark.read of the sink recording,
                                                      sha256 over (reserved_value LE i64, len LE i32,
                                                      payload) of every row in position order

The test kills this process's whole tree with SIGKILL, by PID (tests/support/process_tree.py).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import sys
import time


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive-dir", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--recording-id", required=True, type=int)
    parser.add_argument("--sink-id", required=True)
    parser.add_argument("--stream-id", required=True, type=int)
    parser.add_argument("--max-bytes-per-trigger", default="256k")
    parser.add_argument("--commit-timeout-ms", default="20000")
    parser.add_argument("--staging-dir", default=None, help="sink.stagingDir (default: under the checkpoint)")
    parser.add_argument("--fault", default=None, help="POINT:BATCH:PAUSE_FILE for AERON_SPARK_SINK_FAULT")
    parser.add_argument("--read-back", action="store_true")
    # The cluster layout (tests/cluster): the archive reached by its control channel only, the sink
    # recorded from a UDP channel, executors in local-cluster on media drivers of their own.
    parser.add_argument("--control-channel", default=None, help="archive.controlChannel instead of archive.dir")
    parser.add_argument("--sink-channel", default="aeron:ipc")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--executor-aeron-dir", default=None, help="spark.executorEnv.AERON_DIR")
    return parser.parse_args(argv)


def say(line: str) -> None:
    print(line, flush=True)


def rows_digest(rows) -> tuple[int, str]:
    digest = hashlib.sha256()
    count = 0
    for row in rows:
        payload = bytes(row.payload)
        digest.update(struct.pack("<qi", row.reserved_value, len(payload)))
        digest.update(payload)
        count += 1
    return count, digest.hexdigest()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if args.fault:
        from aeron_spark.connector.sink.fault_injection import ENV_VAR, parse_fault_plan
        parse_fault_plan(args.fault)  # a typo fails here, not silently in a worker
        os.environ[ENV_VAR] = args.fault
    from aeron_spark.connector import register
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(args.master).appName("sink-query-process")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.sql.catalogImplementation", "in-memory")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
    if args.executor_aeron_dir:
        builder = builder.config("spark.executorEnv.AERON_DIR", args.executor_aeron_dir)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # spark.executorEnv.* reaches driver-side Python workers too (pyspark ships sc.environment):
    # keep the commit on this host's driver (AERON_DIR of this process).
    spark.sparkContext.environment.pop("AERON_DIR", None)
    register(spark)
    archive = ({"archive.controlChannel": args.control_channel} if args.control_channel
               else {"archive.dir": args.archive_dir})
    writer = (spark.readStream.format("aeron-archive").options(**archive)
              .option("recordingIds", str(args.recording_id)).option("startingPositions", "earliest")
              .option("maxBytesPerTrigger", args.max_bytes_per_trigger)
              .option("checkpointLocation", args.checkpoint).load()
              .selectExpr("payload", "position AS reserved_value")
              .writeStream.format("aeron-archive").options(**archive)
              .option("channel", args.sink_channel).option("streamId", str(args.stream_id))
              .option("sink.id", args.sink_id).option("sink.commitTimeoutMs", args.commit_timeout_ms)
              .option("checkpointLocation", args.checkpoint).trigger(availableNow=True))
    if args.staging_dir:
        writer = writer.option("sink.stagingDir", args.staging_dir)
    query = writer.start()
    reported: set[int] = set()

    def report_progress() -> None:
        for progress in query.recentProgress:
            if progress.batchId not in reported:
                reported.add(progress.batchId)
                durations = " ".join(f"{k}={v}" for k, v in sorted(progress.durationMs.items()))
                say(f"PROGRESS batch={progress.batchId} rows={progress.numInputRows} ms: {durations}")

    while query.isActive:
        report_progress()
        time.sleep(0.05)
    report_progress()
    error = query.exception()
    if error is not None:
        say(f"QUERY FAILED {str(error)[:2000]}")
        return 3
    say("QUERY DONE")
    if args.read_back:
        rows = (spark.read.format("aeron-archive").options(**archive)
                .option("channel", f"alias=aeron-spark-sink:{args.sink_id}").option("streamId", str(args.stream_id))
                .load().orderBy("position").select("payload", "reserved_value").collect())
        count, digest = rows_digest(rows)
        say(f"SINK ROWS count={count} sha256={digest}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
