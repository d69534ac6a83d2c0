"""`aeron-archive replicate` run as a user runs it (its own process, ``--aeron-driver auto`` on a
host directory where no driver runs, so it embeds one), asking a REAL Java archive (the replica) to
replicate from another Java archive (the source):

* a stopped recording: exit 0, the signals as JSON lines in Java's order, progress lines on
  stderr, the final position equal to the source's stop position and a byte-exact replay;
* a live source followed until Ctrl-C: SIGINT (sent to the command's PID) stops the replication
  in the replica (exit 130, a valid prefix), and a second run with ``--dst-recording-id`` extends
  that prefix to the source's stop position once the source stopped.

Both archives, the command and the peer JVMs are real processes, each stopped by PID by the fixture
or test that started it.
"""

from __future__ import annotations

import functools
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
    NumberedPublisher,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.recording_lookup import recording_of as find_recording_of
from tests.support.waiting import wait_until as wait_for

SIZE = 100
FRAMED = framed_length(SIZE)
TIMEOUT_S = 30.0


@dataclass
class Pair:
    source: RunningModernJavaArchive
    replica: RunningModernJavaArchive
    source_client: ArchiveClient  # ours on the source's driver: publishes the live source
    replica_client: ArchiveClient  # ours on the replica's driver: watches the replica


