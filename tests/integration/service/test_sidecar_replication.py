"""Our sidecar as a replication destination, replicating from a second sidecar (both real processes,
each with its own embedded media driver; the test's driver publishes and requests over UDP).

Proven: a stopped recording is replicated (REPLICATE, EXTEND, SYNC, STOP, REPLICATE_END under the
replicationId), segment bytes and descriptor positions equal the source's and the replica replays
byte-exact; a replication up to a stop position leaves a prefix that a second replicate extends to
the end; StopReplication of a replication and of an unknown id; kill -9 of the source while a live
recording is being followed ends the replication with a report, the replica's catalog verifies and a
new replicate continues from where it stopped (onto a restarted source); kill -9 of the destination
while it follows: restarted, its catalog verifies and a new replicate continues from the recovered
stop position; a live destination merges (MERGE) and the replica goes on recording the live stream
with no gap and no duplicate.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode, RecordingSignal, SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.support.ports import free_udp_port, udp_channel
from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import Sidecar, running_sidecar
from tests.support.sidecar_streams import (
    RECORDED_STREAM,
    TERM,
    TIMEOUT,
    as_pairs,
    await_recorded,
    expected,
    payloads,
    publish,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

NULL = -1


def record_on(sidecar: Sidecar, aeron: AeronClient, messages: list[bytes], *, keep_open: bool = False):
    """Records ``messages`` published over UDP from the test's driver; returns (recording id,
    Published, publication or None, channel)."""
    channel = f"{udp_channel()}|term-length={TERM}"
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron, timeout=TIMEOUT) as archive:
        subscription_id = archive.start_recording(channel, RECORDED_STREAM, SourceLocation.REMOTE)
        publication = aeron.add_exclusive_publication(channel, RECORDED_STREAM)
        recording_id = archive.await_recording_signal(RecordingSignal.START,
                                                      subscription_id=subscription_id).recording_id
        published = publish(publication, messages)
        await_recorded(archive, recording_id, published.end)
        if keep_open:
            return recording_id, published, publication, channel
        archive.stop_recording(channel, RECORDED_STREAM)
        archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
    publication.close()
    return recording_id, published, None, channel


def replicate_request(src: Sidecar, src_recording_id: int, *, dst_recording_id: int = NULL,
                      stop_position: int = NULL):
    return lambda s, c: codecs.ReplicateRequest2(
        s, c, src_recording_id, dst_recording_id, stop_position, NULL, NULL, 10, NULL, NULL,
        src.control_channel, "", "", b"", "")


def signals_until_end(client: RawArchiveClient, replication_id: int, timeout: float = 60.0) -> list[tuple]:
    """(signal, position) of the replication's signals up to REPLICATE_END, and its ERRORs."""
    seen: list[tuple] = []
    while True:
        message = client.await_message(
            lambda m: getattr(m, "correlation_id", None) == replication_id
            and isinstance(m, (codecs.RecordingSignalEvent, codecs.ControlResponse)),
            "replication signal", timeout)
        if isinstance(message, codecs.ControlResponse):
            seen.append(("OK" if message.code == ControlResponseCode.OK else "ERROR", message.relevant_id))
            continue
        seen.append((RecordingSignal(message.signal).name, message.position, message.recording_id))
        if message.signal == RecordingSignal.REPLICATE_END:
            return seen


def segment_bytes(archive_dir: Path, recording_id: int) -> dict[str, bytes]:
    return {p.name.split("-", 1)[1]: p.read_bytes() for p in sorted(archive_dir.glob(f"{recording_id}-*.rec"))}


def descriptor_of(client: RawArchiveClient, recording_id: int):
    descriptors, _ = client.list_recordings()
    return next(d for d in descriptors if d.recording_id == recording_id)


