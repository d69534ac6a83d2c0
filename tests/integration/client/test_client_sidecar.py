"""ArchiveClient against our real sidecar (`aeron-archive serve` as a subprocess).

The client runs on the test session's own media driver and reaches the sidecar's embedded driver
over UDP (control, response, recorded stream and replay channels), except the mark-file test,
which attaches to the sidecar's driver and uses the local IPC control channel.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aeron_spark.archive.service import authenticator
from aeron_spark.archive.cli import main as tool
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal, SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.interop_peer import expected_digest, framed_length, payloads
from tests.support.ports import free_udp_port
from tests.support.sidecar import Sidecar, running_sidecar


MESSAGES = 200
SIZE = 100
TIMEOUT = 10.0


def udp(port: int) -> str:
    return f"aeron:udp?endpoint=localhost:{port}"


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    with running_sidecar(tmp_path_factory.mktemp("client-sidecar") / "archive") as running:
        yield running


@pytest.fixture
def archive(sidecar: Sidecar, aeron_client: AeronClient) -> Iterator[ArchiveClient]:
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT) as client:
        yield client


@dataclass(frozen=True)
class Recorded:
    recording_id: int
    channel: str
    stream_id: int
    stop_position: int


def record(archive: ArchiveClient, stream_id: int, messages: int = MESSAGES, size: int = SIZE) -> Recorded:
    """Records ``messages`` deterministic payloads published by this test's driver over UDP."""
    channel = udp(free_udp_port())
    subscription_id = archive.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = archive.aeron.add_exclusive_publication(channel, stream_id)
    try:
        start = archive.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id)
        for payload in payloads(0, messages, size):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
        end = publication.position
        deadline = time.monotonic() + TIMEOUT
        while archive.recording_position(start.recording_id) < end:
            assert time.monotonic() < deadline, "the sidecar did not record the whole stream"
            time.sleep(0.005)
        archive.stop_recording(channel, stream_id)
        stop = archive.await_recording_signal(RecordingSignal.STOP, recording_id=start.recording_id)
    finally:
        publication.close()
    assert stop.position == end == messages * framed_length(size)
    return Recorded(start.recording_id, channel, stream_id, end)


@pytest.fixture(scope="module")
def recorded(sidecar: Sidecar, aeron_client: AeronClient) -> Recorded:
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT) as client:
        return record(client, 1001)


def digest_of(payloads_: list[bytes]) -> str:
    digest = hashlib.sha256()
    for payload in payloads_:
        digest.update(payload)
    return digest.hexdigest()


def replayed(archive: ArchiveClient, recording_id: int, position: int, length: int) -> list:
    with archive.replay(recording_id, position, length, udp(free_udp_port()), 2001) as replay:
        assert replay.join_position == position
        return list(replay.messages(idle_timeout=TIMEOUT))


def test_connect_reports_the_session_and_the_archive_id(sidecar: Sidecar, archive: ArchiveClient) -> None:
    assert archive.archive_id == int(sidecar.ready["archiveId"])
    assert archive.control_session_id >= 0 and not archive.is_legacy
    assert archive.archive_protocol_version >= (1 << 16) | (11 << 8)


def test_list_shows_the_recording(archive: ArchiveClient, recorded: Recorded) -> None:
    [descriptor] = [d for d in archive.list_recordings() if d.recording_id == recorded.recording_id]
    assert (descriptor.start_position, descriptor.stop_position) == (0, recorded.stop_position)
    assert descriptor.stream_id == recorded.stream_id and descriptor.original_channel == recorded.channel
    single = archive.list_recording(recorded.recording_id)
    assert single == descriptor.with_changes(correlation_id=single.correlation_id)
    found = archive.list_recordings_for_uri(0, 10, recorded.channel.split("?")[1], recorded.stream_id)
    assert [d.recording_id for d in found] == [recorded.recording_id]
    assert archive.list_recording(10_000) is None
    assert archive.find_last_matching_recording(0, "endpoint", recorded.stream_id,
                                                descriptor.session_id) == recorded.recording_id


