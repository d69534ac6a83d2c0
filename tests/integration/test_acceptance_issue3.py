"""Acceptance of issue 3 (archive storage and the `aeron-archive` tool): the points no earlier
test proves (see docs/acceptance.md for the full map of points to tests).

Covered here: the file-sync levels really sync (catalog updates and segment writes: none at 0,
fdatasync at 1, fsync at 2); the mark file of a real running sidecar holds its pid, archive id,
control channels and driver directory, and a second `serve` on the same directory fails fast
with a clear error; every tool command (`describe`, `dump`, `verify`, `checksum`,
`count-entries`, `max-entries`, `pid`), run as the installed console script, works on the
directory of a running sidecar - read-only, with an active recording - and again after it
stopped.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aeron_spark.archive.storage import catalog as catalog_module
from aeron_spark.archive.storage import segment as segment_module
from aeron_spark.archive.cli import tool as tool_module
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import RecordingSignal, SourceLocation
from aeron_spark.archive.storage.mark_file import read_mark_file
from aeron_spark.archive.storage.segment import SegmentWriter
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.frame import DataFrameHeader

from tests.support.sidecar import Sidecar, running_sidecar


pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 15.0
TERM = 64 * 1024
CHANNEL = f"aeron:ipc?term-length={TERM}"


# ------------------------------------------------------------------------------------------------
# file-sync levels
# ------------------------------------------------------------------------------------------------

class SyncCalls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        real_fsync, real_fdatasync = os.fsync, os.fdatasync

        def fsync(fd: int) -> None:
            self.calls.append("fsync")
            real_fsync(fd)

        def fdatasync(fd: int) -> None:
            self.calls.append("fdatasync")
            real_fdatasync(fd)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "fdatasync", fdatasync)

    def take(self) -> list[str]:
        taken, self.calls = self.calls, []
        return taken


def frames_block(count: int, position: int) -> bytes:
    """``count`` 64-byte DATA frames of term 0 starting at ``position``."""
    block = bytearray()
    for index in range(count):
        header = DataFrameHeader(frame_length=64, term_offset=position + 64 * index, session_id=5,
                                 stream_id=1001, term_id=0)
        block += header.pack() + bytes([index + 1]) * 32
    return bytes(block)


@pytest.mark.parametrize("level, expected", [(0, None), (1, "fdatasync"), (2, "fsync")])
def test_file_sync_level_syncs_catalog_updates_and_segment_writes(tmp_path: Path, monkeypatch, level, expected):
    assert catalog_module.os is os and segment_module.os is os  # both sync through os.*
    calls = SyncCalls(monkeypatch)
    with Catalog.open(tmp_path, file_sync=level) as catalog:
        recording_id = catalog.add_recording(
            start_position=0, initial_term_id=0, segment_file_length=TERM, term_buffer_length=TERM,
            mtu_length=1408, session_id=5, stream_id=1001, stripped_channel="aeron:ipc",
            original_channel=CHANNEL, source_identity="aeron:ipc")
        calls.take()
        catalog.recording_stopped(recording_id, 640)
        catalog_calls = calls.take()
    writer = SegmentWriter(tmp_path, recording_id, 0, TERM, TERM, file_sync=level)
    try:
        calls.take()  # file creation (directory sync at levels 1 and 2)
        writer.append(frames_block(10, 0))
        writer.append(frames_block(10, 640))
        segment_calls = calls.take()
    finally:
        writer.close()
    if expected is None:
        assert catalog_calls == [] and segment_calls == []
    else:
        assert catalog_calls and set(catalog_calls) == {expected}
        assert segment_calls == [expected, expected]  # after each write


# ------------------------------------------------------------------------------------------------
# the mark file and the tool on a running sidecar
# ------------------------------------------------------------------------------------------------

def console_script(*argv: str) -> subprocess.CompletedProcess:
    """The installed console script of this venv, as a separate process."""
    script = Path(sys.executable).parent / "aeron-archive"
    return subprocess.run([str(script), *argv], capture_output=True, text=True, check=False, timeout=60)


def tool(*argv: str) -> subprocess.CompletedProcess:
    """The same command run in-process through ``tool.main`` (fast; the sidecar is the other
    process that matters here)."""
    out, err = io.StringIO(), io.StringIO()
    code = tool_module.main(list(argv), stdout=out, stderr=err)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


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


def test_every_tool_command_on_the_directory_of_a_running_sidecar_then_after_it_stopped(tmp_path: Path):
    archive_dir = tmp_path / "archive"
    directory = ["--dir", str(archive_dir)]
    with running_sidecar(archive_dir) as sidecar:
        aeron = AeronClient(sidecar.driver_dir, client_name="acceptance-tool")
        try:
            with ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11,
                                       response_channel="aeron:ipc", aeron=aeron, timeout=TIMEOUT) as archive:
                stopped = record(archive, aeron, 1001, 200, stop=True)
                active, publication = record(archive, aeron, 1002, 50, stop=False)
                catalog_before = (archive_dir / "archive.catalog").read_bytes()

                described = tool("describe", "--json", *directory)
                assert described.returncode == 0, described.stderr
                by_id = {row["recordingId"]: row for row in json.loads(described.stdout)["recordings"]}
                assert by_id[stopped[0]]["stopPosition"] == stopped[1]
                assert by_id[active[0]]["stopPosition"] == -1  # still recording
                one = tool("describe", str(stopped[0]), *directory)
                assert one.returncode == 0 and f"recordingId={stopped[0]}" in one.stdout.replace(" ", ""), one.stdout
                assert tool("count-entries", *directory).stdout == "2\n"
                max_entries = tool("max-entries", *directory)
                assert max_entries.returncode == 0 and int(max_entries.stdout) >= 2
                assert console_script("pid", *directory).stdout == f"{sidecar.pid}\n"
                dumped = tool("dump", str(stopped[0]), "--limit", "3", *directory)
                assert dumped.returncode == 0, dumped.stderr
                lines = dumped.stdout.splitlines()
                assert lines[0].startswith("RecordingDescriptor{") and lines[-1] == "3 frames", dumped.stdout
                assert lines[1].startswith("position=0 length=") and "type=DATA" in lines[1]
                verified = console_script("verify", *directory)
                assert verified.returncode == 0, verified.stdout + verified.stderr
                assert "read-only" in verified.stdout
                checksum = tool("checksum", *directory)
                assert checksum.returncode == 2 and "locked by another archive" in checksum.stderr
                assert (archive_dir / "archive.catalog").read_bytes() == catalog_before
                for command in ("describe", "dump", "verify", "checksum", "count-entries", "max-entries", "pid"):
                    helped = tool(command, "--help")
                    assert helped.returncode == 0 and "--dir" in helped.stdout, command
                publication.close()
                archive.await_recording_signal(RecordingSignal.STOP, recording_id=active[0])
        finally:
            aeron.close()
    assert tool("verify", "--checksum", *directory).returncode == 1  # no checksums were recorded
    assert tool("checksum", *directory).returncode == 0
    after = tool("verify", "--checksum", *directory)
    assert after.returncode == 0, after.stdout + after.stderr
    assert tool("count-entries", *directory).stdout == "2\n"
    missing = tool("dump", "99", *directory)
    assert missing.returncode != 0 and "99" in missing.stderr


def record(archive: ArchiveClient, aeron: AeronClient, stream_id: int, count: int, *, stop: bool):
    subscription_id = archive.start_recording(CHANNEL, stream_id, SourceLocation.LOCAL)
    publication = aeron.add_exclusive_publication(CHANNEL, stream_id)
    recording_id = archive.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id).recording_id
    for index in range(count):
        publication.offer_with_retry(b"message %05d " % index * 8, timeout=TIMEOUT)
    end = publication.position
    deadline = time.monotonic() + TIMEOUT
    while archive.recording_position(recording_id) < end:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    if stop:
        archive.stop_recording(CHANNEL, stream_id)
        archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
        publication.close()
        return recording_id, end
    return (recording_id, end), publication
