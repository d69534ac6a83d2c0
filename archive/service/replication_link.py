"""`SourceArchiveLink`: the replicating archive's own small control connection to the source archive.

A replication (`replication_session`) is a client of the source archive. The service must not
import archive.client (import contract), so this is the service's own connection, built from the
codecs: a response subscription (its wildcard port resolved), an exclusive request publication to
the source's control channel and stream, then AuthConnectRequest with the modern protocol version
(answered by OK, or by a Challenge that is answered with the same credentials, as Aeron's
replication does). A source that has not answered after ``legacy_fallback_ms`` (without
credentials) also gets ConnectRequest in the 1.15.x layout: an Aeron 1.15.x archive knows only that
one, answers without a protocol version, and is then spoken to in its layout (schema version 0)
for the rest of the session. Nothing here blocks waiting for the source: `connect_step` advances one step a
call, `offer` is one attempt, `poll` returns what has arrived; the session owns the deadlines.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable
from typing import Any, Protocol

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode
from aeron_spark.archive.service.aeron_port import ExclusivePublication, close_quietly, is_connected

log = logging.getLogger(__name__)

#: Responses polled per call: a duty cycle never drains an unbounded backlog.
RESPONSE_FRAGMENT_LIMIT = 16
#: Who the source archive sees connecting (its clientInfo, schema v12+).
CLIENT_INFO = "name=aeron-spark-replication"


class SourceLinkError(Exception):
    """The source archive cannot be reached or refused the connection; ``code`` is Aeron's."""

    def __init__(self, message: str, code: int = ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE) -> None:
        super().__init__(message)
        self.code = int(code)


class ResponseSubscription(Protocol):
    """A response subscription as the link uses it (driver_integration's Subscription)."""

    def poll(self, handler: Callable[[memoryview, Any], object], fragment_limit: int) -> int: ...

    def resolved_channel(self) -> str | None: ...

    def close(self) -> None: ...


class LinkAeron(Protocol):
    """The Aeron client calls the link makes."""

    def add_subscription(self, channel: str, stream_id: int) -> Any: ...

    def add_exclusive_publication(self, channel: str, stream_id: int) -> ExclusivePublication: ...


