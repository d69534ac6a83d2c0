"""Staging over pyarrow filesystems: a local path, a file: URI, and S3 (a real S3 HTTP server, moto, on
localhost). Files are written under their final names (no rename), read back, listed, cleaned by name
and age (the storage's mtime), and the hint is one put whose torn or missing copy only makes the
recovery scan longer. Also the commit end to end with staging on S3, and the sink.stagingDir option."""

from __future__ import annotations

import pickle
import time
import uuid

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from aeron_spark.connector.options import OptionError
from aeron_spark.connector.sink.commit import CommitOutcome, SinkCommitter
from aeron_spark.connector.sink.commit_job import HintStore, commit_staged
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import (
    StagedName,
    clean_stale,
    list_staged,
    open_staging_root,
    put_small_file,
    read_staged,
    sink_staging,
    streaming_batch_key,
    write_staged,
)
from aeron_spark.connector.sink.writer import TaskInfo, stage_task_output, to_staged_batch

from tests.support.fake_sink_archive import FakeSinkArchive
from tests.support.s3_server import running_s3_server
from tests.unit.connector.sink.test_commit import batch, rows_of

SINK = "q-storage"


@pytest.fixture(scope="module")
def s3():
    with running_s3_server() as server:
        yield server


@pytest.fixture(params=["path", "file-uri", "s3"])
def root(request, tmp_path, s3) -> str:
    if request.param == "path":
        return str(tmp_path / "staging")
    if request.param == "file-uri":
        return f"file://{tmp_path}/staging"
    return s3.staging_uri(f"unit-{uuid.uuid4().hex[:8]}/staging")


def sink_options(root: str, **extra) -> SinkOptions:
    return SinkOptions.parse({"channel": "aeron:ipc", "streamId": "1001", "archive.controlChannel":
                              "aeron:udp?endpoint=localhost:1", "sink.stagingDir": root, "sink.commitTimeoutMs": "1000",
                              **extra}, streaming=True)


def staged_batches(payloads: list[bytes], chunk: int = 7) -> list[pa.RecordBatch]:
    table = pa.table({"payload": pa.array(payloads, pa.binary())})
    return [to_staged_batch(b) for b in table.to_batches(max_chunksize=chunk)]


def names(staging) -> list[str]:
    return sorted(info.base_name for info in list_staged(staging))


def test_a_staged_file_is_written_under_its_final_name_and_read_back(root):
    staging = sink_staging(SinkOptions.parse({"channel": "aeron:ipc", "streamId": "1", "sink.stagingDir": root,
                                              "archive.controlChannel": "aeron:udp?endpoint=localhost:1"},
                                             streaming=True).staging_root, SINK)
    name = StagedName(streaming_batch_key(3), 1, 0, 42)
    payloads = batch(100, "w")
    staged = write_staged(staging, name, staged_batches(payloads))
    assert (staged.rows, staged.payload_bytes) == (100, sum(map(len, payloads)))
    assert staged.path == staging.path_of(name.file_name)
    assert names(staging) == [name.file_name]  # nothing else: no temporary name, no rename
    read = [p for b in read_staged(staging, staged.path) for p in b.column(0).to_pylist()]
    assert read == payloads
    assert staging.is_local == (not root.startswith("s3:"))


def test_a_failed_write_leaves_no_file(root):
    staging = sink_staging(sink_options(root).staging_root, SINK)

    def failing():
        yield from staged_batches(batch(20, "f"))
        raise ValueError("the task failed mid-partition")

    with pytest.raises(ValueError, match="mid-partition"):
        write_staged(staging, StagedName(streaming_batch_key(0), 0, 0, 1), failing())
    assert names(staging) == []


def test_clean_stale_removes_leftovers_by_name_and_by_the_storage_mtime(root):
    staging = sink_staging(sink_options(root).staging_root, SINK)
    keys = {"old": (3, 0, 0), "same": (5, 1, 0), "later": (6, 0, 0)}
    files = {k: write_staged(staging, StagedName(streaming_batch_key(b), p, a, 1), staged_batches([b"x"])).path
             for k, (b, p, a) in keys.items()}
    job = write_staged(staging, StagedName("j" + "a" * 32, 0, 0, 1), staged_batches([b"j"])).path
    put_small_file(staging, "_committed.json", b"{}")
    assert sorted(clean_stale(staging, keep=set(), committed_batch_id=5)) == sorted([files["old"], files["same"]])
    assert names(staging) == sorted(["_committed.json", files["later"].rsplit("/", 1)[1], job.rsplit("/", 1)[1]])
    # A job file is kept while it is younger than an hour (its mtime is the storage's), removed after.
    assert clean_stale(staging, keep=set(), committed_batch_id=None) == []
    assert clean_stale(staging, keep=set(), committed_batch_id=None, now=time.time() + 3700) == [job]
    assert clean_stale(staging, keep={files["later"]}, committed_batch_id=6) == []


