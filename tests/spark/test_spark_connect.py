"""`format("aeron-archive")` through Spark Connect: a `SparkSession.builder.remote(...)` client of the
Connect server pyspark 4.3 ships, against the REAL sidecar.

One Connect server for the module (tests/support/spark_connect_server.py: spark-submit's
SparkConnectServer, local[2], the settings of the local[2] test session), stopped by PID at teardown,
even on failure. The client never registers the data source: the server's Python workers run this
venv's Python and find it as any session does (``pyspark_aeron_archive``), which is what a user's
cluster needs too (docs/deployment.md, "Spark Connect"). Paths in options (``archive.dir``,
``checkpointLocation``) are the server's; here client and server share one machine.

A batch read (also from a client process that cannot import this project), a streaming read
restarted from its checkpoint, and a streaming sink write with a replayed batch read back exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.spark.source_fixtures import (
    WAIT_S,
    numbered_payloads,
    rows_of,
)
from tests.support.spark_connect_server import ConnectServer, running_connect_server

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from tests.spark.source_fixtures import RecordingArchive

pytestmark = pytest.mark.integration

SINK_STREAM_ID = 4101
CLIENT_WITHOUT_PACKAGE = Path(__file__).with_name("connect_client_without_package.py")
# Set by the Connect client in this process; a classic SparkContext refuses to start while it is.
CONNECT_MODE_VARIABLE = "SPARK_CONNECT_MODE_ENABLED"


def session_settings(pytestconfig: pytest.Config) -> dict[str, str]:
    """The local[2] test session's settings (``spark_options`` in pyproject, ``name: value`` lines)."""
    settings = {}
    for line in pytestconfig.getini("spark_options"):
        name, _, value = line.partition(":")
        settings[name.strip()] = value.strip()
    return settings


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[ConnectServer]:
    with running_connect_server(tmp_path_factory.mktemp("spark-connect"), session_settings(pytestconfig)) as server:
        yield server


@pytest.fixture(scope="module")
def remote(connect_server: ConnectServer) -> Iterator[ConnectSession]:
    """A Spark Connect client session; the process is left as it was found for the classic Spark tests.

    ``SparkSession.builder.remote(url)`` refuses while this process's classic test session runs, so
    the session comes from the Connect session's own builder (what ``remote()`` returns), with the
    variable ``remote()`` sets (pyspark's functions then build Connect columns) set for the module.
    """
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    mode_before = os.environ.get(CONNECT_MODE_VARIABLE)
    os.environ[CONNECT_MODE_VARIABLE] = "1"
    try:
        session = ConnectSession.builder.remote(connect_server.url).create()
        try:
            yield session
        finally:
            session.stop()
    finally:
        if mode_before is None:
            os.environ.pop(CONNECT_MODE_VARIABLE, None)
        else:
            os.environ[CONNECT_MODE_VARIABLE] = mode_before


def test_the_server_finds_the_format_and_its_option_errors_reach_the_client(remote, connect_server):
    with pytest.raises(Exception) as failure:
        remote.read.format("aeron-archive").load().collect()
    # A worker that cannot import the package makes Spark skip the lookup with a warning in its log.
    assert "nothing to read: set recordingIds" in str(failure.value), \
        f"{str(failure.value)[:600]}\n{connect_server.data_source_lookup_failure()}"


# --- (a) batch read -----------------------------------------------------------------------------


def test_batch_read_of_a_recording(remote, archive: RecordingArchive):
    recorded, _ = archive.record(numbered_payloads(0, 200), stop=True, reserved_value=lambda i: 7_000 + i)
    frame = (remote.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
             .option("recordingIds", str(recorded.recording_id)).load())
    assert rows_of(frame) == recorded.rows()
    assert sorted(row.reserved_value for row in frame.select("reserved_value").collect()) == \
        [7_000 + i for i in range(200)]


def test_a_client_without_the_package_reads_a_recording(connect_server, archive: RecordingArchive):
    """Only pyspark's Connect client on the client's side: the project's packages are unimportable there."""
    recorded, _ = archive.record(numbered_payloads(0, 50), stop=True)
    client = subprocess.run(
        [sys.executable, str(CLIENT_WITHOUT_PACKAGE), connect_server.url, archive.archive_dir,
         str(recorded.recording_id)], capture_output=True, text=True, timeout=WAIT_S)
    assert client.returncode == 0, client.stderr[-3000:]
    rows = [json.loads(line) for line in client.stdout.splitlines()]
    assert [(rid, position, bytes.fromhex(payload)) for rid, position, payload in rows] == recorded.rows()


