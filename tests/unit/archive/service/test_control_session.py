"""The control session state machine and the authenticators, without Aeron (sans-IO)."""

from __future__ import annotations

import struct

import pytest

from aeron_spark.archive import codecs
from aeron_spark.archive.service.authenticator import (
    CHALLENGE_PREFIX,
    CredentialsFileError,
    SecretAuthenticator,
    answer_challenge,
    encode_challenge_request,
    encode_plain_credentials,
    load_credentials_file,
)
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    Challenge,
    ControlResponse,
    ControlResponseCode,
    Ping,
    RecordingSignal,
    RecordingSignalEvent,
)
from aeron_spark.driver_integration.publication import OfferResult
from aeron_spark.archive.service.control_session import (
    AUTHENTICATION_REJECTED,
    RESEND_INTERVAL_MS,
    ControlSession,
    SessionState,
    invalid_version_message,
)

SESSION_ID = 7
CONNECT_CORRELATION = 1001
T0 = 1_000_000
MODERN = codecs.semantic_version(1, 12, 0)
SENT = 64  # an offer's result when it succeeded: the publication's new position


def new_session(**overrides) -> ControlSession:
    options = dict(control_session_id=SESSION_ID, connect_correlation_id=CONNECT_CORRELATION,
                   client_version=MODERN, response_channel="aeron:udp?endpoint=localhost:8020",
                   response_stream_id=20, now_ms=T0)
    options.update(overrides)
    return ControlSession(**options)


class Wire:
    """A fake response publication: records what was offered, can refuse."""

    def __init__(self) -> None:
        self.sent: list = []
        self.result = SENT

    def offer(self, message) -> int:
        if self.result >= 0:
            self.sent.append(message)
        return self.result

    def take(self) -> list:
        sent, self.sent = self.sent, []
        return sent


def pump(session: ControlSession, wire: Wire, now: int, connected: bool = True) -> list:
    session.tick(now, connected)
    session.drain(wire.offer, now)
    return wire.take()


def connect_ok(correlation_id: int = CONNECT_CORRELATION) -> ControlResponse:
    return ControlResponse(SESSION_ID, correlation_id, SESSION_ID, ControlResponseCode.OK,
                           MODERN, "")


def to_active(session: ControlSession, wire: Wire, now: int = T0) -> None:
    session.publication_ready(now)
    assert pump(session, wire, now) == [connect_ok()]
    assert session.state is SessionState.AUTHENTICATED
    assert session.accept_request(now)
    assert session.state is SessionState.ACTIVE


def test_handshake_with_default_authenticator_sends_connect_ok_with_modern_layout():
    session, wire = new_session(), Wire()
    assert session.state is SessionState.INIT
    assert pump(session, wire, T0, connected=False) == []
    session.publication_ready(T0)
    assert session.state is SessionState.CONNECTING
    assert pump(session, wire, T0 + 1, connected=False) == []
    sent = pump(session, wire, T0 + 2)
    assert sent == [connect_ok()]
    assert session.state is SessionState.AUTHENTICATED
    encoded = codecs.encode(sent[0])
    # header: blockLength 32 (the C client needs it), template 1, schema 101, version 13
    assert encoded[:8] == struct.pack("<HHHH", 32, 1, 101, 13)
    assert encoded[8:40] == struct.pack("<qqqii", SESSION_ID, CONNECT_CORRELATION, SESSION_ID, 0,
                                        0x010C00)
    assert encoded[40:] == struct.pack("<I", 0)


def test_connect_ok_is_resent_every_200ms_until_the_first_request():
    session, wire = new_session(), Wire()
    session.publication_ready(T0)
    assert pump(session, wire, T0) == [connect_ok()]
    assert pump(session, wire, T0 + RESEND_INTERVAL_MS - 1) == []
    assert pump(session, wire, T0 + RESEND_INTERVAL_MS + 1) == [connect_ok()]
    assert pump(session, wire, T0 + 2 * RESEND_INTERVAL_MS + 2) == [connect_ok()]
    assert session.accept_request(T0 + 500)
    assert session.state is SessionState.ACTIVE
    assert pump(session, wire, T0 + 700) == []


def test_keep_alive_activates_an_authenticated_session():
    session, wire = new_session(), Wire()
    session.publication_ready(T0)
    pump(session, wire, T0)
    session.on_keep_alive(T0 + 10)
    assert session.state is SessionState.ACTIVE


def test_requests_before_authentication_are_not_dispatched():
    session = new_session()
    assert not session.accept_request(T0)
    session.publication_ready(T0)
    assert not session.accept_request(T0)
    assert session.state is SessionState.CONNECTING


@pytest.mark.parametrize("stalled_in", ["INIT", "CONNECTING"])
def test_connect_timeout_aborts_a_stalled_handshake(stalled_in):
    session, wire = new_session(connect_timeout_ms=1000), Wire()
    if stalled_in == "CONNECTING":
        session.publication_ready(T0)
    pump(session, wire, T0 + 1000, connected=False)
    assert session.state is not SessionState.DONE
    pump(session, wire, T0 + 1001, connected=False)
    assert session.state is SessionState.DONE
    assert "failed to establish initial connection" in session.abort_reason
    assert stalled_in in session.abort_reason


