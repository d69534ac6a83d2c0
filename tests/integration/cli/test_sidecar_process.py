"""archive.sidecar_process: the sidecar as a child process (used by examples, benchmarks and tests)."""

from __future__ import annotations

import os

import pytest

from aeron_spark.archive.cli.sidecar_process import CAPTURE, SidecarProcess, parse_ready_line


def test_parse_ready_line_reads_the_key_value_tokens():
    fields = parse_ready_line("aeron-archive ready: pid=12 archiveId=7 aeronDir=/dev/shm/x control=aeron:ipc junk")
    assert fields == {"pid": "12", "archiveId": "7", "aeronDir": "/dev/shm/x", "control": "aeron:ipc"}


def test_start_waits_for_ready_and_stop_terminates_cleanly(tmp_path):
    sidecar = SidecarProcess.start(tmp_path / "archive", "--control-channel", "aeron:ipc", "--log-level", "WARNING")
    try:
        assert sidecar.ready["pid"] == str(sidecar.pid)
        assert sidecar.control_channel == "aeron:ipc" and os.path.isdir(sidecar.aeron_dir)
        assert (tmp_path / "archive" / "archive-mark.dat").exists()
    finally:
        code = sidecar.stop()
    assert code == 0


def test_a_sidecar_that_cannot_start_is_reported_with_its_stderr(tmp_path):
    with pytest.raises(RuntimeError, match="did not become ready") as error:
        SidecarProcess.start(tmp_path / "archive", "--control-channel", "not-a-channel", stderr=CAPTURE, timeout_s=30)
    assert "not-a-channel" in str(error.value)


def test_kill_can_remove_the_embedded_driver_directory(tmp_path):
    sidecar = SidecarProcess.start(tmp_path / "archive", "--control-channel", "aeron:ipc", "--log-level", "WARNING")
    try:
        driver_dir = sidecar.aeron_dir
    finally:
        sidecar.kill(remove_embedded_driver_dir=True)
    assert sidecar.process.returncode == -9 and not os.path.exists(driver_dir)