def test_the_hint_is_one_put_and_a_torn_or_missing_one_falls_back_to_a_scan(root):
    opts = sink_options(root)
    archive = FakeSinkArchive()
    for batch_id in range(3):
        message = stage(opts, batch_id, batch(200, f"b{batch_id}"))
        assert commit_staged(opts, [message], batch_id, open_archive=lambda _o: archive).outcome is CommitOutcome.COMMITTED
    rid = next(iter(archive.recordings))
    recording = archive.recordings[rid]
    end_of_2 = recording.position
    staging = sink_staging(opts.staging_root, SINK)
    hints = HintStore(staging)
    assert hints.load().committed_end == end_of_2 and names(staging) == ["_committed.json"]

    reads: list[int] = []
    real_read = archive.read

    def read(recording_id, start, end):
        reads.append(start)
        return real_read(recording_id, start, end)

    archive.read = read

    def recover_after_debris() -> tuple[int, int]:
        """Debris after the last marker, then recovery: (committed end found, lowest position read)."""
        recording.data += bytes(recording.data[:2048])
        reads.clear()
        state = SinkCommitter(archive, SINK, 1001, hints=hints, timeout_s=1.0).recover()
        assert recording.position == end_of_2 + 2048  # the debris stays (never truncated: sink/commit.py)
        del recording.data[end_of_2 - recording.start_position:]  # each round starts from one batch's debris
        return state.committed_end, min(reads)

    assert recover_after_debris() == (end_of_2, end_of_2 - 96)  # the hinted marker, then a scan from it
    for torn in (b'{"recording_id": 5, "committed_e', b"\x00\xff garbage", b""):
        put_small_file(staging, "_committed.json", torn)
        assert hints.load() is None
        assert recover_after_debris() == (end_of_2, recording.start_position)  # a scan from the start
    staging.filesystem.delete_file(hints.path)
    assert hints.load() is None
    assert recover_after_debris() == (end_of_2, recording.start_position)


def stage(opts: SinkOptions, batch_id: int, payloads: list[bytes], partition: int = 0, attempt: int = 0):
    table = pa.table({"payload": pa.array(payloads, pa.binary())})
    return stage_task_output(opts, iter(table.to_batches(max_chunksize=50)),
                             TaskInfo(partition, attempt, 100 * attempt + partition, batch_id, SINK),
                             streaming_batch_key(batch_id))


def test_a_torn_file_of_a_dead_attempt_is_never_read_and_is_cleaned_up(root):
    opts = sink_options(root)
    archive = FakeSinkArchive()
    staging = sink_staging(opts.staging_root, SINK)
    # Attempt 0 of partition 0 died mid-write: a partial file under its final name, no commit message.
    torn = staging.path_of(StagedName(streaming_batch_key(0), 0, 0, 7).file_name)
    staging.filesystem.create_dir(staging.directory)
    with staging.filesystem.open_output_stream(torn) as out:
        out.write(b"ARROW1\x00\x00 torn")
    winner = stage(opts, 0, batch(30, "w"), attempt=1)
    result = commit_staged(opts, [winner], 0, open_archive=lambda _o: archive)
    assert result.outcome is CommitOutcome.COMMITTED
    assert rows_of(archive, next(iter(archive.recordings))) == batch(30, "w")
    assert names(staging) == ["_committed.json"]  # the winner's file and the torn one are gone


def test_a_commit_with_staging_on_s3_appends_exactly_once(s3):
    root = s3.staging_uri(f"commit-{uuid.uuid4().hex[:8]}")
    opts = sink_options(root)
    archive = FakeSinkArchive()
    parts = [batch(40, f"p{p}") for p in range(3)]
    messages = [stage(opts, 0, parts[p], partition=p) for p in (2, 0, 1)]
    assert all(m.path.startswith(s3.bucket + "/") for m in messages)
    assert commit_staged(opts, messages, 0, open_archive=lambda _o: archive).outcome is CommitOutcome.COMMITTED
    replayed = [stage(opts, 0, parts[p], partition=p, attempt=1) for p in range(3)]
    assert commit_staged(opts, replayed, 0, open_archive=lambda _o: archive).outcome is CommitOutcome.ALREADY_COMMITTED
    assert rows_of(archive, next(iter(archive.recordings))) == [row for part in parts for row in part]
    prefix = root.split("@", 1)[1].split("?", 1)[0].split("/", 1)[1]
    assert s3.keys(prefix) == [f"{prefix}/{SINK}/_committed.json"]


