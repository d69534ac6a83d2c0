"""`aeron-archive serve` as a subprocess with its embedded driver: sessions, bad input, auth."""

from __future__ import annotations

import struct

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.service.authenticator import (
    answer_challenge,
    encode_challenge_request,
    encode_plain_credentials,
)
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode
from aeron_spark.driver_integration.client import AeronClient

from tests.support.raw_archive_client import RawArchiveClient
from tests.support.sidecar import running_sidecar
from tests.support.waiting import wait_until


@pytest.fixture
def sidecar(tmp_path):
    with running_sidecar(tmp_path / "archive") as process:
        yield process


@pytest.fixture
def aeron(sidecar):
    client = AeronClient(sidecar.driver_dir)
    try:
        yield client
    finally:
        client.close()


def udp_client(sidecar, aeron) -> RawArchiveClient:
    return RawArchiveClient(aeron, sidecar.control_channel, 10)


def ipc_client(aeron) -> RawArchiveClient:
    return RawArchiveClient(aeron, "aeron:ipc", 11, response_stream_id=21)


@pytest.mark.parametrize("transport", ["udp", "ipc"])
def test_connect_archive_id_and_close(sidecar, aeron, transport):
    client = udp_client(sidecar, aeron) if transport == "udp" else ipc_client(aeron)
    response = client.connect()
    assert response.code == ControlResponseCode.OK
    assert response.relevant_id == response.control_session_id == client.control_session_id
    assert response.version == codecs.PROTOCOL_SEMANTIC_VERSION
    archive_id = client.call(lambda s, c: codecs.ArchiveIdRequest(s, c))
    assert archive_id.code == ControlResponseCode.OK
    assert archive_id.relevant_id == int(sidecar.ready["archiveId"])
    client.close_session()
    wait_until(lambda: any(f"control session {client.control_session_id} closed: session closed" in line
                           for line in sidecar.stderr_lines), "the session to close")


def test_legacy_1_15_connect_request_is_served(sidecar, aeron):
    client = udp_client(sidecar, aeron)
    response = client.connect(legacy=True)
    assert response.code == ControlResponseCode.OK
    listing, end = client.list_recordings()
    assert listing == [] and end.code == ControlResponseCode.RECORDING_UNKNOWN
    # As the Java 1.15.1 archive: RecordingPosition of an unknown recording is NULL_POSITION (later
    # archives: ERROR UNKNOWN_RECORDING).
    position = client.call(lambda s, c: codecs.RecordingPositionRequest(s, c, 999))
    assert (position.code, position.relevant_id) == (ControlResponseCode.OK, -1)
    stop = client.call(lambda s, c: codecs.StopPositionRequest(s, c, 999))
    assert (stop.code, stop.relevant_id) == (ControlResponseCode.ERROR, ArchiveErrorCode.UNKNOWN_RECORDING)


def test_bad_requests_get_useful_errors_and_the_session_survives(sidecar, aeron):
    client = udp_client(sidecar, aeron)
    assert client.connect().code == ControlResponseCode.OK
    session = client.control_session_id

    unknown = client.call(lambda s, c: codecs.StopPositionRequest(s, c, 999))
    assert (unknown.code, unknown.relevant_id) == (ControlResponseCode.ERROR, ArchiveErrorCode.UNKNOWN_RECORDING)
    assert "unknown recording id: 999" in unknown.error_message

    listed = client.call(lambda s, c: codecs.ListRecordingRequest(s, c, 999))
    assert (listed.code, listed.relevant_id) == (ControlResponseCode.RECORDING_UNKNOWN, 999)

    correlation = client.next_correlation_id()
    client.send(codecs.ArchiveIdRequest(session + 12345, correlation))
    wrong_session = client.await_response(correlation)
    assert wrong_session.code == ControlResponseCode.ERROR
    assert f"unknown controlSessionId={session + 12345}" in wrong_session.error_message

    correlation = client.next_correlation_id()
    client.send_bytes(struct.pack("<HHHHqq", 16, 999, 101, 13, session, correlation))
    unknown_template = client.await_response(correlation)
    assert unknown_template.code == ControlResponseCode.ERROR
    assert "unknown request templateId=999" in unknown_template.error_message

    correlation = client.next_correlation_id()
    truncated = codecs.encode(codecs.StopPositionRequest(session, correlation, 0))[:-4]
    client.send_bytes(truncated)
    malformed = client.await_response(correlation)
    assert malformed.code == ControlResponseCode.ERROR and "malformed request" in malformed.error_message

    client.send_bytes(b"\xde\xad\xbe\xef garbage, not SBE at all")
    garbage = client.await_response(-1)
    assert garbage.code == ControlResponseCode.ERROR
    assert "not an archive control message" in garbage.error_message

    bad_channel = client.call(lambda s, c: codecs.StartRecordingRequest2(
        s, c, 1001, codecs.SourceLocation.LOCAL, codecs.BooleanType.FALSE, "not-a-channel"))
    assert bad_channel.code == ControlResponseCode.ERROR and "not-a-channel" in bad_channel.error_message

    still_alive = client.call(lambda s, c: codecs.ArchiveIdRequest(s, c))
    assert still_alive.code == ControlResponseCode.OK
    assert sidecar.process.poll() is None


