"""The modern Java archive's catalog and segment operations, ReplayMerge and ArchiveTool, all with the
real Aeron 1.51.0 client against the real 1.51.0 archive (small segments, crc32c record checksums).

The last test stops this module's archive and runs ArchiveTool on its directory, so it stays last.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port

SEGMENT_LENGTH = 128 * 1024
TERM_LENGTH = 64 * 1024  # a segment is at least a term: small terms make small segments
SMALL_TERMS_IPC = f"aeron:ipc?term-length={TERM_LENGTH}"


@pytest.fixture(scope="module")
def archive(modern_peer: ModernPeerInstallation,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningModernJavaArchive]:
    with running_modern_java_archive(modern_peer, tmp_path_factory.mktemp("modern-maintenance"),
                                     segment_length=SEGMENT_LENGTH, record_checksum="crc32c") as running:
        yield running


def test_positions_of_a_stopped_recording(archive: RunningModernJavaArchive) -> None:
    recorded = archive.client.record(SMALL_TERMS_IPC, 3001, 100, 100)

    positions = archive.client.positions(recorded.recording_id)

    assert (positions.start_position, positions.stop_position) == (0, recorded.stop_position)
    assert positions.max_recorded_position == recorded.stop_position
    assert positions.recording_position == -1 and positions.active is False  # NULL_POSITION: not recording


def test_truncate_shortens_the_recording_and_replay_ends_there(archive: RunningModernJavaArchive) -> None:
    recorded = archive.client.record("aeron:ipc", 3002, 1000, 100)  # one term: no padding frames
    cut = 500 * framed_length(100)

    truncated = archive.client.truncate(recorded.recording_id, cut)

    assert truncated["stopPosition"] == cut
    replay = archive.client.replay(recorded.recording_id, replay_channel="aeron:ipc", replay_stream_id=4002)
    assert (replay.messages, replay.last_index, replay.digest) == (500, 499, expected_digest(0, 500, 100))


def test_purge_removes_the_recording_from_the_catalog(archive: RunningModernJavaArchive) -> None:
    recorded = archive.client.record(SMALL_TERMS_IPC, 3003, 10, 100)

    purged = archive.client.purge(recorded.recording_id)

    assert purged["stillListed"] is False
    assert recorded.recording_id not in {d["recordingId"] for d in archive.client.list_recordings()}


def test_extend_continues_a_stopped_recording(archive: RunningModernJavaArchive) -> None:
    recorded = archive.client.record(SMALL_TERMS_IPC, 3004, 100, 100)

    extended = archive.client.extend(recorded.recording_id, "aeron:ipc", 3004, 150, 100, first_index=100)

    assert extended["previousStopPosition"] == recorded.stop_position
    assert extended["stopPosition"] == 250 * framed_length(100)
    replay = archive.client.replay(recorded.recording_id, replay_channel="aeron:ipc", replay_stream_id=4004)
    assert (replay.messages, replay.first_index, replay.last_index) == (250, 0, 249)
    assert replay.digest == expected_digest(0, 250, 100)


def test_segment_operations_detach_attach_delete_and_purge(archive: RunningModernJavaArchive) -> None:
    size = 96  # framed 128 B: segment boundaries fall between messages
    recorded = archive.client.record(SMALL_TERMS_IPC, 3005, 4000, size)  # 512,000 B: 4 segments
    recording_id = recorded.recording_id
    client = archive.client

    assert client.detach_segments(recording_id, SEGMENT_LENGTH)["startPosition"] == SEGMENT_LENGTH
    attached = client.attach_segments(recording_id)
    assert (attached["count"], attached["startPosition"]) == (1, 0)
    client.detach_segments(recording_id, SEGMENT_LENGTH)
    assert client.delete_detached_segments(recording_id)["count"] == 1
    purged = client.purge_segments(recording_id, 2 * SEGMENT_LENGTH)
    assert (purged["count"], purged["startPosition"]) == (1, 2 * SEGMENT_LENGTH)

    first = 2 * SEGMENT_LENGTH // framed_length(size)
    replay = client.replay(recording_id, replay_channel="aeron:ipc", replay_stream_id=4005)
    assert (replay.first_position, replay.first_index, replay.last_index) == (2 * SEGMENT_LENGTH, first, 3999)
    assert replay.digest == expected_digest(first, 4000 - first, size)


def test_replay_merge_joins_the_live_stream(archive: RunningModernJavaArchive) -> None:
    live_channel = f"aeron:udp?control=localhost:{free_udp_port()}|control-mode=dynamic"

    merged = archive.client.replay_merge(live_channel, 3006, messages=2000, live_messages=500, size=100)

    assert merged.merged is True
    assert merged.states[0] in ("RESOLVE_REPLAY_PORT", "GET_RECORDING_POSITION")
    assert {"REPLAY", "CATCHUP", "ATTEMPT_LIVE_JOIN"} <= set(merged.states) and merged.states[-1] == "MERGED"
    assert (merged.messages, merged.first_index, merged.last_index) == (2500, 0, 2499)
    assert merged.digest == expected_digest(0, 2500, 100)


def test_recording_signals_arrive_on_the_control_session(archive: RunningModernJavaArchive) -> None:
    recorded, signals = archive.client.record_with_signals("aeron:ipc", 3007, 10, 100)

    mine = [s for s in signals if s["recordingId"] == recorded.recording_id]
    assert [s["signal"] for s in mine][0] == "START" and mine[-1]["signal"] == "STOP"
    assert mine[-1]["position"] == recorded.stop_position


def test_archive_tool_reads_the_stopped_archive(modern_peer: ModernPeerInstallation,
                                                archive: RunningModernJavaArchive) -> None:
    listed = archive.client.list_recordings()
    assert archive.server.stop() is True  # ArchiveTool wants the archive gone (its mark file inactive)
    directory: Path = archive.archive_dir

    described = modern_peer.archive_tool(directory, "describe")
    assert described.returncode == 0, described.stderr
    assert f"recordingId={listed[0]['recordingId']}" in described.stdout
    assert "sbeSchemaId=101|sbeSchemaVersion=13" in described.stdout

    counted = modern_peer.archive_tool(directory, "count-entries")
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.strip().splitlines()[-1] == str(len(listed))

    verified = modern_peer.archive_tool(directory, "verify", "-a", "-checksum", "io.aeron.archive.checksum.Crc32c")
    assert verified.returncode == 0, verified.stderr
    for descriptor in listed:
        assert f"(recordingId={descriptor['recordingId']}) OK" in verified.stdout
