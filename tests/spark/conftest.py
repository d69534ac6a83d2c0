"""One local[2] SparkSession for every test under tests/spark (settings from the Spark notes §5)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    # Workers must run this interpreter (same minor version and the editable install).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("aeron-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


# The source tests' shared set-up; a test module defining its own `archive` uses that instead.
@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """A real sidecar for the module, with a client that records test streams on it."""
    from tests.spark.source_fixtures import RecordingArchive
    from tests.support.sidecar import running_sidecar

    with running_sidecar(tmp_path_factory.mktemp("sidecar") / "archive") as sidecar:
        recording_archive = RecordingArchive(sidecar)
        try:
            yield recording_archive
        finally:
            recording_archive.close()


@pytest.fixture(scope="module")
def spark_source(spark):
    """The session with the aeron-archive format registered."""
    from aeron_spark.connector import register

    register(spark)
    return spark
