"""Keep Spark's per-task garbage collection of a reused Python worker short.

A reused Spark Python worker runs a full ``gc.collect()`` after every task (pyspark/daemon.py),
and a full collection walks every object the process tracks: with pyspark, pyarrow, numpy and
this connector imported that is ~60,000 objects and ~30 ms on an idle core (~90 ms once pandas is
imported), CPU spent after each task of each micro-batch, on both workers of a task (the source's
read and the sink's or foreach's write), and on the driver's commit worker. Nearly all of those
objects are modules, classes and functions that live as long as the process.

``freeze_long_lived_objects`` moves everything alive at its first call (after a collection, so
garbage is not kept) into the collector's permanent generation (``gc.freeze``), once per process;
later collections walk only what was created since. The cost: a reference cycle among those
frozen objects that becomes garbage later is never freed, which for module-level objects does not
happen. ``AERON_SPARK_GC_FREEZE=0`` turns it off (e.g. to compare).
"""

from __future__ import annotations

import gc
import os

from aeron_spark.connector.step_timings import StepTimings

DISABLE_VARIABLE = "AERON_SPARK_GC_FREEZE"
_frozen = False


def freeze_long_lived_objects() -> None:
    """Once per process: collect, then freeze what survives (see the module doc)."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    if os.environ.get(DISABLE_VARIABLE, "1") == "0":
        return
    timings = StepTimings("worker.gc freeze")
    tracked = len(gc.get_objects())
    gc.collect()
    timings.mark("collect before freezing")
    gc.freeze()
    gc.collect()
    timings.mark("collect after freezing")
    timings.ms["objects frozen (a count)"] = float(tracked)
    timings.finish()
