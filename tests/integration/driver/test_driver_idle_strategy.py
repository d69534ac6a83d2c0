"""Every agent thread of an embedded C driver idles with DEFAULT_IDLE_BACKOFF, unless the
environment names that agent's idle strategy (Aeron's AERON_<AGENT>_IDLE_STRATEGY[_INIT_ARGS])."""

from __future__ import annotations

import pytest

from aeron_spark.driver_integration.media_driver import DEFAULT_IDLE_BACKOFF, MediaDriver

AGENTS = {
    "dedicated": ("conductor", "sender", "receiver"),
    "shared_network": ("conductor", "sharednetwork"),
    "shared": ("shared",),
}


@pytest.mark.parametrize("threading_mode", sorted(AGENTS))
def test_each_agent_of_each_threading_mode_idles_with_the_default_backoff(threading_mode, monkeypatch):
    for agent in ("conductor", "sender", "receiver", "sharednetwork", "shared"):
        monkeypatch.delenv(f"AERON_{agent.upper()}_IDLE_STRATEGY", raising=False)
        monkeypatch.delenv(f"AERON_{agent.upper()}_IDLE_STRATEGY_INIT_ARGS", raising=False)
    with MediaDriver(threading_mode=threading_mode) as driver:
        assert {agent: driver.idle_strategy_init_args(agent) for agent in AGENTS[threading_mode]} == \
            dict.fromkeys(AGENTS[threading_mode], DEFAULT_IDLE_BACKOFF)


def test_an_agent_whose_idle_strategy_the_environment_names_keeps_it(monkeypatch):
    monkeypatch.setenv("AERON_SHAREDNETWORK_IDLE_STRATEGY", "noop")
    monkeypatch.delenv("AERON_SHAREDNETWORK_IDLE_STRATEGY_INIT_ARGS", raising=False)
    monkeypatch.delenv("AERON_CONDUCTOR_IDLE_STRATEGY", raising=False)
    monkeypatch.delenv("AERON_CONDUCTOR_IDLE_STRATEGY_INIT_ARGS", raising=False)
    with MediaDriver(threading_mode="shared_network") as driver:
        assert driver.idle_strategy_init_args("sharednetwork") is None
        assert driver.idle_strategy_init_args("conductor") == DEFAULT_IDLE_BACKOFF


def test_an_unknown_agent_names_the_agents():
    with MediaDriver() as driver, pytest.raises(ValueError, match="unknown driver agent 'sendr'"):
        driver.idle_strategy_init_args("sendr")
