"""Spark's commit and abort of one sink write, on the driver: the staged files the tasks reported
are opened here (``StagedFiles``, with the commit hint ``HintStore`` beside them) and appended
exactly once (``SinkCommitter``, ``sink/commit.py``) on this process's cached archive connection
(``sink/archive_access.py``), then deleted; an abort deletes them.

``sink/writer.py`` calls ``commit_staged`` / ``abort_staged`` from its ``commit`` / ``abort``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from aeron_spark.connector.step_timings import StepTimings
from aeron_spark.connector.worker_gc import freeze_long_lived_objects
from aeron_spark.connector.sink import archive_access
from aeron_spark.connector.sink.commit import CommitHint, CommitResult, SinkCommitter
from aeron_spark.connector.sink.frames import MessageColumns, message_columns
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.sink_archive import SinkArchive, SinkCommitError
from aeron_spark.connector.sink.staging import (
    SinkStaging,
    clean_stale,
    delete_quietly,
    list_staged,
    put_small_file,
    read_small_file,
    read_staged,
    sink_staging,
)

LOG = logging.getLogger("aeron_spark.connector.sink")
HINT_FILE = "_committed.json"


class HintStore:
    """``_committed.json`` in the sink's staging directory (``commit.CommitHints``). Written with one
    put (no rename on object stores); ``load`` returns None for what does not parse."""

    def __init__(self, staging: SinkStaging) -> None:
        self.staging = staging
        self.path = staging.path_of(HINT_FILE)

    def load(self) -> CommitHint | None:
        try:
            data = read_small_file(self.staging, HINT_FILE)
            if data is None:
                return None
            fields = json.loads(data)
            return CommitHint(int(fields["recording_id"]), int(fields["committed_end"]), int(fields["batch_id"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            LOG.info("sink hint %s is not usable (%s); scanning instead", self.path, error)
            return None

    def save(self, hint: CommitHint) -> None:
        put_small_file(self.staging, HINT_FILE, json.dumps(vars(hint)).encode())


@dataclass(frozen=True)
class StagedFile:
    """One task's staged file (``commit.StagedPartition``)."""

    staging: SinkStaging
    partition_id: int
    path: str
    rows: int

    def messages(self) -> Iterator[MessageColumns]:
        for batch in read_staged(self.staging, self.path):
            reserved = batch.column(1)
            if reserved.null_count:
                raise SinkCommitError(f"a staged reserved_value column holds {reserved.null_count} nulls "
                                      "(staging fills them)")
            yield message_columns(batch.column(0), reserved)


@dataclass(frozen=True)
class StagedFiles:
    """The staged files of one commit (``commit.StagedInputs``)."""

    sink_id: str
    staging: SinkStaging
    partitions: Sequence[StagedFile]

    def check_present(self) -> None:
        """Every staged file to append exists (one listing): a missing one means the staging root is
        not shared by the driver and the executors, or was cleaned."""
        wanted = [i.path for i in self.partitions if i.rows]
        if not wanted:
            return
        present = {info.path for info in list_staged(self.staging)}
        missing = [path for path in wanted if path not in present]
        if missing:
            raise SinkCommitError(f"sink {self.sink_id}: {len(missing)} staged file(s) the tasks reported are not in "
                                  f"{self.staging.directory} (e.g. {missing[0]}): sink.stagingDir must be storage that "
                                  "the driver and every executor share (on a cluster: an hdfs:, s3:, gs: or abfs: URI, "
                                  "or a shared mount)")


class StagedTaskOutput(Protocol):
    """What a write task reports (``writer.SinkCommitMessage``): one staged file of one partition."""

    @property
    def sink_id(self) -> str: ...

    @property
    def partition_id(self) -> int: ...

    @property
    def path(self) -> str: ...

    @property
    def rows(self) -> int: ...


def commit_staged(options: SinkOptions, messages: Sequence[StagedTaskOutput | None], batch_id: int | None,
                  open_archive: Callable[[SinkOptions], SinkArchive] | None = None) -> CommitResult | None:
    """Spark's commit(messages, batchId): append the staged files of ``messages`` exactly once."""
    freeze_long_lived_objects()  # the commit worker is reused too (worker_gc.py)
    staged = [m for m in messages if m is not None]
    if not staged:
        return None
    sink_ids = {m.sink_id for m in staged}
    if len(sink_ids) != 1:
        raise SinkCommitError(f"commit messages of several sinks in one commit: {sorted(sink_ids)}")
    sink_id = sink_ids.pop()
    staging = sink_staging(options.staging_root, sink_id)
    inputs = StagedFiles(sink_id, staging, [StagedFile(staging, m.partition_id, m.path, m.rows) for m in staged])

    committers: list[SinkCommitter] = []

    def run(archive: SinkArchive) -> CommitResult:
        committer = SinkCommitter(archive, sink_id, options.stream_id, hints=HintStore(staging),
                                  timeout_s=options.commit_timeout_ms / 1000.0)
        committers.append(committer)
        return committer.commit(inputs, batch_id)

    if open_archive is not None:
        archive = open_archive(options)
        try:
            result = run(archive)
        finally:
            archive.close()
    else:
        result = _run_on_shared_archive(options, run)
    # The batch is committed: cleaning up is best effort (leftovers go with a later commit).
    for message in staged:
        delete_quietly(staging, message.path)
    timings = committers[-1].timings if committers else StepTimings("sink.commit")
    timings.mark("delete staged")
    try:
        clean_stale(staging, keep=set(), committed_batch_id=result.batch_id if batch_id is not None else None)
    except OSError as error:
        LOG.warning("sink %s: could not clean the staging directory %s: %s", sink_id, staging.directory, error)
    timings.mark("clean stale")
    timings.finish()
    return result


def _run_on_shared_archive(options: SinkOptions, run: Callable[[SinkArchive], CommitResult]) -> CommitResult:
    """``run`` on this process's cached connection (held for the commit, kept alive between
    commits); when a REUSED connection fails (e.g. the archive restarted since), once more on a
    fresh one - safe because a commit recovers and is idempotent."""
    with archive_access.leased_sink_archive(options) as (archive, reused):
        try:
            return run(archive)
        except (SinkCommitError, ValueError):
            raise  # about the data or the recording, not the connection
        except Exception as error:
            archive_access.forget_shared_sink_archive(options)
            if not reused:
                raise
            LOG.warning("sink commit failed on a reused archive connection (%s); retrying on a new one", error)
    with archive_access.leased_sink_archive(options) as (archive, _):
        try:
            return run(archive)
        except (SinkCommitError, ValueError):
            raise
        except Exception:
            archive_access.forget_shared_sink_archive(options)
            raise


def abort_staged(options: SinkOptions, messages: Sequence[StagedTaskOutput | None]) -> None:
    """Spark's abort: delete what the successful tasks staged (failed tasks appear as None)."""
    for message in messages:
        if message is not None:
            delete_quietly(sink_staging(options.staging_root, message.sink_id), message.path)
