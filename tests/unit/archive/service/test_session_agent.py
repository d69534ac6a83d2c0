"""archive.session_agent: the duty cycle the recorder and the replayer share (with fake sessions)."""

from __future__ import annotations

import pytest

from aeron_spark.archive.service.session_agent import MAX_FAILED_CYCLES, SessionAgent


class FakeSession:
    def __init__(self, name: str, cycles: int, fail: bool = False) -> None:
        self.name, self.cycles, self.fail = name, cycles, fail
        self.io_stats = None
        self.aborted: str | None = None

    @property
    def is_done(self) -> bool:
        return self.cycles <= 0 or self.aborted is not None

    def do_work(self) -> int:
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        self.cycles -= 1
        return 1

    def abort(self, reason: str = "") -> None:
        self.aborted = reason


class FakeAgent(SessionAgent[FakeSession]):
    role_name = "fake-agent"

    def __init__(self) -> None:
        super().__init__()
        self.retired: list[str] = []

    def _describe(self, session: FakeSession) -> str:
        return f"fake {session.name}"

    def _apply(self, command: str, ident: int, session: FakeSession) -> None:
        if command == "stop" and session.name == f"s{ident}":
            session.abort("stopped")

    def _retire(self, session: FakeSession) -> None:
        self.retired.append(session.name)


def test_sessions_run_until_done_a_failing_one_is_aborted_and_does_not_stop_the_others():
    agent = FakeAgent()
    broken = FakeSession("s2", 5, fail=True)
    for session in (FakeSession("s1", 2), broken, FakeSession("s3", 9)):
        agent.add_session(session)
    assert agent.session_count == 3
    assert agent.do_work() == 3 + 3  # three sessions moved in, three cycles (s2's failed one counts)
    assert broken.aborted == "archive failure: RuntimeError: s2 broke" and agent.retired == ["s2"]
    assert agent.do_work() == 2 and agent.retired == ["s2", "s1"]
    agent._enqueue("stop", 3)
    agent.do_work()
    assert agent.retired == ["s2", "s1", "s3"] and agent.session_count == 0


class StubbornSession(FakeSession):
    """Raises in every cycle, also after it was aborted (its stop path is what fails)."""

    @property
    def is_done(self) -> bool:
        return False


def test_a_session_that_raises_even_while_stopping_is_retired_after_a_bounded_number_of_cycles():
    agent = FakeAgent()
    errors: list[BaseException] = []
    agent.error_handler = errors.append
    stubborn, healthy = StubbornSession("s1", 100, fail=True), FakeSession("s2", 100)
    agent.add_session(stubborn)
    agent.add_session(healthy)
    for _ in range(MAX_FAILED_CYCLES):
        agent.do_work()
    assert agent.retired == ["s1"] and agent.session_count == 1 and len(errors) == MAX_FAILED_CYCLES
    assert healthy.cycles == 100 - MAX_FAILED_CYCLES and agent._failed_cycles == {}


def test_close_aborts_and_retires_every_session_and_refuses_new_ones():
    agent = FakeAgent()
    running, queued = FakeSession("a", 100), FakeSession("b", 100)
    agent.add_session(running)
    agent.do_work()
    agent.add_session(queued)
    agent.on_close()
    assert running.aborted == queued.aborted == "archive closing"
    assert sorted(agent.retired) == ["a", "b"] and agent.session_count == 0
    with pytest.raises(RuntimeError, match="fake-agent is closed: cannot add fake c"):
        agent.add_session(FakeSession("c", 1))


def test_a_command_applies_only_to_the_sessions_added_before_it():
    """A truncate stops its recording's replays; the replay asked right after must not be stopped
    by that command, even when the agent's thread takes both in the same duty cycle."""
    agent = FakeAgent()
    before = FakeSession("s1", 5)
    agent.add_session(before)
    agent._enqueue("stop", 1)
    after = FakeSession("s1", 5)  # the same name: the command would match it
    agent.add_session(after)
    agent._enqueue("stop", 7)
    agent.do_work()
    assert before.aborted == "stopped" and after.aborted is None
    assert agent.retired == ["s1"] and agent.session_count == 1
