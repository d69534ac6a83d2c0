"""One Image being recorded into segment files: INIT -> RECORDING -> INACTIVE -> STOPPED.

Created by the conductor (one per Image of a recording subscription, after the catalog entry
and the ``rec-pos`` counter exist) and driven by the :class:`~aeron_spark.archive.service.recorder.Recorder`
agent's duty cycle, modelled on Aeron's ``RecordingSession``:

* INIT: the segment writer is created (files are created on the recorder's thread); a failure
  stops the session at once with the error kept in :attr:`error`.
* RECORDING: each ``do_work`` block-polls up to ``block_length_limit`` bytes (never more than a
  term) straight from the Image's term buffer into the writer (zero-copy view), then publishes
  the new recorded position in the ``rec-pos`` counter. When nothing was polled and the Image is
  at end of stream or closed, the session goes INACTIVE.
* INACTIVE: the writer is closed, :attr:`stop_position` is fixed, the session is STOPPED.

``abort(reason)`` (any thread) stops the session at its next duty cycle: that is how a stop
request ends a recording. A write error ends the recording with :attr:`error` set (code
GENERIC, or STORAGE_SPACE when the disk is full); it is never swallowed.

The ``rec-pos`` counter stays open after STOPPED so that replays following it can read the
final value; :meth:`close` (called by whoever handles ``on_recording_stopped``) closes it.
"""

from __future__ import annotations

import enum
import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aeron_spark.archive.codecs.constants import ArchiveErrorCode
from aeron_spark.archive.configuration import DEFAULT_FILE_IO_MAX_LENGTH
from aeron_spark.archive.service.counters import IoStats

log = logging.getLogger(__name__)


class RecordingState(enum.Enum):
    INIT = "INIT"
    RECORDING = "RECORDING"
    INACTIVE = "INACTIVE"
    STOPPED = "STOPPED"


class RecordedImage(Protocol):
    """What a recording needs of driver_integration's ``Image``."""

    session_id: int
    join_position: int
    term_buffer_length: int

    def block_poll(self, handler: Callable[..., None], block_length_limit: int) -> int: ...

    @property
    def is_end_of_stream(self) -> bool: ...

    @property
    def is_closed(self) -> bool: ...


class BlockWriter(Protocol):
    """What a recording needs of ``segment.SegmentWriter``."""

    @property
    def position(self) -> int: ...

    def append(self, block: memoryview) -> None: ...

    def close(self) -> None: ...


class PositionCounter(Protocol):
    value: int

    def close(self) -> None: ...


class RecordingListener(Protocol):
    """Callbacks from the recorder's thread; implementations that live on another thread must
    only enqueue. ``on_recording_progress`` may return False to have the same progress offered
    again later (a back-pressured events publication)."""

    def on_recording_started(self, session: "RecordingSession") -> None: ...

    def on_recording_progress(self, session: "RecordingSession", position: int) -> bool | None: ...

    def on_recording_stopped(self, session: "RecordingSession") -> None: ...


@dataclass(frozen=True, slots=True)
class RecordingError:
    code: int  # an ArchiveErrorCode value
    message: str


def _error_for(exception: BaseException, recording_id: int) -> RecordingError:
    code = ArchiveErrorCode.GENERIC
    if isinstance(exception, OSError) and exception.errno in (errno.ENOSPC, errno.EDQUOT):
        code = ArchiveErrorCode.STORAGE_SPACE
    return RecordingError(int(code), f"recording {recording_id} failed: "
                                     f"{type(exception).__name__}: {exception}")


def _no_writer_yet(block: memoryview) -> None:
    raise RuntimeError("a block arrived before the recording's segment writer was made")