def test_legacy_client_without_version_is_accepted():
    assert invalid_version_message(0) is None
    assert invalid_version_message(codecs.semantic_version(0, 2, 1)) is None
    session, wire = new_session(client_version=0), Wire()
    assert session.is_legacy_client
    to_active(session, wire)


def test_legacy_client_gets_only_error_codes_aeron_1_15_knows():
    """Aeron 1.15.x knows codes 0..9 (up to INVALID_EXTENSION) and sent GENERIC where later
    archives have a code: the Java 1.15.1 archive does (tests/interop/test_differential_java_1_15_1_client.py)."""
    session, wire = new_session(client_version=0), Wire()
    to_active(session, wire)
    session.send_error(5, "bad position", ArchiveErrorCode.INVALID_POSITION)
    session.send_error(6, "no such recording", ArchiveErrorCode.UNKNOWN_RECORDING)
    session.send_error(7, "bad extension", ArchiveErrorCode.INVALID_EXTENSION)
    assert [m.relevant_id for m in pump(session, wire, T0 + 1)] == [
        ArchiveErrorCode.GENERIC, ArchiveErrorCode.UNKNOWN_RECORDING, ArchiveErrorCode.INVALID_EXTENSION]
    modern, wire = new_session(), Wire()
    to_active(modern, wire)
    modern.send_error(5, "bad position", ArchiveErrorCode.INVALID_POSITION)
    assert [m.relevant_id for m in pump(modern, wire, T0 + 1)] == [ArchiveErrorCode.INVALID_POSITION]


def test_newer_major_version_gets_invalid_version_error_repeatedly_and_never_activates():
    version = codecs.semantic_version(2, 0, 0)
    session, wire = new_session(client_version=version, connect_timeout_ms=1000), Wire()
    session.publication_ready(T0)
    sent = pump(session, wire, T0)
    expected = ControlResponse(SESSION_ID, CONNECT_CORRELATION, SESSION_ID,
                               ControlResponseCode.ERROR, MODERN,
                               "invalid client version 2.0.0, archive is 1.12.0")
    assert sent == [expected]
    assert not session.accept_request(T0 + 1)
    assert pump(session, wire, T0 + RESEND_INTERVAL_MS + 1) == [expected]
    pump(session, wire, T0 + 1001)
    assert session.state is SessionState.DONE


def secret_session(credentials: bytes, **kwargs) -> tuple[ControlSession, SecretAuthenticator]:
    authenticator = SecretAuthenticator({"alice": "s3cret"}, **kwargs)
    authenticator.on_connect_request(SESSION_ID, credentials, T0)
    return new_session(authenticator=authenticator, connect_timeout_ms=1000), authenticator


def test_challenge_answered_correctly_authenticates_under_the_response_correlation_id():
    session, _ = secret_session(encode_challenge_request("alice"))
    wire = Wire()
    session.publication_ready(T0)
    sent = pump(session, wire, T0)
    assert session.state is SessionState.CHALLENGED
    assert len(sent) == 1 and isinstance(sent[0], Challenge)
    challenge = sent[0]
    assert (challenge.control_session_id, challenge.correlation_id, challenge.version) == (
        SESSION_ID, CONNECT_CORRELATION, 0)
    assert challenge.encoded_challenge.startswith(CHALLENGE_PREFIX)
    assert pump(session, wire, T0 + 10) == []  # waiting for the answer
    session.on_challenge_response(2002, answer_challenge("alice", "s3cret", challenge.encoded_challenge),
                                  T0 + 20)
    assert pump(session, wire, T0 + 30) == [connect_ok(2002)]
    assert session.state is SessionState.AUTHENTICATED
    assert session.encoded_principal == b"alice"


def test_wrong_challenge_answer_gets_only_rejections_until_timeout():
    session, _ = secret_session(encode_challenge_request("alice"))
    wire = Wire()
    session.publication_ready(T0)
    challenge = pump(session, wire, T0)[0]
    session.on_challenge_response(2002, answer_challenge("alice", "wrong", challenge.encoded_challenge),
                                  T0 + 5)
    rejection = ControlResponse(SESSION_ID, 2002, ArchiveErrorCode.AUTHENTICATION_REJECTED,
                                ControlResponseCode.ERROR, MODERN, AUTHENTICATION_REJECTED)
    assert pump(session, wire, T0 + 7) == [rejection]
    assert session.state is SessionState.REJECTED
    assert not session.accept_request(T0 + 8)
    assert pump(session, wire, T0 + 100) == []
    assert pump(session, wire, T0 + 8 + RESEND_INTERVAL_MS) == [rejection]
    assert pump(session, wire, T0 + 1001) == []
    assert session.state is SessionState.DONE


