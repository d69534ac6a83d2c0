"""ArchiveClient over a fake transport: a scripted archive that decodes every request's bytes and
answers with encoded responses (no Aeron). Covers the handshake in each protocol, request layouts,
listing pages, fallbacks, signals, asynchronous errors, timeouts and closing."""

from __future__ import annotations

import collections
import itertools
import struct
import time
from collections.abc import Callable

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError, ArchiveTimeoutError
from aeron_spark.archive.codecs import (
    ArchiveErrorCode,
    RecordingSignal,
    SourceLocation,
)
from aeron_spark.archive.codecs import (
    ControlResponseCode as Code,
)
from aeron_spark.driver_integration import OfferResult

SESSION = 1234
ARCHIVE_ID = 77
RESPONSE_CHANNEL = "aeron:udp?endpoint=localhost:20121"


class FakeArchive:
    """A ControlTransport whose far end is a scripted archive.

    ``handlers[template_id](message)`` returns the messages to answer with (default: OK with
    relevantId 0). The archive encodes answers in the 1.15.1 layout when ``legacy``.
    """

    description = "fake:control stream 10"
    response_channel = RESPONSE_CHANNEL
    response_stream_id = 20

    def __init__(self, *, legacy: bool = False, version: int = codecs.PROTOCOL_SEMANTIC_VERSION,
                 repeat_connect_ok: int = 2) -> None:
        self.legacy = legacy
        self.version = 0 if legacy else version
        self.repeat_connect_ok = repeat_connect_ok
        self.sent: list[bytes] = []
        self.requests: list[object] = []
        self.outbox: collections.deque[bytes] = collections.deque()
        self.handlers: dict[int, Callable[[object], list[object]]] = {}
        self.offer_results: collections.deque[int] = collections.deque()
        self.closed = False
        self._ids = itertools.count(1)

    # -- ControlTransport -------------------------------------------------------------------------
    def offer(self, data: bytes) -> int:
        if self.offer_results:
            result = self.offer_results.popleft()
            if result < 0:
                return result
        self.sent.append(bytes(data))
        message = codecs.decode(data)
        self.requests.append(message)
        for answer in self.answer(message):
            self.push(answer)
        return len(self.sent) * 64

    def poll(self, handler, fragment_limit: int) -> int:
        count = 0
        while self.outbox and count < fragment_limit:
            handler(memoryview(self.outbox.popleft()), None)
            count += 1
        return count

    is_request_connected = True
    is_response_connected = True

    def next_correlation_id(self) -> int:
        return next(self._ids)

    def close(self) -> None:
        self.closed = True

    # -- the archive ------------------------------------------------------------------------------
    def push(self, message: object) -> None:
        self.outbox.append(message if isinstance(message, bytes) else
                           codecs.encode(message, version=0 if self.legacy else 13))

    def ok(self, message, relevant_id: int = 0, code: int = Code.OK, text: str = "") -> codecs.ControlResponse:
        return codecs.ControlResponse(SESSION, message.correlation_id, relevant_id, code, self.version, text)

    def answer(self, message) -> list[object]:
        template = message.TEMPLATE_ID
        if template in self.handlers:
            return self.handlers[template](message)
        if isinstance(message, (codecs.ConnectRequest, codecs.AuthConnectRequest)):
            return [self.ok(message, SESSION)] * self.repeat_connect_ok
        if isinstance(message, codecs.ArchiveIdRequest):
            return [self.ok(message, ARCHIVE_ID)]
        if isinstance(message, codecs.CloseSessionRequest):
            return []
        return [self.ok(message)]

    def headers(self) -> list[tuple[int, int, int, int]]:
        return [struct.unpack_from("<HHHH", data) for data in self.sent]

    def of_type(self, kind: type) -> list:
        return [r for r in self.requests if isinstance(r, kind)]


