"""A sink committer in its own process (another driver of the same query), for
test_sink_stalled_committer.py (and tests/interop/modern/test_sink_stalled_committer_java.py):
stages ``--rows`` rows and commits them as ``--batch`` to the sidecar of ``--archive-dir``, or to the
archive at ``--control-channel`` over ``--channel`` (a Java archive on another media driver). With
``AERON_SPARK_SINK_FAULT`` set (connector/sink/fault_injection.py) it pauses at that point. Prints
one line ``RESULT <json>`` (outcome, data_start, end) or ``FAILED <exception class>: <message>``;
exits 0 or 3."""

from __future__ import annotations

import argparse
import json
import sys

import pyarrow as pa
from aeron_spark.connector.sink.commit_job import commit_staged
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import streaming_batch_key
from aeron_spark.connector.sink.writer import TaskInfo, stage_task_output

SINK_ID = "q-stalled"
STREAM_ID = 4110


def sink_options(archive_dir: str | None, staging_dir: str, *, control_channel: str | None = None,
                 channel: str = "aeron:ipc") -> SinkOptions:
    where = {"archive.dir": archive_dir} if archive_dir is not None else {"archive.controlChannel": control_channel}
    return SinkOptions.parse({"channel": channel, "streamId": str(STREAM_ID), **where,
                              "sink.stagingDir": staging_dir, "sink.termLength": "64k", "sink.mtu": "1408",
                              "sink.commitTimeoutMs": "8000", "archive.timeoutMs": "5000"}, streaming=True)


def rows(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}-".encode().ljust(100, b".") for i in range(n)]


def stage(options: SinkOptions, batch_id: int, payloads: list[bytes], attempt: int):
    table = pa.table({"payload": pa.array(payloads, pa.binary())})
    return stage_task_output(options, iter(table.to_batches()), TaskInfo(0, attempt, attempt, batch_id, SINK_ID),
                             streaming_batch_key(batch_id))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--archive-dir")
    parser.add_argument("--control-channel")
    parser.add_argument("--channel", default="aeron:ipc")
    parser.add_argument("--staging-dir", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--attempt", type=int, default=0)
    args = parser.parse_args()
    options = sink_options(args.archive_dir, args.staging_dir, control_channel=args.control_channel,
                           channel=args.channel)
    try:
        result = commit_staged(options, [stage(options, args.batch, rows(args.rows, args.tag), args.attempt)],
                               args.batch)
    except Exception as error:  # noqa: BLE001 - reported to the test, which judges it
        print(f"FAILED {type(error).__name__}: {error}", flush=True)
        return 3
    print("RESULT " + json.dumps({"outcome": result.outcome.name, "data_start": result.data_start,
                                  "end": result.end}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
