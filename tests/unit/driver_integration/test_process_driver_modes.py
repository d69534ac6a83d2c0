"""process_driver's choices without a real driver: the three modes, Aeron's default directory,
and which leftover directories are removed (liveness and the embedded driver are stubbed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from aeron_spark.driver_integration import AeronError
from aeron_spark.driver_integration import process_driver
from aeron_spark.driver_integration.process_driver import (
    DRIVER_MODES,
    DriverUnavailable,
    default_aeron_dir,
    driver_dir_for_process,
    is_driver_active,
    remove_leftover_driver_dirs,
)

EMBEDDED = "/dev/shm/aeron-spark-worker-1-stub"


class _Stubs:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.live: set[str] = set()
        self.checked: list[str] = []
        self.embedded_starts = 0

        class FakeDriver:
            dir = EMBEDDED

        def active(directory: str, timeout_ms: int = 0) -> bool:
            self.checked.append(directory)
            return directory in self.live

        def embedded() -> FakeDriver:
            self.embedded_starts += 1
            return FakeDriver()

        monkeypatch.setattr(process_driver, "is_driver_active", active)
        monkeypatch.setattr(process_driver, "_process_driver", embedded)
        monkeypatch.setenv("AERON_DIR", "/dev/shm/aeron-default-for-test")


@pytest.fixture
def stubs(monkeypatch: pytest.MonkeyPatch) -> _Stubs:
    return _Stubs(monkeypatch)


def test_modes_are_the_documented_three():
    assert DRIVER_MODES == ("auto", "embedded", "external")


@pytest.mark.parametrize("mode", ["", "AUTO", "shared", None])
def test_an_invalid_mode_names_the_accepted_values(stubs, mode):
    with pytest.raises(ValueError, match="accepted values are 'auto', 'embedded', 'external'"):
        driver_dir_for_process(mode, None)


def test_embedded_ignores_the_directory_and_never_checks_liveness(stubs):
    stubs.live.add("/some/dir")
    assert driver_dir_for_process("embedded", "/some/dir") == EMBEDDED
    assert driver_dir_for_process("embedded", None) == EMBEDDED
    assert stubs.checked == [] and stubs.embedded_starts == 2


def test_external_uses_a_live_driver_directory(stubs):
    stubs.live.update({"/some/dir", "/dev/shm/aeron-default-for-test"})
    assert driver_dir_for_process("external", "/some/dir") == "/some/dir"
    assert driver_dir_for_process("external", None) == "/dev/shm/aeron-default-for-test"
    assert driver_dir_for_process("external", "") == "/dev/shm/aeron-default-for-test"
    assert stubs.embedded_starts == 0


def test_external_without_a_live_driver_names_the_directory_and_the_options(stubs):
    with pytest.raises(DriverUnavailable) as raised:
        driver_dir_for_process("external", "/no/driver/here")
    message = str(raised.value)
    assert "/no/driver/here" in message
    assert "start a media driver there" in message
    assert "aeron.driver=auto" in message and "aeron.driver=embedded" in message and "aeron.dir" in message
    assert isinstance(raised.value, AeronError)
    with pytest.raises(DriverUnavailable, match="/dev/shm/aeron-default-for-test"):
        driver_dir_for_process("external", None)
    assert stubs.embedded_starts == 0


def test_auto_prefers_a_live_driver_and_falls_back_to_the_embedded_one(stubs):
    stubs.live.add("/some/dir")
    assert driver_dir_for_process("auto", "/some/dir") == "/some/dir"
    assert stubs.embedded_starts == 0
    assert driver_dir_for_process("auto", "/no/driver/here") == EMBEDDED
    assert driver_dir_for_process("auto", None) == EMBEDDED
    assert stubs.checked == ["/some/dir", "/no/driver/here", "/dev/shm/aeron-default-for-test"]


def test_default_aeron_dir_follows_the_c_client_rule(monkeypatch):
    monkeypatch.setenv("AERON_DIR", "/explicit/dir")
    assert default_aeron_dir() == "/explicit/dir"
    monkeypatch.delenv("AERON_DIR")
    monkeypatch.setenv("USER", "alice")
    expected_base = "/dev/shm" if sys.platform.startswith("linux") else os.environ.get("TMPDIR", "/tmp")
    assert default_aeron_dir() == os.path.join(expected_base, "aeron-alice")
    monkeypatch.delenv("USER")
    import pwd

    assert default_aeron_dir() == os.path.join(expected_base, f"aeron-{pwd.getpwuid(os.getuid()).pw_name}")


def test_is_driver_active_is_false_without_a_cnc_file(tmp_path):
    assert is_driver_active(str(tmp_path / "missing")) is False
    assert is_driver_active(str(tmp_path)) is False  # a directory, but no cnc.dat
    with pytest.raises(ValueError, match="timeout_ms -1 is invalid"):
        is_driver_active(str(tmp_path), -1)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def test_leftover_dirs_of_dead_processes_are_removed_and_others_kept(tmp_path):
    dead = _dead_pid()
    names = {
        "dead": f"aeron-spark-worker-{dead}-abc",
        "mine": f"aeron-spark-worker-{os.getpid()}-old",  # this process has no driver there
        "live": f"aeron-spark-worker-{os.getppid()}-xyz",
        "other": f"aeron-spark-{dead}-unrelated",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
    (tmp_path / f"aeron-spark-worker-{dead}-file").write_text("not a directory")
    removed = remove_leftover_driver_dirs(str(tmp_path))
    assert sorted(removed) == sorted(str(tmp_path / names[key]) for key in ("dead", "mine"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [names["live"], names["other"], f"aeron-spark-worker-{dead}-file"])
    assert remove_leftover_driver_dirs(str(tmp_path / "missing")) == []


def test_pid_liveness():
    assert process_driver._pid_alive(os.getpid())
    assert not process_driver._pid_alive(_dead_pid())