def descriptor(request, recording_id: int, stop: int = 4096) -> codecs.RecordingDescriptorMessage:
    return codecs.RecordingDescriptorMessage(
        SESSION, request.correlation_id, recording_id, 1, 2, 0, stop, 5, 1 << 27, 1 << 16, 1408, 9,
        1001, "aeron:ipc", "aeron:ipc", "aeron:ipc")


def connect(archive: FakeArchive, **kw) -> ArchiveClient:
    kw.setdefault("timeout", 2.0)
    return ArchiveClient(archive, **kw)


# ---------------------------------------------------------------------------------------------
# Handshake
# ---------------------------------------------------------------------------------------------

def test_modern_connect_sends_auth_connect_v13_then_asks_the_archive_id() -> None:
    archive = FakeArchive()
    client = connect(archive)
    assert (client.control_session_id, client.archive_id) == (SESSION, ARCHIVE_ID)
    assert not client.is_legacy and client.archive_protocol_version == codecs.PROTOCOL_SEMANTIC_VERSION
    block_length, template, schema, version = archive.headers()[0]
    assert (template, schema, version, block_length) == (58, 101, 13, 16)
    auth = archive.requests[0]
    assert auth.response_channel == RESPONSE_CHANNEL and auth.response_stream_id == 20
    assert auth.version == codecs.PROTOCOL_SEMANTIC_VERSION and auth.encoded_credentials == b""
    assert isinstance(archive.requests[1], codecs.ArchiveIdRequest)
    assert archive.requests[1].control_session_id == SESSION


def test_archives_before_protocol_1_11_have_no_archive_id() -> None:
    archive = FakeArchive(version=codecs.semantic_version(1, 10, 0))
    client = connect(archive)
    assert client.archive_id == -1 and not archive.of_type(codecs.ArchiveIdRequest)


def test_legacy_connect_sends_the_1_15_layout() -> None:
    archive = FakeArchive(legacy=True)
    client = connect(archive, protocol="legacy")
    assert client.is_legacy and client.archive_id == -1 and client.control_session_id == SESSION
    assert archive.sent[0][:8] == struct.pack("<HHHH", 12, 2, 101, 0)
    assert len(archive.sent) == 1  # no ArchiveIdRequest for 1.15.x


def test_auto_connect_detects_a_1_15_archive_and_switches_to_version_0_layouts() -> None:
    archive = FakeArchive(legacy=True)
    client = connect(archive, protocol="auto")
    assert archive.headers()[0] == (16, 2, 101, 13)  # ConnectRequest with a version, 1.15 reads it
    assert client.is_legacy
    archive.handlers[4] = lambda m: [archive.ok(m, 900)]
    assert client.start_recording("aeron:ipc", 5, SourceLocation.LOCAL) == 900
    assert archive.headers()[-1] == (21, 4, 101, 0)  # StartRecording with a one-byte sourceLocation


def test_auto_connect_to_a_modern_archive_stays_modern() -> None:
    archive = FakeArchive()
    client = connect(archive, protocol="auto")
    assert not client.is_legacy and client.archive_id == ARCHIVE_ID


def test_auto_connect_falls_back_to_auth_connect_when_connect_request_is_ignored() -> None:
    archive = FakeArchive()
    archive.handlers[2] = lambda m: []  # an archive that no longer knows template 2
    client = connect(archive, protocol="auto", timeout=2.0)  # the fallback goes at 1 s (generous on a loaded machine)
    assert [type(r).__name__ for r in archive.requests[:2]] == ["ConnectRequest", "AuthConnectRequest"]
    assert client.control_session_id == SESSION


def test_challenge_is_answered_with_on_challenge_under_a_new_correlation_id() -> None:
    archive = FakeArchive()
    archive.handlers[58] = lambda m: [codecs.Challenge(SESSION, m.correlation_id, 0, b"nonce")]
    archive.handlers[60] = lambda m: [archive.ok(m, SESSION)]
    seen = []

    def answer(challenge: bytes) -> bytes:
        seen.append(challenge)
        return b"secret:" + challenge

    client = connect(archive, credentials=b"me", on_challenge=answer)
    assert seen == [b"nonce"] and client.control_session_id == SESSION
    [reply] = archive.of_type(codecs.ChallengeResponse)
    assert reply.encoded_credentials == b"secret:nonce" and reply.control_session_id == SESSION
    assert reply.correlation_id != archive.requests[0].correlation_id
    assert archive.requests[0].encoded_credentials == b"me"


