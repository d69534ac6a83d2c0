"""The source's replays against the REAL Java Aeron Archive 1.15.1.

A 1.15.1 archive accepts a replay at a position that is not a frame start (OK, and the replay
image even appears) and only then sends an ERROR ("... position not aligned to data header")
while the image stays open and empty: the source used to wait replay.idleTimeoutMs (30 s) and
then report "no progress". It now reads the archive's asynchronous ERROR while waiting and fails
at once with the archive's text. 1.15.1 has no BoundedReplay, so the source replays exactly the
range with a plain Replay there; the first test shows that reading works at all.

Our client runs on the test session's C driver and reaches the Java archive (its own Java
driver) over UDP: control, response and replay channels.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.connector.archive_reading import ClientArchiveAccess
from aeron_spark.connector.replay_errors import ReplayEndInsideFrame, ReplayFailed
from aeron_spark.connector.source.options import ReadMode, SourceOptions
from aeron_spark.connector.source.partition_planner import ReplayRange
from aeron_spark.connector.source.partition_reader import read_range
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.interop_peer import RecordResult, RunningJavaArchive, expected_digest, framed_length
from tests.support.ports import free_udp_port, udp_channel

MESSAGES = 20
SIZE = 1024
FRAME = framed_length(SIZE)
FAST_S = 5.0  # the default replay.idleTimeoutMs is 30 s


@pytest.fixture(scope="module")
def java_recording(java_archive: RunningJavaArchive) -> RecordResult:
    return java_archive.client.record(udp_channel(free_udp_port()), 3101, MESSAGES, SIZE)


@pytest.fixture
def access(java_archive: RunningJavaArchive, aeron_client: AeronClient) -> Iterator[ClientArchiveAccess]:
    client = ArchiveClient.connect(control_channel=java_archive.endpoint.control_channel,
                                   aeron=aeron_client, protocol="legacy", timeout=10.0)
    connected = ClientArchiveAccess(client)
    try:
        yield connected
    finally:
        connected.close()


def source_options(java_archive: RunningJavaArchive, recording: RecordResult) -> SourceOptions:
    return SourceOptions.parse({
        "archive.controlChannel": java_archive.endpoint.control_channel,
        "recordingIds": str(recording.recording_id),
        "replay.channel": udp_channel(free_udp_port()),
        "replay.streamId": "4101",
    }, ReadMode.BATCH)


def test_the_source_reads_a_java_1_15_1_recording(java_archive: RunningJavaArchive, access: ClientArchiveAccess,
                                                  java_recording: RecordResult) -> None:
    assert FRAME == 1056 and java_recording.stop_position == MESSAGES * FRAME
    source = source_options(java_archive, java_recording)
    batches = list(read_range(ReplayRange(java_recording.recording_id, 0, java_recording.stop_position),
                              source, access))
    positions = [p for batch in batches for p in batch.column("position").to_pylist()]
    digest = hashlib.sha256()
    for batch in batches:
        for payload in batch.column("payload").to_pylist():
            digest.update(payload)
    assert positions == list(range(FRAME, java_recording.stop_position + 1, FRAME))
    assert digest.hexdigest() == java_recording.digest == expected_digest(0, MESSAGES, SIZE)


def test_a_start_position_the_java_archive_rejects_after_its_ok_fails_at_once_with_its_text(
        java_archive: RunningJavaArchive, access: ClientArchiveAccess, java_recording: RecordResult) -> None:
    source = source_options(java_archive, java_recording)
    assert source.replay.idle_timeout_ms == 30_000
    started = time.monotonic()
    with pytest.raises(ReplayFailed) as raised:
        list(read_range(ReplayRange(java_recording.recording_id, 4096, java_recording.stop_position),
                        source, access))
    assert time.monotonic() - started < FAST_S
    message = str(raised.value)
    assert f"recording {java_recording.recording_id}: the archive failed the replay" in message
    assert "4096 position not aligned to data header" in message  # the Java archive's own words


def test_an_end_inside_a_frame_fails_fast_against_the_java_archive(
        java_archive: RunningJavaArchive, access: ClientArchiveAccess, java_recording: RecordResult) -> None:
    source = source_options(java_archive, java_recording)
    started = time.monotonic()
    with pytest.raises(ReplayEndInsideFrame) as raised:
        list(read_range(ReplayRange(java_recording.recording_id, 0, 4096), source, access))
    assert time.monotonic() - started < FAST_S
    assert (raised.value.frame_start, raised.value.frame_end) == (3 * FRAME, 4 * FRAME)
