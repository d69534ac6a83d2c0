"""The driver-side commit of the `aeron-archive` sink: staged rows -> the sink recording, exactly once.

``SinkCommitter.commit`` (one micro-batch or one batch-write job):

1. **Recover** the sink recording's state (``recover``): find it by its alias, wait for a
   recording left active by a crashed commit to stop, then read its TAIL. A commit marker ending
   exactly at the stop position means the recording is clean and names the last committed batch.
   Anything else is the DEBRIS of a commit that died before its marker: the last marker is found
   by scanning forward from the last committed end this driver knows (hint file) or from the
   recording's start. The debris is left where it is (see "Debris is never truncated" below).
2. **Skip** a batch whose id is <= the last marker's (Spark re-runs commit for a replayed batch).
3. **Append**: an exclusive publication starting exactly at the recording's stop position
   (initial term id, term length and mtu from the descriptor; after debris, that is the end of the
   debris) is recorded by ExtendRecording (the first batch: StartRecording); the staged files are
   appended in partition order as numpy-built frames (``sink/frames.py``), then the commit marker
   (``connector/commit_markers.py``), whose ``data_start`` names where this batch's data begins.
4. **Seal**: wait until the archive has recorded up to the publication's position, stop the
   recording, check its stop position. The marker being recorded is the commit point.

**One writer per sink**, without a lock (staging may be an object store, and the driver of a
restarted query may run on another host than a zombie one): the archive arbitrates. It refuses
ExtendRecording of a recording that is active (ACTIVE_RECORDING), and an extension whose image does
not join exactly at the stop position (INVALID_EXTENSION), so of two committers that recovered the
same stop position only one can append: the other fails with ``SinkConflict``. The first recording
of a sink has no stop position to race on: after StartRecording the committer lists the sink's
recordings and the lowest recording id wins; a loser stops and purges its own (still empty)
recording and fails with ``SinkConflict``.

**Debris is never truncated.** Earlier versions truncated debris back to the last marker during
recovery. The archive's TruncateRecording is unconditional (Aeron refuses it only for an active
recording or a position past the stop position, and 1.52 no longer even for one being replayed),
so a committer that re-read the recording and then stalled before its truncate could wake after
another committer had recovered, appended and sealed a batch, and cut that committed batch. No
fence held in the archive can refuse such a late truncate, so the commit now never truncates: the
debris [last marker end, stop position) stays in the recording, and the recovering committer
CLAIMS the recording by extending it at the stop position, i.e. after the debris. Only one
ExtendRecording can join at a stop position, so exactly one of several committers that recovered
the same state wins; a stalled one wakes to an extension refused (INVALID_EXTENSION: the stop
moved) and fails with ``SinkConflict``, having changed nothing. The batch's marker names its
``data_start`` (the end of the debris), so readers drop [previous marker end, data_start)
(``source/message_batches.py``); in a recording without debris ``data_start`` is always the
previous marker's end, which is how every recording written before this change reads, unchanged.
The cost is disk: debris stays until the recording is purged (each dead commit leaves at most
one batch of it). Fault point ``before-claim`` stops a commit exactly between its re-read of the
recording and its claim (where the truncate was).

Readers cap a sink recording at its last marker (``source/sink_visibility.py``), so a batch is
visible entirely or not at all. The committer depends only on Protocols: the archive is behind
``SinkArchive`` (``sink/sink_archive.py``), so this logic is unit-tested with a fake, and
``sink/archive_access.py`` implements it over the archive client; the staged rows (``StagedInputs``)
and the hint (``CommitHints``) are opened by ``sink/commit_job.py``, where Spark's commit and abort
calls arrive.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import crc32c
import numpy as np
from aeron_spark.archive.client import RecordingDescriptor
from aeron_spark.driver_integration.frame import scan_frames

from aeron_spark.connector.sink.fault_injection import fault_point
from aeron_spark.connector.step_timings import StepTimings
from aeron_spark.connector.sink.frames import MessageColumns, frame_messages
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
from aeron_spark.connector.sink.sink_archive import (
    SinkAppender,
    SinkArchive,
    SinkCommitError,
    SinkConflict,
    SinkState,
)

LOG = logging.getLogger("aeron_spark.connector.sink")


# --- what the committer is given besides the archive (opened by sink/commit_job.py) ----------------


@dataclass(frozen=True)
class CommitHint:
    """Where the last commit ended (advisory: the recording is the truth)."""

    recording_id: int
    committed_end: int
    batch_id: int


class CommitHints(Protocol):
    """Where the last commit ended, kept durably so the scan for the last marker after a dead commit
    starts there (``commit_job.HintStore``: a file in the staging directory). A torn, missing or
    stale hint only means a longer scan: the committer uses a hint only when a marker of this sink
    ends exactly there."""

    def load(self) -> CommitHint | None:
        """The hint, None when there is none or it does not parse."""

    def save(self, hint: CommitHint) -> None: ...


class StagedPartition(Protocol):
    """One write task's staged rows."""

    @property
    def partition_id(self) -> int: ...

    @property
    def rows(self) -> int:
        """How many rows the task reported staging."""

    def messages(self) -> Iterator[MessageColumns]:
        """The staged rows, in order, as payload and reserved-value columns."""


