"""One control session failing (its offer raising, an answer too long for its publication) closes
that session only: the others are served on, the failure is counted once, and error texts are
bounded (docs/reliability.md, "Control plane")."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ControlResponseCode
from aeron_spark.archive.service.authenticator import AcceptAllAuthenticator
from aeron_spark.archive.service.conductor_settings import ConductorSettings
from aeron_spark.archive.service.service_options import ArchiveServiceOptions
from aeron_spark.archive.service.control_demuxer import ControlDemuxer
from aeron_spark.archive.service.control_session import (
    MAX_ERROR_MESSAGE_LENGTH, TRUNCATED_MARKER, SessionState, bounded_text)
from aeron_spark.archive.service.failure_log import FailureLog


class Publication:
    max_message_length = 8192
    is_connected = True

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.raises: Exception | None = None
        self.closed = False

    def offer(self, data: bytes) -> int:
        if self.raises is not None:
            raise self.raises
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
        self.publications.append(Publication())
        return self.publications[-1]


def demuxer_with(handlers: dict, errors: list) -> tuple[ControlDemuxer, Aeron]:
    aeron = Aeron()
    demuxer = ControlDemuxer(aeron=aeron, settings=ConductorSettings(ArchiveServiceOptions(Path("/nonexistent")), 1),
                             authenticator=AcceptAllAuthenticator(), control_channels=[("aeron:ipc", 10)],
                             handlers=handlers, enqueue=lambda e: None, clock=lambda: 1_000,
                             error_handler=errors.append)
    return demuxer, aeron


def connect(demuxer: ControlDemuxer, image: int, correlation_id: int) -> int:
    demuxer.on_control_message(codecs.encode(codecs.AuthConnectRequest(
        correlation_id, 20, codecs.PROTOCOL_SEMANTIC_VERSION, "aeron:ipc", b"", "")), (0, image))
    for _ in range(3):
        demuxer.service_sessions(1_000)
    return max(demuxer.sessions)


def test_a_session_whose_offer_raises_is_closed_and_the_others_are_served():
    errors: list = []
    demuxer, aeron = demuxer_with({codecs.ArchiveIdRequest: lambda s, m: s.send_ok(m.correlation_id, 7)}, errors)
    first = connect(demuxer, 1, 1)
    second = connect(demuxer, 2, 2)
    for session_id, image in ((first, 1), (second, 2)):
        demuxer.on_control_message(codecs.encode(codecs.ArchiveIdRequest(session_id, 10 + image)), (0, image))
    aeron.publications[0].raises = RuntimeError("offer exploded")
    demuxer.service_sessions(1_000)
    assert first not in demuxer.sessions and aeron.publications[0].closed
    assert second in demuxer.sessions
    assert [m.relevant_id for m in aeron.publications[1].sent if m.correlation_id == 12] == [7]
    assert demuxer.error_count == 1 and [str(e) for e in errors] == ["offer exploded"]


def test_an_answer_longer_than_the_max_message_closes_that_session_not_the_demuxer():
    errors: list = []
    descriptor_too_long = codecs.RecordingSubscriptionDescriptor(0, 0, 1, 2, "x" * 9000)
    demuxer, aeron = demuxer_with({codecs.ArchiveIdRequest: lambda s, m: s._queue(descriptor_too_long)}, errors)
    first = connect(demuxer, 1, 1)
    demuxer.on_control_message(codecs.encode(codecs.ArchiveIdRequest(first, 10)), (0, 1))
    demuxer.service_sessions(1_000)
    assert first not in demuxer.sessions
    assert demuxer.error_count == 1 and "exceeds the response publication's max message length 8192" in str(errors[0])


def test_error_texts_are_bounded_and_ascii():
    text = bounded_text("é" + "y" * 10_000)
    assert len(text) == MAX_ERROR_MESSAGE_LENGTH and text.endswith(TRUNCATED_MARKER)
    assert text.startswith("\\xe9y")
    assert bounded_text("short") == "short"
    errors: list = []

    def fail(session, message):
        raise ValueError("bad channel " + "z" * 9000)
    demuxer, aeron = demuxer_with({codecs.ArchiveIdRequest: fail}, errors)
    first = connect(demuxer, 1, 1)
    demuxer.on_control_message(codecs.encode(codecs.ArchiveIdRequest(first, 10)), (0, 1))
    demuxer.service_sessions(1_000)
    error = next(m for m in aeron.publications[0].sent if m.correlation_id == 10)
    assert error.code == ControlResponseCode.ERROR and error.error_message.endswith(TRUNCATED_MARKER)
    assert demuxer.sessions[first].state is SessionState.ACTIVE


def test_repeated_failures_are_logged_once_with_a_count(caplog):
    now = [0.0]
    failures = FailureLog(logging.getLogger("test.failures"), clock=lambda: now[0], interval_s=10)
    with caplog.at_level(logging.WARNING, logger="test.failures"):
        for _ in range(1_000):
            failures.failed("kind", "bad request %d", 1)
        failures.failed("other", "another kind")
        now[0] = 11.0
        failures.failed("kind", "bad request %d", 1)
    assert [r.getMessage() for r in caplog.records] == [
        "bad request 1", "another kind", "bad request 1 (and 999 more times in the last 10 s)"]
    assert failures.total == 1_002


def test_a_request_the_media_driver_refuses_is_answered_with_its_reason_and_logged_without_a_traceback(caplog):
    from aeron_spark.driver_integration.errors import AeronError

    def refuse(session, message):
        raise AeronError("add_subscription('aeron:udp?endpoint=localhost:1', 5): (-11) generic error\n"
                         "[aeron_udp_port_resolver, aeron_netutil.c:180] port out of range\n")

    errors: list = []
    demuxer, aeron = demuxer_with({codecs.StartRecordingRequest: refuse}, errors)
    session_id = connect(demuxer, 1, 1)
    caplog.set_level(logging.WARNING)
    for correlation_id in (5, 6, 7):
        demuxer.on_control_message(codecs.encode(codecs.StartRecordingRequest(
            session_id, correlation_id, 5, codecs.SourceLocation.REMOTE, "aeron:udp?endpoint=localhost:1")), (0, 1))
    demuxer.service_sessions(1_000)
    answers = [m for m in aeron.publications[0].sent if m.correlation_id in (5, 6, 7)]
    assert [m.code for m in answers] == [ControlResponseCode.ERROR] * 3
    assert "media driver refused" in answers[0].error_message and "port out of range" in answers[0].error_message
    assert "\n" not in answers[0].error_message
    assert len(errors) == 3 and "Traceback" not in caplog.text
    assert caplog.text.count("refused by the media driver") == 1  # the repeats are counted, not logged
