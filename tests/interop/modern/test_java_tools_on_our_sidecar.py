"""Java tools users already run against our sidecar, kept working with real processes:

* the Java 1.51 client's ``ReplayMerge`` (the peer's ``replay-merge``): our sidecar records a live
  dynamic-MDC stream; the merge replays it (Replay with an unbounded length, MaxRecordedPosition
  (67), StopReplay through our sidecar) and joins the live stream with no gap;
* a Java 1.51 **archive replicating a recording from our sidecar** (the peer's ``replicate``: the
  Java archive is the destination, so the client sends ReplicateRequest2 to it; it then connects to
  our sidecar as a client over UDP, lists the recording, replays it to its replication channel and
  records it): a stopped recording, an ACTIVE recording followed while more is published, and a
  replication up to a given ``stopPosition``.

Our sidecar, the Java archive and every peer JVM are real processes; each is stopped by PID by the
fixture or call that started it, also when a test fails. See docs/interop.md, "Java tools on our
sidecar: ReplayMerge and replication from it".
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    RunningModernJavaArchive,
    expected_digest,
    framed_length,
    payloads,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.sidecar import Sidecar, running_sidecar

SIZE = 100
FRAMED = framed_length(SIZE)  # 160
TIMEOUT_S = 30.0
#: Descriptor fields a replica must share with its source.
REPLICATED_FIELDS = ("startPosition", "stopPosition", "streamId", "termBufferLength", "segmentFileLength",
                     "mtuLength", "initialTermId", "sessionId")


@dataclass(frozen=True)
class Archives:
    sidecar: Sidecar
    on_sidecar: ModernPeerClient  # the Java client, own embedded Java driver, UDP control to our sidecar
    java: RunningModernJavaArchive  # the replication destination (its own Java driver)


@pytest.fixture(scope="module")
def archives(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archives]:
    work: Path = tmp_path_factory.mktemp("java-tools-on-our-sidecar")
    # The Java archive's replication channel: a fixed localhost UDP port our sidecar replays to.
    with running_sidecar(work / "sidecar") as sidecar, \
            running_modern_java_archive(modern_peer, work / "java",
                                        replication_channel=udp_channel(free_udp_port())) as java:
        on_sidecar = ModernPeerClient(modern_peer, ModernArchiveEndpoint(control_channel=sidecar.control_channel),
                                      timeout=60.0)
        yield Archives(sidecar, on_sidecar, java)


@pytest.fixture(scope="module")
def ours(archives: Archives) -> Iterator[ArchiveClient]:
    """Our client on the sidecar's own driver: it publishes the streams the sidecar records live."""
    with AeronClient(archives.sidecar.driver_dir, client_name="java-tools-test") as aeron, \
            ArchiveClient.connect(control_channel=archives.sidecar.control_channel, aeron=aeron,
                                  timeout=TIMEOUT_S) as client:
        yield client