def test_positions(archive: ArchiveClient, recorded: Recorded) -> None:
    assert archive.recording_position(recorded.recording_id) == -1  # stopped
    assert archive.stop_position(recorded.recording_id) == recorded.stop_position
    assert archive.start_position(recorded.recording_id) == 0
    assert archive.max_recorded_position(recorded.recording_id) == recorded.stop_position


def test_replay_of_the_whole_recording_has_the_published_digest(archive: ArchiveClient,
                                                                  recorded: Recorded) -> None:
    messages = replayed(archive, recorded.recording_id, 0, recorded.stop_position)
    assert len(messages) == MESSAGES
    assert digest_of([m.payload for m in messages]) == expected_digest(0, MESSAGES, SIZE)
    assert [m.position for m in messages[:2]] == [0, framed_length(SIZE)]
    assert messages[-1].next_position == recorded.stop_position


def test_replay_from_a_mid_position(archive: ArchiveClient, recorded: Recorded) -> None:
    middle = 120 * framed_length(SIZE)
    messages = replayed(archive, recorded.recording_id, middle, recorded.stop_position - middle)
    assert len(messages) == MESSAGES - 120 and messages[0].position == middle
    assert digest_of([m.payload for m in messages]) == expected_digest(120, MESSAGES - 120, SIZE)
    bounded = replayed(archive, recorded.recording_id, middle, 10 * framed_length(SIZE))
    assert digest_of([m.payload for m in bounded]) == expected_digest(120, 10, SIZE)


def test_fragmented_messages_come_back_whole_with_their_start_positions(archive: ArchiveClient) -> None:
    size = 3000  # mtu 1408: frames of 1376 + 1376 + 248 payload bytes
    per_message = 2 * 1408 + framed_length(size - 2 * 1376)
    channel = udp(free_udp_port())
    subscription_id = archive.start_recording(channel, 1004)
    publication = archive.aeron.add_exclusive_publication(channel, 1004)
    try:
        start = archive.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id)
        for payload in payloads(0, 20, size):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
        end = publication.position
        assert end == 20 * per_message
        deadline = time.monotonic() + TIMEOUT
        while archive.recording_position(start.recording_id) < end:
            assert time.monotonic() < deadline
            time.sleep(0.005)
    finally:
        publication.close()
    archive.stop_recording(channel, 1004)
    messages = replayed(archive, start.recording_id, 5 * per_message, 15 * per_message)
    assert [m.position for m in messages] == [i * per_message for i in range(5, 20)]
    assert [m.next_position for m in messages] == [i * per_message for i in range(6, 21)]
    assert digest_of([m.payload for m in messages]) == expected_digest(5, 15, size)


def test_errors_carry_the_archives_code_and_message(archive: ArchiveClient, recorded: Recorded) -> None:
    with pytest.raises(ArchiveError) as unknown:
        archive.stop_position(9_999)
    assert unknown.value.error_code == ArchiveErrorCode.UNKNOWN_RECORDING
    assert "9999" in unknown.value.archive_message
    with pytest.raises(ArchiveError) as misaligned:
        archive.start_replay(recorded.recording_id, 16, 64, udp(free_udp_port()), 2002)
    assert misaligned.value.archive_message and "16" in misaligned.value.archive_message
    with pytest.raises(ArchiveError) as not_stopped:
        archive.stop_recording(udp(free_udp_port()), 5)
    assert not_stopped.value.error_code == ArchiveErrorCode.UNKNOWN_SUBSCRIPTION
    # The session is still usable after errors.
    assert archive.stop_position(recorded.recording_id) == recorded.stop_position


def test_truncate_and_purge_with_delete_signals(archive: ArchiveClient) -> None:
    made = record(archive, 1003, messages=50)
    archive.truncate_recording(made.recording_id, 10 * framed_length(SIZE))
    archive.await_recording_signal(RecordingSignal.DELETE, recording_id=made.recording_id)
    assert archive.stop_position(made.recording_id) == 10 * framed_length(SIZE)
    archive.purge_recording(made.recording_id)
    archive.await_recording_signal(RecordingSignal.DELETE, recording_id=made.recording_id)
    assert archive.list_recording(made.recording_id) is None