@pytest.fixture(scope="module")
def pair(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    work: Path = tmp_path_factory.mktemp("replicate-command")
    with running_modern_java_archive(modern_peer, work / "source") as source, \
            running_modern_java_archive(modern_peer, work / "replica",
                                        replication_channel=udp_channel(free_udp_port())) as replica, \
            AeronClient(str(source.aeron_dir), client_name="replicate-command-source") as source_aeron, \
            AeronClient(str(replica.aeron_dir), client_name="replicate-command-replica") as replica_aeron, \
            ArchiveClient.connect(control_channel=source.control_channel, aeron=source_aeron,
                                  timeout=TIMEOUT_S) as source_client, \
            ArchiveClient.connect(control_channel=replica.control_channel, aeron=replica_aeron,
                                  timeout=TIMEOUT_S) as replica_client:
        yield Pair(source, replica, source_client, replica_client)


def command(pair: Pair, tmp_path: Path, *extra: str) -> list[str]:
    # A driver directory where none runs: --aeron-driver auto embeds one for the command.
    return [sys.executable, "-m", "aeron_spark.archive.cli.main", "replicate",
            "--control-channel", pair.replica.control_channel,
            "--src-control-channel", pair.source.control_channel, "--aeron-driver", "auto",
            "--aeron-dir", str(tmp_path / "no-driver-here"), "--timeout", str(TIMEOUT_S), *extra]


# The shared helpers with this file's timeout.
wait_until = functools.partial(wait_for, timeout=TIMEOUT_S, interval=0.01)
recording_of = functools.partial(find_recording_of, timeout=TIMEOUT_S)



def test_replicate_a_stopped_recording(pair: Pair, tmp_path: Path) -> None:
    recorded = pair.source.client.record(udp_channel(), 6101, 2000, SIZE)

    done = subprocess.run(command(pair, tmp_path, "--recording-id", str(recorded.recording_id),
                                  "--progress-interval", "0.05"),
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["event"] == "replication-started" and lines[-1]["event"] == "replicated"
    assert [line["signal"] for line in lines[1:-1]] == ["REPLICATE", "EXTEND", "SYNC", "REPLICATE_END", "STOP"]
    final = lines[-1]
    assert (final["position"], final["sourcePosition"], final["stopped"]) == \
        (recorded.stop_position, recorded.stop_position, False)
    replica_id = final["dstRecordingId"]
    descriptor = pair.replica_client.list_recording(replica_id)
    assert descriptor is not None and descriptor.stop_position == recorded.stop_position
    replayed = pair.replica.client.replay(replica_id, replay_channel=udp_channel(), replay_stream_id=6102)
    assert (replayed.messages, replayed.digest) == (2000, recorded.digest)


def test_ctrl_c_stops_a_live_replication_and_a_second_run_extends_it(pair: Pair, tmp_path: Path) -> None:
    source_client, replica_client = pair.source_client, pair.replica_client
    channel, stream_id = udp_channel(), 6111
    source_client.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = source_client.aeron.add_exclusive_publication(channel, stream_id)
    publisher = NumberedPublisher(publication, SIZE, TIMEOUT_S)

    def publish(count: int) -> int:
        end = publisher.publish(count)
        wait_until(lambda: source_client.recording_position(recording_id) >= end, "the source to record")
        return end

    try:
        wait_until(lambda: publication.is_connected, "the source's recording subscription")
        recording_id = recording_of(source_client, channel, stream_id, publication.session_id)
        first_end = publish(800)

        process = subprocess.Popen(command(pair, tmp_path, "--recording-id", str(recording_id),
                                           "--progress-interval", "0.1"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[dict] = queue.Queue()
        assert process.stdout is not None
        reader = threading.Thread(target=lambda: [lines.put(json.loads(text)) for text in process.stdout],
                                  daemon=True)
        reader.start()
        try:
            seen: list[dict] = []
            while not any(line.get("signal") == "EXTEND" for line in seen):
                seen.append(lines.get(timeout=TIMEOUT_S))
            replica_id = next(line["recordingId"] for line in seen if line.get("signal") == "EXTEND")
            wait_until(lambda: replica_client.recording_position(replica_id) >= first_end, "the replica to follow")
            time.sleep(0.5)  # the command reports progress while the replica follows the live source
            process.send_signal(signal.SIGINT)  # by the command's PID
            returncode = process.wait(timeout=TIMEOUT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        reader.join(timeout=TIMEOUT_S)
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
        while not lines.empty():
            seen.append(lines.get())

        assert returncode == 130, stderr
        assert f"interrupted: stopping replication {seen[0]['replicationId']}" in stderr
        assert f"-> recording {replica_id}:" in stderr  # progress lines while it followed
        assert seen[-1]["event"] == "replicated" and seen[-1]["stopped"] is True
        assert [line.get("signal") for line in seen[1:-1]] == ["REPLICATE", "EXTEND", "REPLICATE_END", "STOP"]
        prefix = replica_client.list_recording(replica_id)
        assert prefix is not None and prefix.stop_position == seen[-1]["position"] == first_end
        replayed = pair.replica.client.replay(replica_id, replay_channel=udp_channel(), replay_stream_id=6112)
        assert (replayed.messages, replayed.digest) == (800, expected_digest(0, 800, SIZE))

        publish(500)
    finally:
        publication.close()
    wait_until(lambda: source_client.stop_position(recording_id) == publisher.published * FRAMED, "the source to stop")

    # The source's replay publication of the stopped run lingers (5 s in Aeron) with the session id
    # the new replay needs: the source refuses the replay until it is gone, so run it again then.
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        resumed = subprocess.run(command(pair, tmp_path, "--recording-id", str(recording_id),
                                         "--dst-recording-id", str(replica_id), "--progress-interval", "0"),
                                 capture_output=True, text=True, timeout=120)
        if resumed.returncode == 0 or "clashing sessionId" not in resumed.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert resumed.returncode == 0, resumed.stderr
    signals = [json.loads(line).get("signal") for line in resumed.stdout.splitlines()]
    assert "REPLICATE" not in signals and signals[1] == "EXTEND"
    descriptor = replica_client.list_recording(replica_id)
    assert descriptor is not None and descriptor.stop_position == publisher.published * FRAMED
    replayed = pair.replica.client.replay(replica_id, replay_channel=udp_channel(), replay_stream_id=6113)
    assert (replayed.messages, replayed.digest) == (1300, expected_digest(0, 1300, SIZE))
