"""archive.agent_runner: the idle strategies by name, the back-off sequence, and dormant agents
(a session agent with nothing to drive is not polled, and wakes at once on a hand-off)."""

from __future__ import annotations

import threading
import time

import pytest

from aeron_spark.archive.service import agent_runner
from aeron_spark.archive.service.agent_runner import (
    AgentRunner, BackoffIdleStrategy, BusySpinIdleStrategy, SleepingIdleStrategy, YieldingIdleStrategy,
    idle_strategy_name, new_idle_strategy)
from aeron_spark.archive.service.session_agent import SessionAgent


@pytest.mark.parametrize(("text", "expected"), [
    ("backoff", BackoffIdleStrategy), ("YIELD", YieldingIdleStrategy), ("spin", BusySpinIdleStrategy),
    ("sleep", SleepingIdleStrategy), ("org.agrona.concurrent.BackoffIdleStrategy", BackoffIdleStrategy),
    ("org.agrona.concurrent.YieldingIdleStrategy", YieldingIdleStrategy)])
def test_idle_strategies_by_c_driver_name_or_java_class_name(text, expected):
    assert isinstance(new_idle_strategy(text), expected)


def test_an_unknown_idle_strategy_names_the_accepted_values():
    with pytest.raises(ValueError, match="unknown idle strategy 'nap': expected one of backoff, yield, spin, sleep"):
        idle_strategy_name("nap")


def test_backoff_parks_doubling_to_the_cap_and_resets_on_work(monkeypatch):
    calls: list[object] = []
    monkeypatch.setattr(agent_runner.os, "sched_yield", lambda: calls.append("yield"))
    monkeypatch.setattr(agent_runner.time, "sleep", lambda seconds: calls.append(round(seconds * 1e9)))
    idle = BackoffIdleStrategy()  # no spin or yield (a Python duty cycle is the cost), park 100 us .. 1 ms
    for _ in range(6):
        idle.idle(0)
    assert calls == [100_000, 200_000, 400_000, 800_000, 1_000_000, 1_000_000]
    calls.clear()
    idle.idle(1)
    idle.idle(0)
    assert calls == [100_000]  # back to the shortest park


def test_aeron_s_backoff_settings_still_apply_when_given(monkeypatch):
    calls: list[object] = []
    monkeypatch.setattr(agent_runner.os, "sched_yield", lambda: calls.append("yield"))
    monkeypatch.setattr(agent_runner.time, "sleep", lambda seconds: calls.append(round(seconds * 1e9)))
    idle = BackoffIdleStrategy(max_spins=10, max_yields=20, min_park_ns=1_000)  # Aeron's Configuration.IDLE_*
    for _ in range(10 + 20 + 3):
        idle.idle(0)
    assert calls == ["yield"] * 20 + [1_000, 2_000, 4_000]


class _Session:
    io_stats = None

    def __init__(self, cycles: int) -> None:
        self.cycles = cycles

    @property
    def is_done(self) -> bool:
        return self.cycles <= 0

    def do_work(self) -> int:
        self.cycles -= 1
        return 1

    def abort(self, reason: str = "") -> None:
        self.cycles = 0


class _CountingAgent(SessionAgent[_Session]):
    role_name = "counting-agent"

    def __init__(self) -> None:
        super().__init__()
        self.cycles = 0
        self.retired = threading.Event()

    def do_work(self) -> int:
        self.cycles += 1
        return super().do_work()

    def _describe(self, session: _Session) -> str:
        return "session"

    def _apply(self, command: str, ident: int, session: _Session) -> None:
        pass

    def _retire(self, session: _Session) -> None:
        self.retired.set()


def test_a_dormant_session_agent_is_not_polled_and_a_new_session_wakes_it_at_once():
    agent = _CountingAgent()
    # A spinning strategy would poll ~10^5 times a second: only dormancy keeps the count low.
    runner = AgentRunner([agent], name="dormant-test", idle_strategy=BusySpinIdleStrategy()).start()
    try:
        time.sleep(0.3)
        assert agent.is_dormant and agent.cycles <= 3
        started = time.monotonic()
        agent.add_session(_Session(cycles=2))
        assert agent.retired.wait(1.0)
        assert time.monotonic() - started < agent_runner.DORMANT_WAIT_S / 2  # woken, not timed out
        time.sleep(0.2)
        polled = agent.cycles
        time.sleep(0.2)
        assert agent.cycles - polled <= 2  # dormant again once the session is retired
    finally:
        started = time.monotonic()
        runner.close()
    assert time.monotonic() - started < agent_runner.DORMANT_WAIT_S / 2  # close wakes it too


def test_an_agent_that_cannot_be_woken_is_polled_by_its_idle_strategy():
    class Plain:
        cycles = 0

        def do_work(self) -> int:
            self.cycles += 1
            return 0

    plain = Plain()
    with AgentRunner([plain], idle_strategy=BusySpinIdleStrategy()):
        time.sleep(0.1)
    assert plain.cycles > 100
