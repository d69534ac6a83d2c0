"""FAULT-INJECTION HOOK for the sink's failure tests: pause a commit at a named point. Off by default.

Tests that kill the Spark driver or the archive at an exact moment of a commit set, in the
environment of the Spark driver process (its driver-side Python workers inherit it)::

    AERON_SPARK_SINK_FAULT=<point>:<batchId>:<pause file>

When ``SinkCommitter.commit`` reaches ``<point>`` for batch ``<batchId>`` it creates ``<pause file>``
(containing its process id) and then waits for as long as that file exists. The test sees the
file, does its damage (SIGKILL of the query or of the sidecar), and deletes the file to let the
commit go on, or never does (the process is killed). Points:

* ``before-append``: the tasks have staged the batch and the sink recording is recovered; this
  batch is not committed and nothing of it is appended: between the sink's write and its commit.
* ``before-marker``: the batch's rows are appended to the sink recording, its commit marker is not.
* ``before-claim``: the sink recording is recovered and, when it holds debris, re-read (still
  stopped where recovery found it); the commit is about to claim it by ExtendRecording at its stop
  position. This is exactly where the old protocol truncated the debris: a commit stalled here while
  another commits must wake to a refused extension (``SinkConflict``), never to a cut batch.

Unset (production) the hook costs one environment lookup per point. Used by
``tests/spark/test_sink_failures.py`` (through ``tests/spark/sink_query_process.py``) and
``tests/integration/connector/test_sink_stalled_committer.py``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "AERON_SPARK_SINK_FAULT"
POINTS = ("before-append", "before-marker", "before-claim")
POLL_S = 0.05


@dataclass(frozen=True)
class FaultPlan:
    point: str
    batch_id: int
    pause_file: Path


def parse_fault_plan(text: str) -> FaultPlan:
    point, _, rest = text.partition(":")
    batch_text, _, pause_file = rest.partition(":")
    if point not in POINTS or not batch_text.lstrip("-").isdigit() or not pause_file:
        raise ValueError(f"{ENV_VAR}={text!r} is not valid; accepted: <point>:<batchId>:<pause file> with "
                         f"<point> one of {', '.join(POINTS)}")
    return FaultPlan(point, int(batch_text), Path(pause_file))


def fault_point(point: str, batch_id: int | None) -> None:
    """Pause here while the pause file exists if ``AERON_SPARK_SINK_FAULT`` names this point and batch."""
    text = os.environ.get(ENV_VAR)
    if not text:
        return
    plan = parse_fault_plan(text)
    if plan.point != point or plan.batch_id != batch_id:
        return
    temporary = plan.pause_file.with_name(plan.pause_file.name + ".tmp")
    temporary.write_text(str(os.getpid()))
    os.replace(temporary, plan.pause_file)
    while plan.pause_file.exists():
        time.sleep(POLL_S)
