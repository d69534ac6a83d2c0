"""Shared by the differential tests (a Java client's scripted session run against the real Java
archive and against our sidecar, compared field by field): the run's lines and the normalisation of
only what must differ between two fresh archives.

Used by tests/interop/modern/test_differential_java_client.py (Java 1.51) and
tests/interop/test_differential_java_1_15_1_client.py (Java 1.15.1); see docs/interop.md,
"Differential test against the Java archive". Test code, imported from the repository root.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

#: What of an error step is compared: the exception class and Aeron's error code (and its name
#: where the client has names); never the message, which is each archive's own wording.
ERROR_KEYS = ("exception", "code", "codeName")


@dataclass(frozen=True)
class ScriptRun:
    """The JSON lines of one scripted session against one archive."""

    archive: str
    lines: list[dict[str, Any]]
    ports: dict[int, str]  # port -> its placeholder

    @property
    def steps(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == "step"]

    def step(self, name: str) -> dict[str, Any]:
        (found,) = [s for s in self.steps if s["step"] == name]
        return found

    @property
    def signals(self) -> list[dict[str, Any]]:
        return [line["signal"] for line in self.lines if line["event"] == "signal"]


class Tokens:
    """Ids a driver allocates, replaced by their order of first appearance (``sub#0``, ...)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.seen: dict[int, str] = {}

    def __call__(self, value: int) -> str | int:
        if value == -1:
            return value
        return self.seen.setdefault(value, f"{self.prefix}#{len(self.seen)}")


class Normaliser:
    """Replaces what must differ between two fresh archives; `result` is the hook for per-step
    rules of one script."""

    def __init__(self, run: ScriptRun) -> None:
        self.ports = run.ports
        self.subscriptions = Tokens("sub")
        self.sessions = Tokens("replay-session")

    def text(self, value: str) -> str:
        value = re.sub(r"localhost:(\d+)", lambda m: f"localhost:{self.ports.get(int(m.group(1)), m.group(1))}",
                       value)
        return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", value)

    def replay_session(self, value: int) -> dict[str, Any]:
        # A replay session id is (replay id << 32) | the replay image's session id: the replay id
        # counts replays in both archives; the image session id is the driver's.
        return {"replayId": value >> 32, "imageSessionId": self.sessions(value & 0xFFFF_FFFF)}

    def value(self, key: str, value: Any) -> Any:
        if isinstance(value, dict):
            # An error's text is each archive's own wording: its code (errorCode) is compared.
            return {k: self.value(k, v) for k, v in value.items() if k != "message"}
        if isinstance(value, list):
            return [self.value(key, v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if key == "subscriptionId" and isinstance(value, int):
            return self.subscriptions(value)
        if key == "replaySessionId" and isinstance(value, int):
            return self.replay_session(value) if value > 0xFFFF_FFFF else self.sessions(value & 0xFFFF_FFFF)
        if key == "controlSessionId":
            return "<control-session>"
        if key == "correlationId":
            # The client's own counter: equal in both runs only while the script's polling loops
            # (awaiting a stop position, a recording position) happen to poll equally often.
            return "<correlation>"
        if key in ("startTimestamp", "stopTimestamp"):
            return value if value == -1 else "<set>"
        return value

    def result(self, name: str, result: Any) -> Any:
        """Per-step rules of a script (after `value`); none by default."""
        return result

    def step(self, step: dict[str, Any]) -> dict[str, Any]:
        name = step["step"]
        result = self.result(name, self.value("result", step["result"]))
        error = step["error"]
        if error is not None:
            error = {k: error[k] for k in ERROR_KEYS if k in error}
        return {"step": name, "ok": step["ok"], "result": result, "error": error}

    def signal(self, signal: dict[str, Any]) -> dict[str, Any]:
        return self.value("signal", signal)


def normalised(run: ScriptRun, normaliser: type[Normaliser] = Normaliser
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's steps and signals, normalised (one normaliser per run: tokens count per run)."""
    instance = normaliser(run)
    return [instance.step(s) for s in run.steps], [instance.signal(s) for s in run.signals]


def describe(step: dict[str, Any]) -> str:
    return json.dumps({k: step[k] for k in ("ok", "result", "error")}, sort_keys=True)[:1500]


def step_differences(java: ScriptRun, sidecar: ScriptRun, normaliser: type[Normaliser] = Normaliser, *,
                     skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """One text per step whose normalised answers differ, showing both raw answers. Steps in
    ``skip`` are left out before normalising, so the ids they alone allocate (a subscription, a
    replay) do not shift the tokens of the steps after them."""
    def steps(run: ScriptRun) -> list[dict[str, Any]]:
        instance = normaliser(run)
        return [instance.step(s) for s in run.steps if s["step"] not in skip]

    raw = {run.archive: {s["step"]: s for s in run.steps} for run in (java, sidecar)}
    return [
        f"{j['step']}:\n  java:    {describe(raw[java.archive][j['step']])}\n"
        f"  sidecar: {describe(raw[sidecar.archive][j['step']])}"
        for j, s in zip(steps(java), steps(sidecar), strict=True) if j != s]
