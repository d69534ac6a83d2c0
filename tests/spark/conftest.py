"""The Spark tests' session: pytest-spark's one ``spark_session`` (settings: ``spark_options`` in
pyproject's [tool.pytest.ini_options]), named ``spark`` here, and the source tests' sidecar."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.spark.source_fixtures import RecordingArchive


def pytest_configure(config: pytest.Config) -> None:
    # Python workers must run this interpreter (same minor version, the editable install); pytest-spark
    # does not set it, and Spark reads it when the session starts, so it is set before any fixture runs.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark(spark_session: SparkSession) -> SparkSession:
    """pytest-spark's session under the name the tests use; Spark's own log kept to errors."""
    spark_session.sparkContext.setLogLevel("ERROR")
    return spark_session


# The source tests' shared set-up; a test module defining its own `archive` uses that instead.
@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingArchive]:
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
def spark_source(spark: SparkSession) -> SparkSession:
    """The session with the aeron-archive format registered."""
    from aeron_spark.connector import register

    register(spark)
    return spark
