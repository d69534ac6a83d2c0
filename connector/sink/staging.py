"""Staging files: what a write task produced, waiting for the driver's commit.

The staging root (``sink.stagingDir``) is a local path or a ``file:``, ``s3:``/``s3a:``, ``gs:``,
``abfs:`` or ``hdfs:`` URI, opened with ``pyarrow.fs.FileSystem.from_uri``: the driver and the
executors of a cluster share nothing else, and Spark's own shared storage is HDFS or an object
store. Each process opens the root once (``open_staging_root``, cached per process); the options
carry only the URI, so they pickle to the tasks unchanged.

One Arrow IPC file per task attempt, in ``<staging root>/<sink id>/``::

    b<batchId, 19 digits>-p<partition, 5 digits>-a<attempt>-t<taskAttemptId>.arrow   (writeStream)
    j<job id>-p<partition>-a<attempt>-t<taskAttemptId>.arrow                          (write)

with columns ``payload: binary`` and ``reserved_value: int64`` (not null). Object stores have no
rename, so a file is written directly under its final name, which is unique per task attempt: the
commit reads only the files named in successful tasks' commit messages, so a torn file of a dead or
failed attempt is never read (and a failed task deletes its own). ``clean_stale`` removes leftovers
by name and age. Readers of the recording never see staged rows; only the commit (driver) appends
them.

Staged files are not fsynced (it cost 0.1-0.6 s per 150 MB here): only the commit messages held in
the driver's memory refer to them, so a crash that could lose unsynced pages (the OS's) also loses
those messages, and Spark re-runs the batch, which stages it again under new attempt names. Closing
the file publishes it to the driver (NFS close-to-open; HDFS and object stores on close).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

LOG = logging.getLogger("aeron_spark.connector.sink")
STAGED_SCHEMA = pa.schema([pa.field("payload", pa.binary(), nullable=False),
                           pa.field("reserved_value", pa.int64(), nullable=False)])
SUFFIX = ".arrow"
_NAME = re.compile(r"^(?P<key>b\d{19}|j[0-9a-f]{32})-p(?P<partition>\d+)-a(?P<attempt>\d+)-t(?P<task>\d+)\.arrow$")
# URI schemes of sink.stagingDir (pyarrow's names; s3a, Hadoop's name for S3, is read as s3).
STAGING_SCHEMES = ("file", "s3", "s3a", "gs", "gcs", "abfs", "abfss", "hdfs")
ACCEPTED_STAGING_FORMS = ("a path (absolute, or relative to the driver's working directory), or a URI "
                          "file:///path, s3://bucket/prefix (s3a:// is read as s3://), gs://bucket/prefix, "
                          "abfs://container@account.dfs.core.windows.net/prefix or hdfs://namenode:port/path")


def streaming_batch_key(batch_id: int) -> str:
    if batch_id < 0:
        raise ValueError(f"batch id {batch_id} is negative")
    return f"b{batch_id:019d}"


def new_job_key() -> str:
    return "j" + uuid.uuid4().hex


def batch_id_of_key(key: str) -> int | None:
    return int(key[1:]) if key.startswith("b") else None


@dataclass(frozen=True)
class StagedName:
    key: str
    partition_id: int
    attempt: int
    task_attempt_id: int

    @property
    def file_name(self) -> str:
        return f"{self.key}-p{self.partition_id:05d}-a{self.attempt}-t{self.task_attempt_id}{SUFFIX}"

    @classmethod
    def parse(cls, file_name: str) -> StagedName | None:
        match = _NAME.match(file_name)
        if match is None:
            return None
        return cls(match["key"], int(match["partition"]), int(match["attempt"]), int(match["task"]))


@dataclass(frozen=True)
class StagedFile:
    path: str
    rows: int
    payload_bytes: int


# --- the staging root: a path or a URI, one FileSystem per process ---------------------------------


class StagingRootError(ValueError):
    """``sink.stagingDir`` (or the default derived from checkpointLocation) cannot be used."""


def normalize_staging_root(text: str) -> str:
    """The staging root as this process and every task will open it: plain paths made absolute,
    ``s3a:`` rewritten to ``s3:``; raises StagingRootError for a scheme pyarrow cannot open here."""
    text = text.strip()
    if not text:
        raise StagingRootError("is empty")
    scheme = _scheme_of(text)
    if scheme is None:
        return os.path.abspath(text)
    if scheme not in STAGING_SCHEMES:
        raise StagingRootError(f"has the URI scheme {scheme!r}; accepted schemes: {', '.join(STAGING_SCHEMES)}")
    if scheme == "s3a":
        return "s3" + text[len("s3a"):]
    return text


def child_uri(root: str, *parts: str) -> str:
    """``root`` (a path or a URI, maybe with a query) with ``parts`` appended to its path."""
    base, question, query = root.partition("?")
    joined = base.rstrip("/") + "/" + "/".join(part.strip("/") for part in parts)
    return joined + (question + query if question else "")


def redact(uri: str) -> str:
    """The URI without a password (S3 credentials may be given as ``s3://KEY:SECRET@bucket/...``)."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.password is None:
        return uri
    user_info, _, host = parsed.netloc.rpartition("@")
    return urllib.parse.urlunsplit(parsed._replace(netloc=f"{user_info.partition(':')[0]}:***@{host}"))


def _scheme_of(text: str) -> str | None:
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", text)
    return match.group(1).lower() if match is not None else None


_roots: dict[str, tuple[pafs.FileSystem, str]] = {}
_roots_lock = threading.Lock()


def open_staging_root(root: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, base path in it) of a normalized staging root, opened once per process: an S3
    filesystem resolves credentials and maybe the bucket's region when it is created."""
    with _roots_lock:
        opened = _roots.get(root)
        if opened is None:
            try:
                opened = pafs.FileSystem.from_uri(root)
            except (pa.ArrowException, OSError, ValueError) as error:
                text = str(error).strip()
                first_line = text.splitlines()[0] if text else type(error).__name__  # libhdfs lists every path tried
                password = urllib.parse.urlsplit(root).password
                if password:
                    first_line = first_line.replace(password, "***")
                raise StagingRootError(f"cannot be opened: {first_line}") from None
            _roots[root] = opened
        return opened


@dataclass(frozen=True)
class SinkStaging:
    """One sink's staging directory in its filesystem."""

    filesystem: pafs.FileSystem
    directory: str  # a path in ``filesystem``

    @property
    def is_local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def path_of(self, file_name: str) -> str:
        return f"{self.directory}/{file_name}"


def sink_staging(staging_root: str, sink_id: str) -> SinkStaging:
    filesystem, base = open_staging_root(staging_root)
    return SinkStaging(filesystem, f"{base.rstrip('/')}/{sink_id}")


# --- writing, reading, deleting --------------------------------------------------------------------

_created: set[tuple[int, str]] = set()


def _ensure_directory(staging: SinkStaging) -> None:
    """Creates the sink's directory: always on a local disk (a mkdir; someone may have removed it),
    once per process elsewhere (on an object store it is only a marker object, one request)."""
    if staging.is_local:
        staging.filesystem.create_dir(staging.directory, recursive=True)
        return
    key = (id(staging.filesystem), staging.directory)
    if key not in _created:
        staging.filesystem.create_dir(staging.directory, recursive=True)
        _created.add(key)


def write_staged(staging: SinkStaging, name: StagedName, batches: Iterable[pa.RecordBatch]) -> StagedFile:
    """Writes ``batches`` (STAGED_SCHEMA) directly to ``<directory>/<name>``; returns what was written.

    On failure the partial file is deleted (best effort): only a commit message makes a staged file
    read, and a failed task sends none. The IPC writer is not closed on failure, so a partial file
    never gets a footer that would make it look complete."""
    _ensure_directory(staging)
    path = staging.path_of(name.file_name)
    rows = 0
    payload_bytes = 0
    sink = staging.filesystem.open_output_stream(path)
    try:
        writer = pa.ipc.new_file(sink, STAGED_SCHEMA)
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
            payload_bytes += _payload_bytes(batch)
        writer.close()
        sink.close()
    except BaseException:
        with contextlib.suppress(Exception):
            sink.close()
        delete_quietly(staging, path)
        raise
    return StagedFile(path, rows, payload_bytes)


def read_staged(staging: SinkStaging, path: str) -> Iterator[pa.RecordBatch]:
    """The record batches of a staged file: memory-mapped when local (no copy), else read through
    the filesystem (one ranged read per batch on an object store)."""
    if staging.is_local:
        source = pa.memory_map(path, "r")
    else:
        source = staging.filesystem.open_input_file(path)
    with source:
        reader = pa.ipc.open_file(source)
        if not reader.schema.equals(STAGED_SCHEMA):
            raise ValueError(f"staged file {path} has schema {reader.schema}, expected {STAGED_SCHEMA}")
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)


