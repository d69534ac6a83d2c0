"""What the conductor needs of driver_integration's Aeron client, duck-typed.

`ArchiveService` wires the real `AeronClient`; unit tests may pass fakes. The conductor's parts
(control demuxer, request handlers, recording-event publisher) use only these calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Publication(Protocol):
    def offer(self, data: bytes) -> int: ...

    @property
    def is_connected(self) -> bool: ...

    def close(self) -> None: ...


class ExclusivePublication(Publication, Protocol):
    """An exclusive publication: a response or events publication offers messages, a replay
    offers recorded blocks and padding (`replay_session.ReplayPublication`)."""

    session_id: int
    stream_id: int

    def offer_block(self, buffer: Any, offset: int, length: int) -> int: ...

    def append_padding(self, length: int) -> int: ...


class Subscription(Protocol):
    registration_id: int

    def poll(self, handler: Callable[[memoryview, Any], object], fragment_limit: int) -> int: ...

    def close(self) -> None: ...


class AeronPort(Protocol):
    """The Aeron client calls the conductor makes (driver_integration's AeronClient)."""

    def add_subscription(self, channel: str, stream_id: int, *,
                         on_available_image: Callable[[Any], None] | None = None,
                         on_unavailable_image: Callable[[Any], None] | None = None) -> Subscription: ...

    def add_exclusive_publication(self, channel: str, stream_id: int) -> ExclusivePublication: ...

    def add_counter(self, type_id: int, key: bytes, label: str) -> Any: ...


def is_connected(publication: Any) -> bool:
    """``publication.is_connected``, whether a property (AeronClient) or a method."""
    connected = publication.is_connected
    return bool(connected() if callable(connected) else connected)


def close_quietly(resource: Any) -> None:
    """Closes ``resource``; a failure is logged, not raised (shutdown and clean-up paths)."""
    try:
        resource.close()
    except Exception:  # noqa: BLE001
        log.exception("closing %r failed", resource)