def test_a_challenge_without_on_challenge_fails_and_closes_the_session() -> None:
    archive = FakeArchive()
    archive.handlers[58] = lambda m: [codecs.Challenge(SESSION, m.correlation_id, 0, b"n")]
    with pytest.raises(ArchiveError, match="no on_challenge callback"):
        connect(archive)
    assert archive.of_type(codecs.CloseSessionRequest)[0].control_session_id == SESSION
    assert archive.closed


def test_a_failing_on_challenge_closes_the_session_and_propagates() -> None:
    archive = FakeArchive()
    archive.handlers[58] = lambda m: [codecs.Challenge(SESSION, m.correlation_id, 0, b"n")]

    def broken(challenge: bytes) -> bytes:
        raise KeyError("no secret for this archive")
    with pytest.raises(KeyError, match="no secret"):
        connect(archive, on_challenge=broken)
    assert archive.of_type(codecs.CloseSessionRequest) and archive.closed


def test_a_rejected_connect_raises_the_archive_message_and_closes_the_session() -> None:
    archive = FakeArchive()
    archive.handlers[58] = lambda m: [archive.ok(m, ArchiveErrorCode.AUTHENTICATION_REJECTED, Code.ERROR,
                                                 "authentication rejected")]
    with pytest.raises(ArchiveError) as raised:
        connect(archive)
    assert raised.value.error_code == ArchiveErrorCode.AUTHENTICATION_REJECTED
    assert raised.value.archive_message == "authentication rejected"
    assert archive.of_type(codecs.CloseSessionRequest)


def test_legacy_refuses_credentials() -> None:
    with pytest.raises(ArchiveError, match="no authentication"):
        connect(FakeArchive(legacy=True), protocol="legacy", credentials=b"x")


def test_connect_timeout_says_what_timed_out() -> None:
    archive = FakeArchive()
    archive.handlers[58] = lambda m: []
    started = time.monotonic()
    with pytest.raises(ArchiveTimeoutError) as raised:
        connect(archive, timeout=0.2)
    assert time.monotonic() - started < 2
    assert str(raised.value).startswith(
        "no response to AuthConnectRequest correlationId=1 within 0.2 s from fake:control stream 10")
    assert archive.closed


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="protocol 'new' is invalid"):
        ArchiveClient(FakeArchive(), protocol="new")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout 0 is invalid"):
        ArchiveClient(FakeArchive(), timeout=0)


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------

def test_list_recordings_pages_until_a_short_page() -> None:
    archive = FakeArchive()
    total = 2345

    def listing(m):
        ids = range(m.from_recording_id, min(total, m.from_recording_id + m.record_count))
        answers: list[object] = [descriptor(m, i) for i in ids]
        if len(answers) < m.record_count:
            answers.append(archive.ok(m, total, Code.RECORDING_UNKNOWN))
        return answers
    archive.handlers[8] = listing
    client = connect(archive)
    descriptors = client.list_recordings()
    assert [d.recording_id for d in descriptors] == list(range(total))
    assert [r.from_recording_id for r in archive.of_type(codecs.ListRecordingsRequest)] == [0, 1000, 2000]
    assert [d.recording_id for d in client.list_recordings(5, 3)] == [5, 6, 7]


def test_list_recording_returns_none_for_an_unknown_id() -> None:
    archive = FakeArchive()
    archive.handlers[10] = lambda m: ([descriptor(m, 3)] if m.recording_id == 3
                                      else [archive.ok(m, m.recording_id, Code.RECORDING_UNKNOWN)])
    client = connect(archive)
    assert client.list_recording(3).recording_id == 3
    assert client.list_recording(4) is None


