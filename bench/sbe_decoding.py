"""Benchmark: SBE decoding in the source, against reading the raw payload and a per-row Python UDF.

One recording of ``--messages`` (default 10,000,000) SBE ``Tick`` messages of 64 bytes (an 8-byte
header and a 56-byte root block: ints, a decimal price composite, an enum, an optional int) is made through the real
sidecar, then one local[2] Spark session runs, alternating, each followed by an aggregation that
touches every value of every row (``count(*)`` and ``bit_xor(xxhash64(<columns>))``):

(a) raw:     the source's default rows, hashing ``payload``;
(b) decoded: the source with ``sbe.schema`` and ``sbe.messages=Tick``, hashing every decoded column;
(c) UDF:     the raw read through a per-row Python ``udf`` that ``struct.unpack``s each payload into
             the same struct, hashing it.

(a') and (b') are (a) and (b) given a user schema of just the columns their aggregation reads
(``payload``; the ten decoded fields): the source then builds (and decodes) only those, the
column pruning Spark does not do for a Python source. (b+) is (b) with a user schema asking for
``session_id``, ``stream_id`` and ``reserved_value`` too (the decoded rows' default until
session 7). (a*) and (b*) are an in-memory Python source yielding (a)'s and (b)'s very batches
(bench/in_memory_source.py, read once in this process before Spark starts): the ceiling Spark's
Python Data Source hop leaves each read, in the same run.

(b), (b'), (b+), (b*) and (c) must hash alike (the same values, types and nulls), which checks the decoder
against an independent struct layout. It prints min / median seconds and rows/s of each and the
ratios b/a (target >= 0.7), b/c (target >= 10), a/c (the bound of b/c), b'/a', b*/a*, a/a*, b/b*.

    .venv/bin/python bench/sbe_decoding.py                      # 10 M messages
    .venv/bin/python bench/sbe_decoding.py --messages 1000000 --repetitions 2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from spark_bench_support import (
    Timings,
    Workload,
    exit_on_sigterm,
    local_spark,
    progress,
    running_sidecar,
    spark_processes_stopped,
    stop_session,
)
from spark_source_vs_parquet import record

MESSAGE_SIZE = 64
STREAM_ID = 4101
SCHEMA_XML = """<?xml version="1.0" encoding="UTF-8"?>
<sbe:messageSchema xmlns:sbe="http://fixprotocol.io/2016/sbe" package="bench" id="77" version="0">
    <types>
        <composite name="messageHeader">
            <type name="blockLength" primitiveType="uint16"/>
            <type name="templateId" primitiveType="uint16"/>
            <type name="schemaId" primitiveType="uint16"/>
            <type name="version" primitiveType="uint16"/>
        </composite>
        <composite name="Decimal">
            <type name="mantissa" primitiveType="int64"/>
            <type name="exponent" primitiveType="int8"/>
        </composite>
        <enum name="Side" encodingType="uint8">
            <validValue name="Buy">1</validValue>
            <validValue name="Sell">2</validValue>
        </enum>
    </types>
    <message name="Tick" id="1" blockLength="56">
        <field name="tradeId" id="1" type="int64"/>
        <field name="transactTime" id="2" type="int64"/>
        <field name="price" id="3" type="Decimal"/>
        <field name="quantity" id="4" type="int32"/>
        <field name="securityId" id="5" type="int32"/>
        <field name="side" id="6" type="Side"/>
        <field name="orderId" id="7" type="int64" presence="optional"/>
        <field name="sequence" id="8" type="int64"/>
        <field name="venue" id="9" type="int16"/>
        <field name="matchNumber" id="10" type="int32"/>
    </message>
