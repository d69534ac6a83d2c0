"""What each of Spark's Python workers pays for our package: CPU and modules, per worker role.

A new query's first micro-batch starts its Python workers one after another, and each is a fresh
process that imports ``aeron_spark.connector.data_source`` (docs/reliability.md, where a first
batch's time goes). For each role this runs a fresh interpreter that imports the role's pyspark
worker module (as the worker does before it reads our pickled objects), then does what that
worker does with the connector, and reports the CPU time of our part (CPU, not wall time: steady
on a loaded machine) and the modules it added:

* ``lookup``  pyspark.sql.worker.lookup_data_sources: imports ``pyspark_aeron_archive``;
* ``create``  create_data_source: the data source with its options, and its schema;
* ``plan``    plan_data_source_read: the stream reader, pickled;
* ``write``   write_into_data_source: the stream writer, pickled;
* ``source``  python_streaming_source_runner: the stream reader and the code its offsets reach;
* ``exec``    pyspark.worker (the task): the reading and the staging code;
* ``commit``  python_streaming_sink_runner: the writer and the commit.

No archive is reached (the options name one that is not contacted).

    .venv/bin/python bench/worker_imports.py [--rounds 5] [--overlay DIR ...]

``--overlay DIR`` (repeatable) measures the package found in DIR instead (put first on PYTHONPATH:
a directory holding ``aeron_spark/`` and ``pyspark_aeron_archive/``, e.g. a commit's tree laid
out as installed), so that versions are compared back to back, rounds interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROLES = {
    "lookup": "pyspark.sql.worker.lookup_data_sources",
    "create": "pyspark.sql.worker.create_data_source",
    "plan": "pyspark.sql.worker.plan_data_source_read",
    "write": "pyspark.sql.worker.write_into_data_source",
    "source": "pyspark.sql.streaming.python_streaming_source_runner",
    "exec": "pyspark.worker",
    "commit": "pyspark.sql.worker.python_streaming_sink_runner",
}
# Options of a live read and of the sink; the archive they name is never contacted here.
SOURCE_OPTIONS = {"archive.controlChannel": "aeron:udp?endpoint=127.0.0.1:18010",
                  "channel": "aeron:udp?endpoint=127.0.0.1:20121", "streamId": "7"}

ROLE_SCRIPT = r"""
import importlib, json, sys, tempfile, time
role, worker_module, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
importlib.import_module(worker_module)
import pyspark.sql.datasource  # noqa: F401 - every data source worker has it
before = set(sys.modules)
started = time.process_time()
if role == "lookup":
    import pyspark_aeron_archive  # noqa: F401
else:
    from pyspark import cloudpickle
    from pyspark.sql.types import BinaryType, StructField, StructType
    from aeron_spark.connector.data_source import AeronArchiveDataSource
    if role in ("create", "plan", "source", "exec"):
        source = AeronArchiveDataSource({**options, "startingPositions": "earliest"})
        schema = source.schema()
        if role != "create":
            reader = source.streamReader(schema)
        if role == "plan":
            cloudpickle.dumps(reader)
        if role == "source":  # what latestOffset and partitions reach
            import aeron_spark.connector.source.offset_reader, aeron_spark.connector.source.timestamp_resolution  # noqa
            import aeron_spark.connector.source.archive_access, aeron_spark.connector.archive_connection  # noqa
        if role == "exec":  # the task reads (batch_reader) and stages (the writer)
            import aeron_spark.connector.source.batch_reader, aeron_spark.connector.sink.writer  # noqa
    if role in ("write", "commit"):
        sink = AeronArchiveDataSource({**options, "checkpointLocation": tempfile.mkdtemp(), "sink.id": "bench"})
        writer = sink.streamWriter(StructType([StructField("payload", BinaryType())]), False)
        if role == "write":
            cloudpickle.dumps(writer)
        if role == "commit":
            import aeron_spark.connector.sink.commit_job  # noqa: F401
cpu_ms = (time.process_time() - started) * 1000.0
added = set(sys.modules) - before
print(json.dumps({"cpu_ms": cpu_ms, "modules": len(added),
                  "ours": len([m for m in added if m.startswith(("aeron_spark", "pyspark_aeron_archive"))]),
                  "libraries": sorted(m for m in added if m in ("numpy", "pyarrow", "pyarrow.compute", "cffi", "crc32c"))}))
"""


def measure(role: str, overlay: Path | None) -> dict:
    env = dict(os.environ)
    if overlay is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(overlay), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", ROLE_SCRIPT, role, ROLES[role], json.dumps(SOURCE_OPTIONS)],
                          env=env, capture_output=True, text=True, timeout=300, check=False,
                          cwd=tempfile.gettempdir())  # not the repository: its folders are not the installed layout
    if done.returncode != 0:
        raise RuntimeError(f"role {role} ({overlay or 'this tree'}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="fresh interpreters per role and version")
    parser.add_argument("--overlay", type=Path, action="append", default=[],
                        help="a directory with aeron_spark/ to measure instead of the installed tree")
    args = parser.parse_args(argv)
    versions: list[Path | None] = list(args.overlay) or [None]
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for role in ROLES:
            for version in versions:
                results.setdefault((role, str(version or "this tree")), []).append(measure(role, version))
    names = [str(version or "this tree") for version in versions]
    print("| worker (role) | " + " | ".join(f"{name}: CPU ms (median), our / all modules added" for name in names) + " |")
    print("|---|" + "---|" * len(names))
    for role in ROLES:
        cells = []
        for name in names:
            runs = results[(role, name)]
            cells.append(f"{statistics.median(r['cpu_ms'] for r in runs):.0f} ({runs[0]['ours']} / {runs[0]['modules']}"
                         + (f"; {', '.join(runs[0]['libraries'])}" if runs[0]["libraries"] else "") + ")")
        print(f"| {role} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
