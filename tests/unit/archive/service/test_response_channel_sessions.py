"""The control demuxer's response channels (``control-mode=response``) and replay tokens, over a
fake Aeron: the response publication names the request Image's correlation id, a replay with a
token is routed to the token's session from another request Image, and bad or stale tokens are
answered with an ERROR, never dropped silently when a session can be told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ControlResponseCode
from aeron_spark.archive.service.authenticator import AcceptAllAuthenticator
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.service_options import ArchiveServiceOptions
from aeron_spark.archive.service.control_demuxer import ControlDemuxer, response_publication_channel
from aeron_spark.archive.service.replay_tokens import MAX_TOKENS_PER_SESSION, ReplayTokens

RESPONSE = "aeron:udp?control-mode=response|control=archive-host:8011"


class Publication:
    max_message_length = 8192
    is_connected = True

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.sent: list[Any] = []
        self.closed = False

    def offer(self, data: bytes) -> int:
        self.sent.append(codecs.decode(data))
        return len(self.sent) * 64

    def close(self) -> None:
        self.closed = True


class Aeron:
    def __init__(self) -> None:
        self.publications: list[Publication] = []

    def add_subscription(self, channel: str, stream_id: int, **_: Any) -> Any:
        return object()

    def add_exclusive_publication(self, channel: str, stream_id: int) -> Publication:
        self.publications.append(Publication(channel))
        return self.publications[-1]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def make(handlers: dict | None = None, clock: Clock | None = None) -> tuple[ControlDemuxer, Aeron, list]:
    aeron = Aeron()
    replays: list = []
    table = {codecs.ReplayRequest: lambda s, m: replays.append((s, m)),
             codecs.BoundedReplayRequest: lambda s, m: replays.append((s, m)),
             codecs.ListRecordingRequest: lambda s, m: s.send_ok(m.correlation_id, 0)}
    demuxer = ControlDemuxer(aeron=aeron, settings=ConductorSettings(ArchiveServiceOptions(Path("/nonexistent")), 1),
                             authenticator=AcceptAllAuthenticator(), control_channels=[("aeron:ipc", 10)],
                             handlers={**table, **(handlers or {})}, enqueue=lambda e: None,
                             clock=clock or (lambda: 1_000), error_handler=None)
    demuxer._handlers[codecs.ReplayTokenRequest] = demuxer.issue_replay_token  # as the conductor maps it
    return demuxer, aeron, replays


def connect(demuxer: ControlDemuxer, image: int, image_correlation_id: int, channel: str = RESPONSE) -> int:
    demuxer.on_control_message(codecs.encode(codecs.AuthConnectRequest(
        image, 20, codecs.PROTOCOL_SEMANTIC_VERSION, channel, b"", "")), (0, image),
        image_correlation_id=image_correlation_id)
    for _ in range(3):
        demuxer.service_sessions(1_000)
    session_id = max(demuxer.sessions)
    demuxer.on_control_message(codecs.encode(codecs.KeepAliveRequest(session_id, -1)), (0, image))
    return session_id


def ok_relevant_id(publication: Publication, correlation_id: int) -> int:
    [response] = [m for m in publication.sent if isinstance(m, codecs.ControlResponse)
                  and m.correlation_id == correlation_id]
    assert response.code == ControlResponseCode.OK, response
    return response.relevant_id


def errors(publication: Publication, correlation_id: int) -> list[str]:
    return [m.error_message for m in publication.sent if isinstance(m, codecs.ControlResponse)
            and m.correlation_id == correlation_id and m.code == ControlResponseCode.ERROR]


def test_the_response_publication_names_the_request_images_correlation_id():
    demuxer, aeron, _ = make()
    connect(demuxer, image=5, image_correlation_id=77)
    channel = aeron.publications[0].channel
    assert channel.startswith("aeron:udp?control-mode=response|control=archive-host:8011")
    assert "response-correlation-id=77" in channel and "term-length=65536" in channel


def test_other_response_channels_are_left_as_the_client_gave_them():
    assert "response-correlation-id" not in response_publication_channel("aeron:udp?endpoint=h:1|session-id=5", 9)
    assert response_publication_channel("aeron:ipc?control-mode=response", 9).endswith("response-correlation-id=9")


def test_a_response_channel_without_an_image_correlation_id_makes_no_session():
    demuxer, aeron, _ = make()
    demuxer.on_control_message(codecs.encode(codecs.AuthConnectRequest(
        1, 20, codecs.PROTOCOL_SEMANTIC_VERSION, RESPONSE, b"", "")), (0, 1))
    assert demuxer.sessions == {} and aeron.publications == []


def test_a_replay_with_a_token_comes_on_another_image_and_goes_to_the_tokens_session():
    demuxer, aeron, replays = make()
    session_id = connect(demuxer, image=5, image_correlation_id=77)
    demuxer.on_control_message(codecs.encode(codecs.ReplayTokenRequest(session_id, 30, 4)), (0, 5))
    demuxer.service_sessions(1_000)
    token = ok_relevant_id(aeron.publications[0], 30)
    assert token != -1
    replay_channel = "aeron:udp?control-mode=response|control=archive-host:8012"
    # Image 9 is the client's request publication for this replay; its correlation id is 91.
    request = codecs.ReplayRequest(session_id, 31, 4, 0, 1024, 2001, -1, token, replay_channel)
    demuxer.on_control_message(codecs.encode(request), (0, 9), image_correlation_id=91)
    [(session, message)] = replays
    assert session.control_session_id == session_id
    assert message.replay_channel == replay_channel + "|response-correlation-id=91"
    bounded = codecs.BoundedReplayRequest(session_id, 32, 4, 0, 1024, 3, 2001, -1, token, replay_channel)
    demuxer.on_control_message(codecs.encode(bounded), (0, 10), image_correlation_id=92)
    assert replays[1][1].replay_channel.endswith("response-correlation-id=92")


def test_a_token_for_another_recording_or_an_expired_one_is_answered_with_an_error():
    clock = Clock()
    demuxer, aeron, replays = make(clock=clock)
    session_id = connect(demuxer, image=5, image_correlation_id=77)
    demuxer.on_control_message(codecs.encode(codecs.ReplayTokenRequest(session_id, 30, 4)), (0, 5))
    demuxer.service_sessions(clock.now)
    token = ok_relevant_id(aeron.publications[0], 30)
    channel = "aeron:udp?control-mode=response|control=archive-host:8012"
    demuxer.on_control_message(codecs.encode(codecs.ReplayRequest(
        session_id, 31, 5, 0, 1024, 2001, -1, token, channel)), (0, 9), image_correlation_id=91)
    clock.now += demuxer.settings.connect_timeout_ms
    demuxer.on_control_message(codecs.encode(codecs.ReplayRequest(
        session_id, 32, 4, 0, 1024, 2001, -1, token, channel)), (0, 9), image_correlation_id=91)
    demuxer.service_sessions(clock.now)
    assert replays == []
    for correlation_id in (31, 32):
        [text] = errors(aeron.publications[0], correlation_id)
        assert "Unknown session or token timeout" in text
    assert len(demuxer.replay_tokens) == 0  # expired tokens are forgotten


def test_an_unknown_token_naming_no_session_is_dropped_and_logged(caplog):
    demuxer, aeron, replays = make()
    channel = "aeron:udp?control-mode=response|control=archive-host:8012"
    demuxer.on_control_message(codecs.encode(codecs.ReplayRequest(
        12345, 31, 4, 0, 1024, 2001, -1, 999, channel)), (0, 9), image_correlation_id=91)
    assert replays == [] and aeron.publications == []
    assert "Unknown session or token timeout" in caplog.text


def test_a_replay_without_a_token_is_served_on_its_own_session_as_before():
    demuxer, aeron, replays = make()
    session_id = connect(demuxer, image=5, image_correlation_id=77)
    channel = "aeron:udp?endpoint=client:9000"
    demuxer.on_control_message(codecs.encode(codecs.ReplayRequest(
        session_id, 31, 4, 0, 1024, 2001, -1, -1, channel)), (0, 5), image_correlation_id=77)
    assert [m.replay_channel for _, m in replays] == [channel]
    # ... and a tokenless one from another Image is dropped (the session is bound to its Image).
    demuxer.on_control_message(codecs.encode(codecs.ReplayRequest(
        session_id, 32, 4, 0, 1024, 2001, -1, -1, channel)), (0, 6), image_correlation_id=78)
    assert len(replays) == 1


def test_a_closed_sessions_tokens_end_with_it():
    demuxer, aeron, replays = make()
    session_id = connect(demuxer, image=5, image_correlation_id=77)
    demuxer.on_control_message(codecs.encode(codecs.ReplayTokenRequest(session_id, 30, 4)), (0, 5))
    demuxer.service_sessions(1_000)
    assert len(demuxer.replay_tokens) == 1
    demuxer.on_control_message(codecs.encode(codecs.CloseSessionRequest(session_id)), (0, 5))
    demuxer.service_sessions(1_000)
    assert demuxer.sessions == {} and len(demuxer.replay_tokens) == 0


def test_replay_tokens_are_unique_non_null_bounded_per_session_and_expire():
    values = iter([-1, 7, 7, 8] + list(range(100, 200)))
    tokens: ReplayTokens[str] = ReplayTokens(validity_ms=100, random_source=lambda: next(values))
    assert tokens.issue("a", 1, 4, now_ms=0) == 7
    assert tokens.issue("a", 1, 4, now_ms=0) == 8  # -1 and a token in use are drawn again
    assert tokens.session_for(7, 4, now_ms=99) == "a"
    assert tokens.session_for(7, 5, now_ms=99) is None
    assert tokens.session_for(7, 4, now_ms=100) is None
    for _ in range(MAX_TOKENS_PER_SESSION):
        tokens.issue("a", 1, 4, now_ms=0)
    assert len(tokens) == MAX_TOKENS_PER_SESSION and tokens.session_for(7, 4, 0) is None  # oldest evicted
    tokens.issue("b", 2, 4, now_ms=50)
    assert tokens.expire(100) == MAX_TOKENS_PER_SESSION and len(tokens) == 1
    tokens.remove_session(2)
    assert len(tokens) == 0
    with pytest.raises(ValueError):
        ReplayTokens(validity_ms=0)