# --- (b) streaming read with a checkpoint -------------------------------------------------------------


def read_available_now(remote, archive: RecordingArchive, recording_id: int, checkpoint: Path, output: Path):
    """One AvailableNow query of the recording into parquet at ``output``; returns it once finished."""
    query = (remote.readStream.format("aeron-archive").option("archive.dir", archive.archive_dir)
             .option("recordingIds", str(recording_id)).option("startingPositions", "earliest").load()
             .writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        finished = query.awaitTermination(WAIT_S)
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"the AvailableNow query did not finish within {WAIT_S} s"
    assert query.exception() is None, query.exception()
    return query


def rows_read(query) -> int:
    """Input rows over the query's progress (Connect's progress is a dict whose attributes sum the sources)."""
    return sum(progress.numInputRows for progress in query.recentProgress)


def test_streaming_read_restarts_from_its_checkpoint(remote, archive: RecordingArchive, tmp_path):
    recorded, publication = archive.record(numbered_payloads(0, 60))
    checkpoint, output = tmp_path / "chk", tmp_path / "out"
    first = read_available_now(remote, archive, recorded.recording_id, checkpoint, output)
    assert rows_of(remote.read.parquet(str(output))) == recorded.rows()
    assert rows_read(first) == 60

    archive.publish(publication, recorded, numbered_payloads(60, 40))
    archive.await_recorded(recorded.recording_id, recorded.end)
    second = read_available_now(remote, archive, recorded.recording_id, checkpoint, output)
    assert second.id == first.id  # the same query, resumed from the checkpoint
    assert rows_read(second) == 40  # only the new messages
    assert rows_of(remote.read.parquet(str(output))) == recorded.rows()  # each message once


# --- (c) sink write exactly once ------------------------------------------------------------------


def write_input_file(directory: Path, index: int, lines: list[str]) -> None:
    """An input file of the text source, written whole (rename), its mtime ordered by ``index``."""
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".part-{index:03d}.txt"
    temporary.write_text("\n".join(lines) + "\n")
    os.utime(temporary, (1_700_000_000 + index, 1_700_000_000 + index))  # the file source's order
    temporary.rename(directory / f"part-{index:03d}.txt")


def lines_of(index: int, count: int = 100) -> list[str]:
    return [f"file{index}-line{j}" for j in range(count)]


def write_available_now(remote, archive: RecordingArchive, source_dir: Path, checkpoint: Path):
    """Text files -> the aeron-archive sink, one file per micro-batch; returns the finished query."""
    query = (remote.readStream.format("text").option("maxFilesPerTrigger", "1").load(str(source_dir))
             .selectExpr("value AS payload")
             .writeStream.format("aeron-archive").option("archive.dir", archive.archive_dir)
             .option("channel", "aeron:ipc").option("streamId", str(SINK_STREAM_ID))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        finished = query.awaitTermination(WAIT_S)
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"the AvailableNow sink query did not finish within {WAIT_S} s"
    assert query.exception() is None, query.exception()
    return query


def sink_payloads(remote, archive: RecordingArchive, sink_id: str) -> list[str]:
    """The sink recording of ``sink_id``, read back with the source, in order."""
    rows = (remote.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
            .option("channel", f"alias=aeron-spark-sink:{sink_id}").option("streamId", str(SINK_STREAM_ID))
            .load().orderBy("recording_id", "position").select("payload").collect())
    return [bytes(row.payload).decode() for row in rows]


def test_sink_write_is_exactly_once_across_a_replayed_batch(remote, archive: RecordingArchive, tmp_path):
    source_dir, checkpoint = tmp_path / "in", tmp_path / "chk"
    for index in range(2):
        write_input_file(source_dir, index, lines_of(index))
    query = write_available_now(remote, archive, source_dir, checkpoint)
    expected = lines_of(0) + lines_of(1)
    assert sink_payloads(remote, archive, query.id) == expected

    # Forget that batch 1 was committed: Spark runs it again and the sink must not write it twice.
    commits = checkpoint / "commits"
    assert sorted(int(name) for name in os.listdir(commits) if name.isdigit()) == [0, 1]
    (commits / "1").unlink()
    (commits / ".1.crc").unlink(missing_ok=True)
    write_input_file(source_dir, 2, lines_of(2))
    restarted = write_available_now(remote, archive, source_dir, checkpoint)
    assert restarted.id == query.id
    assert sink_payloads(remote, archive, query.id) == expected + lines_of(2)