def test_legacy_protocol_against_the_sidecar(sidecar: Sidecar, aeron_client: AeronClient,
                                             recorded: Recorded) -> None:
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron_client,
                               protocol="legacy", timeout=TIMEOUT) as legacy:
        assert legacy.is_legacy and legacy.archive_id == -1
        assert legacy.list_recording(recorded.recording_id).stop_position == recorded.stop_position
        assert legacy.max_recorded_position(recorded.recording_id) == recorded.stop_position
        messages = replayed(legacy, recorded.recording_id, 0, recorded.stop_position)
        assert digest_of([m.payload for m in messages]) == expected_digest(0, MESSAGES, SIZE)


def test_from_mark_file_uses_the_local_ipc_control_channel(sidecar: Sidecar, recorded: Recorded) -> None:
    with ArchiveClient.from_mark_file(sidecar.archive_dir, timeout=TIMEOUT) as local:
        assert local.description == "aeron:ipc stream 11"
        assert local.aeron.aeron_dir == sidecar.driver_dir
        assert local.archive_id == int(sidecar.ready["archiveId"])
        assert local.list_recording(recorded.recording_id) is not None


def test_from_mark_file_on_another_driver_uses_the_udp_control_channel(
        sidecar: Sidecar, aeron_client: AeronClient, recorded: Recorded) -> None:
    with ArchiveClient.from_mark_file(sidecar.archive_dir, aeron=aeron_client, timeout=TIMEOUT) as remote:
        assert remote.description == f"{sidecar.control_channel} stream 10"
        assert remote.list_recording(recorded.recording_id) is not None


def test_authentication_by_challenge_and_rejection(tmp_path: Path, aeron_client: AeronClient) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text("spark:s3cret\n")
    with running_sidecar(tmp_path / "auth", ["--auth-credentials-file", str(credentials),
                                             "--auth-challenge-only"]) as secured:
        connect = {"control_channel": secured.control_channel, "aeron": aeron_client, "timeout": TIMEOUT}
        challenges: list[bytes] = []

        def answer(challenge: bytes) -> bytes:
            challenges.append(challenge)
            return authenticator.answer_challenge("spark", "s3cret", challenge)
        with ArchiveClient.connect(credentials=authenticator.encode_challenge_request("spark"),
                                   on_challenge=answer, **connect) as authenticated:
            assert challenges and challenges[0].startswith(authenticator.CHALLENGE_PREFIX)
            assert authenticated.list_recordings() == []
        with pytest.raises(ArchiveError) as rejected:
            ArchiveClient.connect(credentials=authenticator.encode_challenge_request("spark"),
                                  on_challenge=lambda c: b"spark:0000", **connect)
        assert rejected.value.error_code == ArchiveErrorCode.AUTHENTICATION_REJECTED
        assert rejected.value.archive_message == "authentication rejected"
        with pytest.raises(ArchiveError, match="no on_challenge callback"):
            ArchiveClient.connect(credentials=authenticator.encode_challenge_request("spark"), **connect)


def test_connect_timeout_names_the_control_channel(aeron_client: AeronClient) -> None:
    nowhere = udp(free_udp_port())
    started = time.monotonic()
    with pytest.raises(ArchiveTimeoutError) as raised:
        ArchiveClient.connect(control_channel=nowhere, aeron=aeron_client, timeout=0.5)
    assert time.monotonic() - started < 3
    assert f"{nowhere} stream 10 did not connect within 0.5 s" in str(raised.value)


def test_request_timeout_says_which_request_timed_out(tmp_path: Path, aeron_client: AeronClient) -> None:
    with running_sidecar(tmp_path / "frozen") as frozen:
        client = ArchiveClient.connect(control_channel=frozen.control_channel, aeron=aeron_client,
                                       timeout=1.0)
        os.kill(frozen.pid, signal.SIGSTOP)
        _wait_until_stopped(frozen.pid)
        try:
            with pytest.raises(ArchiveTimeoutError) as raised:
                client.list_recordings(0, 10)
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
            client.close()
    message = str(raised.value)
    assert message.startswith("no response to ListRecordingsRequest correlationId=")
    assert f"within 1.0 s from {frozen.control_channel} stream 10" in message