class StagedInputs(Protocol):
    """The staged rows of one commit (``commit_job.StagedFiles``)."""

    @property
    def partitions(self) -> Sequence[StagedPartition]: ...

    def check_present(self) -> None:
        """Raise ``SinkCommitError`` when staged rows the tasks reported cannot be read (checked
        before anything is appended)."""


# --- the committer -----------------------------------------------------------------------------


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


class SinkCommitter:
    def __init__(self, archive: SinkArchive, sink_id: str, stream_id: int, *, hints: CommitHints | None = None,
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
        self.timings = StepTimings("sink.commit")

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
        known = self._state_left_by_this_process()
        if known is not None:
            self.timings.mark("recover: known")
            return known
        recording = self.find_recording()
        self.timings.mark("recover: find")
        if recording is None:
            return SinkState(None, None, None)
        if recording.is_active:
            recording = self._await_stopped(recording.recording_id)
        stop = recording.stop_position
        tail = self._tail_marker(recording)
        self.timings.mark("recover: tail")
        if tail is not None:
            return SinkState(recording, tail, stop)
        last = self._last_marker_before(recording)
        committed_end = last.end if last is not None else recording.start_position
        if committed_end < stop:
            LOG.warning("sink %s: recording %d holds %d bytes after its last commit marker (a commit that did not "
                        "finish); they stay, the next batch is appended after them and readers skip [%d, %d)",
                        self.sink_id, recording.recording_id, stop - committed_end, committed_end, stop)
        return SinkState(recording, last, committed_end)

    def _state_left_by_this_process(self) -> SinkState | None:
        """The state this process's last commit of the sink left, if the recording is still exactly
        there: stopped at that commit's marker end. One ListRecording instead of a listing and a tail
        replay. Safe because the stop position only ever moves forward, by an extension (which would
        move it past this end; nothing truncates a sink recording): stopped at this end, the recording
        ends with this commit's marker."""
        states = self.archive.committed_states
        if states is None:
            return None
        known = states.pop((self.sink_id, self.stream_id), None)
        if known is None or known.recording is None:  # only commits that sealed a recording are remembered
            return None
        current = self.archive.describe(known.recording.recording_id)
        if (current is None or current.is_active or current.stop_position != known.committed_end
                or current.initial_term_id != known.recording.initial_term_id):
            LOG.info("sink %s: recording %d is no longer where this process's last commit left it; recovering",
                     self.sink_id, known.recording.recording_id)
            return None
        return SinkState(current, known.last_marker, known.committed_end)

    def _remember(self, sealed: RecordingDescriptor, marker: CommitMarker, marker_position: int) -> None:
        states = self.archive.committed_states
        if states is not None:
            states[(self.sink_id, self.stream_id)] = SinkState(
                sealed, LocatedMarker(marker, marker_position), sealed.stop_position)

    def _check_unchanged(self, recovered: RecordingDescriptor) -> None:
        """Before claiming a recording that holds debris: it must still be stopped where this commit
        re-read it. The archive's refusal of the extension is what decides (this check and the claim
        are not atomic); this only fails a late committer early, naming what happened."""
        current = self.archive.describe(recovered.recording_id)
        if current is None or current.is_active or current.stop_position != recovered.stop_position:
            now = "gone" if current is None else "active" if current.is_active else f"stopped at {current.stop_position}"
            raise SinkConflict(f"sink {self.sink_id}: recording {recovered.recording_id} changed while this commit "
                               f"recovered it (stopped at {recovered.stop_position}, now {now}): another committer "
                               f"is writing sink.id {self.sink_id}; one writer per sink.id (this commit failed, "
                               "nothing of it was appended)")

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
                continue  # read it again before judging the deadline (a stalled process may be past it)
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

    def commit(self, inputs: StagedInputs, batch_id: int | None) -> CommitResult:
        """Append ``inputs`` as batch ``batch_id`` (None: a batch write, numbered last + 1)."""
        batch_write = batch_id is None
        partitions = [i.partition_id for i in inputs.partitions]
        if len(set(partitions)) != len(partitions):
            raise SinkCommitError(f"sink {self.sink_id}: two commit messages for one partition: {sorted(partitions)}")
        rows = sum(i.rows for i in inputs.partitions)
        if rows == 0:
            return CommitResult(CommitOutcome.EMPTY, batch_id)
        self.timings.mark("before recover")
        state = self.recover()
        self.timings.mark("recover")
        last = state.last_marker
        recording_id = state.recording.recording_id if state.recording is not None else None
        if last is not None and last.marker.is_batch_write != batch_write:
            kind = "batch writes (spark.write)" if last.marker.is_batch_write else "a streaming query"
            raise SinkConflict(f"sink.id {self.sink_id} (recording {recording_id}) is written by {kind}; "
                               "give this writer its own sink.id")
        if batch_id is None:  # a batch write: the next batch id
            batch_id = last.marker.batch_id + 1 if last is not None else 0
        elif last is not None and last.marker.batch_id >= batch_id:
            LOG.info("sink %s: batch %d is already committed (last committed batch %d); skipping", self.sink_id,
                     batch_id, last.marker.batch_id)
            return CommitResult(CommitOutcome.ALREADY_COMMITTED, batch_id, recording_id, end=state.committed_end)
        inputs.check_present()
        self.timings.mark("check staged")
        fault_point("before-append", batch_id)  # test-only fault injection; off unless its env var is set
        if state.recording is not None and state.committed_end != state.recording.stop_position:
            self._check_unchanged(state.recording)  # debris: fail a late committer early, by name
        fault_point("before-claim", batch_id)  # re-read, not yet claimed: where the old truncate raced
        appender = self.archive.start_appender(state.recording, self.sink_id)  # the claim
        self.timings.mark("extend")
        try:
            if state.recording is None:
                self._claim_first_recording(appender)
            data_start = appender.position
            if state.recording is not None and data_start != state.recording.stop_position:
                raise SinkCommitError(f"sink {self.sink_id}: the publication starts at {data_start}, the recording "
                                      f"stops at {state.recording.stop_position}")
            written, payload_bytes, data_crc = self._append_staged(appender, inputs.partitions)
            self.timings.mark("append rows")
            self._note_back_pressure(appender)
            fault_point("before-marker", batch_id)  # test-only fault injection (sink/fault_injection.py)
            if written != rows:
                raise SinkCommitError(f"sink {self.sink_id}: staged files hold {written} rows, the tasks reported {rows}")
            marker = CommitMarker(self._hash, batch_id, data_start, written, payload_bytes, data_crc,
                                  FLAG_BATCH_WRITE if batch_write else 0)
            marker_position = appender.position
            self._append_message(appender, marker.encode(), MARKER_RESERVED_VALUE)
            end = appender.position
            self.timings.mark("marker")
            sealed = appender.seal()
            self.timings.mark("seal")
        except BaseException:
            with contextlib.suppress(Exception):
                appender.abandon()
            raise
        if sealed.stop_position != end:
            raise SinkCommitError(f"sink {self.sink_id}: recording {sealed.recording_id} stopped at "
                                  f"{sealed.stop_position}, expected {end} (the end of batch {batch_id}'s marker)")
        self._remember(sealed, marker, marker_position)
        if self.hints is not None:
            with contextlib.suppress(OSError):
                self.hints.save(CommitHint(sealed.recording_id, end, batch_id))
            self.timings.mark("hint")
        LOG.info("sink %s: committed batch %d: %d rows, recording %d [%d, %d)", self.sink_id, batch_id, written,
                 sealed.recording_id, data_start, end)
        return CommitResult(CommitOutcome.COMMITTED, batch_id, sealed.recording_id, data_start, end, written)

    def _claim_first_recording(self, appender: SinkAppender) -> None:
        """Two committers that both found no sink recording both start one; the lowest recording id
        wins (ids grow, so a winner's check can never see a lower one appear later). The loser stops
        and purges its own, still empty, recording and fails."""
        own = appender.recording_id
        first = self.find_recording()
        if first is None or first.recording_id == own:
            return
        LOG.warning("sink %s: recording %d was started concurrently with this commit's %d; the lower id wins, "
                    "removing %d", self.sink_id, first.recording_id, own, own)
        appender.abandon()
        with contextlib.suppress(Exception):
            self.archive.discard(own)
        raise SinkConflict(f"sink {self.sink_id}: another committer started the sink recording at the same time "
                           f"(recording {first.recording_id}, before this commit's {own}, which was stopped and "
                           f"removed); one writer per sink.id (this commit failed, nothing of it was appended)")

    def _append_staged(self, appender: SinkAppender, partitions: Sequence[StagedPartition]) -> tuple[int, int, int]:
        rows = payload_bytes = 0
        data_crc = 0
        for staged in sorted(partitions, key=lambda i: i.partition_id):
            if staged.rows == 0:
                continue
            for columns in staged.messages():
                offsets = columns.offsets
                first, last = int(offsets[0]), int(offsets[-1])
                data_crc = crc32c.crc32c(columns.values[first:last], data_crc)
                for block in frame_messages(columns.values, offsets, columns.reserved, appender.position,
                                            appender.layout):
                    appender.append(block)
                rows += offsets.size - 1
                payload_bytes += last - first
        return rows, payload_bytes, data_crc

    def _note_back_pressure(self, appender: SinkAppender) -> None:
        """Of "append rows", the part spent waiting for the archive to drain the publication; with
        the offers refused meanwhile."""
        self.timings.ms["append rows: back pressured"] = appender.back_pressure_s * 1000.0
        self.timings.ms["append rows: offers refused"] = float(appender.refused_offers)

    def _append_message(self, appender: SinkAppender, payload: bytes, reserved_value: int) -> None:
        values = np.frombuffer(payload, dtype=np.uint8)
        for block in frame_messages(values, np.array([0, len(payload)]), np.array([reserved_value]),
                                    appender.position, appender.layout):
            appender.append(block)

