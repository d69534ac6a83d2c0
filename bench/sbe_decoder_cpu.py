"""Microbenchmark: CPU ns per row of ``SbeDecoder.decode`` with the C helper and with the numpy path.

Decodes batches of ``--rows`` back-to-back 64-byte Tick messages (bench/sbe_decoding.py's schema and
data) alternating the two paths (``AERON_SPARK_SBE_NATIVE``) in this one process, ``--repetitions``
times each, and prints the minimum and median process CPU time per row of each and their ratio.
No Spark, no sidecar: just the decoder.

    .venv/bin/python bench/sbe_decoder_cpu.py                      # 131,072 rows a batch (the source's)
    .venv/bin/python bench/sbe_decoder_cpu.py --rows 1000000 --repetitions 9
    .venv/bin/python bench/sbe_decoder_cpu.py --batches 4       # 4 batches in turn: not in cache
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import pyarrow as pa
from sbe_decoding import MESSAGE_SIZE, SCHEMA_XML, ticks

from aeron_spark.connector.sbe import SbeDecoder, native_fields, parse_schema

PATHS = {"numpy": "0", "native": "1"}


def payloads(count: int) -> pa.BinaryArray:
    offsets = (np.arange(count + 1, dtype=np.int32) * MESSAGE_SIZE)
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(ticks(count))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=131_072)
    parser.add_argument("--repetitions", type=int, default=15)
    parser.add_argument("--batches", type=int, default=1, help="distinct batches decoded in turn (4 x 8 MB: out of cache)")
    args = parser.parse_args(argv)
    if not native_fields.built():
        parser.error("the C helper is not built (pip install -e . builds it)")
    batches = [payloads(args.rows) for _ in range(args.batches)]
    batch = batches[0]
    decoder = SbeDecoder(parse_schema(SCHEMA_XML))
    results = {}
    for path, switch in PATHS.items():  # both paths decode alike
        os.environ[native_fields.SWITCH] = switch
        results[path] = decoder.decode(batch).by_message["Tick"].values
    assert results["numpy"].equals(results["native"]), "the two paths decode differently"
    cpu = {path: [] for path in PATHS}
    for repetition in range(args.repetitions):
        for turn, (path, switch) in enumerate(PATHS.items()):
            os.environ[native_fields.SWITCH] = switch
            batch = batches[(repetition * len(PATHS) + turn) % args.batches]  # not the batch just decoded
            began = time.process_time_ns()
            decoder.decode(batch)
            cpu[path].append((time.process_time_ns() - began) / args.rows)
    for path, times in cpu.items():
        print(f"{path:>7}: min {min(times):6.1f} ns/row, median {statistics.median(times):6.1f} ns/row "
              f"({args.rows:,} rows a batch, {args.batches} batch(es) in turn, {args.repetitions} repetitions)")
    print(f"numpy / native: min {min(cpu['numpy']) / min(cpu['native']):.2f}x, "
          f"median {statistics.median(cpu['numpy']) / statistics.median(cpu['native']):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
