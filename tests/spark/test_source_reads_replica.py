"""The analytics replica read by Spark (docs/deployment.md, "The analytics replica"): a production
archive (the source, a real Java archive) records a live stream; a second archive (the replica)
replicates that recording while it is being recorded; a Spark streaming query reading the REPLICA,
started while the replication runs, ends with exactly the source's rows: every message once, in
order, byte for byte, up to the source's stop position. And the source's data-loss rules hold on a
replica that is re-synchronised: truncated below what a query has read (an operator cutting a
replica back), it is reported as data loss (failOnDataLoss=true fails the query naming it), and with
failOnDataLoss=false the query goes on once a new replicate has extended the replica again, still
reading every message once.

The replica archive is a parameter of the test: the real Java archive (Aeron 1.51, its own Java
media driver; Spark's workers reach it over UDP and, not sharing its driver, read the growing
replica's position with RecordingPosition requests), and our sidecar (which replicates from the Java
source as Aeron's ReplicationSession does).

Every archive and peer JVM is a real process, stopped by PID by the fixture that started it.
"""

from __future__ import annotations

import functools
import contextlib
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, RecordingSignal
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    RunningModernJavaArchive,
    ensure_modern_peer_built,
    expected_digest,
    framed_length,
    NumberedPublisher,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.recording_lookup import recording_of as find_recording_of
from tests.support.waiting import wait_until as wait_for
from tests.support.sidecar import running_sidecar

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SIZE = 200
FRAMED = framed_length(SIZE)
TIMEOUT_S = 30.0
WAIT_S = 90.0
#: The archives that serve as the replica in this test.
REPLICA_KINDS = ["java", "sidecar"]
BATCHES = (1_000, 1_500, 500)  # before the query starts, while it runs, then the last before the source stops


@dataclass
class Replica:
    kind: str
    control_channel: str
    client: ArchiveClient  # ours, on the replica's own driver


@contextlib.contextmanager
def running_replica(kind: str, work: Path) -> Iterator[Replica]:
    """The replica archive of ``kind`` with our client on its driver; stopped by PID on exit."""
    if kind == "java":
        with running_modern_java_archive(ensure_modern_peer_built(), work,
                                         replication_channel=udp_channel(free_udp_port())) as java:
            with AeronClient(str(java.aeron_dir), client_name="replica-test") as aeron, \
                    ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron,
                                          timeout=TIMEOUT_S) as client:
                yield Replica(kind, java.control_channel, client)
    elif kind == "sidecar":
        with running_sidecar(work / "archive") as sidecar, \
                AeronClient(sidecar.driver_dir, client_name="replica-test") as aeron, \
                ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                      timeout=TIMEOUT_S) as client:
            yield Replica(kind, sidecar.control_channel, client)
    else:
        raise ValueError(f"replica kind {kind!r} is invalid: expected one of {REPLICA_KINDS}")


@dataclass
class Source:
    java: RunningModernJavaArchive
    client: ArchiveClient  # ours, on the source's driver: records and publishes the live stream


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    with running_modern_java_archive(ensure_modern_peer_built(), tmp_path_factory.mktemp("replica-source")) as java, \
            AeronClient(str(java.aeron_dir), client_name="replica-source-test") as aeron, \
            ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron, timeout=TIMEOUT_S) as client:
        yield Source(java, client)


@pytest.fixture(params=REPLICA_KINDS)
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    with running_replica(request.param, tmp_path / f"replica-{request.param}") as running:
        yield running


# The shared helpers with this file's timeout.
wait_until = functools.partial(wait_for, timeout=WAIT_S, interval=0.01)
recording_of = functools.partial(find_recording_of, timeout=WAIT_S)



def rows_of(spark, table: str) -> list[tuple[int, int, bytes]]:
    return sorted((r.recording_id, r.position, bytes(r.payload))
                  for r in spark.table(table).select("recording_id", "position", "payload").collect())


