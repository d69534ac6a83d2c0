"""What a stalled sidecar is doing: its driver's heartbeat, its threads, its counters (issue 33).

* ``driver_heartbeat_age_ms(aeron_dir)``: how old the media driver's keepalive is, read from
  ``cnc.dat`` as an Aeron client reads it (the to-driver ring buffer's consumer heartbeat; a client
  declares the driver dead past its driver timeout, 10 s by default).
* ``thread_states(pid)``: each thread's name, scheduler state, kernel wait channel and CPU time,
  from /proc (a thread blocked in the kernel shows where).
* ``python_stacks(pid)``: every thread's Python and native stack through py-spy, when it is
  installed (``$AERON_PY_SPY`` or ``py-spy`` on the PATH), else a note saying so.
* ``stall_report(pid, aeron_dir)``: all of it, plus the driver's counters, as one text.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

CNC_FILE = "cnc.dat"
CNC_METADATA_LENGTH = 128  # CncFileDescriptor.META_DATA_LENGTH
_CNC_LENGTHS = struct.Struct("<iiiiii")  # version, to-driver, to-clients, counters meta, values, error log
_CNC_PID_OFFSET = 40
#: RingBufferDescriptor: the trailer after the to-driver buffer's data, cache-line pairs (64 B lines).
RING_TRAILER_LENGTH = 768
RING_CONSUMER_HEARTBEAT_OFFSET = 640
PY_SPY_ENV = "AERON_PY_SPY"


def driver_heartbeat_age_ms(aeron_dir: str | Path) -> int:
    """Milliseconds since the media driver at ``aeron_dir`` last stamped its keepalive."""
    data = (Path(aeron_dir) / CNC_FILE).read_bytes()[:CNC_METADATA_LENGTH + 64 * 1024 * 1024]
    to_driver_length = _CNC_LENGTHS.unpack_from(data, 0)[1]
    at = CNC_METADATA_LENGTH + to_driver_length - RING_TRAILER_LENGTH + RING_CONSUMER_HEARTBEAT_OFFSET
    (heartbeat_ms,) = struct.unpack_from("<q", data, at)
    return int(time.time() * 1000) - heartbeat_ms


def driver_pid(aeron_dir: str | Path) -> int:
    with open(Path(aeron_dir) / CNC_FILE, "rb") as cnc:
        return struct.unpack_from("<q", cnc.read(CNC_METADATA_LENGTH), _CNC_PID_OFFSET)[0]


def thread_states(pid: int) -> str:
    lines = []
    ticks = os.sysconf("SC_CLK_TCK")
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        base = f"/proc/{pid}/task/{tid}"
        try:
            name = Path(f"{base}/comm").read_text().strip()
            stat = Path(f"{base}/stat").read_text().rsplit(")", 1)[1].split()
            wchan = Path(f"{base}/wchan").read_text().strip() or "-"
        except OSError:
            continue
        cpu_s = (int(stat[11]) + int(stat[12])) / ticks
        lines.append(f"  tid {tid} {name!r}: state {stat[0]}, wchan {wchan}, cpu {cpu_s:.2f} s")
    return "\n".join(lines)


def python_stacks(pid: int, timeout_s: float = 20.0) -> str:
    beside_python = Path(sys.executable).parent / "py-spy"  # the venv's, when installed there
    py_spy = os.environ.get(PY_SPY_ENV) or shutil.which("py-spy") or (str(beside_python) if beside_python.exists() else None)
    if not py_spy:
        return f"  (py-spy not installed: set ${PY_SPY_ENV} or put py-spy on the PATH for stacks)"
    try:
        done = subprocess.run([py_spy, "dump", "--native", "--pid", str(pid)], capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"  (py-spy dump failed: {error})"
    return done.stdout + done.stderr


def driver_counters(aeron_dir: str | Path, limit: int = 80) -> str:
    """The driver's counters (label = value), read by a separate process so a wedged client
    library cannot wedge the caller; empty when the driver cannot be read."""
    script = ("import sys\n"
              "from aeron_spark.driver_integration.client import AeronClient\n"
              "with AeronClient(sys.argv[1], timeout=3.0, driver_timeout=3.0) as client:\n"
              "    reader = client.counters_reader\n"
              "    for counter_id in range(reader.max_counter_id + 1):\n"
              "        label = reader.label(counter_id)\n"
              "        if label:\n"
              "            print(f'  {counter_id:4d} {label} = {reader.value(counter_id)}')\n")
    try:
        done = subprocess.run([sys.executable, "-c", script, str(aeron_dir)], capture_output=True,
                              text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "  (reading the counters timed out)"
    lines = (done.stdout or done.stderr).splitlines()
    return "\n".join(lines[:limit])


def stall_report(pid: int, aeron_dir: str | Path | None) -> str:
    parts = [f"sidecar pid {pid}"]
    if aeron_dir is not None:
        try:
            parts.append(f"driver heartbeat age: {driver_heartbeat_age_ms(aeron_dir)} ms (driver pid "
                         f"{driver_pid(aeron_dir)})")
        except (OSError, struct.error) as error:
            parts.append(f"driver heartbeat unreadable: {error}")
    parts.append("threads:\n" + thread_states(pid))
    parts.append("stacks:\n" + python_stacks(pid))
    if aeron_dir is not None:
        parts.append("driver counters:\n" + driver_counters(aeron_dir))
    return "\n".join(parts)
