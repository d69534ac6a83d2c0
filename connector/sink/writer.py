"""``write`` / ``writeStream`` of format ``aeron-archive``: the executor side and the writer classes.

Executors STAGE (``write``): each task turns its Arrow batches into the staged layout (payload
binary, reserved_value int64), writes one staging file and returns a ``SinkCommitMessage``
naming it. Nothing reaches the archive there. The driver's ``commit`` (``sink/commit_job.py``) appends
the staged rows of every task, in partition order, to the sink recording and seals them with a
commit marker; ``abort`` deletes the staged files. See docs/exactly-once.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from aeron_spark.connector.options import OptionError
from aeron_spark.connector.step_timings import StepTimings
from aeron_spark.connector.worker_gc import freeze_long_lived_objects
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import (
    STAGED_SCHEMA,
    StagedName,
    new_job_key,
    sink_staging,
    streaming_batch_key,
    write_staged,
)

ACCEPTED_COLUMNS = "payload (binary or string, required), reserved_value (bigint, optional)"
# Small Spark batches (spark.sql.execution.arrow.maxRecordsPerBatch, 10000 rows) are combined up
# to this many payload bytes per staged batch, so the commit frames large blocks.
STAGED_BATCH_BYTES = 8 << 20
_INTEGRAL = (LongType, IntegerType, ShortType, ByteType)


class SinkDataError(ValueError):
    """A row the sink cannot append (null payload, reserved value of a commit marker, ...)."""


@dataclass(frozen=True)
class SinkColumns:
    payload_is_string: bool
    has_reserved_value: bool


def sink_columns(schema: StructType) -> SinkColumns:
    """Checks the DataFrame's columns: payload (binary|string) and optional reserved_value (integral)."""
    names = [field.name for field in schema.fields]
    extra = [name for name in names if name not in ("payload", "reserved_value")]
    if extra or "payload" not in names:
        problem = f"unexpected column(s) {extra}" if extra else "no payload column"
        raise OptionError(f"the aeron-archive sink accepts the columns {ACCEPTED_COLUMNS}; got {schema.simpleString()} "
                          f"({problem}; select or rename the columns to write)")
    payload_type = schema["payload"].dataType
    if not isinstance(payload_type, (BinaryType, StringType)):
        raise OptionError(f"column payload has type {payload_type.simpleString()}; accepted: binary, or string "
                          "(written as UTF-8)")
    has_reserved = "reserved_value" in names
    if has_reserved and not isinstance(schema["reserved_value"].dataType, _INTEGRAL):
        raise OptionError(f"column reserved_value has type {schema['reserved_value'].dataType.simpleString()}; "
                          "accepted: bigint (or int, smallint, tinyint)")
    return SinkColumns(isinstance(payload_type, StringType), has_reserved)


def check_append_only(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("the aeron-archive sink only appends (a recording is append-only): use mode(\"append\") "
                          "for write, and the append (or update) output mode for writeStream")


def to_staged_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """One Spark Arrow batch -> STAGED_SCHEMA; raises SinkDataError for rows that cannot be sent."""
    # Imported here, on the executor: Spark's write-planning worker imports this module only to
    # pickle the writer (data_source's docstring), and commit_markers brings the archive client.
    import pyarrow.compute as pc
    from aeron_spark.connector.commit_markers import MARKER_RESERVED_VALUE
    payload = batch.column(batch.schema.get_field_index("payload"))
    if payload.null_count:
        row = pc.index(pc.is_null(payload), True).as_py()
        raise SinkDataError(f"column payload is null in row {row} of a batch; an Aeron message needs bytes "
                            "(use an empty binary or filter the row)")
    if pa.types.is_string(payload.type) or pa.types.is_large_string(payload.type):
        payload = payload.cast(pa.binary() if pa.types.is_string(payload.type) else pa.large_binary())
    if not pa.types.is_binary(payload.type):
        payload = payload.cast(pa.binary())
    index = batch.schema.get_field_index("reserved_value")
    if index < 0:
        reserved = pa.nulls(batch.num_rows, pa.int64()).fill_null(0)
    else:
        reserved = batch.column(index).cast(pa.int64()).fill_null(0)
        if batch.num_rows and pc.any(pc.equal(reserved, MARKER_RESERVED_VALUE)).as_py():
            row = pc.index(reserved, MARKER_RESERVED_VALUE).as_py()
            raise SinkDataError(f"column reserved_value is {MARKER_RESERVED_VALUE} in row {row}: that value marks "
                                "the sink's commit markers and may not be used by data rows")
    return pa.RecordBatch.from_arrays([payload, reserved], schema=STAGED_SCHEMA)


def coalesce(batches: Iterator[pa.RecordBatch], target_bytes: int = STAGED_BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """Staged batches combined up to ``target_bytes`` of payload (order kept)."""
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        pending_bytes += batch.nbytes
        if pending_bytes >= target_bytes:
            yield _combined(pending)
            pending, pending_bytes = [], 0
    if pending:
        yield _combined(pending)


def _combined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches, schema=STAGED_SCHEMA).combine_chunks().to_batches()[0]


class SinkCommitMessage(WriterCommitMessage):
    """What one successful write task staged (picklable, sent to the driver's commit). ``path`` is the
    file's path in the staging root's filesystem."""

    def __init__(self, sink_id: str, batch_key: str, partition_id: int, attempt: int, path: str, rows: int,
                 payload_bytes: int) -> None:
        self.sink_id = sink_id
        self.batch_key = batch_key
        self.partition_id = partition_id
        self.attempt = attempt
        self.path = path
        self.rows = rows
        self.payload_bytes = payload_bytes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SinkCommitMessage) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return (f"SinkCommitMessage(sink={self.sink_id}, {self.batch_key}, partition={self.partition_id}, "
                f"attempt={self.attempt}, rows={self.rows}, path={self.path})")


