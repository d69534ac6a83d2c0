"""ArchiveClient's replication requests over the scripted fake archive of test_archive_client:
the ReplicateRequest2 layout with every field, StopReplication, following a replication's signals
(only its own, in order, until SYNC / REPLICATE_END), its asynchronous failure and bad arguments."""

from __future__ import annotations

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal, semantic_version
from aeron_spark.archive.codecs import ControlResponseCode as Code

from tests.unit.archive.client.test_archive_client import SESSION, FakeArchive, connect

REPLICATION_ID = 5150
SOURCE = "aeron:udp?endpoint=source-host:8010"


def replicating_archive() -> FakeArchive:
    archive = FakeArchive()
    archive.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = lambda m: [archive.ok(m, REPLICATION_ID)]
    return archive


def signal(kind: RecordingSignal, *, recording_id: int = 3, position: int = 0,
           correlation_id: int = REPLICATION_ID, subscription_id: int = -1) -> codecs.RecordingSignalEvent:
    return codecs.RecordingSignalEvent(SESSION, correlation_id, recording_id, subscription_id, position, kind)


def test_replicate_sends_replicate_request2_with_every_field() -> None:
    archive = replicating_archive()
    client = connect(archive)
    replication_id = client.replicate(
        7, SOURCE, 11, dst_recording_id=4, stop_position=8192, live_destination="aeron:udp?endpoint=h:9",
        replication_channel="aeron:udp?endpoint=replica:0", channel_tag_id=21, subscription_tag_id=22,
        file_io_max_length=65536, replication_session_id=99, src_credentials=b"user:pass")
    assert replication_id == REPLICATION_ID
    (sent,) = archive.of_type(codecs.ReplicateRequest2)
    assert sent == codecs.ReplicateRequest2(
        SESSION, sent.correlation_id, 7, 4, 8192, 21, 22, 11, 65536, 99, SOURCE, "aeron:udp?endpoint=h:9",
        "aeron:udp?endpoint=replica:0", b"user:pass", "")
    assert archive.headers()[-1][3] == 13  # the current schema: every field of version 10+ is sent


def test_replicate_defaults_are_aerons_null_values() -> None:
    archive = replicating_archive()
    client = connect(archive)
    client.replicate(7, SOURCE, src_response_channel="aeron:udp?control-mode=response|control=src:9")
    (sent,) = archive.of_type(codecs.ReplicateRequest2)
    assert (sent.dst_recording_id, sent.stop_position, sent.channel_tag_id, sent.subscription_tag_id,
            sent.src_control_stream_id, sent.file_io_max_length, sent.replication_session_id) == \
        (-1, -1, -1, -1, 10, -1, -1)
    assert (sent.live_destination, sent.replication_channel, sent.encoded_credentials) == ("", "", b"")
    assert sent.src_response_channel == "aeron:udp?control-mode=response|control=src:9"


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"src_recording_id": -1}, "src_recording_id -1 is invalid"),
    ({"src_control_channel": "localhost:8010"}, "src_control_channel 'localhost:8010' is invalid"),
    ({"stop_position": -5}, "stop_position -5 is invalid"),
    ({"dst_recording_id": -2}, "dst_recording_id -2 is invalid"),
    ({"file_io_max_length": 0}, "file_io_max_length 0 is invalid"),
    ({"live_destination": "aeron:udp?endpoint=h:9", "src_response_channel": "aeron:udp?control-mode=response"},
     "live_destination and src_response_channel exclude each other"),
])
def test_bad_replicate_arguments_are_named_and_nothing_is_sent(kwargs, named: str) -> None:
    archive = replicating_archive()
    client = connect(archive)
    arguments = {"src_recording_id": 7, "src_control_channel": SOURCE, **kwargs}
    with pytest.raises(ValueError, match=named):
        client.replicate(**arguments)
    assert archive.of_type(codecs.ReplicateRequest2) == []


def test_replicate_refused_by_the_archive_raises_its_code() -> None:
    archive = FakeArchive()
    archive.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = lambda m: [
        archive.ok(m, ArchiveErrorCode.UNKNOWN_RECORDING, Code.ERROR, "unknown destination recording 4")]
    client = connect(archive)
    with pytest.raises(ArchiveError, match="unknown destination recording 4") as raised:
        client.replicate(7, SOURCE, dst_recording_id=4)
    assert raised.value.error_code == ArchiveErrorCode.UNKNOWN_RECORDING


def test_legacy_sessions_refuse_replication_without_sending_it() -> None:
    archive = FakeArchive(legacy=True)
    client = connect(archive, protocol="legacy")
    with pytest.raises(ArchiveError, match="ReplicateRequest2 is not supported by the Aeron 1.15.x"):
        client.replicate(7, SOURCE)
    with pytest.raises(ArchiveError, match="StopReplicationRequest is not supported"):
        client.stop_replication(REPLICATION_ID)
    assert len(archive.requests) == 1  # the connect only


def test_await_replication_yields_its_own_signals_in_order_until_sync() -> None:
    archive = replicating_archive()
    client = connect(archive)
    replication_id = client.replicate(7, SOURCE)
    archive.push(signal(RecordingSignal.REPLICATE))
    archive.push(signal(RecordingSignal.START, correlation_id=1, recording_id=9))  # someone else's
    archive.push(signal(RecordingSignal.EXTEND, subscription_id=44))
    archive.push(signal(RecordingSignal.SYNC, position=4096, subscription_id=44))
    archive.push(signal(RecordingSignal.STOP, position=4096, subscription_id=44))
    archive.push(signal(RecordingSignal.REPLICATE_END))

    seen = list(client.await_replication(replication_id, until=("sync",), timeout=1.0))
    assert [s.signal for s in seen] == [RecordingSignal.REPLICATE, RecordingSignal.EXTEND, RecordingSignal.SYNC]
    assert seen[-1].position == 4096
    rest = list(client.await_replication(replication_id, timeout=1.0))  # default: until SYNC or END
    assert [s.signal for s in rest] == [RecordingSignal.STOP, RecordingSignal.REPLICATE_END]
    # The other operation's signal stayed queued for its own reader.
    assert [s.recording_id for s in client.poll_for_recording_signals()] == [9]