class RecordingSession:
    """One Image -> one recording. Single-threaded except :meth:`abort` and the read-only
    properties, which other threads may call."""

    def __init__(self, *, recording_id: int, image: RecordedImage,
                 writer_factory: Callable[[], BlockWriter], position_counter: PositionCounter,
                 correlation_id: int = 0, owner: object = None,
                 file_io_max_length: int = DEFAULT_FILE_IO_MAX_LENGTH,
                 listener: RecordingListener | None = None,
                 nano_clock: Callable[[], int] = time.perf_counter_ns) -> None:
        if file_io_max_length <= 0:
            raise ValueError(f"file_io_max_length {file_io_max_length} must be > 0")
        self.recording_id = recording_id
        self.correlation_id = correlation_id
        self.owner = owner  # the conductor's own bookkeeping (control session, subscription, ...)
        self.image = image
        self.join_position = image.join_position
        self.block_length_limit = min(image.term_buffer_length, file_io_max_length)
        self.listener = listener
        self.io_stats = IoStats()  # the Recorder replaces it with its shared one
        self._writer_factory = writer_factory
        self._writer: BlockWriter | None = None
        self._append: Callable[[memoryview], None] = _no_writer_yet
        self._counter = position_counter
        self._nano_clock = nano_clock
        self._state = RecordingState.INIT
        self._recorded_position = self.join_position
        self._progress_position = self.join_position
        self._stop_position: int | None = None
        self._abort_reason: str | None = None
        self._block_error: BaseException | None = None
        self.stop_reason = ""
        self.error: RecordingError | None = None
        self._counter_closed = False
        self._handler = self._on_block  # one bound method for the session's lifetime

    # -- read from any thread --------------------------------------------------------------------
    @property
    def state(self) -> RecordingState:
        return self._state

    @property
    def recorded_position(self) -> int:
        return self._recorded_position

    @property
    def stop_position(self) -> int | None:
        """Final recorded position once STOPPED, else None."""
        return self._stop_position

    @property
    def is_done(self) -> bool:
        return self._state is RecordingState.STOPPED

    @property
    def counter_id(self) -> int:
        return getattr(self._counter, "counter_id", -1)

    def abort(self, reason: str = "stop requested") -> None:
        """Stop at the next duty cycle (thread-safe: one attribute write)."""
        self._abort_reason = reason

    # -- the recorder's thread ----------------------------------------------------------------------
    def do_work(self) -> int:
        work = 0
        if self._abort_reason is not None and self._state in (RecordingState.INIT, RecordingState.RECORDING):
            self._to(RecordingState.INACTIVE, self._abort_reason)
        if self._state is RecordingState.INIT:
            work += self._init()
        if self._state is RecordingState.RECORDING:
            work += self._record()
        if self._state is RecordingState.INACTIVE:
            self._stop()
            work += 1
        return work

    def _init(self) -> int:
        try:
            self._writer = self._writer_factory()
            self._append = self._writer.append
        except Exception as exception:  # noqa: BLE001 - reported, not swallowed
            self.error = _error_for(exception, self.recording_id)
            log.error("%s", self.error.message)
            self._to(RecordingState.INACTIVE, self.error.message)
            return 1
        self._to(RecordingState.RECORDING, "")
        if self.listener is not None:
            self.listener.on_recording_started(self)
        return 1

    def _on_block(self, block: memoryview, position: int, session_id: int, term_id: int) -> None:
        # Called inside Image.block_poll: ``block`` is a zero-copy view of the term buffer, valid
        # only here. Exceptions are kept and raised after block_poll returns, so a failed write is
        # never mistaken for progress.
        if self._block_error is not None:
            return
        start = self._nano_clock()
        try:
            self._append(block)  # set by _init before the first poll
        except BaseException as exception:  # noqa: BLE001
            self._block_error = exception
            return
        self.io_stats.record(len(block), self._nano_clock() - start)

    def _record(self) -> int:
        try:
            consumed = self.image.block_poll(self._handler, self.block_length_limit)
        except Exception as exception:  # noqa: BLE001
            if self._block_error is None and self.image.is_closed:
                # The image went away (publisher gone, subscription closed): a normal end.
                self._to(RecordingState.INACTIVE, f"image closed: {exception}")
                return 1
            self._block_error = self._block_error or exception
            consumed = 0
        if self._block_error is not None:
            self.error = _error_for(self._block_error, self.recording_id)
            log.error("%s", self.error.message)
            self._to(RecordingState.INACTIVE, self.error.message)
            return 1
        if consumed > 0 and self._writer is not None:  # RECORDING: _init made the writer
            position = self._writer.position
            self._recorded_position = position
            self._counter.value = position
        elif self.image.is_end_of_stream or self.image.is_closed:
            self._to(RecordingState.INACTIVE, f"image end of stream={self.image.is_end_of_stream}, "
                                              f"closed={self.image.is_closed}")
        if self.listener is not None and self._progress_position < self._recorded_position:
            if self.listener.on_recording_progress(self, self._recorded_position) is not False:
                self._progress_position = self._recorded_position
        return consumed

    def _stop(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception as exception:  # noqa: BLE001
                if self.error is None:
                    self.error = _error_for(exception, self.recording_id)
                log.error("recording %d: closing segment writer failed: %s", self.recording_id, exception)
            self._recorded_position = self._writer.position
        self._stop_position = self._recorded_position
        self._counter.value = self._stop_position  # written before anyone may close the counter
        self._to(RecordingState.STOPPED, self.stop_reason)
        if self.listener is not None:
            self.listener.on_recording_stopped(self)

    def _to(self, state: RecordingState, reason: str) -> None:
        log.debug("recording %d: %s -> %s %s", self.recording_id, self._state.value, state.value, reason)
        if state is RecordingState.INACTIVE:
            self.stop_reason = reason
        self._state = state

    def close(self) -> None:
        """Release the writer (if still open) and the rec-pos counter; idempotent."""
        if self._writer is not None and self._state is not RecordingState.STOPPED:
            self._writer.close()
        if not self._counter_closed:
            self._counter_closed = True
            self._counter.close()
