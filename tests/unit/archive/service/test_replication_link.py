"""`SourceArchiveLink`, the replication's control connection to the source archive, with a fake Aeron:
the handshake a step at a time, the challenge, refusals with their codes, the 1.15.x fallback and
the schema version it speaks afterwards, only its own session's messages, CloseSession on close."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode
from aeron_spark.archive.service.replication_link import SourceArchiveLink, SourceLinkError

RESOLVED = "aeron:udp?endpoint=localhost:40555"


@dataclass
class FakePublication:
    connected: bool = True
    offered: list[bytes] = field(default_factory=list)
    closed: bool = False
    session_id: int = 1
    stream_id: int = 10

    @property
    def is_connected(self) -> bool:
        return self.connected

    def offer(self, data: bytes) -> int:
        self.offered.append(data)
        return len(data)

    def offer_block(self, buffer: Any, offset: int, length: int) -> int:
        raise NotImplementedError

    def append_padding(self, length: int) -> int:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True

    def sent(self) -> list[Any]:
        return [codecs.decode(data) for data in self.offered]


@dataclass
class FakeSubscription:
    incoming: list[bytes] = field(default_factory=list)
    closed: bool = False

    def resolved_channel(self) -> str | None:
        return RESOLVED

    def poll(self, handler: Callable[[memoryview, Any], object], fragment_limit: int) -> int:
        batch, self.incoming = self.incoming[:fragment_limit], self.incoming[fragment_limit:]
        for data in batch:
            handler(memoryview(data), None)
        return len(batch)

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeAeron:
    publication: FakePublication = field(default_factory=FakePublication)
    subscription: FakeSubscription = field(default_factory=FakeSubscription)
    refuse: str | None = None

    def add_subscription(self, channel: str, stream_id: int) -> FakeSubscription:
        return self.subscription

    def add_exclusive_publication(self, channel: str, stream_id: int) -> FakePublication:
        if self.refuse:
            raise RuntimeError(self.refuse)
        return self.publication


@dataclass
class Clock:
    now: int = 0

    def __call__(self) -> int:
        return self.now


def make(credentials: bytes = b"", **aeron: Any) -> tuple[SourceArchiveLink, FakeAeron, Clock]:
    fake, clock = FakeAeron(**aeron), Clock()
    link = SourceArchiveLink(fake, control_channel="aeron:udp?endpoint=localhost:8010", control_stream_id=10,
                             response_channel="aeron:udp?endpoint=localhost:0", response_stream_id=20,
                             credentials=credentials, clock=clock, legacy_fallback_ms=2_500)
    return link, fake, clock


def steps(link: SourceArchiveLink, count: int = 5) -> None:
    for _ in range(count):
        link.connect_step()


def answer(fake: FakeAeron, message: Any, version: int = codecs.SCHEMA_VERSION) -> None:
    fake.subscription.incoming.append(codecs.encode(message, version=version))


def test_auth_connect_with_the_resolved_response_channel_then_ok() -> None:
    link, fake, _ = make(credentials=b"user:pass")
    steps(link)
    [connect] = fake.publication.sent()
    assert isinstance(connect, codecs.AuthConnectRequest)
    assert (connect.response_channel, connect.response_stream_id, connect.encoded_credentials) == \
        (RESOLVED, 20, b"user:pass")
    assert connect.version == codecs.PROTOCOL_SEMANTIC_VERSION
    answer(fake, codecs.ControlResponse(42, connect.correlation_id, 42, ControlResponseCode.OK,
                                        codecs.PROTOCOL_SEMANTIC_VERSION, ""))
    link.connect_step()
    assert link.is_connected and link.control_session_id == 42 and not link.legacy


def test_a_challenge_is_answered_with_the_credentials() -> None:
    link, fake, _ = make(credentials=b"user:pass")
    steps(link)
    connect = fake.publication.sent()[0]
    answer(fake, codecs.Challenge(42, connect.correlation_id, 0, b"who?"))
    link.connect_step()
    reply = fake.publication.sent()[-1]
    assert isinstance(reply, codecs.ChallengeResponse) and reply.encoded_credentials == b"user:pass"
    answer(fake, codecs.ControlResponse(42, reply.correlation_id, 42, ControlResponseCode.OK, 0, ""))
    link.connect_step()
    assert link.control_session_id == 42


@pytest.mark.parametrize("relevant_id", [ArchiveErrorCode.AUTHENTICATION_REJECTED, ArchiveErrorCode.GENERIC])
def test_a_refused_connect_is_a_replication_connection_failure_as_aeron(relevant_id: int) -> None:
    link, fake, _ = make()
    steps(link)
    connect = fake.publication.sent()[0]
    answer(fake, codecs.ControlResponse(42, connect.correlation_id, relevant_id, ControlResponseCode.ERROR, 0,
                                        "no"))
    with pytest.raises(SourceLinkError) as raised:
        link.connect_step()
    assert raised.value.code == ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE and "no" in str(raised.value)


def test_a_channel_the_driver_refuses_is_a_connection_failure() -> None:
    link, _, _ = make(refuse="invalid channel")
    with pytest.raises(SourceLinkError) as raised:
        steps(link)
    assert raised.value.code == ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE
    assert "invalid channel" in str(raised.value)


def test_no_answer_then_the_1_15_connect_and_version_0_from_then_on() -> None:
    link, fake, clock = make()
    steps(link)
    assert len(fake.publication.offered) == 1
    clock.now = 2_500
    link.connect_step()
    legacy_bytes = fake.publication.offered[-1]
    assert codecs.decode_header(legacy_bytes).version == codecs.LEGACY_SCHEMA_VERSION
    legacy = codecs.decode(legacy_bytes)
    assert isinstance(legacy, codecs.ConnectRequest) and legacy.version == codecs.NULL_VERSION
    answer(fake, codecs.ControlResponse(7, legacy.correlation_id, 7, ControlResponseCode.OK, 0, ""),
           version=codecs.LEGACY_SCHEMA_VERSION)
    link.connect_step()
    assert link.legacy and link.control_session_id == 7
    assert link.offer(codecs.ListRecordingRequest(7, link.next_correlation_id(), 3))
    assert codecs.decode_header(fake.publication.offered[-1]).version == codecs.LEGACY_SCHEMA_VERSION


def test_a_modern_archive_refusing_the_1_15_connect_still_connects_with_auth_connect() -> None:
    link, fake, clock = make()
    steps(link)
    clock.now = 2_500
    link.connect_step()
    modern, legacy = fake.publication.sent()
    answer(fake, codecs.ControlResponse(8, legacy.correlation_id, 8, ControlResponseCode.ERROR, 0,
                                        "invalid client version 0"))
    answer(fake, codecs.ControlResponse(9, modern.correlation_id, 9, ControlResponseCode.OK, 0, ""))
    link.connect_step()
    assert link.control_session_id == 9 and not link.legacy


def test_poll_keeps_only_this_sessions_messages_and_close_sends_close_session() -> None:
    link, fake, _ = make()
    steps(link)
    answer(fake, codecs.ControlResponse(42, fake.publication.sent()[0].correlation_id, 42,
                                        ControlResponseCode.OK, 0, ""))
    link.connect_step()
    answer(fake, codecs.ControlResponse(41, 5, 0, ControlResponseCode.OK, 0, ""))
    answer(fake, codecs.ControlResponse(42, 6, 0, ControlResponseCode.OK, 0, ""))
    assert [m.correlation_id for m in link.poll()] == [6]
    link.close()
    assert isinstance(fake.publication.sent()[-1], codecs.CloseSessionRequest)
    assert fake.publication.closed and fake.subscription.closed