def test_a_streaming_query_on_the_replica_reads_exactly_the_source(spark_source, source: Source, replica: Replica,
                                                                   tmp_path: Path) -> None:
    channel, stream_id = udp_channel(), 7101
    source.client.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = source.client.aeron.add_exclusive_publication(channel, stream_id)
    publisher = NumberedPublisher(publication, SIZE, TIMEOUT_S)
    publish = publisher.publish

    table = f"replica_rows_{replica.kind}"
    query = None
    try:
        wait_until(lambda: publication.is_connected, "the source's recording subscription")
        recording_id = recording_of(source.client, channel, stream_id, publication.session_id)
        publish(BATCHES[0])

        # The replica follows the ACTIVE source recording (no stop position).
        replication_id = replica.client.replicate(recording_id, source.java.control_channel)
        started = list(replica.client.await_replication(replication_id, until=("EXTEND",), timeout=TIMEOUT_S))
        assert [s.signal for s in started] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND]
        replica_id = started[0].recording_id

        checkpoint = tmp_path / "chk"
        query = (spark_source.readStream.format("aeron-archive")
                 .options(**{"archive.controlChannel": replica.control_channel},
                          channel=channel.split("?")[1], streamId=str(stream_id), startingPositions="earliest",
                          discoveryIntervalMs="200", maxBytesPerPartition="64k",
                          checkpointLocation=str(checkpoint))
                 .load().writeStream.format("memory").queryName(table)
                 .option("checkpointLocation", str(checkpoint)).trigger(processingTime="200 milliseconds").start())
        wait_until(lambda: len(rows_of(spark_source, table)) > 0 or query.exception() is not None,
                   "the query's first rows from the replica")
        assert replica.client.stop_position(replica_id) == -1  # still replicating while the query reads
        publish(BATCHES[1])
        publish(BATCHES[2])
    finally:
        publication.close()
    total = sum(BATCHES)
    try:
        wait_until(lambda: source.client.stop_position(recording_id) == total * FRAMED, "the source to stop")
        ended = list(replica.client.await_replication(replication_id, until=("REPLICATE_END",), timeout=WAIT_S))
        assert ended[-1].signal == RecordingSignal.REPLICATE_END
        wait_until(lambda: replica.client.stop_position(replica_id) == total * FRAMED,
                   "the replica to stop at the source's stop position")

        def all_rows_or_failure() -> bool:
            assert query.exception() is None, f"the query failed: {query.exception()}"
            return len(rows_of(spark_source, table)) >= total
        wait_until(all_rows_or_failure, f"{total} rows from the replica")
        query.processAllAvailable()  # nothing more may come: no duplicates after the end either
        rows = rows_of(spark_source, table)
    finally:
        query.stop()

    assert query.exception() is None
    assert {row[0] for row in rows} == {replica_id}  # the replica's recording, its id in the replica
    assert len(rows) == total, f"{len(rows)} rows, expected {total}"
    positions = [row[1] for row in rows]
    assert positions == [(index + 1) * FRAMED for index in range(total)]  # each message once, in order
    indices = [int(np.frombuffer(row[2][:8], dtype="<i8")[0]) for row in rows]
    assert indices == list(range(total))
    digest = hashlib.sha256(b"".join(row[2] for row in rows)).hexdigest()
    assert digest == expected_digest(0, total, SIZE)  # byte for byte the source's payloads


# ---------------------------------------------------------------------------------------------
# A replica re-synchronised: stopped, truncated below what the query read, replicated again


def replicate_again(replica: Replica, recording_id: int, source_channel: str, replica_id: int) -> None:
    """Extends ``replica_id`` from its stop position to the source's end. The source's replay
    publication of the previous replication lingers (5 s in Aeron) with the session id the new
    replay needs; the source refuses the replay until it is gone, so it is asked again then."""
    deadline = time.monotonic() + WAIT_S
    while True:
        replication_id = replica.client.replicate(recording_id, source_channel, dst_recording_id=replica_id)
        try:
            ended = list(replica.client.await_replication(replication_id, until=("REPLICATE_END",), timeout=WAIT_S))
        except ArchiveError as error:
            if "clashing sessionId" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
            continue
        assert ended[0].signal == RecordingSignal.EXTEND and ended[-1].signal == RecordingSignal.REPLICATE_END
        return


