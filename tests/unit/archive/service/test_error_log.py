"""Errors caught by duty cycles end up in the mark file's error log: distinct errors once each,
a repeated error counted."""

from __future__ import annotations

import time

from aeron_spark.archive.service.agent_runner import AgentRunner
from aeron_spark.archive.service.archive_service import ArchiveService, ArchiveServiceOptions
from aeron_spark.archive.service.error_log import MarkFileErrorLog, describe_error
from aeron_spark.archive.service.session_agent import SessionAgent
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile, read_error_log


def new_mark_file(directory) -> ArchiveMarkFile:
    return ArchiveMarkFile.create(directory, archive_id=5, control_channel="aeron:udp?endpoint=localhost:8010",
                                  control_stream_id=10, local_control_channel="aeron:ipc",
                                  local_control_stream_id=11, events_channel="", events_stream_id=30,
                                  aeron_directory="/dev/shm/none")


class Failing:
    """An agent whose do_work raises: ``disk full`` on odd cycles, ``bad frame`` on even ones."""

    role_name = "failing-agent"

    def __init__(self) -> None:
        self.cycles = 0

    def do_work(self) -> int:
        self.cycles += 1
        if self.cycles % 2:
            raise OSError("disk full")
        raise ValueError("bad frame")


def test_errors_raised_in_do_work_are_recorded_in_the_mark_file_and_counted(tmp_path):
    with new_mark_file(tmp_path) as mark_file:
        runner = AgentRunner([Failing()], error_handler=MarkFileErrorLog(mark_file))
        for _ in range(5):
            runner.do_work()
        assert runner.error_count == 5  # still counted
        errors = read_error_log(tmp_path)
    assert len(errors) == 2  # distinct errors, not one record per occurrence
    by_type = {e.error.rsplit("\n", 1)[-1]: e for e in errors}
    assert by_type["OSError: disk full"].observation_count == 3
    assert by_type["ValueError: bad frame"].observation_count == 2
    assert "in do_work" in by_type["OSError: disk full"].error  # the stack trace is kept
    first = by_type["OSError: disk full"]
    assert first.first_observation_timestamp <= first.last_observation_timestamp


def test_the_archive_service_runners_record_duty_cycle_errors(tmp_path, caplog):
    service = ArchiveService(ArchiveServiceOptions(archive_dir=tmp_path))
    service.mark_file = new_mark_file(tmp_path)
    service.error_log = MarkFileErrorLog(service.mark_file)
    agent = Failing()
    try:
        service._start_agents([agent])
        deadline = time.monotonic() + 10
        while agent.cycles < 4 and time.monotonic() < deadline:
            time.sleep(0.001)
        (runner,) = service._runners
        assert runner.name == "failing-agent"
    finally:
        for runner in service._runners:
            runner.close()
        service.mark_file.close()
    errors = read_error_log(tmp_path)
    assert sorted(e.error.rsplit("\n", 1)[-1] for e in errors) == ["OSError: disk full", "ValueError: bad frame"]
    assert sum(e.observation_count for e in errors) == runner.error_count >= 4
    assert "agent failing-agent failed in do_work" in caplog.text  # still logged


def test_a_failing_session_is_recorded_too(tmp_path):
    class Session:
        io_stats = None
        is_done = False

        def do_work(self) -> int:
            raise RuntimeError("listener failed")

        def abort(self, reason: str = "") -> None:
            self.is_done = True

    class Agent(SessionAgent):
        def _describe(self, session) -> str:
            return "session"

        def _retire(self, session) -> None:
            pass

    with new_mark_file(tmp_path) as mark_file:
        agent = Agent(error_handler=MarkFileErrorLog(mark_file))
        agent.add_session(Session())
        agent.add_session(Session())
        agent.do_work()  # both fail once, are aborted and retired
        agent.do_work()
        (error,) = read_error_log(tmp_path)
        assert agent.session_count == 0
    assert error.observation_count == 2 and error.error.endswith("RuntimeError: listener failed")


def test_a_closed_mark_file_does_not_break_the_handler(tmp_path):
    mark_file = new_mark_file(tmp_path)
    mark_file.close()
    MarkFileErrorLog(mark_file)(RuntimeError("late"))  # logged, not raised
    assert describe_error(RuntimeError("x")) == "RuntimeError: x"