def wait_until(condition, what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def descriptor(client: ModernPeerClient, recording_id: int) -> dict[str, Any]:
    (found,) = client.list_recordings(recording_id=recording_id)
    return found


def replayed_digest(client: ModernPeerClient, recording_id: int, stream_id: int) -> tuple[int, str]:
    replay = client.replay(recording_id, replay_channel=udp_channel(free_udp_port()), replay_stream_id=stream_id)
    return replay.messages, replay.digest


# ---------------------------------------------------------------------------------------------
# ReplayMerge


@pytest.mark.parametrize(("messages", "live_messages"), [(2000, 0), (2000, 1500)],
                         ids=["recorded-only", "published-during-replay"])
def test_java_replay_merge_on_our_sidecar_merges_with_every_message_once(
        archives: Archives, messages: int, live_messages: int) -> None:
    live = f"aeron:udp?control=localhost:{free_udp_port()}|control-mode=dynamic"
    merged = archives.on_sidecar.replay_merge(live, 3001, messages, live_messages, SIZE, timeout_ms=20_000)

    assert merged.merged and merged.fields["liveAdded"]
    assert merged.states[-1] == "MERGED"
    # GET_RECORDING_POSITION is answered by MaxRecordedPosition (67) from our sidecar.
    assert {"GET_RECORDING_POSITION", "REPLAY", "CATCHUP", "ATTEMPT_LIVE_JOIN"} <= set(merged.states)
    total = messages + live_messages
    # Every message once and in order: the digest over indices 0..total-1 in order, and the count.
    assert (merged.messages, merged.first_index, merged.last_index) == (total, 0, total - 1)
    assert merged.digest == expected_digest(0, total, SIZE)
    assert merged.fields["lastPosition"] == merged.fields["publicationPosition"] == total * FRAMED
    # Having merged, the client removed the replay destination and sent StopReplay: our sidecar
    # ended the merge's (unbounded) replay for that request.
    stopped = re.compile(rf"replay \d+ of recording {merged.recording_id} ended: stop replay")
    wait_until(lambda: any(stopped.search(line) for line in archives.sidecar.stderr_lines),
               "the sidecar to end the merge's replay on StopReplay")
    # The sidecar recorded the whole live stream too (the command stops the recording at the end).
    source = archives.on_sidecar.positions(merged.recording_id)
    assert source.stop_position == total * FRAMED


# ---------------------------------------------------------------------------------------------
# A Java 1.51 archive replicating from our sidecar


def test_java_archive_replicates_a_stopped_recording_from_our_sidecar(archives: Archives) -> None:
    recorded = archives.on_sidecar.record(udp_channel(free_udp_port()), 4001, 1000, SIZE)
    assert recorded.stop_position == 1000 * FRAMED

    result = archives.java.client.replicate(recorded.recording_id, archives.sidecar.control_channel)

    assert result.signal_names[0] == "REPLICATE" and result.signal_names[-1] == "REPLICATE_END"
    assert "EXTEND" in result.signal_names
    sync = [s for s in result.signals if s["signal"] == "SYNC"]
    assert [s["position"] for s in sync] == [recorded.stop_position]
    source = descriptor(archives.on_sidecar, recorded.recording_id)
    replica = descriptor(archives.java.client, result.dst_recording_id)
    assert {f: replica[f] for f in REPLICATED_FIELDS} == {f: source[f] for f in REPLICATED_FIELDS}
    assert replayed_digest(archives.java.client, result.dst_recording_id, 4002) == \
        replayed_digest(archives.on_sidecar, recorded.recording_id, 4003) == (1000, recorded.digest)


def test_java_archive_replicates_up_to_a_stop_position(archives: Archives) -> None:
    recorded = archives.on_sidecar.record(udp_channel(free_udp_port()), 4011, 1000, SIZE)
    stop_position = 600 * FRAMED

    result = archives.java.client.replicate(recorded.recording_id, archives.sidecar.control_channel,
                                            stop_position=stop_position)

    assert result.signal_names[0] == "REPLICATE" and result.signal_names[-1] == "REPLICATE_END"
    replica = descriptor(archives.java.client, result.dst_recording_id)
    assert (replica["startPosition"], replica["stopPosition"]) == (0, stop_position)
    assert replayed_digest(archives.java.client, result.dst_recording_id, 4012) == \
        (600, expected_digest(0, 600, SIZE))


def test_java_archive_follows_an_active_recording_on_our_sidecar(archives: Archives, ours: ArchiveClient) -> None:
    channel, stream_id = f"{udp_channel(free_udp_port())}|term-length=65536", 4021
    counts = (800, 600, 600)  # before the replication, while it follows, then the rest
    ours.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = ours.aeron.add_exclusive_publication(channel, stream_id)
    ends: list[int] = []  # publication position after each batch (64 KiB terms end in padding)

    def publish(batch: int) -> None:
        for payload in payloads(sum(counts[:batch]), counts[batch], SIZE):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT_S)
        ends.append(publication.position)
        wait_until(lambda: ours.recording_position(recording_id) >= ends[-1], f"batch {batch} recorded")

    try:
        wait_until(lambda: publication.is_connected, "the sidecar's recording subscription to connect")
        recording_id = ours.find_last_matching_recording(0, channel, stream_id, publication.session_id)
        publish(0)
        followed: dict[str, Any] = {}

        def follow_then_stop(signal: dict[str, Any]) -> None:
            # EXTEND: the Java archive recorded locally and asked our sidecar for a replay that
            # follows the ACTIVE source. Publish more; once the replica has it (the source still
            # active), publish the rest and stop the source recording.
            if signal["signal"] != "EXTEND" or followed:
                return
            publish(1)
            replica = archives.java.client
            wait_until(lambda: replica.positions(signal["recordingId"]).recording_position >= ends[1],
                       "the replica to follow the live source")
            followed["sourceActive"] = ours.stop_position(recording_id) == -1
            publish(2)
            ours.stop_recording(channel, stream_id)

        result = archives.java.client.replicate(recording_id, archives.sidecar.control_channel,
                                                on_signal=follow_then_stop)
    finally:
        publication.close()

    total = sum(counts)
    assert followed == {"sourceActive": True}
    assert ends[0] < ends[1] < ends[2]
    # No SYNC: Java signals it when the replica reaches a source stop position known at the start.
    assert result.signal_names == ["REPLICATE", "EXTEND", "REPLICATE_END"]
    wait_until(lambda: ours.stop_position(recording_id) == ends[2], "the source recording to stop")
    source = descriptor(archives.on_sidecar, recording_id)
    replica = descriptor(archives.java.client, result.dst_recording_id)
    # The replica caught up with the source after it stopped: the same stop position.
    assert replica["stopPosition"] == source["stopPosition"] == ends[2]
    assert {f: replica[f] for f in REPLICATED_FIELDS} == {f: source[f] for f in REPLICATED_FIELDS}
    assert replayed_digest(archives.java.client, result.dst_recording_id, 4022) == \
        replayed_digest(archives.on_sidecar, recording_id, 4023) == (total, expected_digest(0, total, SIZE))
