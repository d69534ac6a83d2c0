"""What each of Spark's Python workers imports of ours: a new query's first micro-batch starts five of
them one after the other (create_data_source, plan_data_source_read, write_into_data_source, the
executor's pyspark.worker, the sink's commit runner), each a fresh process importing
``aeron_spark.connector.data_source``, so each role imports only the code it runs
(docs/reliability.md, where a first batch's time goes). Checked by module names in a fresh
interpreter, not by time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SOURCE_OPTIONS = {"archive.controlChannel": "aeron:udp?endpoint=127.0.0.1:18010",
                  "channel": "aeron:udp?endpoint=127.0.0.1:20121", "streamId": "7",
                  "startingPositions": "earliest"}
ARCHIVE_CLIENT = ("aeron_spark.archive.client.archive_client", "aeron_spark.archive.codecs.wire_messages")
SOURCE_READING = ("aeron_spark.connector.source.batch_reader", "aeron_spark.connector.source.offset_reader",
                  "aeron_spark.connector.source.archive_access", "aeron_spark.connector.archive_reading",
                  "aeron_spark.connector.source.message_batches")
SINK_CODE = ("aeron_spark.connector.sink.writer", "aeron_spark.connector.sink.commit_job",
             "aeron_spark.connector.sink.commit", "aeron_spark.connector.commit_markers")
SBE = ("aeron_spark.connector.sbe", "aeron_spark.connector.source.sbe_columns")
HEAVY_LIBRARIES = ("pyarrow.compute", "crc32c")


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def assert_none_of(modules: set[str], *groups: tuple[str, ...]) -> None:
    loaded = sorted(name for group in groups for name in group if name in modules)
    assert not loaded, f"imported but not needed here: {loaded}"


def test_importing_the_data_source_imports_no_role_code_nor_aeron():
    modules = modules_after("import aeron_spark.connector.data_source")
    assert_none_of(modules, ARCHIVE_CLIENT, SOURCE_READING, SINK_CODE, SBE, HEAVY_LIBRARIES,
                   ("aeron_spark.driver_integration", "aeron_spark.connector.source.micro_batch_stream",
                    "numpy", "pyarrow", "cffi"))


def test_planning_a_read_pickles_the_reader_without_the_archive_client_or_the_reading_code():
    modules = modules_after(f"""
        from pyspark import cloudpickle
        from aeron_spark.connector.data_source import AeronArchiveDataSource
        source = AeronArchiveDataSource({SOURCE_OPTIONS!r})
        cloudpickle.dumps(source.streamReader(source.schema()))
    """)
    assert "aeron_spark.connector.source.micro_batch_stream" in modules
    assert_none_of(modules, ARCHIVE_CLIENT, SOURCE_READING, SINK_CODE, SBE, HEAVY_LIBRARIES)


def test_planning_a_write_imports_no_source_code_nor_sbe_nor_the_commit_nor_the_archive_client():
    sink_options = {key: value for key, value in SOURCE_OPTIONS.items() if key != "startingPositions"}
    modules = modules_after(f"""
        import tempfile
        from pyspark import cloudpickle
        from pyspark.sql.types import BinaryType, StructField, StructType
        from aeron_spark.connector.data_source import AeronArchiveDataSource
        sink = AeronArchiveDataSource({{**{sink_options!r}, "checkpointLocation": tempfile.mkdtemp(), "sink.id": "s"}})
        cloudpickle.dumps(sink.streamWriter(StructType([StructField("payload", BinaryType())]), False))
    """)
    assert "aeron_spark.connector.sink.writer" in modules
    assert_none_of(modules, ARCHIVE_CLIENT, SOURCE_READING, SBE, HEAVY_LIBRARIES,
                   ("aeron_spark.connector.source.micro_batch_stream", "aeron_spark.connector.sink.commit_job",
                    "aeron_spark.connector.commit_markers"))


def test_the_executors_reading_code_imports_the_sbe_decoder_only_for_an_sbe_read():
    modules = modules_after("import aeron_spark.connector.source.batch_reader, aeron_spark.connector.sink.writer")
    assert "aeron_spark.connector.source.partition_reader" in modules
    assert_none_of(modules, SBE)


def test_staging_a_batch_on_an_executor_imports_no_archive_client():
    modules = modules_after("""
        import pyarrow as pa
        from aeron_spark.connector.sink.writer import to_staged_batch
        to_staged_batch(pa.record_batch([pa.array([b"x"])], names=["payload"]))
    """)
    assert "aeron_spark.connector.commit_markers" in modules
    assert_none_of(modules, ARCHIVE_CLIENT, SOURCE_READING, SBE)
