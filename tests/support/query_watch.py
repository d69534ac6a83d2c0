"""The watch loop every query process of tests/support runs: one ``PROGRESS`` line per new batch
until the stop file appears or the query ends, then ``QUERY STOPPED`` or ``QUERY FAILED <error>``.
The tests read those lines from the process's stdout."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Exit code of a query process whose query failed.
QUERY_FAILED_EXIT = 3


def failure_line(error: BaseException | object) -> str:
    """``QUERY FAILED <error>`` on one line (Spark's errors span many), cut to 20,000 characters: a
    Python worker's traceback comes first and the error naming what failed (the archive) last."""
    return f"QUERY FAILED {str(error)[:20000]}".replace("\n", " | ")


def watch_query(spark: Any, query: Any, stop_file: Path, say: Callable[[str], None],
                describe: Callable[[Any], str]) -> int:
    """Says ``PROGRESS <describe(progress)>`` once per batch id of ``query.recentProgress`` until
    ``stop_file`` exists (the query is stopped then) or the query ends; then says how it ended and
    returns the process's exit code (0, or :data:`QUERY_FAILED_EXIT`). Spark is stopped after a
    clean stop; after a failure the process exits and takes it along."""
    reported: set[int] = set()

    def report_progress() -> None:
        for progress in query.recentProgress:
            if progress.batchId not in reported:
                reported.add(progress.batchId)
                say(f"PROGRESS {describe(progress)}")

    while query.isActive:
        report_progress()
        if stop_file.exists():
            query.stop()
            break
        time.sleep(0.1)
    report_progress()
    error = query.exception()
    if error is not None:
        say(failure_line(error))
        return QUERY_FAILED_EXIT
    say("QUERY STOPPED")
    spark.stop()
    return 0
