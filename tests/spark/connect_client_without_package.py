"""A Spark Connect client for which this project does not exist: run as a script by
tests/spark/test_spark_connect.py, it makes ``aeron_spark`` and ``pyspark_aeron_archive`` unimportable,
reads one recording with ``format("aeron-archive")`` through the Connect server and prints the rows as
JSON lines ``[recording_id, position, payload hex]``, in position order.

Usage: connect_client_without_package.py SC_URL ARCHIVE_DIR RECORDING_ID
"""

from __future__ import annotations

import importlib.abc
import json
import sys

HIDDEN_PACKAGES = ("aeron_spark", "pyspark_aeron_archive")


class HidePackages(importlib.abc.MetaPathFinder):
    """Fails every import of the project's packages, as on a machine without them."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.split(".")[0] in HIDDEN_PACKAGES:
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden: a client without aeron-spark)")
        return None


def main(url: str, archive_dir: str, recording_id: str) -> None:
    sys.meta_path.insert(0, HidePackages())
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        rows = (spark.read.format("aeron-archive").option("archive.dir", archive_dir)
                .option("recordingIds", recording_id).load()
                .orderBy("position").select("recording_id", "position", "payload").collect())
    finally:
        spark.stop()
    imported = sorted(name for name in sys.modules if name.split(".")[0] in HIDDEN_PACKAGES)
    if imported:
        raise SystemExit(f"the client imported {imported}")
    for row in rows:
        print(json.dumps([row.recording_id, row.position, bytes(row.payload).hex()]))


if __name__ == "__main__":
    main(*sys.argv[1:])
