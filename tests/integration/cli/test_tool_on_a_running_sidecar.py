"""Every `aeron-archive` tool command (`describe`, `dump`, `verify`, `checksum`, `count-entries`,
`max-entries`, `pid`; some as the installed console script) works on the directory of a running
sidecar - read-only, with an active recording - and again after it stopped."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aeron_spark.archive.cli import main as tool_module
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import RecordingSignal, SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.timeout(120)

TIMEOUT = 15.0
TERM = 64 * 1024
CHANNEL = f"aeron:ipc?term-length={TERM}"


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
