"""Example: record a few messages with the archive sidecar, then read them with Spark.

1. Starts ``aeron-archive serve`` (the sidecar, with its own embedded media driver) on a
   temporary directory, or uses an archive that is already running (``--archive-dir DIR``).
2. Records a few messages: asks the archive to record an IPC stream, publishes on it, waits
   until the archive has every byte.
3. Reads the recording with ``spark.readStream.format("aeron-archive")`` and
   ``Trigger.AvailableNow`` into a memory table, and prints the rows.

Run::

    .venv/bin/python examples/read_recording_stream.py
    .venv/bin/python examples/read_recording_stream.py --archive-dir /data/archive   # a running archive

Exits 0 when every recorded message was read back once, in order. The sidecar it starts is
stopped by PID when it finishes (also on failure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from aeron_spark.archive.cli.sidecar_process import SidecarProcess

CHANNEL = "aeron:ipc?term-length=64k"
STREAM_ID = 5001
MESSAGES = [f"hello #{i} from Aeron".encode() for i in range(5)] + [b"a fragmented message " * 200]


def record_messages(archive_dir: Path) -> tuple[int, list[tuple[int, bytes]]]:
    """Records MESSAGES on a new IPC stream; returns the recording id and (position, payload)s."""
    from aeron_spark.archive.client.archive_client import ArchiveClient, SourceLocation

    with ArchiveClient.from_mark_file(archive_dir) as archive:  # control channel + driver from the mark file
        stream_id = STREAM_ID + int(time.time()) % 1000  # a fresh stream on a long-running archive
        archive.start_recording(CHANNEL, stream_id, SourceLocation.LOCAL)
        publication = archive.aeron.add_exclusive_publication(CHANNEL, stream_id)
        try:
            recording_id = next(d.recording_id for d in wait_for_recording(archive, publication))
            sent = [(publication.offer_with_retry(payload), payload) for payload in MESSAGES]
            while archive.max_recorded_position(recording_id) < sent[-1][0]:
                time.sleep(0.01)
        finally:
            archive.stop_recording(CHANNEL, stream_id)
            publication.close()
    print(f"recorded {len(sent)} messages as recording {recording_id} (stream {stream_id}, "
          f"{sent[-1][0]} bytes)")
    return recording_id, sent


def wait_for_recording(archive, publication):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [d for d in archive.list_recordings_for_uri(0, None, "aeron:ipc", publication.stream_id)
                 if d.session_id == publication.session_id]
        if found:
            return found
        time.sleep(0.01)
    raise RuntimeError("the archive did not start recording")


def read_with_spark(archive_dir: Path, recording_id: int, checkpoint: Path) -> list:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from aeron_spark.connector import register
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("read-recording-stream")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        register(spark)  # format("aeron-archive") in this session
        stream = (spark.readStream.format("aeron-archive")
                  .option("archive.dir", str(archive_dir))       # control channel and driver from the mark file
                  .option("recordingIds", str(recording_id))
                  .option("startingPositions", "earliest")
                  .option("checkpointLocation", str(checkpoint))  # the query's checkpoint, shared with the source
                  .load())
        query = (stream.writeStream.format("memory").queryName("recorded")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        rows = spark.sql("select recording_id, position, payload, session_id, stream_id "
                         "from recorded order by position").collect()
        for row in rows:
            text = bytes(row.payload).decode()
            print(f"  recording {row.recording_id} position {row.position:>6} session {row.session_id} "
                  f"stream {row.stream_id}: {text[:40]}{'...' if len(text) > 40 else ''} ({len(text)} B)")
        return rows
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="record a few messages and read them with Spark")
    parser.add_argument("--archive-dir", type=Path, help="use this running archive instead of starting one")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="read-recording-stream-"))
    try:
        if args.archive_dir is not None:
            archive_dir = args.archive_dir
            recording_id, sent = record_messages(archive_dir)
            rows = read_with_spark(archive_dir, recording_id, work / "checkpoint")
        else:
            archive_dir = work / "archive"
            with SidecarProcess.start(archive_dir, "--control-channel", "aeron:ipc", "--log-level", "WARNING") as sidecar:
                print(f"archive sidecar running: pid {sidecar.pid}, directory {archive_dir}")
                recording_id, sent = record_messages(archive_dir)
                rows = read_with_spark(archive_dir, recording_id, work / "checkpoint")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    got = [(row.position, bytes(row.payload)) for row in rows]
    if got != sent:
        print(f"MISMATCH: read {len(got)} rows, recorded {len(sent)} messages", file=sys.stderr)
        return 1
    print(f"read all {len(got)} messages back, in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
