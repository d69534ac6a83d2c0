"""connector/worker_gc.py: the first call collects and freezes, once per process; the variable turns it off.
Run in a fresh interpreter each, so the test process's collector is left alone."""

import subprocess
import sys

PROBE = """
import gc
from aeron_spark.connector.worker_gc import freeze_long_lived_objects
before = gc.get_freeze_count()
freeze_long_lived_objects()
first = gc.get_freeze_count()
freeze_long_lived_objects()
print(before, first, gc.get_freeze_count())
"""


def run_probe(**env: str) -> list[int]:
    import os

    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                            env={**os.environ, **env}, timeout=60)
    return [int(value) for value in result.stdout.split()]


def test_first_call_freezes_what_is_alive_and_later_calls_do_nothing():
    before, first, second = run_probe()
    assert first > before + 1000  # the imports (pyarrow, the connector) are now in the permanent generation
    assert second == first


def test_the_variable_turns_it_off():
    before, first, second = run_probe(AERON_SPARK_GC_FREEZE="0")
    assert before == first == second
