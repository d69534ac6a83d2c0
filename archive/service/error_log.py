"""`MarkFileErrorLog`: the running archive's error handler, recording into the mark file.

Every error a duty cycle catches (an `AgentRunner` cycle, a conductor event or request handler, a
recorder or replayer session) is passed to this handler, which adds it to the mark file's error
log (`ArchiveMarkFile.record_error`, Aeron's DistinctErrorLog layout, read back with
`storage.mark_file.read_error_log`). An error is keyed by its text:
the exception type, message and stack trace, so the same error raised at the same place again is
counted (observation count, last timestamp), not added twice. The handler never raises: a closed
or full mark file leaves the error in the process log only (the caller logs it anyway).

With an ``error_counter`` (the archive's counter type 101, "Archive Errors") every error passed to
the handler is counted there too, as Aeron's CountedErrorHandler: the handler runs on the
conductor's, the recorder's and the replayer's threads, so the count is kept under a lock and
stored (errors are rare: no hot path).
"""

from __future__ import annotations

import logging
import threading
import traceback

from aeron_spark.archive.codecs.counter_layout import WritableCounter
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile

log = logging.getLogger(__name__)


def describe_error(error: BaseException) -> str:
    """The error log's text for ``error``: its traceback, then ``Type: message``."""
    return "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()


class MarkFileErrorLog:
    """Callable error handler: ``handler(error)`` records ``error`` in ``mark_file``."""

    def __init__(self, mark_file: ArchiveMarkFile, error_counter: WritableCounter | None = None) -> None:
        self.mark_file = mark_file
        self.error_counter = error_counter  # may be set once allocated (after the mark file exists)
        self.error_count = 0
        self._count_lock = threading.Lock()

    def __call__(self, error: BaseException) -> None:
        try:
            self.mark_file.record_error(describe_error(error))
        except Exception:  # noqa: BLE001 - e.g. the mark file is closed at shutdown
            log.warning("could not record an error in the mark file's error log", exc_info=True)
        self._count()

    def _count(self) -> None:
        with self._count_lock:
            self.error_count += 1
            counter = self.error_counter
            if counter is None:
                return
            try:
                counter.value = self.error_count
            except Exception:  # noqa: BLE001 - closed at shutdown: the error is in the log
                log.debug("error counter not updated", exc_info=True)