@pytest.fixture
def auth_sidecar(tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text("alice:s3cret\n")
    with running_sidecar(tmp_path / "archive", ["--auth-credentials-file", str(credentials)]) as process:
        yield process


def test_authentication_accepted_and_rejected(auth_sidecar):
    aeron = AeronClient(auth_sidecar.driver_dir)
    try:
        challenged = udp_client(auth_sidecar, aeron)
        ok = challenged.connect(encode_challenge_request("alice"),
                                on_challenge=lambda c: answer_challenge("alice", "s3cret", c))
        assert ok.code == ControlResponseCode.OK
        assert challenged.call(lambda s, c: codecs.ArchiveIdRequest(s, c)).code == ControlResponseCode.OK

        plain = RawArchiveClient(aeron, auth_sidecar.control_channel, 10)
        assert plain.connect(encode_plain_credentials("alice", "s3cret")).code == ControlResponseCode.OK

        for credentials, answer in ((encode_plain_credentials("alice", "wrong"), None),
                                    (b"", None),
                                    (encode_challenge_request("alice"),
                                     lambda c: answer_challenge("alice", "guess", c))):
            rejected = RawArchiveClient(aeron, auth_sidecar.control_channel, 10)
            response = rejected.connect(credentials, on_challenge=answer)
            assert response.code == ControlResponseCode.ERROR
            assert response.relevant_id == ArchiveErrorCode.AUTHENTICATION_REJECTED
            assert response.error_message == "authentication rejected"
            later = rejected.drain(0.5)
            assert all(isinstance(m, codecs.ControlResponse) and m.code == ControlResponseCode.ERROR
                       for m in later), later
    finally:
        aeron.close()


def test_random_and_mutated_requests_never_break_the_sidecar(sidecar, aeron):
    import random

    rng = random.Random(20261122)
    client = udp_client(sidecar, aeron)
    assert client.connect().code == ControlResponseCode.OK
    session = client.control_session_id
    valid = [
        codecs.encode(codecs.ListRecordingsRequest(session, 1, 0, 10)),
        codecs.encode(codecs.StopPositionRequest(session, 2, 0)),
        codecs.encode(codecs.StartRecordingRequest2(session, 3, 7, codecs.SourceLocation.LOCAL,
                                                    codecs.BooleanType.FALSE, "aeron:ipc")),
        codecs.encode(codecs.ReplayRequest(session, 4, 0, 0, -1, 9, -1, -1, "aeron:ipc")),
        codecs.encode(codecs.TruncateRecordingRequest(session, 5, 3, 64)),
    ]
    for _ in range(150):
        choice = rng.random()
        if choice < 0.3:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 80)))
        else:
            data = bytearray(rng.choice(valid))
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            if choice > 0.8:
                data = data[:rng.randrange(1, len(data))]
            data = bytes(data)
        client.send_bytes(data)
    client.drain(1.0)
    assert sidecar.process.poll() is None, sidecar.log_tail()
    assert not [line for line in sidecar.stderr_lines if "failed in do_work" in line], sidecar.log_tail()
    # (a mutation may legitimately have become a CloseSession for this session: use a new one)
    fresh = udp_client(sidecar, aeron)
    assert fresh.connect().code == ControlResponseCode.OK
    assert fresh.call(lambda s, c: codecs.ArchiveIdRequest(s, c)).code == ControlResponseCode.OK
