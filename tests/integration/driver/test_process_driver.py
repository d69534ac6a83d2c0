"""process_driver on real drivers: one embedded driver per process (also across threads and
fork), attaching to a live driver, failing fast without one, and the embedded driver's directory
removed at exit or, after a SIGKILL, by the next process that starts one."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator

import pytest

from aeron_spark.driver_integration import AeronClient, MediaDriver
from aeron_spark.driver_integration.process_driver import (
    LEFTOVER_HEARTBEAT_TIMEOUT_MS,
    DriverUnavailable,
    close_process_driver,
    driver_dir_for_process,
    is_driver_active,
    process_embedded_driver,
)

from tests.support.driver_streams import await_image, offer_all, poll_messages
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(90)

# Starts this process's embedded driver, prints its directory, exits normally on a line of stdin.
CHILD = """
from aeron_spark.driver_integration.process_driver import driver_dir_for_process
print(driver_dir_for_process("embedded", None), flush=True)
input()
"""


@pytest.fixture(autouse=True)
def no_process_driver() -> Iterator[None]:
    close_process_driver()
    try:
        yield
    finally:
        close_process_driver()


def _embedded_dir_pattern(pid: int) -> re.Pattern[str]:
    return re.compile(rf"^(/dev/shm|{re.escape(os.path.realpath('/tmp'))}|/tmp)/aeron-spark-worker-{pid}-\w+$")


def _start_child() -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "AERON_SPARK_TRACE_CAPI"}
    return subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _read_line(child: subprocess.Popen[str], timeout: float = 30.0) -> str:
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    assert ready, f"child {child.pid} printed nothing within {timeout}s"
    return child.stdout.readline().strip()


def _stop(child: subprocess.Popen[str]) -> None:
    """A normal exit first (its driver directory goes away), SIGKILL by PID if that fails."""
    if child.poll() is None:
        try:
            child.communicate("\n", timeout=10)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
    if child.poll() is None:
        os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)


def test_embedded_is_one_driver_per_process_that_clients_use():
    first = driver_dir_for_process("embedded", None)
    assert driver_dir_for_process("embedded", "/ignored") == first
    driver = process_embedded_driver()
    assert driver is not None and driver.dir == first
    assert _embedded_dir_pattern(os.getpid()).match(first), first
    assert is_driver_active(first)
    with AeronClient(first) as client, client.add_subscription("aeron:ipc", 6001) as subscription, \
            client.add_publication("aeron:ipc", 6001) as publication:
        await_image(subscription, publication.session_id).close()
        offer_all(publication, [b"through the process driver"])
        assert [p for p, _ in poll_messages(subscription, 1)] == [b"through the process driver"]
    close_process_driver()
    assert process_embedded_driver() is None and driver.is_closed and not os.path.exists(first)
    second = driver_dir_for_process("embedded", None)
    assert second != first and os.path.isdir(second)


def test_concurrent_first_calls_start_a_single_driver():
    results: list[str] = []
    barrier = threading.Barrier(4)

    def call() -> None:
        barrier.wait()
        results.append(driver_dir_for_process("embedded", None))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 4 and len(set(results)) == 1


def test_auto_attaches_to_a_live_driver_and_embeds_one_otherwise(tmp_path):
    with MediaDriver() as running:
        assert driver_dir_for_process("auto", running.dir) == running.dir
        assert driver_dir_for_process("external", running.dir) == running.dir
        assert process_embedded_driver() is None
    no_driver = str(tmp_path / "no-driver")
    embedded = driver_dir_for_process("auto", no_driver)
    assert embedded != no_driver and _embedded_dir_pattern(os.getpid()).match(embedded)
    assert process_embedded_driver().dir == embedded


def test_external_without_a_driver_fails_fast_naming_the_directory_and_the_option(tmp_path):
    stopped = MediaDriver(dir=str(tmp_path / "stopped"), dir_delete_on_shutdown=False)
    stopped.close()  # its cnc.dat stays, with a heartbeat that says closed
    for directory in (str(tmp_path / "never-a-driver"), stopped.dir):
        started = time.monotonic()
        with pytest.raises(DriverUnavailable) as raised:
            driver_dir_for_process("external", directory)
        assert time.monotonic() - started < 2
        assert directory in str(raised.value) and "aeron.driver=auto" in str(raised.value)
    assert process_embedded_driver() is None


def test_is_driver_active_prints_nothing(capfd):
    with MediaDriver() as running:
        assert is_driver_active(running.dir) and is_driver_active(running.dir, 1000)
    assert not is_driver_active(running.dir)
    assert capfd.readouterr() == ("", "")


def test_a_forked_child_starts_its_own_driver_and_leaves_the_parents_alone():
    parent_dir = driver_dir_for_process("embedded", None)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a process with threads
        pid = os.fork()
    if pid == 0:  # child: report, clean up, never return into pytest
        code = 1
        try:
            os.close(read_end)
            inherited = process_embedded_driver()
            own = driver_dir_for_process("embedded", None)
            os.write(write_end, f"{inherited}|{own}|{os.path.isdir(own)}\n".encode())
            close_process_driver()
            code = 0
        finally:
            os._exit(code)
    try:
        os.close(write_end)
        with os.fdopen(read_end) as reader:
            ready, _, _ = select.select([reader], [], [], 30)
            assert ready, "the forked child reported nothing"
            inherited, own, existed = reader.readline().strip().split("|")
        deadline = time.monotonic() + 30
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            assert time.monotonic() < deadline, "the forked child did not exit"
            time.sleep(0.01)
        pid = 0
        assert inherited == "None"
        assert own != parent_dir and _embedded_dir_pattern(int(own.split("-")[-2])).match(own)
        assert existed == "True" and not os.path.exists(own)  # closed by the child
        assert process_embedded_driver().dir == parent_dir and is_driver_active(parent_dir)
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_the_embedded_driver_directory_is_removed_at_normal_exit():
    child = _start_child()
    try:
        directory = _read_line(child)
        assert _embedded_dir_pattern(child.pid).match(directory), directory
        assert is_driver_active(directory)
        child.communicate("\n", timeout=30)
        assert child.returncode == 0
        assert not os.path.exists(directory)
    finally:
        _stop(child)


def test_a_sigkilled_processs_directory_is_removed_by_the_next_start():
    live, killed = _start_child(), _start_child()
    try:
        live_dir, killed_dir = _read_line(live), _read_line(killed)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=10)
        assert os.path.isdir(killed_dir)  # no atexit after SIGKILL
        wait_until(lambda: not is_driver_active(killed_dir, LEFTOVER_HEARTBEAT_TIMEOUT_MS),
                   "the killed driver's heartbeat to go stale", timeout=LEFTOVER_HEARTBEAT_TIMEOUT_MS / 1000 + 5)
        driver_dir_for_process("embedded", None)  # this process's start cleans up
        assert not os.path.exists(killed_dir)
        assert os.path.isdir(live_dir) and is_driver_active(live_dir)  # its process still runs
    finally:
        _stop(live)
        _stop(killed)
