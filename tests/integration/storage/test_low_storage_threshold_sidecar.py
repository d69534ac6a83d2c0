"""``serve --low-storage-threshold`` on a real sidecar whose archive directory is an 8 MiB tmpfs
(root only: mounting; the test fails, never skips, without it). Runs in both threading modes.

* Threshold above the free space: StartRecording, ExtendRecording and a replication into the
  archive are refused with STORAGE_SPACE, the message naming the usable bytes and the threshold;
  the catalog's recording is untouched.
* A recording that fills the disk (threshold 0): it stops with an ERROR STORAGE_SPACE and a STOP
  signal to its client, its stop position is in the catalog at once, everything recorded before
  it replays byte-exact while the same sidecar keeps serving, and the directory verifies clean.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from aeron_spark.archive.cli import main as tool_module
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal, SourceLocation
from aeron_spark.driver_integration import AeronClient
from aeron_spark.driver_integration.errors import AeronError
from aeron_spark.driver_integration.frame import compute_fragmented_frame_length

from tests.support.sidecar import running_sidecar
from tests.support.sidecar_streams import (
    IPC_RECORDED, RECORDED_STREAM, TIMEOUT, Published, as_pairs, await_recording_of, error_of, ipc_archive,
    message_start, payloads, record_ipc)
from tests.support.small_tmpfs import small_tmpfs, usable_bytes

pytestmark = pytest.mark.timeout(240)

TMPFS_SIZE = "8m"
HIGH_THRESHOLD = 64 * 1024 * 1024  # far above what an 8 MiB file system can have free


def verify_clean(directory: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    code = tool_module.main(["verify", "--dir", str(directory)], stdout=out, stderr=err)
    assert code == 0, out.getvalue() + err.getvalue()
    assert "ERROR" not in out.getvalue(), out.getvalue()
    return out.getvalue()


def test_below_the_threshold_start_extend_and_replicate_are_refused_with_storage_space(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", TMPFS_SIZE) as fs:
        directory = fs / "archive"
        with running_sidecar(directory) as sidecar:  # a recording to extend, under the default threshold
            aeron = AeronClient(sidecar.driver_dir, client_name="low-storage-setup")
            try:
                with ipc_archive(aeron) as archive:
                    recording_id, published, _ = record_ipc(archive, payloads(40, seed=21))
            finally:
                aeron.close()
        with running_sidecar(tmp_path / "source") as source, \
                running_sidecar(directory, ["--low-storage-threshold", "64m"]) as sidecar:
            source_aeron = AeronClient(source.driver_dir, client_name="low-storage-source")
            aeron = AeronClient(sidecar.driver_dir, client_name="low-storage")
            try:
                with ipc_archive(source_aeron) as source_archive:
                    source_recording_id, _, _ = record_ipc(source_archive, payloads(20, seed=22))
                with ipc_archive(aeron) as archive:
                    usable = usable_bytes(fs)
                    refused = error_of(lambda: archive.start_recording(IPC_RECORDED, RECORDED_STREAM,
                                                                       SourceLocation.LOCAL))
                    assert refused.error_code == ArchiveErrorCode.STORAGE_SPACE, refused
                    assert f"low storage threshold {HIGH_THRESHOLD} bytes" in refused.archive_message
                    reported_usable = int(refused.archive_message.split("low storage space: ")[1].split()[0])
                    assert abs(reported_usable - usable) <= 1024 * 1024, (refused.archive_message, usable)
                    refused = error_of(lambda: archive.extend_recording(recording_id, IPC_RECORDED, RECORDED_STREAM,
                                                                        SourceLocation.LOCAL))
                    assert refused.error_code == ArchiveErrorCode.STORAGE_SPACE, refused
                    [descriptor] = archive.list_recordings()
                    assert (descriptor.recording_id, descriptor.stop_position) == (recording_id, published.end)
                    # Replication into this archive extends a recording: refused at that step, as Aeron's.
                    replication_id = archive.replicate(source_recording_id, source.control_channel)
                    with pytest.raises(ArchiveError) as failed:
                        for _ in archive.await_replication(replication_id, timeout=TIMEOUT * 2):
                            pass
                    assert failed.value.error_code == ArchiveErrorCode.STORAGE_SPACE, failed.value
            finally:
                aeron.close()
                source_aeron.close()
        verify_clean(directory)


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


def whole_messages_before(published: Published, max_payload_length: int, stop_position: int) -> list[tuple[int, bytes]]:
    """The messages recorded entirely below ``stop_position`` (a block may end inside a
    fragmented message: its head is recorded, but a replay delivers whole messages only)."""
    return [(start, message) for start, message in zip(published.starts, published.messages, strict=True)
            if start + compute_fragmented_frame_length(len(message), max_payload_length) <= stop_position]


def await_error_response(archive: ArchiveClient) -> ArchiveError | None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            archive.check_for_error_response()
            time.sleep(0.01)
        except ArchiveError as raised:
            return raised
    return None


def test_a_recording_that_fills_the_disk_stops_with_its_prefix_intact_and_the_sidecar_serves_on(
        tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", TMPFS_SIZE) as fs:
        directory = fs / "archive"
        with running_sidecar(directory, ["--low-storage-threshold", "0"]) as sidecar:
            aeron = AeronClient(sidecar.driver_dir, client_name="filling-tmpfs")
            try:
                with ipc_archive(aeron) as archive:
                    subscription_id = archive.start_recording(IPC_RECORDED, RECORDED_STREAM, SourceLocation.LOCAL)
                    publication = aeron.add_exclusive_publication(IPC_RECORDED, RECORDED_STREAM)
                    started = await_recording_of(archive, subscription_id, publication.session_id)
                    published = publish_until_refused(publication, payloads(14_000, seed=23))  # ~11 MiB > 8 MiB
                    stopped = archive.await_recording_signal(RecordingSignal.STOP, recording_id=started.recording_id)
                    error = await_error_response(archive)
                    assert error is not None and error.error_code == ArchiveErrorCode.STORAGE_SPACE, error
                    assert 2 * 1024 * 1024 < stopped.position < published.end  # megabytes recorded, not all
                    # The stop position is in the catalog now, and the sidecar still answers.
                    descriptor = archive.list_recording(started.recording_id)
                    assert descriptor is not None and descriptor.stop_position == stopped.position
                    with archive.replay(started.recording_id, 0, stopped.position, "aeron:ipc", 2001) as replay:
                        got = as_pairs(list(replay.messages(idle_timeout=TIMEOUT)))
                    wanted = whole_messages_before(published, publication.max_payload_length, stopped.position)
                    assert len(got) == len(wanted) and got == wanted  # byte-exact, nothing lost before the stop
                    publication.close()
            finally:
                aeron.close()
        verify_clean(directory)
