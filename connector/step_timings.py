"""Where the milliseconds of a read or a commit go: named steps, logged at DEBUG.

With the environment variable ``AERON_SPARK_TIMINGS`` set to a file path, each finished
``StepTimings`` is also appended there as one JSON line ``{"what": ..., "at": epoch s of its
start, "ms": {step: ms}}``
(bench/live_tail_latency.py reads it: Spark's Python workers inherit the variable, and their log
output is not collected). Off unless set; the cost when off is one ``perf_counter`` per step.
"""

from __future__ import annotations

import json
import logging
import os
import time

LOG = logging.getLogger("aeron_spark.connector.timings")
TIMINGS_FILE_VARIABLE = "AERON_SPARK_TIMINGS"
_IMPORTED_AT = time.perf_counter()  # a small age at a step says the Python worker was fresh


class StepTimings:
    """``mark(step)`` charges the time since the previous mark to ``step``; ``finish`` reports."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.ms: dict[str, float] = {}
        self._started = self._last = time.perf_counter()
        self._started_at = time.time()  # places the steps on Spark's batch timeline (the bench)

    def mark(self, step: str) -> None:
        now = time.perf_counter()
        self.ms[step] = self.ms.get(step, 0.0) + (now - self._last) * 1000.0
        self._last = now

    def finish(self) -> None:
        self.ms["total"] = (time.perf_counter() - self._started) * 1000.0
        self.ms["worker age at start"] = (self._started - _IMPORTED_AT) * 1000.0
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug("%s: %s", self.what, ", ".join(f"{step} {ms:.1f} ms" for step, ms in self.ms.items()))
        path = os.environ.get(TIMINGS_FILE_VARIABLE)
        if path:
            line = json.dumps({"what": self.what, "at": round(self._started_at, 4),
                               "ms": {k: round(v, 3) for k, v in self.ms.items()}}) + "\n"
            try:
                with open(path, "a", encoding="utf-8") as out:  # one short append: whole lines from many processes
                    out.write(line)
            except OSError as error:
                LOG.debug("cannot append step timings to %s: %s", path, error)