</sbe:messageSchema>
"""
TICK_DTYPE = np.dtype([("blockLength", "<u2"), ("templateId", "<u2"), ("schemaId", "<u2"), ("version", "<u2"),
                       ("tradeId", "<i8"), ("transactTime", "<i8"), ("mantissa", "<i8"), ("exponent", "i1"),
                       ("quantity", "<i4"), ("securityId", "<i4"), ("side", "u1"), ("orderId", "<i8"),
                       ("sequence", "<i8"), ("venue", "<i2"), ("matchNumber", "<i4")])
assert TICK_DTYPE.itemsize == MESSAGE_SIZE
DECODED_COLUMNS = ("tradeId", "transactTime", "price", "quantity", "securityId", "side", "orderId", "sequence", "venue",
                   "matchNumber")
DECODED_ONLY = ("tradeId bigint not null, transactTime bigint not null, "
                "price struct<mantissa:bigint not null,exponent:tinyint not null> not null, quantity int not null, "
                "securityId int not null, side string, orderId bigint, sequence bigint not null, "
                "venue smallint not null, matchNumber int not null")
UDF_TYPE = ("tradeId bigint, transactTime bigint, price struct<mantissa:bigint,exponent:tinyint>, quantity int, "
            "securityId int, side string, orderId bigint, sequence bigint, venue smallint, matchNumber int")


def ticks(count: int) -> np.ndarray:
    """``count`` Tick messages back to back (every 10th orderId is the null value)."""
    rng = np.random.default_rng(7)
    messages = np.zeros(count, dtype=TICK_DTYPE)
    messages["blockLength"], messages["templateId"], messages["schemaId"] = 56, 1, 77
    messages["tradeId"] = np.arange(count)
    messages["transactTime"] = 1_700_000_000_000_000_000 + np.arange(count) * 1000
    messages["mantissa"] = rng.integers(1, 10_000_000, count)
    messages["exponent"] = -4
    messages["quantity"] = rng.integers(1, 1000, count)
    messages["securityId"] = rng.integers(1, 50, count)
    messages["side"] = rng.integers(1, 3, count)
    messages["orderId"] = np.where(np.arange(count) % 10 == 0, np.iinfo(np.int64).min, rng.integers(0, 1 << 40, count))
    messages["sequence"] = np.arange(count)
    messages["venue"] = rng.integers(0, 20, count)
    messages["matchNumber"] = rng.integers(0, 1 << 30, count)
    return messages.view(np.uint8)


def unpack_tick(payload: bytes):
    """The per-row Python UDF (c): the usual hand-written decoder."""
    import struct
    (_bl, _tid, _sid, _ver, trade_id, transact_time, mantissa, exponent, quantity, security_id, side, order_id,
     sequence, venue, match_number) = struct.unpack("<HHHHqqqbiiBqqhi", payload)
    return (trade_id, transact_time, (mantissa, exponent), quantity, security_id,
            {1: "Buy", 2: "Sell"}.get(side), None if order_id == -(1 << 63) else order_id, sequence, venue, match_number)


def hashed(frame, columns) -> tuple:
    from pyspark.sql import functions as F
    return tuple(frame.agg(F.count("*"), F.bit_xor(F.xxhash64(*columns))).collect()[0])


RAW, DECODED, UDF = "(a) raw payload", "(b) sbe.schema decoded", "(c) per-row Python UDF"
RAW_PRUNED, DECODED_PRUNED = "(a') raw, .schema(payload only)", "(b') decoded, .schema(decoded only)"
DECODED_WITH_METADATA = "(b+) decoded, + session_id, stream_id, reserved_value"
WITH_METADATA = ("recording_id bigint not null, position bigint not null, " + DECODED_ONLY
                 + ", session_id int not null, stream_id int not null, reserved_value bigint not null")
RAW_CEILING, DECODED_CEILING = "(a*) in-memory, (a)'s batches", "(b*) in-memory, (b)'s batches"


def measure(spark, archive_dir: str, recording_id: int, schema_path: Path, count: int,
            repetitions: int, ceiling: dict[str, list[str]] | None) -> dict[str, Timings]:
    from pyspark.sql import functions as F

    def base():  # a new reader each time: DataFrameReader.option changes the reader it is called on
        return (spark.read.format("aeron-archive").option("archive.dir", archive_dir)
                .option("recordingIds", str(recording_id)).option("minPartitions", "2"))

    def decoding():
        return base().option("sbe.schema", str(schema_path)).option("sbe.messages", "Tick")

    per_row = F.udf(unpack_tick, UDF_TYPE)
    scans = {
        RAW: lambda: hashed(base().load(), ["payload"]),
        DECODED: lambda: hashed(decoding().load(), DECODED_COLUMNS),
        UDF: lambda: hashed(base().load().select(per_row("payload").alias("t")).select("t.*"), DECODED_COLUMNS),
        RAW_PRUNED: lambda: hashed(base().schema("payload binary not null").load(), ["payload"]),
        DECODED_PRUNED: lambda: hashed(decoding().schema(DECODED_ONLY).load(), DECODED_COLUMNS),
        DECODED_WITH_METADATA: lambda: hashed(decoding().schema(WITH_METADATA).load(), DECODED_COLUMNS),
    }
    if ceiling is not None:
        from in_memory_source import reader
        scans[RAW_CEILING] = lambda: hashed(reader(spark, ceiling[RAW_CEILING]).load(), ["payload"])
        scans[DECODED_CEILING] = lambda: hashed(reader(spark, ceiling[DECODED_CEILING]).load(), DECODED_COLUMNS)
    answers = {}
    for name, scan in scans.items():
        started = time.perf_counter()
        answers[name] = scan()
        progress(f"warm-up {name}: {time.perf_counter() - started:.2f} s, answer {answers[name]}")
    if any(answer[0] != count for answer in answers.values()):
        raise AssertionError(f"row counts differ from {count}: {answers}")
    decoded = answers[DECODED]
    for name in (UDF, DECODED_PRUNED, DECODED_WITH_METADATA, DECODED_CEILING):
        if name in answers and answers[name] != decoded:
            raise AssertionError(f"{name} and the decoder disagree: {answers[name]} != {decoded}")
    seconds: dict[str, list[float]] = {name: [] for name in scans}
    for repetition in range(repetitions):
        for name, scan in scans.items():
            started = time.perf_counter()
            scan()
            seconds[name].append(time.perf_counter() - started)
        progress(f"repetition {repetition + 1}/{repetitions}: "
                 + ", ".join(f"{name} {values[-1]:.2f} s" for name, values in seconds.items()))
    return {name: Timings(values) for name, values in seconds.items()}


def ceiling_files(archive_dir: str, recording_id: int, schema_path: Path, work: Path) -> dict[str, list[str]]:
    """(a)'s and (b)'s batches, read once in this process through the source's own code, for the
    in-memory source (bench/in_memory_source.py): the ceiling Spark allows each read."""
    from in_memory_source import materialize

    options = {"archive.dir": archive_dir, "recordingIds": str(recording_id), "minPartitions": "2"}
    decoded = {**options, "sbe.schema": str(schema_path), "sbe.messages": "Tick"}
    files = {}
    for name, read_options in ((RAW_CEILING, options), (DECODED_CEILING, decoded)):
        started = time.perf_counter()
        files[name], rows = materialize(dict(read_options), work, f"ceiling-{len(files)}")
        progress(f"{name}: {rows:,} rows read in {time.perf_counter() - started:.1f} s")
    return files


def record_ticks(sidecar, count: int) -> int:
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.driver_integration import AeronClient

    aeron = AeronClient(sidecar.aeron_dir, client_name="sbe-decoding-bench")
    try:
        archive = ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=10,
                                        response_channel="aeron:ipc", aeron=aeron)
        try:
            started = time.perf_counter()
            recording_id, stop, _mtu = record(archive, aeron, Workload(count, MESSAGE_SIZE), ticks(count), STREAM_ID)
            progress(f"recorded {count:,} ticks: recording {recording_id}, {stop:,} bytes in "
                     f"{time.perf_counter() - started:.1f} s")
            return recording_id
        finally:
            archive.close()
    finally:
        aeron.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, help="where the archive goes (default: a temp dir)")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="skip the in-memory Python source yielding (a)'s and (b)'s batches")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    work = Path(tempfile.mkdtemp(prefix="sbe-decoding-bench-", dir=args.work_dir))
    try:
        schema_path = work / "ticks.xml"
        schema_path.write_text(SCHEMA_XML)
        with contextlib.ExitStack() as stack:
            sidecar = stack.enter_context(running_sidecar(
                work / "archive", "--control-channel", "aeron:ipc", "--control-stream-id", "10",
                "--log-level", "WARNING"))
            recording_id = record_ticks(sidecar, args.messages)
            ceiling = None if args.no_ceiling else ceiling_files(str(sidecar.archive_dir), recording_id,
                                                                 schema_path, work)
            stack.enter_context(spark_processes_stopped())
            spark = local_spark("sbe-decoding", **{"spark.driver.memory": "2g"})
            stack.callback(stop_session, spark)
            from aeron_spark.connector import register
            register(spark)
            if ceiling is not None:
                import in_memory_source
                in_memory_source.register(spark)
            timings = measure(spark, str(sidecar.archive_dir), recording_id, schema_path, args.messages,
                              args.repetitions, ceiling)
            workload = Workload(args.messages, MESSAGE_SIZE)
            print(f"\n{workload.label} SBE Tick messages ({args.repetitions} repetitions, local[2])")
            for name, timing in timings.items():
                print(timing.line(name, workload))
            raw, decoded, per_row = timings[RAW], timings[DECODED], timings[UDF]
            print(decoded.ratio_line("(b) decoded", raw, "(a) raw") + "   target >= 0.70x")
            print(decoded.ratio_line("(b) decoded", per_row, "(c) UDF") + "   target >= 10x")
            print(raw.ratio_line("(a) raw", per_row, "(c) UDF") + "   (the bound of b/c when b/a <= 1)")
            print(timings[DECODED_PRUNED].ratio_line("(b')", timings[RAW_PRUNED], "(a')"))
            print(timings[DECODED_PRUNED].ratio_line("(b')", per_row, "(c) UDF"))
            print(timings[DECODED_WITH_METADATA].ratio_line("(b+)", per_row, "(c) UDF"))
            print(timings[DECODED_WITH_METADATA].ratio_line("(b+)", raw, "(a) raw"))
            if ceiling is not None:
                print(timings[DECODED_CEILING].ratio_line("(b*)", timings[RAW_CEILING], "(a*)")
                      + "   what Spark allows b/a with these columns")
                print(raw.ratio_line("(a)", timings[RAW_CEILING], "(a*)"))
                print(decoded.ratio_line("(b)", timings[DECODED_CEILING], "(b*)"), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
