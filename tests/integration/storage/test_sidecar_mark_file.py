"""The mark file of a real running sidecar holds its pid, archive id, control channels and driver
directory; a second `serve` on the same directory fails fast with a clear error and the first one
carries on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from aeron_spark.archive.storage.mark_file import read_mark_file

from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = pytest.mark.timeout(120)


def test_mark_file_of_a_running_sidecar_and_a_second_serve_on_its_directory(tmp_path: Path):
    archive_dir = tmp_path / "archive"
    with running_sidecar(archive_dir) as sidecar:
        mark = read_mark_file(archive_dir)
        assert mark.is_live() and not mark.terminated
        assert mark.pid == sidecar.pid
        assert mark.archive_id == int(sidecar.ready["archiveId"])
        assert (mark.control_channel, mark.control_stream_id) == (sidecar.control_channel, 10)
        assert (mark.local_control_channel, mark.local_control_stream_id) == ("aeron:ipc", 11)
        assert mark.aeron_directory == sidecar.driver_dir
        assert abs(mark.start_timestamp - time.time() * 1000) < 120_000

        second = Sidecar(archive_dir)
        started = time.monotonic()
        try:
            with pytest.raises(RuntimeError) as refused:
                second.start()
        finally:
            second.kill()
        assert time.monotonic() - started < 20
        assert second.process.returncode == 1
        log = "\n".join(second.stderr_lines)
        assert "archive failed to start" in log and "only one archive may run on a directory" in log, log
        assert sidecar.process.poll() is None  # the first one carries on
        assert read_mark_file(archive_dir).pid == sidecar.pid
        assert "did not become ready" in str(refused.value)
    assert read_mark_file(archive_dir).terminated