@pytest.mark.parametrize("fail_on_data_loss", [True, False], ids=["failOnDataLoss", "skip-lost-ranges"])
def test_a_replica_truncated_below_what_the_query_read_follows_the_data_loss_rules(
        spark_source, source: Source, replica: Replica, tmp_path: Path, fail_on_data_loss: bool) -> None:
    channel, stream_id = udp_channel(), 7111 if fail_on_data_loss else 7112
    source.client.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = source.client.aeron.add_exclusive_publication(channel, stream_id)
    publisher = NumberedPublisher(publication, SIZE, TIMEOUT_S)
    publish = publisher.publish

    table = f"replica_resync_{replica.kind}_{'fail' if fail_on_data_loss else 'skip'}"
    query = None
    try:
        wait_until(lambda: publication.is_connected, "the source's recording subscription")
        recording_id = recording_of(source.client, channel, stream_id, publication.session_id)
        publish(1_000)
        read_end = 1_000 * FRAMED
        wait_until(lambda: source.client.recording_position(recording_id) >= read_end, "the source to record")
        # The replica follows the live source, then its replication is stopped: a stopped prefix.
        replication_id = replica.client.replicate(recording_id, source.java.control_channel)
        started = list(replica.client.await_replication(replication_id, until=("EXTEND",), timeout=TIMEOUT_S))
        replica_id = started[-1].recording_id
        wait_until(lambda: replica.client.recording_position(replica_id) >= read_end, "the replica to follow")
        replica.client.stop_replication(replication_id)
        replica.client.await_recording_signal(RecordingSignal.STOP, correlation_id=replication_id, timeout=TIMEOUT_S)

        checkpoint = tmp_path / "chk"
        query = (spark_source.readStream.format("aeron-archive")
                 .options(**{"archive.controlChannel": replica.control_channel},
                          channel=channel.split("?")[1], streamId=str(stream_id), startingPositions="earliest",
                          discoveryIntervalMs="200", failOnDataLoss=str(fail_on_data_loss).lower(),
                          checkpointLocation=str(checkpoint))
                 .load().writeStream.format("memory").queryName(table)
                 .option("checkpointLocation", str(checkpoint)).trigger(processingTime="200 milliseconds").start())
        wait_until(lambda: len(rows_of(spark_source, table)) >= 1_000, "the query to read the replica's prefix")

        # An operator cuts the replica back below what the query has read.
        replica.client.truncate_recording(replica_id, 400 * FRAMED)
        if fail_on_data_loss:
            wait_until(lambda: query.exception() is not None, "the query to report the truncation")
            failure = str(query.exception())
            assert f"recording {replica_id} was truncated to {400 * FRAMED}, before the query's position " \
                   f"{read_end}" in failure
            assert "failOnDataLoss=false" in failure
            return
        time.sleep(1.5)  # several triggers see the replica truncated (a warning each, nothing read)
        assert query.exception() is None
        publish(1_000)
    finally:
        publication.close()
        if query is not None and fail_on_data_loss:
            query.stop()
    total = publisher.published
    try:
        wait_until(lambda: source.client.stop_position(recording_id) == total * FRAMED, "the source to stop")
        replicate_again(replica, recording_id, source.java.control_channel, replica_id)
        wait_until(lambda: replica.client.stop_position(replica_id) == total * FRAMED, "the replica to catch up")

        def all_rows_or_failure() -> bool:
            assert query.exception() is None, f"the query failed: {query.exception()}"
            return len(rows_of(spark_source, table)) >= total
        wait_until(all_rows_or_failure, f"{total} rows from the re-synchronised replica")
        query.processAllAvailable()
        rows = rows_of(spark_source, table)
    finally:
        query.stop()
    # What the query had read stays read once; the rest comes once from the extended replica.
    assert [row[1] for row in rows] == [(index + 1) * FRAMED for index in range(total)]
    assert hashlib.sha256(b"".join(row[2] for row in rows)).hexdigest() == expected_digest(0, total, SIZE)
