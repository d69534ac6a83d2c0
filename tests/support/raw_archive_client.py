"""A raw control-protocol test client: speaks the archive protocol with ``codecs`` over
``driver_integration``, with no archive client code of ours in between.

It connects (answering a challenge if asked), sends any request (or raw bytes, or a request
encoded with an older schema version) and collects the decoded responses, so tests can check
exactly what a sidecar answers.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from aeron_spark.archive import codecs
from aeron_spark.driver_integration.client import AeronClient

from tests.support.ports import udp_channel
from tests.support.waiting import wait_until

RESPONSE_TIMEOUT_S = 10.0


class ArchiveResponseTimeout(AssertionError):
    pass


class RawArchiveClient:
    """A minimal archive client: one request publication, one response subscription."""

    def __init__(self, aeron: AeronClient, request_channel: str, request_stream_id: int, *,
                 response_channel: str | None = None, response_stream_id: int = 20) -> None:
        self.aeron = aeron
        if response_channel is None:
            response_channel = ("aeron:ipc" if request_channel.startswith("aeron:ipc")
                                else udp_channel())
        self.response_channel = response_channel
        self.response_stream_id = response_stream_id
        self.responses = aeron.add_subscription(response_channel, response_stream_id)
        self.requests = aeron.add_exclusive_publication(request_channel, request_stream_id)
        self.control_session_id: int | None = None
        self.received: list[Any] = []
        self._correlation = itertools.count(1000)
        wait_until(lambda: self.requests.is_connected, "request publication to connect", RESPONSE_TIMEOUT_S)

    def next_correlation_id(self) -> int:
        return next(self._correlation)

    # -- sending -------------------------------------------------------------------------------
    def send_bytes(self, data: bytes) -> None:
        deadline = time.monotonic() + RESPONSE_TIMEOUT_S
        while (result := self.requests.offer(data)) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"request offer failed with {result}")
            time.sleep(0.001)

    def send(self, message: Any, version: int = codecs.SCHEMA_VERSION) -> None:
        self.send_bytes(codecs.encode(message, version=version))

    # -- receiving -----------------------------------------------------------------------------
    def poll(self) -> int:
        def on_message(payload: memoryview, header: Any) -> None:
            try:
                self.received.append(codecs.decode(bytes(payload)))
            except codecs.UnknownTemplateError:
                pass  # Ping and friends
        return self.responses.poll(on_message, 100)

    def await_message(self, predicate: Callable[[Any], bool], what: str,
                      timeout: float = RESPONSE_TIMEOUT_S) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for index, message in enumerate(self.received):
                if predicate(message):
                    del self.received[index]
                    return message
            if time.monotonic() > deadline:
                raise ArchiveResponseTimeout(f"no {what} within {timeout} s; got {self.received!r}")
            if self.poll() == 0:
                time.sleep(0.001)

    def await_response(self, correlation_id: int, timeout: float = RESPONSE_TIMEOUT_S) -> codecs.ControlResponse:
        return self.await_message(
            lambda m: isinstance(m, codecs.ControlResponse) and m.correlation_id == correlation_id,
            f"ControlResponse for correlationId={correlation_id}", timeout)

    def await_signal(self, signal_type: codecs.RecordingSignal, recording_id: int | None = None,
                     timeout: float = RESPONSE_TIMEOUT_S) -> codecs.RecordingSignalEvent:
        return self.await_message(
            lambda m: isinstance(m, codecs.RecordingSignalEvent) and m.signal == signal_type
            and (recording_id is None or m.recording_id == recording_id),
            f"{signal_type.name} signal", timeout)

    def drain(self, seconds: float = 0.3) -> list[Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.poll() == 0:
                time.sleep(0.005)
        drained, self.received = self.received, []
        return drained

    # -- protocol --------------------------------------------------------------------------------
    def connect(self, credentials: bytes = b"",
                on_challenge: Callable[[bytes], bytes] | None = None,
                legacy: bool = False) -> codecs.ControlResponse:
        """Connects; returns the final connect response (OK or ERROR)."""
        correlation_id = self.next_correlation_id()
        if legacy:
            self.send(codecs.ConnectRequest(correlation_id, self.response_stream_id, 0,
                                            self.response_channel), version=0)
        else:
            self.send(codecs.AuthConnectRequest(
                correlation_id, self.response_stream_id, codecs.PROTOCOL_SEMANTIC_VERSION,
                self.response_channel, credentials, "name=raw-test-client"))
        message = self.await_message(
            lambda m: getattr(m, "correlation_id", None) == correlation_id
            and isinstance(m, (codecs.ControlResponse, codecs.Challenge)), "connect response")
        if isinstance(message, codecs.Challenge):
            if on_challenge is None:
                raise AssertionError(f"unexpected challenge {message.encoded_challenge!r}")
            answer_correlation = self.next_correlation_id()
            self.send(codecs.ChallengeResponse(message.control_session_id, answer_correlation,
                                               on_challenge(message.encoded_challenge)))
            message = self.await_response(answer_correlation)
        if message.code == codecs.ControlResponseCode.OK:
            self.control_session_id = message.control_session_id
        return message

    def request(self, factory: Callable[[int, int], Any], version: int = codecs.SCHEMA_VERSION) -> int:
        """Sends ``factory(controlSessionId, correlationId)``; returns the correlation id."""
        correlation_id = self.next_correlation_id()
        session_id = self.control_session_id
        assert session_id is not None, "connect() first"
        self.send(factory(session_id, correlation_id), version=version)
        return correlation_id

    def call(self, factory: Callable[[int, int], Any]) -> codecs.ControlResponse:
        return self.await_response(self.request(factory))

    def list_recordings(self, from_id: int = 0, count: int = 100) -> tuple[list[Any], Any]:
        correlation_id = self.request(lambda s, c: codecs.ListRecordingsRequest(s, c, from_id, count))
        descriptors: list[Any] = []
        while True:
            message = self.await_message(
                lambda m: getattr(m, "correlation_id", None) == correlation_id
                and isinstance(m, (codecs.RecordingDescriptorMessage, codecs.ControlResponse)),
                "listing")
            if isinstance(message, codecs.ControlResponse):
                return descriptors, message
            descriptors.append(message)
            if len(descriptors) == count:
                return descriptors, None

    def close_session(self) -> None:
        if self.control_session_id is not None:
            self.send(codecs.CloseSessionRequest(self.control_session_id))

    def close(self) -> None:
        for resource in (self.requests, self.responses):
            try:
                resource.close()
            except Exception:  # noqa: BLE001 - best effort in teardown
                pass
