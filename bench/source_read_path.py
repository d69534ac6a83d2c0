"""Profile of the source's read path in one Python process, without Spark: where a row's time goes.

Records ``--workload`` messages through the real sidecar (or reuses ``--archive-dir`` holding
recording ``--recording-id``), then times, for the whole recording in one replay range:

1. replay only: every replayed block polled from the image, nothing copied (the receive floor);
2. replay + copy: each block copied out of the term buffer (``bytes``);
3. assembly only: the batch builder fed with blocks already in memory (frames -> Arrow batches);
4. the partition reader end to end (``read_range``: replay, staging copy, assembly, Arrow),
   default columns and payload only; with ``--sbe`` also decoded rows;
5. Arrow IPC of those batches to a null sink, as Spark's Python worker writes them to the JVM.

    .venv/bin/python bench/source_read_path.py --workload 10000000x32
    .venv/bin/python bench/source_read_path.py --workload 10000000x64 --sbe

Prints min / median seconds and M rows/s of each stage over ``--repetitions``, and the CPU time this
process spent per row (all its threads; the sidecar's replay work is not in it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from spark_bench_support import Workload, payload_block, progress, running_sidecar
from spark_source_vs_parquet import TERM_LENGTH, record


def record_workload(sidecar, workload: Workload, sbe: bool) -> int:
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.driver_integration import AeronClient

    if sbe:
        from sbe_decoding import ticks
        data = ticks(workload.count)
    else:
        data = payload_block(workload, seed=0)
    aeron = AeronClient(sidecar.aeron_dir, client_name="source-read-path")
    try:
        archive = ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=10,
                                        response_channel="aeron:ipc", aeron=aeron)
        try:
            recording_id, stop, _ = record(archive, aeron, workload, data, 4301)
            progress(f"recorded {workload.label}: recording {recording_id}, {stop:,} bytes")
            return recording_id
        finally:
            archive.close()
    finally:
        aeron.close()


def timed(name: str, repetitions: int, rows: int, run) -> None:
    seconds, cpu = [], []
    for _ in range(repetitions):
        started, cpu_started = time.perf_counter(), time.process_time()
        run()
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    best, median = min(seconds), statistics.median(seconds)
    print(f"{name:<44} {best:6.3f} s / {median:6.3f} s   {rows / best / 1e6:6.2f} / {rows / median / 1e6:6.2f} M rows/s"
          f"   this process's CPU {min(cpu) / rows * 1e9:6.1f} ns/row", flush=True)


def profile(archive_dir: str, recording_id: int, rows: int, repetitions: int, schema_path: Path | None) -> None:
    import pyarrow as pa

    from aeron_spark.connector.source.archive_access import open_archive
    from aeron_spark.connector.source.message_batches import MessageBatchBuilder, OutputColumns
    from aeron_spark.connector.source.options import ReadMode, SourceOptions
    from aeron_spark.connector.source.partition_planner import ReplayRange
    from aeron_spark.connector.source.partition_reader import read_range

    base = {"archive.dir": archive_dir, "recordingIds": str(recording_id)}
    options = SourceOptions.parse(base, ReadMode.BATCH)
    access = open_archive(options.connection)
    try:
        descriptor = access.describe(recording_id)
        start, end = descriptor.start_position, descriptor.stop_position
        whole = ReplayRange(recording_id, start, end)
        print(f"recording {recording_id}: {end - start:,} bytes, {rows:,} messages, one range")

        def replay_only():
            with access.replay_pump(recording_id, start, end, options.replay) as pump:
                while pump.next_block(lambda view, _p: None) is not None:
                    pass

        blocks: list[tuple[int, bytes]] = []

        def replay_copy():
            blocks.clear()
            with access.replay_pump(recording_id, start, end, options.replay) as pump:
                while (block := pump.next_block(lambda view, _p: bytes(view))) is not None:
                    blocks.append(block)

        def assemble_only(columns):
            builder = MessageBatchBuilder(recording_id=recording_id, session_id=descriptor.session_id,
                                          stream_id=descriptor.stream_id, start_position=start,
                                          min_end_position=start, columns=columns)
            count = 0
            for position, block in blocks:
                for batch in builder.add_block(block, position):
                    count += batch.num_rows
            for batch in builder.finish():
                count += batch.num_rows
            assert count == rows, count

        captured: list[pa.RecordBatch] = []

        def reader(read_options, keep=False):
            def run():
                captured.clear()
                count = 0
                for batch in read_range(whole, read_options, access):
                    count += batch.num_rows
                    if keep:
                        captured.append(batch)
                assert count == rows, count
            return run

        def ipc():
            sink = pa.MockOutputStream()
            wrapped = [pa.RecordBatch.from_arrays([pa.StructArray.from_arrays(b.columns, fields=list(b.schema))],
                                                  ["_0"]) for b in captured]
            with pa.ipc.new_stream(sink, wrapped[0].schema) as writer:
                for batch in wrapped:
                    writer.write_batch(batch)

        payload_only = OutputColumns(("payload",))
        timed("1. replay only (no copy)", repetitions, rows, replay_only)
        timed("2. replay + copy out of the term buffer", repetitions, rows, replay_copy)
        timed("3. assembly only, default columns", repetitions, rows, lambda: assemble_only(None))
        timed("3. assembly only, payload only", repetitions, rows, lambda: assemble_only(payload_only))
        blocks.clear()
        timed("4. read_range, default columns", repetitions, rows, reader(options))
        timed("4. read_range, payload only", repetitions, rows,
              reader(dataclasses.replace(options, output_columns=("payload",)), keep=True))
        timed("5. Arrow IPC framing (no socket), payload only", repetitions, rows, ipc)
        if schema_path is not None:
            sbe_options = SourceOptions.parse({**base, "sbe.schema": str(schema_path), "sbe.messages": "Tick"},
                                              ReadMode.BATCH)
            timed("4. read_range, sbe.schema decoded", repetitions, rows, reader(sbe_options, keep=True))
            timed("5. Arrow IPC framing (no socket), decoded", repetitions, rows, ipc)
        sizes = [b.num_rows for b in captured]
        print(f"batches: {len(sizes)}, rows per batch {min(sizes):,}-{max(sizes):,}")
    finally:
        access.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Workload.parser(TERM_LENGTH // 8), default=Workload(10_000_000, 32))
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--sbe", action="store_true", help="record SBE Tick messages (64 B) and time decoding too")
    parser.add_argument("--work-dir", type=Path, help="where the archive goes (default: a temp dir)")
    args = parser.parse_args(argv)
    workload = Workload(args.workload.count, 64) if args.sbe else args.workload
    work = Path(tempfile.mkdtemp(prefix="source-read-path-", dir=args.work_dir))
    try:
        schema_path = None
        if args.sbe:
            from sbe_decoding import SCHEMA_XML
            schema_path = work / "ticks.xml"
            schema_path.write_text(SCHEMA_XML)
        with contextlib.ExitStack() as stack:
            sidecar = stack.enter_context(running_sidecar(
                work / "archive", "--control-channel", "aeron:ipc", "--control-stream-id", "10",
                "--log-level", "WARNING"))
            recording_id = record_workload(sidecar, workload, args.sbe)
            profile(str(sidecar.archive_dir), recording_id, workload.count, args.repetitions, schema_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