@dataclass(frozen=True)
class TaskInfo:
    partition_id: int
    attempt: int
    task_attempt_id: int
    batch_id: int | None
    query_id: str | None


def spark_task_info() -> TaskInfo:
    """From Spark's TaskContext: partition, attempt and the streaming batch/query ids (local properties)."""
    from pyspark import TaskContext
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the aeron-archive sink's write() must run in a Spark task")
    batch_text = context.getLocalProperty("streaming.sql.batchId")
    return TaskInfo(context.partitionId(), context.attemptNumber(), context.taskAttemptId(),
                    int(batch_text) if batch_text is not None else None,
                    context.getLocalProperty("sql.streaming.queryId"))


def stage_task_output(options: SinkOptions, batches: Iterator[pa.RecordBatch], task: TaskInfo,
                      batch_key: str) -> SinkCommitMessage:
    freeze_long_lived_objects()  # Spark's per-task gc.collect() then skips the imports (worker_gc.py)
    sink_id = options.resolve_sink_id(task.query_id)
    name = StagedName(batch_key, task.partition_id, task.attempt, task.task_attempt_id)
    staged = write_staged(sink_staging(options.staging_root, sink_id), name,
                          coalesce(to_staged_batch(batch) for batch in batches))
    return SinkCommitMessage(sink_id, batch_key, task.partition_id, task.attempt, staged.path, staged.rows,
                             staged.payload_bytes)


class AeronArchiveStreamWriter(DataSourceStreamArrowWriter):
    """writeStream: stage on executors; commit(messages, batchId) appends exactly once."""

    def __init__(self, options: SinkOptions, columns: SinkColumns,
                 task_info: Callable[[], TaskInfo] = spark_task_info) -> None:
        self.options = options
        self.columns = columns
        self._task_info = task_info

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        timings = StepTimings("sink.task")
        task = self._task_info()
        if task.batch_id is None:
            raise RuntimeError("streaming write without the local property streaming.sql.batchId")
        message = stage_task_output(self.options, iterator, task, streaming_batch_key(task.batch_id))
        timings.mark("stage (reading included)")
        timings.finish()
        return message

    def commit(self, messages: list, batchId: int) -> None:
        timings = StepTimings("sink.commit call")
        # Imported here, on the driver: tasks that only stage never load the archive client.
        from aeron_spark.connector.sink.commit_job import commit_staged
        timings.mark("import")
        commit_staged(self.options, messages, batch_id=batchId)
        timings.mark("commit_staged")
        timings.finish()

    def abort(self, messages: list, batchId: int) -> None:
        from aeron_spark.connector.sink.commit_job import abort_staged
        abort_staged(self.options, messages)


class AeronArchiveBatchWriter(DataSourceArrowWriter):
    """write: one job = one batch of the sink recording (its batch id is the last one + 1)."""

    def __init__(self, options: SinkOptions, columns: SinkColumns,
                 task_info: Callable[[], TaskInfo] = spark_task_info) -> None:
        self.options = options
        self.columns = columns
        self._task_info = task_info
        # Created once on the driver and pickled to tasks and to the commit: one key per job.
        self.job_key = new_job_key()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return stage_task_output(self.options, iterator, self._task_info(), self.job_key)

    def commit(self, messages: list) -> None:
        from aeron_spark.connector.sink.commit_job import commit_staged  # on the driver (see the stream writer)
        commit_staged(self.options, messages, batch_id=None)

    def abort(self, messages: list) -> None:
        from aeron_spark.connector.sink.commit_job import abort_staged
        abort_staged(self.options, messages)
