"""Bounded waits for tests: poll a condition until it holds, fail with what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_SECONDS = 10.0


def wait_until(condition: Callable[[], T], what: str, timeout: float = WAIT_SECONDS,
               interval: float = 0.001) -> T:
    """Calls ``condition`` until it returns something truthy and returns that; AssertionError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
