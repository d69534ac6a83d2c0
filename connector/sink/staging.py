"""Staging files: what a write task produced, waiting for the driver's commit.

One Arrow IPC file per task attempt, in ``<staging root>/<sink id>/``::

    b<batchId, 19 digits>-p<partition, 5 digits>-a<attempt>-t<taskAttemptId>.arrow   (writeStream)
    j<job id>-p<partition>-a<attempt>-t<taskAttemptId>.arrow                          (write)

with columns ``payload: binary`` and ``reserved_value: int64`` (not null). A file is written under
a dot-prefixed temporary name and renamed, so a name without the dot is always complete.
Readers of the recording never see staged rows; only the commit (driver) appends them.

Staged files are not fsynced (it cost 0.1-0.6 s per 150 MB here): only the commit messages held in
the driver's memory refer to them, so a crash that could lose unsynced pages (the OS's) also loses
those messages, and Spark re-runs the batch, which stages it again under new attempt names. On
shared storage, close() publishes the file to the driver (NFS close-to-open; HDFS/S3 on close).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

STAGED_SCHEMA = pa.schema([pa.field("payload", pa.binary(), nullable=False),
                           pa.field("reserved_value", pa.int64(), nullable=False)])
SUFFIX = ".arrow"
_NAME = re.compile(r"^(?P<key>b\d{19}|j[0-9a-f]{32})-p(?P<partition>\d+)-a(?P<attempt>\d+)-t(?P<task>\d+)\.arrow$")


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


def sink_staging_dir(staging_root: str, sink_id: str) -> Path:
    return Path(staging_root) / sink_id


def write_staged(directory: Path, name: StagedName, batches: Iterable[pa.RecordBatch]) -> StagedFile:
    """Writes ``batches`` (STAGED_SCHEMA) to ``directory/name`` atomically; returns what was written."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / name.file_name
    temporary = directory / f".{name.file_name}.{os.getpid()}.tmp"
    rows = 0
    payload_bytes = 0
    try:
        with pa.OSFile(str(temporary), "wb") as sink, pa.ipc.new_file(sink, STAGED_SCHEMA) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
                payload_bytes += _payload_bytes(batch)
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return StagedFile(str(final), rows, payload_bytes)


def read_staged(path: str) -> Iterator[pa.RecordBatch]:
    """The record batches of a staged file (memory-mapped)."""
    with pa.memory_map(path, "r") as source:
        reader = pa.ipc.open_file(source)
        if not reader.schema.equals(STAGED_SCHEMA):
            raise ValueError(f"staged file {path} has schema {reader.schema}, expected {STAGED_SCHEMA}")
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)


def delete_quietly(path: str | Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def clean_stale(directory: Path, *, keep: set[str], committed_batch_id: int | None,
                job_files_older_than_s: float = 3600.0, now: float | None = None) -> list[str]:
    """Deletes leftovers of crashed or superseded attempts; returns the deleted paths.

    * streaming files of batches <= ``committed_batch_id`` (their batch is done);
    * files of that batch not in ``keep`` are included (other attempts);
    * batch-write job files and temporary files older than ``job_files_older_than_s`` (a running
      job's files are younger: its tasks wrote them minutes ago at most).
    """
    if not directory.is_dir():
        return []
    now = time.time() if now is None else now
    deleted: list[str] = []
    for entry in os.scandir(directory):
        path = entry.path
        if path in keep:
            continue
        name = StagedName.parse(entry.name)
        stale = False
        if name is not None and name.key.startswith("b"):
            batch_id = batch_id_of_key(name.key)
            stale = committed_batch_id is not None and batch_id is not None and batch_id <= committed_batch_id
        elif name is not None or entry.name.startswith("."):
            with contextlib.suppress(FileNotFoundError):
                stale = now - entry.stat().st_mtime > job_files_older_than_s
        if stale:
            delete_quietly(path)
            deleted.append(path)
    return deleted


def _payload_bytes(batch: pa.RecordBatch) -> int:
    import pyarrow.compute as pc
    return int(pc.sum(pc.binary_length(batch.column(0))).as_py() or 0)