def test_list_recordings_for_uri_sends_the_fragment_and_stream() -> None:
    archive = FakeArchive()
    archive.handlers[9] = lambda m: [descriptor(m, 1), archive.ok(m, 2, Code.RECORDING_UNKNOWN)]
    client = connect(archive)
    assert len(client.list_recordings_for_uri(0, 10, "endpoint=x", 1001)) == 1
    [request] = archive.of_type(codecs.ListRecordingsForUriRequest)
    assert (request.channel, request.stream_id, request.record_count) == ("endpoint=x", 1001, 10)


def test_a_listing_page_says_where_the_archive_scan_ended() -> None:
    archive = FakeArchive()
    archive.handlers[9] = lambda m: [descriptor(m, 4), archive.ok(m, 900, Code.RECORDING_UNKNOWN)]
    archive.handlers[8] = lambda m: [descriptor(m, i) for i in range(m.from_recording_id, m.from_recording_id + 2)]
    client = connect(archive)
    page = client.list_recordings_for_uri_page(3, 10, "endpoint=x", 1001)
    assert [d.recording_id for d in page.descriptors] == [4] and page.scanned_to == 900
    assert page.next_from(3) == 900  # the next listing skips what the archive already scanned
    full = client.list_recordings_page(7, 2)  # ended by its count: no scan end, continue after the last
    assert (full.scanned_to, full.next_from(7)) == (None, 9)


def test_errors_carry_the_archive_code_and_message() -> None:
    archive = FakeArchive()
    archive.handlers[15] = lambda m: [archive.ok(m, ArchiveErrorCode.UNKNOWN_RECORDING, Code.ERROR,
                                                 f"unknown recording id: {m.recording_id}")]
    client = connect(archive)
    with pytest.raises(ArchiveError) as raised:
        client.stop_position(42)
    assert raised.value.error_code == ArchiveErrorCode.UNKNOWN_RECORDING
    assert raised.value.archive_message == "unknown recording id: 42"
    assert not isinstance(raised.value, ArchiveTimeoutError)


def test_request_timeout_names_request_correlation_channel_and_progress() -> None:
    archive = FakeArchive()
    archive.handlers[8] = lambda m: [descriptor(m, 0)]  # one of five, then silence
    client = connect(archive, timeout=0.2)
    with pytest.raises(ArchiveTimeoutError) as raised:
        client.list_recordings(0, 5)
    correlation_id = archive.requests[-1].correlation_id
    assert str(raised.value) == (
        f"no response to ListRecordingsRequest correlationId={correlation_id} within 0.2 s from "
        f"fake:control stream 10 (1 of 5 descriptors received)")
    assert raised.value.correlation_id == correlation_id


def test_back_pressure_is_retried_then_times_out_with_the_offer_result() -> None:
    archive = FakeArchive()
    client = connect(archive, timeout=0.2)
    archive.offer_results.extend([OfferResult.BACK_PRESSURED] * 3)
    assert client.stop_position(1) == 0  # retried through three back-pressured offers
    archive.offer_results.extend([OfferResult.BACK_PRESSURED] * 100_000)
    with pytest.raises(ArchiveTimeoutError, match="could not send StopPositionRequest .* BACK_PRESSURED"):
        client.stop_position(1)
    archive.offer_results.clear()
    archive.offer_results.append(OfferResult.CLOSED)
    with pytest.raises(ArchiveError, match="offer failed with CLOSED"):
        client.stop_position(1)


def test_recording_requests_use_the_right_templates() -> None:
    archive = FakeArchive()
    archive.handlers[65] = lambda m: [archive.ok(m, 1 if m.recording_id == 1 else 0)]
    client = connect(archive)
    client.start_recording("aeron:udp?endpoint=x:1", 7)
    client.start_recording("aeron:ipc", 7, SourceLocation.LOCAL, auto_stop=True)
    client.extend_recording(3, "aeron:ipc", 7)
    client.stop_recording("aeron:ipc", 7)
    client.stop_recording_subscription(99)
    assert client.stop_recording_by_identity(1) is True
    assert client.stop_recording_by_identity(2) is False
    templates = [r.TEMPLATE_ID for r in archive.requests[2:]]
    assert templates == [4, 63, 11, 5, 14, 65, 65]
    start = archive.requests[2]
    assert (start.source_location, start.stream_id) == (SourceLocation.REMOTE, 7)


