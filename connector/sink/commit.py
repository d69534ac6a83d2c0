"""The driver-side commit of the `aeron-archive` sink: staged rows -> the sink recording, exactly once.

``SinkCommitter.commit`` (one micro-batch or one batch-write job):

1. **Recover** the sink recording's state (``recover``): find it by its alias, wait for a
   recording left active by a crashed commit to stop, then read its TAIL. A commit marker ending
   exactly at the stop position means the recording is clean and names the last committed batch.
   Anything else is the debris of a commit that died before its marker: the last marker is found
   by scanning forward from the last committed end this driver knows (hint file) or from the
   recording's start, and the recording is TRUNCATED back to the end of that marker.
2. **Skip** a batch whose id is <= the last marker's (Spark re-runs commit for a replayed batch).
3. **Append**: an exclusive publication starting exactly at the recording's stop position
   (initial term id, term length and mtu from the descriptor) is recorded by ExtendRecording (the
   first batch: StartRecording); the staged files are appended in partition order as numpy-built
   frames (``sink/frames.py``), then the commit marker (``connector/commit_markers.py``).
4. **Seal**: wait until the archive has recorded up to the publication's position, stop the
   recording, check its stop position. The marker being recorded is the commit point.

Readers cap a sink recording at its last marker (``source/sink_visibility.py``), so a batch is
visible entirely or not at all. The archive access is behind ``SinkArchive`` so this logic is
unit-tested with a fake; ``sink/archive_access.py`` implements it over
``aeron_spark.archive.client.archive_client``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

import crc32c
import numpy as np
import pyarrow as pa
from aeron_spark.archive.client import RecordingDescriptor
from aeron_spark.driver_integration.frame import scan_frames

from aeron_spark.connector.sink.fault_injection import fault_point
from aeron_spark.connector.sink.frames import PublicationLayout, TermBlock, frame_messages
from aeron_spark.connector.commit_markers import (
    FLAG_BATCH_WRITE,
    MARKER_FRAME_LENGTH,
    MARKER_RESERVED_VALUE,
    CommitMarker,
    LocatedMarker,
    marker_at_tail,
    markers_in_frames,
    sink_id_hash,
    sink_id_of_channel,
)
from aeron_spark.connector.sink.staging import clean_stale, delete_quietly, read_staged, sink_staging_dir

LOG = logging.getLogger("aeron_spark.connector.sink")
HINT_FILE = "_committed.json"
LOCK_FILE = "_commit.lock"


class SinkCommitError(RuntimeError):
    """A commit could not complete; nothing of it is visible, and the next commit cleans up."""


class SinkConflict(SinkCommitError):
    """The sink recording is used in a way this commit cannot continue (e.g. stream and batch writes)."""


# --- what the committer needs from the archive -------------------------------------------------


class SinkAppender(Protocol):
    """An open, recorded publication positioned at the end of the sink recording."""

    @property
    def recording_id(self) -> int: ...

    @property
    def layout(self) -> PublicationLayout: ...

    @property
    def position(self) -> int: ...

    def append(self, block: TermBlock) -> None:
        """Append the block's frames (they start at ``position``)."""

    def seal(self) -> RecordingDescriptor:
        """Wait until everything appended is recorded, stop the recording; its stopped descriptor."""

    def abandon(self) -> None:
        """Best effort after a failure: stop the recording and release the publication."""


class SinkArchive(Protocol):
    def find_sink_recordings(self, sink_id: str, stream_id: int) -> list[RecordingDescriptor]:
        """Recordings of ``stream_id`` whose original channel contains the sink's alias."""

    def describe(self, recording_id: int) -> RecordingDescriptor | None: ...

    def read(self, recording_id: int, start: int, end: int) -> ContextManager[Iterator[tuple[int, bytes]]]:
        """Whole frames of [start, end) as (position, block); raises if start is not a frame."""

    def truncate(self, recording_id: int, position: int) -> None: ...

    def stop_active(self, recording_id: int) -> None:
        """Stop a recording left active (by identity)."""

    def start_appender(self, recording: RecordingDescriptor | None, sink_id: str) -> SinkAppender:
        """Extend ``recording`` at its stop position, or start the sink recording when None."""

    def close(self) -> None: ...


# --- durable hint (local, advisory: the recording is the truth) -----------------------------------


@dataclass(frozen=True)
class CommitHint:
    recording_id: int
    committed_end: int
    batch_id: int


class HintStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / HINT_FILE

    def load(self) -> CommitHint | None:
        try:
            data = json.loads(self.path.read_text())
            return CommitHint(int(data["recording_id"]), int(data["committed_end"]), int(data["batch_id"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, hint: CommitHint) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{HINT_FILE}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(vars(hint)))
        os.replace(temporary, self.path)


# --- the committer -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkState:
    recording: RecordingDescriptor | None
    last_marker: LocatedMarker | None
    committed_end: int | None  # None: no sink recording yet
    truncated_from: int | None = None  # the stop position before debris was cut


class CommitOutcome(Enum):
    COMMITTED = "committed"
    ALREADY_COMMITTED = "already committed"
    EMPTY = "empty batch (nothing appended)"


@dataclass(frozen=True)
class CommitResult:
    outcome: CommitOutcome
    batch_id: int | None
    recording_id: int | None = None
    data_start: int | None = None
    end: int | None = None
    rows: int = 0


@dataclass(frozen=True)
class StagedInput:
    partition_id: int
    path: str
    rows: int


class SinkCommitter:
    def __init__(self, archive: SinkArchive, sink_id: str, stream_id: int, *, hints: HintStore | None = None,
                 timeout_s: float = 60.0, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.archive = archive
        self.sink_id = sink_id
        self.stream_id = stream_id
        self.hints = hints
        self.timeout_s = timeout_s
        self._sleep = sleep
        self._clock = clock
        self._hash = sink_id_hash(sink_id)

    # -- recovery -------------------------------------------------------------------------------

    def find_recording(self) -> RecordingDescriptor | None:
        found = [d for d in self.archive.find_sink_recordings(self.sink_id, self.stream_id)
                 if sink_id_of_channel(d.original_channel) == self.sink_id and d.stream_id == self.stream_id]
        if not found:
            return None
        found.sort(key=lambda d: d.recording_id)
        if len(found) > 1:
            LOG.warning("sink %s: %d recordings carry its alias (%s); using the first", self.sink_id, len(found),
                        [d.recording_id for d in found])
        return found[0]

    def recover(self) -> SinkState:
        recording = self.find_recording()
        if recording is None:
            return SinkState(None, None, None)
        if recording.is_active:
            recording = self._await_stopped(recording.recording_id)
        stop = recording.stop_position
        tail = self._tail_marker(recording)
        if tail is not None:
            return SinkState(recording, tail, stop)
        last = self._last_marker_before(recording)
        committed_end = last.end if last is not None else recording.start_position
        if committed_end < stop:
            LOG.warning("sink %s: recording %d holds %d bytes after its last commit marker (a commit that did not "
                        "finish); truncating to %d", self.sink_id, recording.recording_id, stop - committed_end,
                        committed_end)
            self.archive.truncate(recording.recording_id, committed_end)
            recording = self.archive.describe(recording.recording_id) or recording.with_changes(
                stop_position=committed_end)
            if recording.stop_position != committed_end:
                raise SinkCommitError(f"sink {self.sink_id}: truncating recording {recording.recording_id} to "
                                      f"{committed_end} left it stopping at {recording.stop_position}")
        return SinkState(recording, last, committed_end, truncated_from=stop)

    def _await_stopped(self, recording_id: int) -> RecordingDescriptor:
        """A recording still active belongs to a commit that died; it stops when its publication goes
        (autoStop) - or is stopped here after half the timeout."""
        deadline = self._clock() + self.timeout_s
        stop_at = self._clock() + self.timeout_s / 2
        stopped_it = False
        while True:
            descriptor = self.archive.describe(recording_id)
            if descriptor is None:
                raise SinkCommitError(f"sink {self.sink_id}: recording {recording_id} left the catalog")
            if not descriptor.is_active:
                return descriptor
            now = self._clock()
            if not stopped_it and now >= stop_at:
                LOG.warning("sink %s: recording %d is still active (an unfinished commit); stopping it",
                            self.sink_id, recording_id)
                self.archive.stop_active(recording_id)
                stopped_it = True
            if now >= deadline:
                raise SinkCommitError(f"sink {self.sink_id}: recording {recording_id} is still being recorded after "
                                      f"{self.timeout_s} s; is another writer using sink.id {self.sink_id}?")
            self._sleep(0.05)

    def _tail_marker(self, recording: RecordingDescriptor) -> LocatedMarker | None:
        stop = recording.stop_position
        start = stop - MARKER_FRAME_LENGTH
        if start < recording.start_position:
            return None
        try:
            with self.archive.read(recording.recording_id, start, stop) as blocks:
                data = b"".join(block for _, block in blocks)
        except Exception as error:  # noqa: BLE001 - not a frame boundary: the tail is not a marker
            LOG.info("sink %s: no marker frame at the tail of recording %d (%s)", self.sink_id,
                     recording.recording_id, error)
            return None
        return marker_at_tail(data, start, stop, self._hash)

    def _last_marker_before(self, recording: RecordingDescriptor) -> LocatedMarker | None:
        """Scan for the last marker: from the hinted committed end when it checks out, else from the start."""
        start, stop = recording.start_position, recording.stop_position
        hint = self.hints.load() if self.hints is not None else None
        if hint is not None and hint.recording_id == recording.recording_id and start < hint.committed_end <= stop:
            hinted = self._marker_ending_at(recording, hint.committed_end)
            if hinted is not None:
                later = self._scan(recording, hint.committed_end, stop)
                return later if later is not None else hinted
        return self._scan(recording, start, stop)

    def _marker_ending_at(self, recording: RecordingDescriptor, end: int) -> LocatedMarker | None:
        shortened = recording.with_changes(stop_position=end)
        return self._tail_marker(shortened)

    def _scan(self, recording: RecordingDescriptor, start: int, end: int) -> LocatedMarker | None:
        if start >= end:
            return None
        last: LocatedMarker | None = None
        with self.archive.read(recording.recording_id, start, end) as blocks:
            for position, block in blocks:
                data = np.frombuffer(block, dtype=np.uint8)
                found = markers_in_frames(data, position, scan_frames(data).offsets, self._hash)
                if found:
                    last = found[-1]
        return last

    # -- commit ---------------------------------------------------------------------------------

    def commit(self, inputs: Sequence[StagedInput], batch_id: int | None) -> CommitResult:
        """Append ``inputs`` as batch ``batch_id`` (None: a batch write, numbered last + 1)."""
        batch_write = batch_id is None
        partitions = [i.partition_id for i in inputs]
        if len(set(partitions)) != len(partitions):
            raise SinkCommitError(f"sink {self.sink_id}: two commit messages for one partition: {sorted(partitions)}")
        rows = sum(i.rows for i in inputs)
        if rows == 0:
            return CommitResult(CommitOutcome.EMPTY, batch_id)
        state = self.recover()
        last = state.last_marker
        if last is not None and last.marker.is_batch_write != batch_write:
            kind = "batch writes (spark.write)" if last.marker.is_batch_write else "a streaming query"
            raise SinkConflict(f"sink.id {self.sink_id} (recording {state.recording.recording_id}) is written by {kind}; "
                               "give this writer its own sink.id")
        if batch_write:
            batch_id = last.marker.batch_id + 1 if last is not None else 0
        elif last is not None and last.marker.batch_id >= batch_id:
            LOG.info("sink %s: batch %d is already committed (last committed batch %d); skipping", self.sink_id,
                     batch_id, last.marker.batch_id)
            return CommitResult(CommitOutcome.ALREADY_COMMITTED, batch_id, state.recording.recording_id,
                                end=state.committed_end)
        fault_point("before-append", batch_id)  # test-only fault injection; off unless its env var is set
        appender = self.archive.start_appender(state.recording, self.sink_id)
        try:
            data_start = appender.position
            if state.committed_end is not None and data_start != state.committed_end:
                raise SinkCommitError(f"sink {self.sink_id}: the publication starts at {data_start}, the recording "
                                      f"ends at {state.committed_end}")
            written, payload_bytes, data_crc = self._append_staged(appender, inputs)
            fault_point("before-marker", batch_id)  # test-only fault injection (sink/fault_injection.py)
            if written != rows:
                raise SinkCommitError(f"sink {self.sink_id}: staged files hold {written} rows, the tasks reported {rows}")
            marker = CommitMarker(self._hash, batch_id, data_start, written, payload_bytes, data_crc,
                                  FLAG_BATCH_WRITE if batch_write else 0)
            self._append_message(appender, marker.encode(), MARKER_RESERVED_VALUE)
            end = appender.position
            sealed = appender.seal()
        except BaseException:
            with contextlib.suppress(Exception):
                appender.abandon()
            raise
        if sealed.stop_position != end:
            raise SinkCommitError(f"sink {self.sink_id}: recording {sealed.recording_id} stopped at "
                                  f"{sealed.stop_position}, expected {end} (the end of batch {batch_id}'s marker)")
        if self.hints is not None:
            with contextlib.suppress(OSError):
                self.hints.save(CommitHint(sealed.recording_id, end, batch_id))
        LOG.info("sink %s: committed batch %d: %d rows, recording %d [%d, %d)", self.sink_id, batch_id, written,
                 sealed.recording_id, data_start, end)
        return CommitResult(CommitOutcome.COMMITTED, batch_id, sealed.recording_id, data_start, end, written)

    def _append_staged(self, appender: SinkAppender, inputs: Sequence[StagedInput]) -> tuple[int, int, int]:
        rows = payload_bytes = 0
        data_crc = 0
        for staged in sorted(inputs, key=lambda i: i.partition_id):
            if staged.rows == 0:
                continue
            for batch in read_staged(staged.path):
                values, offsets = binary_buffers(batch.column(0))
                reserved = int64_values(batch.column(1))
                first, last = int(offsets[0]), int(offsets[-1])
                data_crc = crc32c.crc32c(values[first:last], data_crc)
                for block in frame_messages(values, offsets, reserved, appender.position, appender.layout):
                    appender.append(block)
                rows += batch.num_rows
                payload_bytes += last - first
        return rows, payload_bytes, data_crc

    def _append_message(self, appender: SinkAppender, payload: bytes, reserved_value: int) -> None:
        values = np.frombuffer(payload, dtype=np.uint8)
        for block in frame_messages(values, np.array([0, len(payload)]), np.array([reserved_value]),
                                    appender.position, appender.layout):
            appender.append(block)


def binary_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of an Arrow binary array, zero-copy (offsets index ``values``)."""
    if len(array) == 0:
        return np.empty(0, np.uint8), np.zeros(1, np.int64)
    _, offsets_buffer, values_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[array.offset:array.offset + len(array) + 1]
    values = np.frombuffer(values_buffer, dtype=np.uint8) if values_buffer is not None else np.empty(0, np.uint8)
    return values, offsets.astype(np.int64)


def int64_values(array: pa.Array) -> np.ndarray:
    """The values of a null-free int64 Arrow array, zero-copy. (``Array.to_numpy`` imports pandas,
    ~1 s in a fresh commit worker on a loaded machine.)"""
    if array.null_count:
        raise SinkCommitError(f"a staged reserved_value column holds {array.null_count} nulls (staging fills them)")
    data = array.buffers()[1]
    if len(array) == 0 or data is None:
        return np.zeros(len(array), np.int64)
    return np.frombuffer(data, dtype=np.int64)[array.offset:array.offset + len(array)]


# --- entry points used by sink/writer.py ---------------------------------------------------------


@contextlib.contextmanager
def commit_lock(directory: Path) -> Iterator[None]:
    """One committing process per sink on this host (a zombie driver cannot interleave its appends)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def commit_staged(options, messages: Sequence, batch_id: int | None,
                  open_archive: Callable | None = None) -> CommitResult | None:
    """Spark's commit(messages, batchId): append the staged files of ``messages`` exactly once."""
    staged = [m for m in messages if m is not None]
    if not staged:
        return None
    sink_ids = {m.sink_id for m in staged}
    if len(sink_ids) != 1:
        raise SinkCommitError(f"commit messages of several sinks in one commit: {sorted(sink_ids)}")
    sink_id = sink_ids.pop()
    directory = sink_staging_dir(options.staging_root, sink_id)
    inputs = [StagedInput(m.partition_id, m.path, m.rows) for m in staged]

    def run(archive: SinkArchive) -> CommitResult:
        committer = SinkCommitter(archive, sink_id, options.stream_id, hints=HintStore(directory),
                                  timeout_s=options.commit_timeout_ms / 1000.0)
        return committer.commit(inputs, batch_id)

    with commit_lock(directory):
        if open_archive is not None:
            archive = open_archive(options)
            try:
                result = run(archive)
            finally:
                archive.close()
        else:
            result = _run_on_shared_archive(options, run)
        for message in staged:
            delete_quietly(message.path)
        clean_stale(directory, keep=set(), committed_batch_id=result.batch_id if batch_id is not None else None)
    return result


def _run_on_shared_archive(options, run: Callable[[SinkArchive], CommitResult]) -> CommitResult:
    """``run`` on this process's cached connection; when a REUSED connection fails (e.g. the archive
    restarted since), once more on a fresh one - safe because a commit recovers and is idempotent."""
    from aeron_spark.connector.sink.archive_access import forget_shared_sink_archive, shared_sink_archive
    archive, reused = shared_sink_archive(options)
    try:
        return run(archive)
    except (SinkCommitError, ValueError):
        raise  # about the data or the recording, not the connection
    except Exception as error:
        forget_shared_sink_archive(options)
        if not reused:
            raise
        LOG.warning("sink commit failed on a reused archive connection (%s); retrying on a new one", error)
    archive, _ = shared_sink_archive(options)
    try:
        return run(archive)
    except (SinkCommitError, ValueError):
        raise
    except Exception:
        forget_shared_sink_archive(options)
        raise


def abort_staged(messages: Sequence) -> None:
    """Spark's abort: delete what the successful tasks staged (failed tasks appear as None)."""
    for message in messages:
        if message is not None:
            delete_quietly(message.path)