def verify_catalog(archive_dir: Path) -> None:
    script = Path(sys.executable).parent / "aeron-archive"
    result = subprocess.run([str(script), "verify", "--dir", str(archive_dir)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def source(tmp_path: Path):
    with running_sidecar(tmp_path / "source") as sidecar:
        yield sidecar


@pytest.fixture
def destination(tmp_path: Path):
    with running_sidecar(tmp_path / "destination") as sidecar:
        yield sidecar


@pytest.fixture
def dst_client(destination: Sidecar, aeron_client: AeronClient):
    client = RawArchiveClient(aeron_client, destination.control_channel, 10)
    try:
        assert client.connect().code == ControlResponseCode.OK
        yield client
    finally:
        client.close_session()
        client.close()


def test_replicates_a_stopped_recording_byte_exact(source: Sidecar, destination: Sidecar, dst_client: RawArchiveClient,
                                                   aeron_client: AeronClient) -> None:
    src_id, published, _, _ = record_on(source, aeron_client, payloads(200, seed=11))
    answer = dst_client.call(replicate_request(source, src_id))
    assert answer.code == ControlResponseCode.OK, answer
    replication_id = answer.relevant_id
    signals = signals_until_end(dst_client, replication_id)
    names = [s[0] for s in signals]
    assert names == ["REPLICATE", "OK", "EXTEND", "SYNC", "STOP", "REPLICATE_END"], signals
    dst_id = signals[0][2]
    assert signals[0][1] == 0 and signals[2][1] == 0  # REPLICATE and EXTEND at the source start
    assert signals[3][1] == published.end and signals[4][1] == published.end

    dst = descriptor_of(dst_client, dst_id)
    with ArchiveClient.connect(control_channel=source.control_channel, aeron=aeron_client, timeout=TIMEOUT) as src:
        [src_descriptor] = [d for d in src.list_recordings() if d.recording_id == src_id]
    for name in ("start_position", "stop_position", "initial_term_id", "term_buffer_length", "mtu_length",
                 "segment_file_length", "session_id", "stream_id", "original_channel", "start_timestamp"):
        assert getattr(dst, name) == getattr(src_descriptor, name), name
    assert segment_bytes(destination.archive_dir, dst_id) == segment_bytes(source.archive_dir, src_id)

    with ArchiveClient.connect(control_channel=destination.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT) as replica:
        with replica.replay(dst_id, 0, published.end, udp_channel(), 2001) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)
    verify_catalog(destination.archive_dir)


def test_stop_position_prefix_then_a_second_replicate_extends_it(source: Sidecar, destination: Sidecar,
                                                                 dst_client: RawArchiveClient,
                                                                 aeron_client: AeronClient) -> None:
    src_id, published, _, _ = record_on(source, aeron_client, payloads(200, seed=12))
    middle = published.starts[100]
    replication_id = dst_client.call(replicate_request(source, src_id, stop_position=middle)).relevant_id
    signals = signals_until_end(dst_client, replication_id)
    assert [s[0] for s in signals] == ["REPLICATE", "OK", "EXTEND", "STOP", "REPLICATE_END"], signals
    dst_id = signals[0][2]
    assert descriptor_of(dst_client, dst_id).stop_position == middle
    verify_catalog(destination.archive_dir)

    replication_id = dst_client.call(replicate_request(source, src_id, dst_recording_id=dst_id)).relevant_id
    signals = signals_until_end(dst_client, replication_id)
    assert [s[0] for s in signals] == ["OK", "EXTEND", "SYNC", "STOP", "REPLICATE_END"], signals
    assert signals[1][1] == middle
    assert descriptor_of(dst_client, dst_id).stop_position == published.end
    assert segment_bytes(destination.archive_dir, dst_id) == segment_bytes(source.archive_dir, src_id)

    # in sync already: SYNC and REPLICATE_END, nothing recorded
    replication_id = dst_client.call(replicate_request(source, src_id, dst_recording_id=dst_id)).relevant_id
    assert [s[0] for s in signals_until_end(dst_client, replication_id)] == ["SYNC", "REPLICATE_END"]


def test_refusals_name_the_problem(source: Sidecar, dst_client: RawArchiveClient, aeron_client: AeronClient) -> None:
    answer = dst_client.call(lambda s, c: codecs.StopReplicationRequest(s, c, 42))
    assert (answer.code, answer.relevant_id) == (ControlResponseCode.ERROR, ArchiveErrorCode.UNKNOWN_REPLICATION)
    answer = dst_client.call(replicate_request(source, 0, dst_recording_id=77))
    assert (answer.code, answer.relevant_id) == (ControlResponseCode.ERROR, ArchiveErrorCode.UNKNOWN_RECORDING)
    answer = dst_client.call(lambda s, c: codecs.ReplicateRequest2(
        s, c, 0, NULL, NULL, NULL, NULL, 10, NULL, NULL, source.control_channel, "", "aeron:udp?endpoint=localhost:0",
        b"", "aeron:udp?control-mode=response|control=localhost:20998"))
    assert answer.code == ControlResponseCode.ERROR and "srcResponseChannel" in answer.error_message
    # a live destination needs an active source recording (Aeron's error, after REPLICATE)
    src_id, _, _, _ = record_on(source, aeron_client, payloads(10, seed=20))
    replication_id = dst_client.call(lambda s, c: codecs.ReplicateRequest(
        s, c, src_id, NULL, 10, source.control_channel, "aeron:udp?endpoint=localhost:20999")).relevant_id
    signals = signals_until_end(dst_client, replication_id)
    assert [s[0] for s in signals] == ["REPLICATE", "ERROR", "REPLICATE_END"], signals
    # an unknown source recording: OK, then ERROR 5 and REPLICATE_END under the replicationId
    replication_id = dst_client.call(replicate_request(source, 999)).relevant_id
    signals = signals_until_end(dst_client, replication_id)
    assert signals == [("ERROR", ArchiveErrorCode.UNKNOWN_RECORDING), ("REPLICATE_END", NULL, NULL)]


def test_unreachable_source_is_replication_connection_failure(dst_client: RawArchiveClient) -> None:
    nobody = Sidecar(Path("/nonexistent"))  # never started: only its free control port is used
    replication_id = dst_client.call(replicate_request(nobody, 0)).relevant_id
    signals = signals_until_end(dst_client, replication_id, timeout=30)
    assert signals[0] == ("ERROR", ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE), signals
    assert signals[-1][0] == "REPLICATE_END"


def test_live_follow_stop_replication_and_kill_of_the_source(tmp_path: Path, destination: Sidecar,
                                                             dst_client: RawArchiveClient,
                                                             aeron_client: AeronClient) -> None:
    source = Sidecar(tmp_path / "source").start()
    try:
        src_id, first, publication, channel = record_on(source, aeron_client, payloads(100, seed=13), keep_open=True)
        # follow the live recording, then stop the replication: a valid prefix remains
        replication_id = dst_client.call(replicate_request(source, src_id)).relevant_id
        extend = dst_client.await_signal(RecordingSignal.EXTEND)
        dst_id = extend.recording_id
        more = publish(publication, payloads(100, seed=14, start=100), first.end)
        wait_until(lambda: _recorded(dst_client, dst_id) >= more.end, "replica to follow the live source", TIMEOUT)
        answer = dst_client.call(lambda s, c: codecs.StopReplicationRequest(s, c, replication_id))
        assert answer.code == ControlResponseCode.OK
        names = [s[0] for s in signals_until_end(dst_client, replication_id)]
        assert names[-2:] == ["STOP", "REPLICATE_END"], names
        prefix = descriptor_of(dst_client, dst_id).stop_position
        assert prefix == more.end
        verify_catalog(destination.archive_dir)  # the prefix is valid (read-only, the replica running)

        # follow again from the prefix, then kill -9 the source mid-replication
        replication_id = dst_client.call(replicate_request(source, src_id, dst_recording_id=dst_id)).relevant_id
        dst_client.await_signal(RecordingSignal.EXTEND)
        later = publish(publication, payloads(50, seed=15, start=200), more.end)
        wait_until(lambda: _recorded(dst_client, dst_id) >= later.end, "replica to follow again", TIMEOUT)
        source.kill()
        signals = signals_until_end(dst_client, replication_id, timeout=60)
        # reported: ERROR 14 (the source connection lost), then the recording's STOP, REPLICATE_END last
        assert [s[0] for s in signals if s[0] != "OK"] == ["ERROR", "STOP", "REPLICATE_END"], signals
        assert ("ERROR", ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE) in signals
        reached = descriptor_of(dst_client, dst_id).stop_position
        assert reached == later.end
        publication.close()
    finally:
        source.terminate()
        source.kill()
    verify_catalog(destination.archive_dir)

    # the source restarted on its archive (its crashed recording recovered): a new replicate continues
    with running_sidecar(source.archive_dir) as restarted:
        replication_id = dst_client.call(replicate_request(restarted, src_id, dst_recording_id=dst_id)).relevant_id
        signals = signals_until_end(dst_client, replication_id)
        assert signals[-1][0] == "REPLICATE_END" and "ERROR" not in [s[0] for s in signals], signals
        with ArchiveClient.connect(control_channel=restarted.control_channel, aeron=aeron_client,
                                   timeout=TIMEOUT) as src:
            [src_descriptor] = [d for d in src.list_recordings() if d.recording_id == src_id]
        assert descriptor_of(dst_client, dst_id).stop_position == src_descriptor.stop_position
        assert segment_bytes(destination.archive_dir, dst_id) == segment_bytes(restarted.archive_dir, src_id)
    verify_catalog(destination.archive_dir)


def _recorded(client: RawArchiveClient, recording_id: int) -> int:
    answer = client.call(lambda s, c: codecs.MaxRecordedPositionRequest(s, c, recording_id))
    return answer.relevant_id


def test_kill_of_the_destination_mid_replication_then_a_new_replicate_continues(
        tmp_path: Path, source: Sidecar, aeron_client: AeronClient) -> None:
    """kill -9 of the replica while it follows a live source: restarted on its directory, its catalog
    verifies (the crashed recording recovered to a frame boundary), and a new replicate into the
    same recording continues from there to the source's end, byte-equal."""
    src_id, first, publication, channel = record_on(source, aeron_client, payloads(100, seed=21), keep_open=True)
    replica_dir = tmp_path / "replica"
    replica = Sidecar(replica_dir).start()
    try:
        client = RawArchiveClient(aeron_client, replica.control_channel, 10)
        try:
            assert client.connect().code == ControlResponseCode.OK
            client.call(replicate_request(source, src_id))
            dst_id = client.await_signal(RecordingSignal.EXTEND).recording_id
            more = publish(publication, payloads(100, seed=22, start=100), first.end)
            wait_until(lambda: _recorded(client, dst_id) >= more.end, "replica to follow the live source", TIMEOUT)
        finally:
            client.close()
        replica.kill()
    finally:
        replica.terminate()
        replica.kill()
    verify_catalog(replica_dir)

    with running_sidecar(replica_dir) as restarted:
        client = RawArchiveClient(aeron_client, restarted.control_channel, 10)
        try:
            assert client.connect().code == ControlResponseCode.OK
            recovered = descriptor_of(client, dst_id).stop_position
            assert 0 < recovered <= more.end
            replication_id = client.call(replicate_request(source, src_id, dst_recording_id=dst_id)).relevant_id
            extend = client.await_signal(RecordingSignal.EXTEND)
            assert extend.position == recovered
            last = publish(publication, payloads(50, seed=23, start=200), more.end)
            wait_until(lambda: _recorded(client, dst_id) >= last.end, "replica to follow again", TIMEOUT)
            publication.close()  # the publisher stops: the source recording ends, the replay ends
            signals = signals_until_end(client, replication_id)
            assert [s[0] for s in signals if s[0] != "OK"][-2:] == ["STOP", "REPLICATE_END"], signals
            assert descriptor_of(client, dst_id).stop_position == last.end
        finally:
            client.close_session()
            client.close()
        with ArchiveClient.connect(control_channel=source.control_channel, aeron=aeron_client, timeout=TIMEOUT) as src:
            wait_until(lambda: src.stop_position(src_id) == last.end, "the source recording to stop", TIMEOUT)
        assert segment_bytes(restarted.archive_dir, dst_id) == segment_bytes(source.archive_dir, src_id)
    verify_catalog(replica_dir)


def test_live_destination_merges_into_the_live_stream_with_no_gap_and_no_duplicate(
        source: Sidecar, destination: Sidecar, dst_client: RawArchiveClient, aeron_client: AeronClient) -> None:
    """The source records a dynamic-MDC live stream; our replica replicates it with a live destination
    on the same stream: it replays, catches up, adds the live destination, drops the replay (MERGE,
    REPLICATE_END) and goes on recording the live stream alone. When the publisher stops, the replica
    stops where the source stops, and its segments equal the source's byte for byte."""
    control_port = free_udp_port()
    live = f"aeron:udp?control=localhost:{control_port}|control-mode=dynamic|term-length={TERM}"
    publication = aeron_client.add_exclusive_publication(live, RECORDED_STREAM)
    recording_channel = (f"aeron:udp?endpoint=localhost:0|control=localhost:{control_port}"
                         f"|session-id={publication.session_id}")
    try:
        with ArchiveClient.connect(control_channel=source.control_channel, aeron=aeron_client,
                                   timeout=TIMEOUT) as src:
            subscription_id = src.start_recording(recording_channel, RECORDED_STREAM, SourceLocation.REMOTE)
            src_id = src.await_recording_signal(RecordingSignal.START, subscription_id=subscription_id).recording_id
            published = publish(publication, payloads(300, seed=31))
            await_recorded(src, src_id, published.end)
            live_destination = f"aeron:udp?endpoint=localhost:0|control=localhost:{control_port}"
            replication_id = dst_client.call(lambda s, c: codecs.ReplicateRequest2(
                s, c, src_id, NULL, NULL, NULL, NULL, 10, NULL, NULL, source.control_channel, live_destination,
                "", b"", "")).relevant_id
            messages = list(published.messages)
            signals: list[tuple] = []
            index = 300
            deadline = time.monotonic() + 60
            while not signals or signals[-1][0] != "REPLICATE_END":
                assert time.monotonic() < deadline, f"no merge: {signals}"
                message = payloads(1, seed=32 + index, start=index)[0][:200]
                publication.offer_with_retry(message, timeout=TIMEOUT)
                messages.append(message)
                index += 1
                for event in dst_client.drain(0.002):
                    if isinstance(event, codecs.RecordingSignalEvent) and event.correlation_id == replication_id:
                        signals.append((RecordingSignal(event.signal).name, event.position, event.recording_id))
                    elif isinstance(event, codecs.ControlResponse) and event.correlation_id == replication_id:
                        assert event.code == ControlResponseCode.OK, event
            assert [s[0] for s in signals] == ["REPLICATE", "EXTEND", "MERGE", "REPLICATE_END"], signals
            dst_id = signals[0][2]
            for extra in range(100):  # the replica goes on with the live stream alone
                message = payloads(1, seed=99, start=index + extra)[0][:200]
                publication.offer_with_retry(message, timeout=TIMEOUT)
                messages.append(message)
            end = publication.position
            await_recorded(src, src_id, end)
            wait_until(lambda: _recorded(dst_client, dst_id) >= end, "the merged replica to record live", TIMEOUT)
            publication.close()
            stop = dst_client.await_signal(RecordingSignal.STOP, recording_id=dst_id, timeout=30)
            assert stop.correlation_id == replication_id and stop.position == end
            wait_until(lambda: src.stop_position(src_id) == end, "the source recording to stop", TIMEOUT)
    finally:
        publication.close()
    assert descriptor_of(dst_client, dst_id).stop_position == end
    assert segment_bytes(destination.archive_dir, dst_id) == segment_bytes(source.archive_dir, src_id)
    with ArchiveClient.connect(control_channel=destination.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT) as replica:
        with replica.replay(dst_id, 0, end, udp_channel(), 2003) as replay:
            assert [bytes(m.payload) for m in replay.messages(idle_timeout=TIMEOUT)] == messages


def test_a_replica_shut_down_mid_replication_exits_cleanly_and_verifies(
        tmp_path: Path, source: Sidecar, aeron_client: AeronClient) -> None:
    """SIGTERM of the replica while it follows a live source: it stops the replication (its
    recording stopped, the source connection closed), exits 0, and its catalog verifies."""
    src_id, first, publication, _ = record_on(source, aeron_client, payloads(50, seed=41), keep_open=True)
    replica = Sidecar(tmp_path / "replica").start()
    try:
        client = RawArchiveClient(aeron_client, replica.control_channel, 10)
        try:
            assert client.connect().code == ControlResponseCode.OK
            client.call(replicate_request(source, src_id))
            dst_id = client.await_signal(RecordingSignal.EXTEND).recording_id
            wait_until(lambda: _recorded(client, dst_id) >= first.end, "replica to follow", TIMEOUT)
        finally:
            client.close()
        assert replica.terminate() == 0, replica.log_tail()
    finally:
        replica.kill()
        publication.close()
    verify_catalog(tmp_path / "replica")


@pytest.mark.parametrize("request_name", ["ReplicateRequest", "TaggedReplicateRequest"])
def test_the_older_replicate_requests_replicate_too(source: Sidecar, destination: Sidecar,
                                                    dst_client: RawArchiveClient, aeron_client: AeronClient,
                                                    request_name: str) -> None:
    """ReplicateRequest (50) and TaggedReplicateRequest (62) run as ReplicateRequest2 without stop
    position, replication channel or credentials; the tags go on the replication subscription."""
    src_id, published, _, _ = record_on(source, aeron_client, payloads(60, seed=51))
    if request_name == "ReplicateRequest":
        factory: Any = lambda s, c: codecs.ReplicateRequest(  # noqa: E731
            s, c, src_id, NULL, 10, source.control_channel, "")
    else:
        factory = lambda s, c: codecs.TaggedReplicateRequest(  # noqa: E731
            s, c, src_id, NULL, 9001, 9002, 10, source.control_channel, "")
    replication_id = dst_client.call(factory).relevant_id
    signals = signals_until_end(dst_client, replication_id)
    assert [s[0] for s in signals] == ["REPLICATE", "OK", "EXTEND", "SYNC", "STOP", "REPLICATE_END"], signals
    dst_id = signals[0][2]
    assert segment_bytes(destination.archive_dir, dst_id) == segment_bytes(source.archive_dir, src_id)
    if request_name == "TaggedReplicateRequest":
        assert any("tags=9001,9002" in line for line in destination.stderr_lines)