def delete_quietly(staging: SinkStaging, path: str) -> None:
    """Deletes a file; one already gone (or a transient storage error) is not a failure: leftovers are
    removed by a later ``clean_stale``."""
    try:
        staging.filesystem.delete_file(path)
    except FileNotFoundError:
        pass
    except OSError as error:
        LOG.warning("could not delete staged file %s: %s", path, error)


def list_staged(staging: SinkStaging) -> list[pafs.FileInfo]:
    """The files directly in the sink's staging directory (none when it does not exist)."""
    selector = pafs.FileSelector(staging.directory, allow_not_found=True, recursive=False)
    return [info for info in staging.filesystem.get_file_info(selector) if info.type == pafs.FileType.File]


def clean_stale(staging: SinkStaging, *, keep: set[str], committed_batch_id: int | None,
                job_files_older_than_s: float = 3600.0, now: float | None = None) -> list[str]:
    """Deletes leftovers of crashed or superseded attempts; returns the deleted paths.

    * streaming files of batches <= ``committed_batch_id`` (their batch is done);
    * files of that batch not in ``keep`` are included (other attempts);
    * batch-write job files and dot-files (temporaries of earlier versions) last modified more than
      ``job_files_older_than_s`` ago (a running job's files are younger: its tasks wrote them minutes
      ago at most). The age is the storage's mtime (an object's last-modified time).
    """
    now = time.time() if now is None else now
    deleted: list[str] = []
    for info in list_staged(staging):
        path = info.path
        if path in keep:
            continue
        name = StagedName.parse(info.base_name)
        stale = False
        if name is not None and name.key.startswith("b"):
            batch_id = batch_id_of_key(name.key)
            stale = committed_batch_id is not None and batch_id is not None and batch_id <= committed_batch_id
        elif (name is not None or info.base_name.startswith(".")) and info.mtime is not None:
            stale = now - info.mtime.timestamp() > job_files_older_than_s
        if stale:
            delete_quietly(staging, path)
            deleted.append(path)
    return deleted


def read_small_file(staging: SinkStaging, file_name: str) -> bytes | None:
    """The content of a small file of the sink's directory, None when it does not exist."""
    try:
        with staging.filesystem.open_input_stream(staging.path_of(file_name)) as source:
            return source.read()
    except FileNotFoundError:
        return None


def put_small_file(staging: SinkStaging, file_name: str, data: bytes) -> None:
    """Writes a small file in one write and close: one object on an object store, which appears whole
    on close; on a local disk or HDFS a crash can leave it torn, so readers must check what they read."""
    _ensure_directory(staging)
    with staging.filesystem.open_output_stream(staging.path_of(file_name)) as sink:
        sink.write(data)


def _payload_bytes(batch: pa.RecordBatch) -> int:
    import pyarrow.compute as pc
    return int(pc.sum(pc.binary_length(batch.column(0))).as_py() or 0)
