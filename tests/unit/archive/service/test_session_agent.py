"""archive.session_agent: the duty cycle the recorder and the replayer share (with fake sessions)."""

from __future__ import annotations

import pytest

from aeron_spark.archive.service.session_agent import SessionAgent


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


def test_sessions_run_until_done_a_failing_one_does_not_stop_the_others_and_commands_abort():
    agent = FakeAgent()
    for session in (FakeSession("s1", 2), FakeSession("s2", 5, fail=True), FakeSession("s3", 9)):
        agent.add_session(session)
    assert agent.session_count == 3
    assert agent.do_work() == 3 + 2  # three sessions moved in, two did work (s2 failed)
    assert agent.do_work() == 2 and agent.retired == ["s1"]
    agent._enqueue("stop", 3)
    agent.do_work()
    assert agent.retired == ["s1", "s3"] and agent.session_count == 1


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
