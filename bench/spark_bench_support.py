"""What the Spark benchmarks share: workloads, their payloads, the Parquet side, the Spark session,
the fingerprint both sides must agree on, and the timing summary.

Imported by bench/spark_source_vs_parquet.py and bench/spark_sink_vs_parquet.py (run as scripts,
so this folder is on sys.path).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PARQUET_ROW_GROUP_BYTES = 16 << 20  # so Spark can split one file across both cores


@dataclass(frozen=True)
class Workload:
    count: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.count:,} x {self.size} B"

    @property
    def payload_mb(self) -> float:
        return self.count * self.size / 1e6

    @classmethod
    def parser(cls, max_size: int):
        """An argparse type for ``COUNTxSIZE`` with 8 <= SIZE <= max_size."""
        def parse(text: str) -> Workload:
            count, _, size = text.lower().partition("x")
            try:
                workload = cls(int(count.replace("_", "")), int(size))
            except ValueError:
                raise argparse.ArgumentTypeError(f"workload {text!r}: expected COUNTxSIZE, e.g. 2000000x32") from None
            if workload.count <= 0 or not 8 <= workload.size <= max_size:
                raise argparse.ArgumentTypeError(f"workload {text!r}: count must be > 0 and size in 8..{max_size}")
            return workload
        return parse


def payload_block(workload: Workload, seed: int) -> np.ndarray:
    """All payloads back to back: random bytes (incompressible), message i at [i*size, (i+1)*size)."""
    return np.random.default_rng(seed).integers(0, 256, workload.count * workload.size, dtype=np.uint8)


def write_parquet(path: Path, workload: Workload, data: np.ndarray) -> None:
    """The payloads as one uncompressed Parquet column ``payload``, written with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    offsets = np.arange(0, workload.count + 1, dtype=np.int32) * workload.size
    payload = pa.Array.from_buffers(pa.binary(), workload.count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    pq.write_table(pa.table({"payload": payload}), path, compression="none",
                   row_group_size=max(1, PARQUET_ROW_GROUP_BYTES // workload.size))


def fingerprint(dataframe) -> tuple:
    """count(*), sum(length(payload)), bit_xor(xxhash64(payload)): touches every payload byte."""
    from pyspark.sql import functions as F

    row = dataframe.agg(F.count("*"), F.sum(F.length("payload")), F.bit_xor(F.xxhash64("payload"))).collect()[0]
    return tuple(row)


def local_spark(app_name: str, **config: str):
    """local[2] without UI or progress bars, two shuffle partitions, plus ``config``."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class Timings:
    seconds: list[float]

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def line(self, name: str, workload: Workload) -> str:
        return (f"  {name:<26} min {self.best:7.3f} s  median {self.median:7.3f} s   "
                f"best {workload.count / self.best / 1e6:6.2f} M rows/s {workload.payload_mb / self.best:7.1f} MB/s   "
                f"median {workload.count / self.median / 1e6:6.2f} M rows/s "
                f"{workload.payload_mb / self.median:7.1f} MB/s")

    def ratio_line(self, name: str, reference: Timings, reference_name: str) -> str:
        """How fast this is relative to ``reference`` (rows/s ratio = reference seconds / ours)."""
        return (f"  ratio {name} / {reference_name} (rows/s): best {reference.best / self.best:.2f}x, "
                f"median {reference.median / self.median:.2f}x")
