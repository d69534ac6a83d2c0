"""A sidecar SIGKILLed and restarted many times under a live publisher answers after every restart
(issue 33, point 1: "the stall"; docs/reliability.md, "Restarts under load").

The sidecar is killed (SIGKILL) every 2-4 s and restarted 1-3 s later on the same archive directory
and control port, while a live publisher (tests/support/live_publisher.py, its own media driver)
publishes over UDP and, after each restart, reconnects and asks for a new recording. After each
restart:

* a new client (on the publisher's driver, by the control channel, as a Spark query reaches the
  archive) connects and is answered within its 10 s connect timeout;
* the publisher's publication reconnects and its new recording starts;
* the restarted sidecar's embedded driver keeps its keepalive fresh (under Aeron's 10 s driver
  timeout, with margin).

When any of it fails, the failure carries the sidecar's state (tests/support/stall_diagnostics.py):
its driver's heartbeat age, each thread's kernel state, the Python and native stacks (py-spy, when
installed: ``AERON_PY_SPY=/path/to/py-spy``), the driver's counters, and the sidecar's log tail.
``AERON_RESTARTS`` sets the number of restarts (default 6).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient

from tests.support.driver_process import running_driver_process
from tests.support.live_publisher import LivePublisher
from tests.support.ports import free_udp_port
from tests.support.sidecar import Sidecar
from tests.support.stall_diagnostics import driver_heartbeat_age_ms, stall_report
from tests.support.stall_watchdog import stall_files, watching_for_stalls

RESTARTS = int(os.environ.get("AERON_RESTARTS", "6"))
pytestmark = pytest.mark.timeout(120 + 25 * RESTARTS)

STREAM_ID = 4811
RATE_PER_S = 2_000
CONNECT_TIMEOUT_S = 10.0
RECORDING_TIMEOUT_S = 30.0
#: Aeron's driver timeout is 10 s; a healthy driver stamps its keepalive every second.
MAX_HEARTBEAT_AGE_MS = 5_000


def answered_after_restart(sidecar: Sidecar, aeron_dir: Path) -> float:
    started = time.monotonic()
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron_dir=str(aeron_dir),
                               timeout=CONNECT_TIMEOUT_S) as client:
        client.list_recordings(0, 1)
    return time.monotonic() - started


def watchdog_findings(stalls_dir: Path) -> str:
    """What the stall watchdog saw (tests/support/stall_watchdog.py): its log and every stall's threads and stacks."""
    parts = [f"stall watchdog ({stalls_dir}):"]
    for path in [stalls_dir / "watchdog.log", *stall_files(stalls_dir)]:
        if path.exists():
            parts.append(f"--- {path.name}\n{path.read_text()[-20_000:]}")
    return "\n".join(parts)


def test_a_sidecar_killed_and_restarted_many_times_under_a_live_publisher_answers_every_time(tmp_path: Path) -> None:
    rng = random.Random(33)
    archive_dir = tmp_path / "archive"
    publisher_driver = Path(f"/dev/shm/aeron-spark-test-publisher-{os.getpid()}")
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
    left_behind: list[str] = []  # the killed sidecars' embedded driver directories
    sidecar = Sidecar(archive_dir)
    publisher: LivePublisher | None = None
    timings: list[str] = []
    stalls_dir = tmp_path / "stalls"
    try:
        with running_driver_process(publisher_driver), watching_for_stalls(os.getpid(), stalls_dir,
                                                                           MAX_HEARTBEAT_AGE_MS):
            sidecar.start()
            control_port = sidecar.control_port
            publisher = LivePublisher([], "--channel", channel, "--stream-id", str(STREAM_ID), "--messages",
                                      "100000000", "--rate", str(RATE_PER_S), "--control-channel",
                                      sidecar.control_channel, "--aeron-dir", str(publisher_driver))
            publisher.wait_until(lambda: len(publisher.recordings()) == 1, "its first recording", 60)
            for restart in range(RESTARTS):
                time.sleep(rng.uniform(2.0, 4.0))
                left_behind.append(sidecar.driver_dir)
                sidecar.running.kill(remove_embedded_driver_dir=False)  # SIGKILL by PID, the driver dir stays
                time.sleep(rng.uniform(1.0, 3.0))
                sidecar = Sidecar(archive_dir, control_port=control_port)
                sidecar.start()
                ready = time.monotonic()
                try:
                    answer_s = answered_after_restart(sidecar, publisher_driver)
                    publisher.wait_until(lambda: len(publisher.recordings()) == restart + 2,
                                         f"a new recording after restart {restart + 1}", RECORDING_TIMEOUT_S)
                    recording_s = time.monotonic() - ready
                    age_ms = driver_heartbeat_age_ms(sidecar.driver_dir)
                    assert age_ms < MAX_HEARTBEAT_AGE_MS, f"the driver's keepalive is {age_ms} ms old"
                except (AssertionError, Exception) as failure:
                    report = stall_report(sidecar.pid, sidecar.driver_dir if sidecar.running else None)
                    raise AssertionError(f"restart {restart + 1} of {RESTARTS}: {failure}\n{report}\n"
                                         f"sidecar log:\n{sidecar.log_tail(80)}\npublisher:\n"
                                         f"{publisher.output(30)}\n{watchdog_findings(stalls_dir)}") from failure
                timings.append(f"restart {restart + 1}: answered {answer_s:.2f} s, recording again "
                               f"{recording_s:.2f} s after ready, driver keepalive {age_ms} ms old")
            print("\n".join(timings))
        assert not stall_files(stalls_dir), f"a driver's keepalive went stale:\n{watchdog_findings(stalls_dir)}"
    finally:
        if publisher is not None:
            publisher.stop()
        sidecar.terminate()
        sidecar.kill()
        for directory in left_behind:
            shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(publisher_driver, ignore_errors=True)
