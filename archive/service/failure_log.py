"""`FailureLog`: one log line per kind of failure, with a count, instead of one per bad request.

A client (or a fuzzer) can send the same bad request thousands of times a second; logging each,
with a traceback, floods the log and costs the conductor more than the request did. The first
failure of a kind is logged (with its traceback when asked); repeats are only counted, and a
summary line "... N more times" is logged at most once per `SUMMARY_INTERVAL_S` per kind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

SUMMARY_INTERVAL_S = 10.0
MAX_KINDS = 1024  # distinct kinds remembered; beyond that the oldest are forgotten (bounded memory)


class FailureLog:
    def __init__(self, logger: logging.Logger, *, clock: Callable[[], float] = time.monotonic,
                 interval_s: float = SUMMARY_INTERVAL_S) -> None:
        self._log = logger
        self._clock = clock
        self._interval_s = interval_s
        self._kinds: dict[object, list] = {}  # kind -> [next summary time, repeats not yet logged]
        self.total = 0

    def failed(self, kind: object, text: str, *args: object, level: int = logging.WARNING,
               exc_info: bool = False) -> bool:
        """Logs ``text % args`` if this ``kind`` was not logged lately; returns whether it was."""
        self.total += 1
        now = self._clock()
        state = self._kinds.get(kind)
        if state is None:
            if len(self._kinds) >= MAX_KINDS:
                self._kinds.pop(next(iter(self._kinds)))
            self._kinds[kind] = [now + self._interval_s, 0]
            self._log.log(level, text, *args, exc_info=exc_info)
            return True
        if now < state[0]:
            state[1] += 1
            return False
        repeats, state[0], state[1] = state[1], now + self._interval_s, 0
        suffix = f" (and {repeats} more times in the last {self._interval_s:.0f} s)" if repeats else ""
        self._log.log(level, text + suffix, *args)
        return True