@pytest.mark.parametrize("credentials, accepted", [
    (encode_plain_credentials("alice", "s3cret"), True),
    (encode_plain_credentials("alice", "nope"), False),
    (encode_plain_credentials("bob", "s3cret"), False),
    (b"", False),
    (b"\xff\xfe", False),
])
def test_plain_credentials(credentials, accepted):
    session, _ = secret_session(credentials)
    wire = Wire()
    session.publication_ready(T0)
    sent = pump(session, wire, T0)
    assert pump(session, wire, T0 + 1) == []
    if accepted:
        assert session.state is SessionState.AUTHENTICATED
        assert sent == [connect_ok()]
    else:
        assert session.state is SessionState.REJECTED
        assert [m.relevant_id for m in sent] == [ArchiveErrorCode.AUTHENTICATION_REJECTED]


def test_plain_credentials_refused_when_only_challenges_are_allowed():
    session, _ = secret_session(encode_plain_credentials("alice", "s3cret"), allow_plain=False)
    wire = Wire()
    session.publication_ready(T0)
    pump(session, wire, T0)
    assert session.state is SessionState.REJECTED


def test_active_session_pings_every_liveness_interval():
    session, wire = new_session(liveness_check_interval_ms=1000), Wire()
    to_active(session, wire)
    assert pump(session, wire, T0 + 999) == []
    assert pump(session, wire, T0 + 1001) == [Ping(SESSION_ID)]
    assert pump(session, wire, T0 + 1500) == []
    assert pump(session, wire, T0 + 2002) == [Ping(SESSION_ID)]


def test_responses_go_out_in_order_and_wait_while_back_pressured():
    session, wire = new_session(connect_timeout_ms=1000), Wire()
    to_active(session, wire)
    session.send_ok(5, 42)
    session.send_signal(5, 3, 42, 0, RecordingSignal.START)
    session.send_error(6, "no such recording", ArchiveErrorCode.UNKNOWN_RECORDING)
    wire.result = OfferResult.BACK_PRESSURED
    assert pump(session, wire, T0 + 10) == []
    assert session.outbox_length == 3
    wire.result = SENT
    sent = pump(session, wire, T0 + 20)
    assert sent == [
        ControlResponse(SESSION_ID, 5, 42, ControlResponseCode.OK, MODERN, ""),
        RecordingSignalEvent(SESSION_ID, 5, 3, 42, 0, RecordingSignal.START),
        ControlResponse(SESSION_ID, 6, 5, ControlResponseCode.ERROR, MODERN, "no such recording"),
    ]


def test_responses_blocked_for_the_connect_timeout_abort_the_session():
    session, wire = new_session(connect_timeout_ms=1000, liveness_check_interval_ms=100_000), Wire()
    to_active(session, wire)
    session.send_ok(5)
    wire.result = OfferResult.BACK_PRESSURED
    pump(session, wire, T0 + 10)
    pump(session, wire, T0 + 1010)
    assert session.state is SessionState.ACTIVE
    pump(session, wire, T0 + 1011)
    assert session.state is SessionState.DONE
    assert "failed to send response" in session.abort_reason


def test_response_publication_gone_ends_an_active_session():
    session, wire = new_session(), Wire()
    to_active(session, wire)
    pump(session, wire, T0 + 1, connected=False)
    assert session.state is SessionState.DONE
    assert "not connected" in session.abort_reason


def test_close_request_and_image_loss_end_the_session_and_clear_its_outbox():
    session, wire = new_session(), Wire()
    to_active(session, wire)
    session.send_ok(1)
    session.on_close_request()
    assert session.is_done and session.outbox_length == 0
    assert session.abort_reason == "session closed"
    other = new_session()
    other.on_request_image_unavailable()
    assert other.is_done


def test_idle_timeout_is_off_by_default_and_ends_idle_sessions_when_set():
    session, wire = new_session(liveness_check_interval_ms=10**9), Wire()
    to_active(session, wire)
    pump(session, wire, T0 + 10**8)
    assert session.state is SessionState.ACTIVE
    idle, wire = new_session(idle_timeout_ms=500, liveness_check_interval_ms=10**9), Wire()
    to_active(idle, wire)
    idle.accept_request(T0 + 400)
    pump(idle, wire, T0 + 900)
    assert idle.state is SessionState.ACTIVE
    pump(idle, wire, T0 + 901)
    assert idle.state is SessionState.DONE


def test_credentials_file(tmp_path):
    path = tmp_path / "creds"
    path.write_text("# archive users\nalice:s3cret\n\nbob:pa:ss\n")
    assert load_credentials_file(path) == {"alice": b"s3cret", "bob": b"pa:ss"}
    path.write_text("alice\n")
    with pytest.raises(CredentialsFileError, match="principal:secret"):
        load_credentials_file(path)
    path.write_text("alice:x\nalice:y\n")
    with pytest.raises(CredentialsFileError, match="twice"):
        load_credentials_file(path)
    with pytest.raises(CredentialsFileError, match="cannot read"):
        load_credentials_file(tmp_path / "missing")