class SourceArchiveLink:
    """See the module docstring. `connect_step` until `is_connected`; then `offer`/`poll`."""

    def __init__(self, aeron: LinkAeron, *, control_channel: str, control_stream_id: int,
                 response_channel: str, response_stream_id: int, credentials: bytes = b"",
                 clock: Callable[[], int], legacy_fallback_ms: int | None = None) -> None:
        self._aeron = aeron
        self.control_channel = control_channel
        self.control_stream_id = control_stream_id
        self._response_channel = response_channel
        self._response_stream_id = response_stream_id
        self._credentials = credentials
        # Ids of our own requests on the source's session: only our responses carry them.
        self._correlation_ids = itertools.count(random.randrange(1 << 40, 1 << 50))
        self._subscription: ResponseSubscription | None = None
        self._publication: ExclusivePublication | None = None
        self._resolved_response_channel: str | None = None
        self._connect_correlation_id: int | None = None
        self._legacy_correlation_id: int | None = None
        self._clock = clock
        self._legacy_fallback_ms = legacy_fallback_ms if not credentials else None
        self._connect_sent_ms = 0
        #: The source answered the 1.15.x ConnectRequest: every request goes in schema version 0.
        self.legacy = False
        self.control_session_id: int | None = None
        self._inbox: list[codecs.ControlMessage] = []
        self._closed = False

    @property
    def is_connected(self) -> bool:
        return self.control_session_id is not None

    def next_correlation_id(self) -> int:
        return next(self._correlation_ids)

    def connect_step(self) -> int:
        """One step of the handshake; raises `SourceLinkError` when the source refuses it."""
        try:
            if self._subscription is None:
                self._subscription = self._aeron.add_subscription(self._response_channel,
                                                                  self._response_stream_id)
                return 1
            if self._resolved_response_channel is None:
                self._resolved_response_channel = self._subscription.resolved_channel()
                return 0 if self._resolved_response_channel is None else 1
            if self._publication is None:
                self._publication = self._aeron.add_exclusive_publication(self.control_channel,
                                                                          self.control_stream_id)
                return 1
        except Exception as error:  # the driver refused a channel: the source cannot be reached
            raise SourceLinkError(f"cannot open a control connection to {self.control_channel} "
                                  f"stream {self.control_stream_id}: {error}") from error
        if self._connect_correlation_id is None:
            if not is_connected(self._publication):
                return 0
            correlation_id = self.next_correlation_id()
            request = codecs.AuthConnectRequest(
                correlation_id, self._response_stream_id, codecs.PROTOCOL_SEMANTIC_VERSION,
                self._resolved_response_channel, self._credentials, CLIENT_INFO)
            if self._publication.offer(codecs.encode(request)) > 0:
                self._connect_correlation_id = correlation_id
                self._connect_sent_ms = self._clock()
                return 1
            return 0
        return self._legacy_fallback() + self._await_connect_answer()

    def _legacy_fallback(self) -> int:
        fallback = self._legacy_fallback_ms
        if (fallback is None or self._legacy_correlation_id is not None or self._publication is None
                or self._clock() < self._connect_sent_ms + fallback):
            return 0
        correlation_id = self.next_correlation_id()
        request = codecs.ConnectRequest(correlation_id, self._response_stream_id, codecs.NULL_VERSION,
                                        self._resolved_response_channel or "")
        if self._publication.offer(codecs.encode(request, version=codecs.LEGACY_SCHEMA_VERSION)) > 0:
            self._legacy_correlation_id = correlation_id
            return 1
        return 0

    def _await_connect_answer(self) -> int:
        work = self._poll_into_inbox(accept_any_session=True)
        for message in self._inbox:
            if isinstance(message, codecs.Challenge) and message.correlation_id == self._connect_correlation_id:
                challenge_id = self.next_correlation_id()
                answer = codecs.ChallengeResponse(message.control_session_id, challenge_id, self._credentials)
                if self._publication is not None and self._publication.offer(codecs.encode(answer)) > 0:
                    self._connect_correlation_id = challenge_id
            elif isinstance(message, codecs.ControlResponse) and message.correlation_id in (
                    self._connect_correlation_id, self._legacy_correlation_id):
                if message.code != ControlResponseCode.OK and message.correlation_id == self._legacy_correlation_id:
                    # a modern archive refusing the 1.15.x connect: its answer to AuthConnect decides
                    log.info("replication: %s refused the 1.15.x connect: %s", self.control_channel,
                             message.error_message)
                    continue
                if message.code != ControlResponseCode.OK:  # Aeron reports any refused connect as 14
                    raise SourceLinkError(f"the source archive refused the connection: {message.error_message}")
                self.control_session_id = message.control_session_id
                self.legacy = message.correlation_id == self._legacy_correlation_id
                log.info("replication: connected to source archive %s (control session %d%s)",
                         self.control_channel, message.control_session_id, ", Aeron 1.15.x" if self.legacy else "")
                break
        self._inbox.clear()
        return work

    def offer(self, message: codecs.ControlMessage) -> bool:
        """One attempt to send ``message``; False when back-pressured or not connected."""
        publication = self._publication
        version = codecs.LEGACY_SCHEMA_VERSION if self.legacy else codecs.SCHEMA_VERSION
        return publication is not None and publication.offer(codecs.encode(message, version=version)) > 0

    @property
    def is_request_connected(self) -> bool:
        return self._publication is not None and is_connected(self._publication)

    def poll(self) -> list[codecs.ControlMessage]:
        """The responses, descriptors and signals of our session that arrived since the last call."""
        self._poll_into_inbox(accept_any_session=False)
        messages, self._inbox = self._inbox, []
        return messages

    def _poll_into_inbox(self, *, accept_any_session: bool) -> int:
        subscription = self._subscription
        if subscription is None:
            return 0
        inbox = self._inbox
        session_id = self.control_session_id

        def on_fragment(payload: memoryview, _header: Any) -> None:
            try:
                message = codecs.decode(bytes(payload))
            except codecs.CodecError as error:
                log.warning("replication: undecodable message from %s: %s", self.control_channel, error)
                return
            owner = getattr(message, "control_session_id", None)
            if accept_any_session or owner == session_id:
                inbox.append(message)

        return subscription.poll(on_fragment, RESPONSE_FRAGMENT_LIMIT)

    def close(self) -> None:
        """Closes the source session (CloseSessionRequest, best effort) and our resources."""
        if self._closed:
            return
        self._closed = True
        if self.control_session_id is not None:
            self.offer(codecs.CloseSessionRequest(self.control_session_id))
        for resource in (self._publication, self._subscription):
            if resource is not None:
                close_quietly(resource)