def test_legacy_refuses_newer_requests_without_sending_them() -> None:
    archive = FakeArchive(legacy=True)
    client = connect(archive, protocol="legacy")
    sent = len(archive.sent)
    for call in (lambda: client.purge_recording(1), lambda: client.stop_all_replays(),
                 lambda: client.start_bounded_replay(1, 0, 10, 3, "aeron:ipc", 5),
                 lambda: client.start_recording("aeron:ipc", 1, auto_stop=True),
                 lambda: client.list_recording_subscriptions(0, 5, "", 0, False),
                 lambda: client.start_replay(1, 0, 10, "aeron:ipc", 5, file_io_max_length=4096)):
        with pytest.raises(ArchiveError, match="not supported by the Aeron 1.15.x"):
            call()
    assert len(archive.sent) == sent


def test_max_recorded_position_falls_back_on_archives_without_template_67() -> None:
    archive = FakeArchive(legacy=True)
    archive.handlers[12] = lambda m: [archive.ok(m, -1)]    # not active
    archive.handlers[15] = lambda m: [archive.ok(m, 8192)]  # stopped here
    client = connect(archive, protocol="legacy")
    assert client.max_recorded_position(3) == 8192
    assert [r.TEMPLATE_ID for r in archive.requests[1:]] == [12, 15]
    archive.handlers[10] = lambda m: [descriptor(m, 3)]
    assert client.start_position(3) == 0  # from the descriptor: no StartPositionRequest in 1.15


def test_modern_positions_use_their_own_templates() -> None:
    archive = FakeArchive()
    archive.handlers[67] = lambda m: [archive.ok(m, 640)]
    archive.handlers[52] = lambda m: [archive.ok(m, 64)]
    client = connect(archive)
    assert (client.max_recorded_position(3), client.start_position(3)) == (640, 64)


def test_replay_requests_and_a_late_replay_error() -> None:
    archive = FakeArchive()
    replay_session_id = (3 << 32) | 0xFFFF_FFF0
    archive.handlers[6] = lambda m: [archive.ok(m, replay_session_id)]
    client = connect(archive)
    assert client.start_replay(5, 0, 1024, "aeron:ipc", 2001) == replay_session_id
    request = archive.of_type(codecs.ReplayRequest)[0]
    assert (request.file_io_max_length, request.replay_token, request.replay_channel) == (-1, -1, "aeron:ipc")
    assert archive.headers()[-1][0] == 56
    client.check_replay_error(replay_session_id)  # nothing yet
    archive.push(archive.ok(request, ArchiveErrorCode.GENERIC, Code.ERROR, "segment file missing"))
    with pytest.raises(ArchiveError, match="segment file missing"):
        client.check_replay_error(replay_session_id)
    archive.push(archive.ok(request, 0, Code.ERROR, "again"))
    assert client.poll_for_error_response() == "again"
    assert client.poll_for_error_response() is None


class SideRequestPublication:
    """A request publication of its own (a replay over a response channel): what is offered on it
    reaches the same scripted archive, whose answers come on the session's response channel."""

    def __init__(self, archive: FakeArchive, response_correlation_id: int) -> None:
        self.archive = archive
        self.response_correlation_id = response_correlation_id
        self.offered: list[object] = []
        self.closed = False
        self.is_connected = True

    def offer(self, data: bytes) -> int:
        self.offered.append(codecs.decode(data))
        return self.archive.offer(data)

    def close(self) -> None:
        self.closed = True


