"""A standalone media driver process: a "host" of its own in the cluster-layout tests.

Processes on different media drivers share no counters, IPC streams or log buffers, exactly as
on different hosts. ``running_driver_process`` starts ``python -m
aeron_spark.driver_integration.media_driver --dir DIR``, waits until it prints its directory, and
stops it by PID on exit (SIGTERM, then SIGKILL), also when the test fails.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


@contextmanager
def running_driver_process(aeron_dir: Path) -> Iterator[subprocess.Popen]:
    process = subprocess.Popen([sys.executable, "-m", "aeron_spark.driver_integration.media_driver",
                                "--dir", str(aeron_dir)], stdout=subprocess.PIPE, text=True)
    try:
        line = _first_line(process)
        if line.strip() != str(aeron_dir):
            raise RuntimeError(f"the media driver process {process.pid} printed {line!r}, not its directory")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)
        shutil.rmtree(aeron_dir, ignore_errors=True)


def _first_line(process: subprocess.Popen) -> str:
    import selectors
    stdout = process.stdout
    assert stdout is not None, "the media driver process is started with stdout=PIPE"
    selector = selectors.DefaultSelector()
    selector.register(stdout, selectors.EVENT_READ)
    if not selector.select(STARTUP_TIMEOUT_S):
        raise RuntimeError(f"the media driver process {process.pid} did not start within {STARTUP_TIMEOUT_S} s")
    return stdout.readline()
