"""A full disk is an answer, not silence: the archive directory on a 1 MiB tmpfs (root only: the
tests fail, never skip, without it, as tests/support/small_tmpfs.require_tmpfs_mounts says).

* Disk already full: StartRecording is refused with STORAGE_SPACE (Aeron's low-storage-space
  check, before any OK), and the catalog gains no entry.
* Disk filling while recording: the recording ends with an ERROR naming STORAGE_SPACE and a STOP
  signal to its client; after freeing space and restarting, `aeron-archive verify` is clean and
  the recording replays up to its stop position.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aeron_spark.archive.cli import main as tool_module
from aeron_spark.archive.client.archive_client import ArchiveError
from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal, SourceLocation
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.errors import AeronError

from tests.support.sidecar import running_sidecar
from tests.support.small_tmpfs import require_tmpfs_mounts
from tests.support.sidecar_streams import (
    IPC_RECORDED, RECORDED_STREAM, TIMEOUT, Published, as_pairs, expected, ipc_archive, message_start, payloads)

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture(autouse=True)
def _can_mount_tmpfs() -> None:
    require_tmpfs_mounts()


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Writes a file until the file system is full; returns it (delete it to free the space)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\xff" * 4096)
    finally:
        os.close(fd)
    return filler


def publish_until_refused(publication, messages: list[bytes]) -> Published:
    """Publishes until the recording stops consuming (back pressure for 2 s) or all are sent."""
    starts: list[int] = []
    end = 0
    for message in messages:
        try:
            end = publication.offer_with_retry(message, timeout=2.0)
        except AeronError:
            break
        starts.append(message_start(publication, message, end))
    return Published(messages[:len(starts)], starts, end)


def verify(directory: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    code = tool_module.main(["verify", "--dir", str(directory)], stdout=out, stderr=err)
    assert code == 0, out.getvalue() + err.getvalue()
    return out.getvalue()


def test_start_recording_on_a_full_disk_is_refused_with_storage_space(tmp_path: Path):
    with small_tmpfs(tmp_path / "fs") as fs:
        directory = fs / "archive"
        with running_sidecar(directory) as sidecar:
            aeron = AeronClient(sidecar.driver_dir, client_name="full-disk")
            try:
                with ipc_archive(aeron) as archive:
                    fill(fs)
                    with pytest.raises(ArchiveError) as refused:
                        archive.start_recording(IPC_RECORDED, RECORDED_STREAM, SourceLocation.LOCAL)
                    assert refused.value.error_code == ArchiveErrorCode.STORAGE_SPACE, refused.value
                    assert "low storage space" in refused.value.archive_message
                    assert archive.list_recordings() == []
            finally:
                aeron.close()
        verify(directory)


def await_error_response(archive) -> ArchiveError | None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            archive.check_for_error_response()
            time.sleep(0.01)
        except ArchiveError as raised:
            return raised
    return None


def test_a_recording_running_when_the_disk_fills_ends_with_an_error_and_a_stop(tmp_path: Path):
    with small_tmpfs(tmp_path / "fs") as fs:
        directory = fs / "archive"
        with running_sidecar(directory) as sidecar:
            aeron = AeronClient(sidecar.driver_dir, client_name="filling-disk")
            try:
                with ipc_archive(aeron) as archive:
                    subscription_id = archive.start_recording(IPC_RECORDED, RECORDED_STREAM, SourceLocation.LOCAL)
                    publication = aeron.add_exclusive_publication(IPC_RECORDED, RECORDED_STREAM)
                    started = archive.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id)
                    published = publish_until_refused(publication, payloads(3000, seed=4))  # ~2.3 MiB > the disk
                    stopped = archive.await_recording_signal(RecordingSignal.STOP, recording_id=started.recording_id)
                    error = await_error_response(archive)
                    assert error is not None and error.error_code == ArchiveErrorCode.STORAGE_SPACE, error
                    assert 0 < stopped.position < published.end
                    publication.close()
            finally:
                aeron.close()
        (fs / "filler").unlink(missing_ok=True)
        verify(directory)
        with running_sidecar(directory) as sidecar:  # restart after the disk filled: consistent
            aeron = AeronClient(sidecar.driver_dir, client_name="after-full-disk")
            try:
                with ipc_archive(aeron) as archive:
                    [d] = archive.list_recordings()
                    assert d.stop_position == stopped.position
                    with archive.replay(d.recording_id, 0, d.stop_position, "aeron:ipc", 2001) as replay:
                        got = as_pairs(list(replay.messages(idle_timeout=TIMEOUT)))
                    assert got == expected(published, 0, d.stop_position)
            finally:
                aeron.close()
        assert "ERROR" not in verify(directory)
