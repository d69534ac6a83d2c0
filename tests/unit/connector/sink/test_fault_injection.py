"""The sink's fault-injection hook: off by default, pauses only at its point and batch, bad values named."""

from __future__ import annotations

import os
import threading
import time

import pytest
from aeron_spark.connector.sink.fault_injection import (
    ENV_VAR,
    fault_point,
    parse_fault_plan,
)


def test_unset_the_hook_does_nothing(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR, raising=False)
    fault_point("before-append", 0)
    assert list(tmp_path.iterdir()) == []


def test_other_points_and_batches_pass_through(monkeypatch, tmp_path):
    pause = tmp_path / "paused"
    monkeypatch.setenv(ENV_VAR, f"before-marker:3:{pause}")
    fault_point("before-append", 3)
    fault_point("before-marker", 2)
    fault_point("before-marker", None)
    assert not pause.exists()


def test_pauses_while_the_pause_file_exists(monkeypatch, tmp_path):
    pause = tmp_path / "paused"
    monkeypatch.setenv(ENV_VAR, f"before-append:7:{pause}")
    done = threading.Event()
    thread = threading.Thread(target=lambda: (fault_point("before-append", 7), done.set()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not pause.exists():
        assert time.monotonic() < deadline, "the hook never created its pause file"
        time.sleep(0.01)
    assert pause.read_text() == str(os.getpid())
    assert not done.wait(0.2)  # still paused
    pause.unlink()
    assert done.wait(5)
    thread.join(5)


@pytest.mark.parametrize("text", ["nowhere:1:/tmp/x", "before-append:x:/tmp/x", "before-append:1", "before-append"])
def test_a_bad_plan_names_the_variable_and_the_points(text):
    with pytest.raises(ValueError, match=f"{ENV_VAR}.*before-append, before-marker"):
        parse_fault_plan(text)


def test_before_claim_is_a_point_of_its_own(monkeypatch, tmp_path):
    pause = tmp_path / "paused"
    assert parse_fault_plan(f"before-claim:4:{pause}").point == "before-claim"
    monkeypatch.setenv(ENV_VAR, f"before-claim:4:{pause}")
    fault_point("before-append", 4)  # the points before and after it pass through
    fault_point("before-marker", 4)
    assert not pause.exists()