# ---------------------------------------------------------------------------------------------
# The CLI (in-process through the tool's main)
# ---------------------------------------------------------------------------------------------

def run_tool(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = tool.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_recordings_prints_aeron_descriptors(sidecar: Sidecar, recorded: Recorded) -> None:
    code, out, err = run_tool("recordings", "--dir", str(sidecar.archive_dir))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    [row] = [r for r in rows if r["recordingId"] == recorded.recording_id]
    assert row["stopPosition"] == recorded.stop_position and row["streamId"] == recorded.stream_id
    assert list(row)[:3] == ["controlSessionId", "correlationId", "recordingId"]
    code, out, err = run_tool("recordings", "--control-channel", sidecar.control_channel,
                              "--aeron-dir", sidecar.driver_dir, "--recording-id", "777")
    assert (code, out) == (1, "") and "recording 777 is not in the archive" in err


def test_cli_replay_prints_every_message(sidecar: Sidecar, recorded: Recorded) -> None:
    middle = 150 * framed_length(SIZE)
    code, out, err = run_tool("replay", str(recorded.recording_id), "--position", str(middle),
                              "--dir", str(sidecar.archive_dir))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == MESSAGES - 150 and rows[0]["position"] == middle
    assert rows[-1]["nextPosition"] == recorded.stop_position
    assert digest_of([base64.b64decode(r["payload"]) for r in rows]) == expected_digest(150, 50, SIZE)


def test_cli_replay_over_udp_with_legacy_protocol(sidecar: Sidecar, recorded: Recorded) -> None:
    code, out, err = run_tool("replay", str(recorded.recording_id), "--length", str(3 * framed_length(SIZE)),
                              "--control-channel", sidecar.control_channel,
                              "--aeron-dir", sidecar.driver_dir, "--legacy")
    assert code == 0, err
    assert [json.loads(line)["position"] for line in out.splitlines()] == [0, 160, 320]


def test_cli_stat_lists_the_archive_counters(sidecar: Sidecar, recorded: Recorded) -> None:
    code, out, err = run_tool("stat", "--dir", str(sidecar.archive_dir), "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows and all(100 <= r["typeId"] <= 113 for r in rows)
    assert {"counterId", "value", "typeId", "label"} <= set(rows[0])
    code, out, err = run_tool("stat", "--dir", str(sidecar.archive_dir), "--json",
                              "--archive-id", sidecar.ready["archiveId"])
    assert code == 0 and len(out.splitlines()) == len(rows)
    code, out, err = run_tool("stat", "--dir", str(sidecar.archive_dir), "--archive-id", "98765")
    assert (code, out) == (0, "")
    code, text, err = run_tool("stat", "--aeron-dir", sidecar.driver_dir, "--all")
    assert code == 0, err
    assert len(text.splitlines()) > len(rows) and " - type " in text


def test_cli_errors_and_exit_codes(sidecar: Sidecar) -> None:
    code, _, err = run_tool("recordings", "--control-channel", udp(free_udp_port()),
                            "--aeron-dir", sidecar.driver_dir, "--timeout", "0.5")
    assert code == 3 and "did not connect within 0.5 s" in err
    code, _, err = run_tool("replay", "12345", "--dir", str(sidecar.archive_dir))
    assert code == 1 and "recording 12345 is not in the archive" in err
    code, _, err = run_tool("replay", "0", "--follow", "--length", "5", "--dir", str(sidecar.archive_dir))
    assert code == 2 and "--follow and --length" in err
    code, _, err = run_tool("stat", "--aeron-dir", "/nonexistent/aeron")
    assert code == 2 and "/nonexistent/aeron does not exist" in err
    code, _, err = run_tool("recordings", "--dir", "/nonexistent/archive")
    assert code == 1 and "cannot find the archive of /nonexistent/archive" in err


def _wait_until_stopped(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP is asynchronous: wait until the kernel shows the process stopped (state T)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop within {timeout} s")