def test_a_staged_file_missing_on_the_driver_fails_before_anything_is_appended(tmp_path):
    opts = sink_options(str(tmp_path / "staging"))
    archive = FakeSinkArchive()
    message = stage(opts, 0, batch(5, "m"))
    pafs.LocalFileSystem().delete_file(message.path)  # e.g. an executor's local disk, not shared
    with pytest.raises(Exception, match="sink.stagingDir must be storage that the driver and every executor share"):
        commit_staged(opts, [message], 0, open_archive=lambda _o: archive)
    assert archive.recordings == {}


# --- the option -----------------------------------------------------------------------------------

BASE = {"channel": "aeron:ipc", "streamId": "7", "archive.controlChannel": "aeron:udp?endpoint=localhost:1"}


def test_the_staging_root_accepts_paths_and_uris(tmp_path, s3, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parse = SinkOptions.parse
    assert parse({**BASE, "sink.stagingDir": "rel/dir"}, streaming=True).staging_root == str(tmp_path / "rel/dir")
    assert parse({**BASE, "sink.stagingDir": f"file://{tmp_path}/x"}, streaming=True).staging_root == f"file://{tmp_path}/x"
    s3a = s3.staging_uri("p").replace("s3://", "s3a://", 1)
    assert parse({**BASE, "sink.stagingDir": s3a}, streaming=True).staging_root == s3.staging_uri("p")
    # Default: under the checkpoint (Spark passes checkpointLocation to a streaming sink), else archive.dir.
    with_checkpoint = {**BASE, "archive.dir": "/data/archive", "checkpointLocation": f"{tmp_path}/chk"}
    assert parse(with_checkpoint, streaming=True).staging_root == f"{tmp_path}/chk/aeron-sink-staging"
    assert parse({**with_checkpoint, "checkpointLocation": f"file:{tmp_path}/chk"}, streaming=True).staging_root == \
        f"file:{tmp_path}/chk/aeron-sink-staging"
    assert parse({**BASE, "checkpointLocation": s3.staging_uri("chk")}, streaming=True).staging_root == \
        s3.staging_uri("chk/aeron-sink-staging")
    assert parse(with_checkpoint, streaming=False).staging_root == "/data/archive/spark-sink-staging"
    assert parse({**BASE, "archive.dir": "/data/archive"}, streaming=True).staging_root == \
        "/data/archive/spark-sink-staging"


@pytest.mark.parametrize("options, message", [
    ({"sink.stagingDir": "ftp://host/dir"}, r"sink.stagingDir='ftp://host/dir' has the URI scheme 'ftp'; accepted schemes: "
                                            r"file, s3, s3a, gs, gcs, abfs, abfss, hdfs"),
    ({"checkpointLocation": "dbfs:/chk"}, r"default staging root 'dbfs:/chk/aeron-sink-staging' \(under checkpointLocation"
                                          r"; set option sink.stagingDir .* has the URI scheme 'dbfs'"),
    ({}, r"option sink.stagingDir is required when neither checkpointLocation .* accepted: a path .* s3://bucket/prefix"),
    ({"sink.stagingDir": "hdfs://127.0.0.1:1/staging"}, r"sink.stagingDir=.hdfs://127.0.0.1:1/staging. cannot be "
                                                           r"opened: .*option sink.stagingDir accepts"),
    ({"sink.stagingDir": "s3://bucket/x?endpoint_override=127.0.0.1:1&colour=blue"}, r"cannot be opened: .*'colour'"),
])
def test_a_bad_staging_root_is_an_option_error_naming_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        SinkOptions.parse({**BASE, **options}, streaming=True)


def test_credentials_in_the_uri_are_not_shown_in_errors():
    with pytest.raises(OptionError) as caught:
        SinkOptions.parse({**BASE, "sink.stagingDir": "s3://KEY:SECRET@bucket/x?endpoint_override=h:1&bad=1"},
                          streaming=True)
    assert "SECRET" not in str(caught.value) and "KEY:***@bucket" in str(caught.value)


def test_tasks_get_only_the_uri_and_open_the_filesystem_once_per_process(s3):
    opts = sink_options(s3.staging_uri("pickled"))
    copy = pickle.loads(pickle.dumps(opts))
    assert copy == opts and isinstance(copy.staging_root, str)
    first, base = open_staging_root(copy.staging_root)
    assert open_staging_root(copy.staging_root)[0] is first and base == f"{s3.bucket}/pickled"
    assert isinstance(first, pafs.S3FileSystem)