class ResponseModeArchive(FakeArchive):
    is_response_mode = True

    def __init__(self) -> None:
        super().__init__()
        self.side_publications: list[SideRequestPublication] = []

    def open_request_publication(self, response_correlation_id: int) -> SideRequestPublication:
        self.side_publications.append(SideRequestPublication(self, response_correlation_id))
        return self.side_publications[-1]


RESPONSE_REPLAY = "aeron:udp?control-mode=response|control=archive-host:8012"


def test_a_replay_over_a_response_channel_asks_a_token_and_sends_it_on_a_publication_of_its_own() -> None:
    archive = ResponseModeArchive()
    replay_session_id = (4 << 32) | 77
    archive.handlers[105] = lambda m: [archive.ok(m, -5_000_000_000_123)]
    archive.handlers[6] = lambda m: [archive.ok(m, replay_session_id)]
    archive.handlers[18] = lambda m: [archive.ok(m, replay_session_id + 1)]
    client = connect(archive)
    assert client.start_replay(5, 0, 1024, RESPONSE_REPLAY, 2001, subscription_registration_id=42) \
        == replay_session_id
    [token_request] = archive.of_type(codecs.ReplayTokenRequest)
    assert (token_request.control_session_id, token_request.recording_id) == (SESSION, 5)
    [side] = archive.side_publications
    assert side.response_correlation_id == 42 and side.closed
    [request] = side.offered
    assert isinstance(request, codecs.ReplayRequest) and request.replay_token == -5_000_000_000_123
    assert (request.control_session_id, request.replay_channel) == (SESSION, RESPONSE_REPLAY)
    assert client.start_bounded_replay(5, 0, 1024, 9, RESPONSE_REPLAY, 2001, subscription_registration_id=43) \
        == replay_session_id + 1
    assert archive.side_publications[1].offered[0].replay_token == -5_000_000_000_123
    # the late error of a replay over a response channel is found as any other's
    archive.push(archive.ok(request, ArchiveErrorCode.GENERIC, Code.ERROR, "segment file missing"))
    with pytest.raises(ArchiveError, match="segment file missing"):
        client.check_replay_error(replay_session_id)


def test_a_replay_over_a_response_channel_needs_the_subscription_and_a_modern_archive() -> None:
    archive = ResponseModeArchive()
    client = connect(archive)
    with pytest.raises(ArchiveError, match="subscription_registration_id"):
        client.start_replay(5, 0, 1024, RESPONSE_REPLAY, 2001)
    assert archive.of_type(codecs.ReplayTokenRequest) == []
    legacy = connect(FakeArchive(legacy=True), protocol="legacy")
    with pytest.raises(ArchiveError, match="1.15.x"):
        legacy.start_replay(5, 0, 1024, RESPONSE_REPLAY, 2001, subscription_registration_id=1)


def test_a_refused_token_replay_closes_its_request_publication() -> None:
    archive = ResponseModeArchive()
    archive.handlers[105] = lambda m: [archive.ok(m, 11)]
    archive.handlers[6] = lambda m: [archive.ok(m, 0, Code.ERROR, "Unknown session or token timeout")]
    client = connect(archive)
    with pytest.raises(ArchiveError, match="token timeout"):
        client.start_replay(5, 0, 1024, RESPONSE_REPLAY, 2001, subscription_registration_id=42)
    assert archive.side_publications[0].closed


def test_stop_replay_and_maintenance_results() -> None:
    archive = FakeArchive()
    archive.handlers[13] = lambda m: [archive.ok(m, 2)]
    archive.handlers[104] = lambda m: [archive.ok(m, 3)]
    archive.handlers[16] = lambda m: [archive.ok(m, 11)]
    client = connect(archive)
    client.stop_replay(5)
    client.stop_all_replays()
    assert client.truncate_recording(1, 4096) == 2
    assert client.purge_recording(1) == 3
    assert client.find_last_matching_recording(0, "ipc", 1001, 9) == 11
    assert archive.of_type(codecs.StopAllReplaysRequest)[0].recording_id == -1


# ---------------------------------------------------------------------------------------------
# Signals and closing
# ---------------------------------------------------------------------------------------------

