"""archive.credentials / archive.credentialsFile against a REAL sidecar with authentication
(`aeron-archive serve --auth-credentials-file F --auth-challenge-only`): the right credentials read
(batch and stream) and write (the sink); none or wrong ones fail at once naming the archive's
refusal; and the secret appears nowhere in what the test can see: exception texts, explain output
of batch and streaming plans, the query's progress JSON, the driver's Python log records (py4j's
wire log aside) and the sidecar's DEBUG log.
"""

from __future__ import annotations

import logging
import time

import pytest

from aeron_spark.archive.client import SecretCredentials
from aeron_spark.connector import register

from tests.spark.source_fixtures import (
    RecordingArchive,
    numbered_payloads,
    rows_of,
    run_available_now,
    stream_reader,
)
from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.integration

PRINCIPAL = "spark-reader"
SECRET = "xK9-credential-canary-4417"
WRONG_SECRET = "wrong-canary-secret-8852"
SINK_STREAM_ID = 4301


@pytest.fixture(scope="module")
def secured(tmp_path_factory, spark):
    register(spark)
    directory = tmp_path_factory.mktemp("secured")
    server_file = directory / "archive.credentials"
    server_file.write_text(f"{PRINCIPAL}:{SECRET}\n")
    client_file = directory / "spark.credentials"
    client_file.write_text(f"# read by every Spark process when it connects\n{PRINCIPAL}:{SECRET}\n")
    with running_sidecar(directory / "archive", ["--auth-credentials-file", str(server_file),
                                                 "--auth-challenge-only"]) as sidecar:
        archive = RecordingArchive(sidecar, SecretCredentials(PRINCIPAL, SECRET))
        try:
            yield archive, client_file
        finally:
            archive.close()


def batch(spark, archive, **options):
    reader = spark.read.format("aeron-archive").option("archive.dir", archive.archive_dir)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text and WRONG_SECRET not in text


def test_right_credentials_read_and_write_and_never_show(spark, secured, tmp_path, capsys, caplog):
    archive, client_file = secured
    caplog.set_level(logging.DEBUG)
    recorded, _ = archive.record(numbered_payloads(0, 30), stop=True)
    inline = {"archive.credentials": f"{PRINCIPAL}:{SECRET}"}
    from_file = {"archive.credentialsFile": str(client_file)}

    frame = batch(spark, archive, recordingIds=str(recorded.recording_id), **inline)
    assert rows_of(frame) == recorded.rows()
    frame.explain(True)
    assert rows_of(batch(spark, archive, recordingIds=str(recorded.recording_id), **from_file)) == recorded.rows()

    written = spark.createDataFrame([(f"row{i}".encode(),) for i in range(50)], "payload binary")
    (written.write.format("aeron-archive").mode("append").option("archive.dir", archive.archive_dir)
     .option("channel", "aeron:ipc").option("streamId", str(SINK_STREAM_ID)).option("sink.id", "secured")
     .options(**inline).save())
    sink_rows = batch(spark, archive, channel="alias=aeron-spark-sink:secured", streamId=str(SINK_STREAM_ID),
                      **from_file).select("payload").collect()
    assert sorted(bytes(row.payload) for row in sink_rows) == sorted(f"row{i}".encode() for i in range(50))

    stream_reader(spark, archive, tmp_path / "plan-only", recordingIds=recorded.recording_id,
                  **{"archive_credentials": f"{PRINCIPAL}:{SECRET}"}).explain(True)  # the streaming plan
    query = run_available_now(spark, archive, tmp_path / "chk", query_name="secured_stream",
                              recordingIds=recorded.recording_id, startingPositions="earliest",
                              **{"archive.credentials": f"{PRINCIPAL}:{SECRET}"})
    assert rows_of(spark.table("secured_stream")) == recorded.rows()
    query.explain(True)
    progress = [p.json for p in query.recentProgress]
    assert progress and any(p.numInputRows == 30 for p in query.recentProgress)

    # py4j's own DEBUG records echo every JVM call with its arguments, options included (any
    # option of any source: docs/deployment.md says to use credentialsFile where that matters).
    logs = "\n".join(record.getMessage() for record in caplog.records if not record.name.startswith("py4j"))
    explained = capsys.readouterr().out
    # The streaming plan lists the options; Spark's default spark.redaction.regex hides this one.
    assert "archive.credentials=*********(redacted)" in explained
    assert_no_secret(explained, "\n".join(progress), logs, "\n".join(archive.sidecar.stderr_lines))


@pytest.mark.parametrize("options", [
    {},
    {"archive.credentials": f"{PRINCIPAL}:{WRONG_SECRET}"},
    {"archive.credentials": f"intruder:{SECRET}"},
], ids=["none", "wrong-secret", "unknown-principal"])
def test_missing_or_wrong_credentials_fail_at_once_naming_the_refusal(spark, secured, options):
    archive, _ = secured
    recorded, _ = archive.record(numbered_payloads(0, 3), stop=True)
    started = time.monotonic()
    # A long request timeout: failing well inside it shows the refusal is not a timeout.
    with pytest.raises(Exception, match="AUTHENTICATION_REJECTED") as error:
        rows_of(batch(spark, archive, recordingIds=str(recorded.recording_id), **{"archive.timeoutMs": "30000"},
                      **options))
    assert time.monotonic() - started < 15
    text = str(error.value)
    assert ("set archive.credentials" in text) if not options else ("the secret is not shown" in text)
    assert_no_secret(text, repr(error.value))


def test_credentials_given_twice_are_refused_naming_both(spark, secured):
    archive, client_file = secured
    with pytest.raises(Exception, match="archive.credentials and archive.credentialsFile are exclusive") as error:
        batch(spark, archive, recordingIds="0", **{"archive.credentials": f"{PRINCIPAL}:{SECRET}",
                                                   "archive.credentialsFile": str(client_file)}).collect()
    assert_no_secret(str(error.value))