def test_a_replication_failure_is_raised_after_the_signals_before_it() -> None:
    archive = replicating_archive()
    client = connect(archive)
    replication_id = client.replicate(7, SOURCE)
    archive.push(signal(RecordingSignal.REPLICATE))
    archive.push(codecs.ControlResponse(SESSION, replication_id, ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE,
                                        Code.ERROR, archive.version, "failed to connect to source archive"))
    assert [s.signal for s in client.poll_replication(replication_id)] == [RecordingSignal.REPLICATE]
    with pytest.raises(ArchiveError, match="failed to connect to source archive") as raised:
        client.poll_replication(replication_id)
    assert raised.value.error_code == ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE
    assert raised.value.correlation_id == replication_id


def test_await_replication_times_out_naming_the_replication_and_bad_until_is_named() -> None:
    archive = replicating_archive()
    client = connect(archive)
    replication_id = client.replicate(7, SOURCE)
    with pytest.raises(ArchiveTimeoutError, match=rf"no signal of replication {replication_id} within 0.1 s"):
        list(client.await_replication(replication_id, until=("MERGE",), timeout=0.1))
    with pytest.raises(ValueError, match="until 'MERGED' is invalid: expected recording signals among"):
        list(client.await_replication(replication_id, until=("MERGED",)))


def test_stop_replication_and_an_already_ended_one() -> None:
    archive = FakeArchive()
    known = {REPLICATION_ID}

    def stop(message: codecs.StopReplicationRequest) -> list[object]:
        if message.replication_id in known:
            known.discard(message.replication_id)
            return [archive.ok(message)]
        return [archive.ok(message, ArchiveErrorCode.UNKNOWN_REPLICATION, Code.ERROR, "unknown replication")]
    archive.handlers[codecs.StopReplicationRequest.TEMPLATE_ID] = stop
    client: ArchiveClient = connect(archive)
    client.stop_replication(REPLICATION_ID)
    assert archive.of_type(codecs.StopReplicationRequest)[0].replication_id == REPLICATION_ID
    with pytest.raises(ArchiveError) as raised:
        client.stop_replication(REPLICATION_ID)
    assert raised.value.error_code == ArchiveErrorCode.UNKNOWN_REPLICATION
    assert client.try_stop_replication(REPLICATION_ID) is False


def test_await_replication_raises_the_error_read_before_its_end() -> None:
    archive = replicating_archive()
    client = connect(archive)
    replication_id = client.replicate(7, SOURCE)
    archive.push(signal(RecordingSignal.REPLICATE))
    archive.push(codecs.ControlResponse(SESSION, replication_id, ArchiveErrorCode.GENERIC, Code.ERROR,
                                        archive.version, "failed to create replay publication"))
    archive.push(signal(RecordingSignal.REPLICATE_END, position=-1))
    seen = []
    with pytest.raises(ArchiveError, match="failed to create replay publication"):
        for event in client.await_replication(replication_id, timeout=1.0):
            seen.append(event.signal)
    assert seen == [RecordingSignal.REPLICATE]  # it did not end as if it had succeeded


def test_archives_before_1_33_get_the_replicate_request_they_know() -> None:
    archive = FakeArchive(version=semantic_version(1, 5, 0))  # Aeron 1.28-1.31
    for template in (codecs.ReplicateRequest.TEMPLATE_ID, codecs.TaggedReplicateRequest.TEMPLATE_ID):
        archive.handlers[template] = lambda m: [archive.ok(m, REPLICATION_ID)]
    client = connect(archive)
    assert client.replicate(7, SOURCE, 11, dst_recording_id=4, live_destination="aeron:udp?endpoint=h:9") == \
        REPLICATION_ID
    assert client.replicate(7, SOURCE, channel_tag_id=21, subscription_tag_id=22) == REPLICATION_ID
    (plain,) = archive.of_type(codecs.ReplicateRequest)
    assert (plain.src_recording_id, plain.dst_recording_id, plain.src_control_stream_id, plain.src_control_channel,
            plain.live_destination) == (7, 4, 11, SOURCE, "aeron:udp?endpoint=h:9")
    (tagged,) = archive.of_type(codecs.TaggedReplicateRequest)
    assert (tagged.channel_tag_id, tagged.subscription_tag_id, tagged.dst_recording_id) == (21, 22, -1)
    with pytest.raises(ArchiveError, match=r"stop_position, replication_channel need\(s\) ReplicateRequest2 "
                                           r"\(Aeron 1.33\+, protocol 1.7.0\); the archive at .* speaks protocol 1.5.0"):
        client.replicate(7, SOURCE, stop_position=4096, replication_channel="aeron:udp?endpoint=r:0")
    assert archive.of_type(codecs.ReplicateRequest2) == []


def test_tags_need_an_archive_of_1_24_or_later() -> None:
    archive = FakeArchive(version=semantic_version(1, 1, 0))  # Aeron 1.23
    client = connect(archive)
    with pytest.raises(ArchiveError, match=r"channel_tag_id and subscription_tag_id need TaggedReplicateRequest"):
        client.replicate(7, SOURCE, channel_tag_id=21)