def start_with_signals(archive: FakeArchive):
    def start(m):
        return [codecs.RecordingSignalEvent(SESSION, m.correlation_id, 8, 700, 0, RecordingSignal.START),
                archive.ok(m, 700),
                codecs.RecordingSignalEvent(SESSION, m.correlation_id, 9, 700, 0, RecordingSignal.START)]
    archive.handlers[4] = start


def test_signals_interleaved_with_responses_reach_the_callback_after_the_call() -> None:
    archive = FakeArchive()
    start_with_signals(archive)
    received = []
    client = connect(archive, on_recording_signal=received.append)
    assert client.start_recording("aeron:ipc", 1) == 700
    assert [s.recording_id for s in received] == [8, 9]  # before and after the OK, in order
    archive.push(codecs.Ping(SESSION))
    archive.push(codecs.RecordingSignalEvent(SESSION, 1, 9, 700, 64, RecordingSignal.STOP))
    assert [s.signal for s in client.poll_for_recording_signals()] == [RecordingSignal.STOP]
    assert [s.signal for s in received] == [RecordingSignal.START] * 2 + [RecordingSignal.STOP]


def test_signals_wait_in_the_queue_without_a_callback() -> None:
    archive = FakeArchive()
    start_with_signals(archive)
    client = connect(archive)
    client.start_recording("aeron:ipc", 1)
    archive.push(codecs.RecordingSignalEvent(SESSION, 1, 9, 700, 4096, RecordingSignal.STOP))
    stop = client.await_recording_signal(RecordingSignal.STOP, recording_id=9)
    assert stop.position == 4096
    assert [s.recording_id for s in client.poll_for_recording_signals()] == [8, 9]
    with pytest.raises(ArchiveTimeoutError, match=r"no recording signal \(signal=DELETE\) within 0.1 s"):
        client.await_recording_signal(RecordingSignal.DELETE, timeout=0.1)


def test_close_sends_close_session_once_and_later_calls_fail() -> None:
    archive = FakeArchive()
    with connect(archive) as client:
        pass
    assert [r.control_session_id for r in archive.of_type(codecs.CloseSessionRequest)] == [SESSION]
    assert archive.closed and client.is_closed
    client.close()
    assert len(archive.of_type(codecs.CloseSessionRequest)) == 1
    with pytest.raises(ArchiveError, match="is closed"):
        client.list_recordings()


def test_a_client_without_an_aeron_client_says_so() -> None:
    client = connect(FakeArchive())
    with pytest.raises(ArchiveError, match="no AeronClient"):
        _ = client.aeron


# ---------------------------------------------------------------------------------------------
# Liveness: pings that waited in the image say nothing about now
# ---------------------------------------------------------------------------------------------

def test_pings_read_after_a_long_gap_do_not_prove_the_archive_alive(monkeypatch) -> None:
    """A dead archive's last pings stay in the image until the driver times it out: read after a
    gap longer than the ping silence, they count as of the last empty poll, and `is_connected`
    then waits briefly for a fresh message before calling the session lost."""
    from aeron_spark.archive.client import client_session as module

    archive = FakeArchive()
    client = connect(archive)
    clock = [time.monotonic()]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(module.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    archive.push(codecs.Ping(SESSION))
    assert client.is_connected  # a ping read at once: alive

    clock[0] += 10.0  # the archive died right after sending two more pings
    archive.push(codecs.Ping(SESSION))
    archive.push(codecs.Ping(SESSION))
    assert not client.is_connected  # they waited in the image; nothing fresh came within the wait

    clock[0] += 10.0
    archive.push(codecs.Ping(SESSION))
    archive.outbox_later = [codecs.Ping(SESSION)]
    original_poll = archive.poll

    def poll_with_a_fresh_ping(handler, limit):  # an archive that is alive pings again soon
        count = original_poll(handler, limit)
        if not count and archive.outbox_later:
            archive.push(archive.outbox_later.pop())
        return count

    archive.poll = poll_with_a_fresh_ping
    assert client.is_connected
