"""Control sessions still connecting: bounded, fairly shared between request Images, and the adds
the media driver is still carrying out for them.

A ConnectRequest costs the conductor no driver round trip: the session's response publication and
its counter are asked of the driver without waiting (``async_add_*``, as Aeron's archive does) and
polled each duty cycle (`control_demuxer`). Until a session is ACTIVE (its first request after the
connect OK) it is *connecting*, and connecting sessions are capped, so a flood of ConnectRequests
with response channels nobody answers on (unreachable UDP ports, unread IPC streams) holds at most
`MAX_CONNECTING_SESSIONS` publications and counters, each for at most the connect timeout:

* one request Image (one client's request publication) holds at most
  `MAX_CONNECTING_SESSIONS_PER_IMAGE`; a connect beyond that is dropped (logged once per kind,
  counted), before anything is allocated;
* when every slot is taken, a connect from an Image holding fewer slots than the busiest one takes
  the busiest Image's oldest slot (that session is closed). A new client therefore gets in however
  many Images flood the archive; a flood from one Image only ever competes with itself.

An add nobody wants any more (its session closed first) is `discard`-ed until the C client settles
it, and what arrives is closed (`Discards`): dropping it unpolled would leak the driver's
publication and its log file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

#: Sessions in their handshake (INIT to AUTHENTICATED or REJECTED), over all request Images.
MAX_CONNECTING_SESSIONS = 128
#: Sessions in their handshake created by one request Image.
MAX_CONNECTING_SESSIONS_PER_IMAGE = 16
#: Unwanted adds waiting for the C client's answer; beyond this a new connect is dropped (a driver
#: that answers nothing for the client's driver timeout must not let them pile up).
MAX_DISCARDS = 4 * MAX_CONNECTING_SESSIONS

ResourceT = TypeVar("ResourceT", covariant=True)


class PendingResource(Protocol[ResourceT]):
    """An add the media driver is still carrying out (driver_integration's ``PendingAdd``)."""

    def poll(self) -> ResourceT | None: ...

    def discard(self) -> bool: ...


class Discards:
    """Unwanted pending adds, polled (`reap`) until the C client settles each."""

    def __init__(self) -> None:
        self._pending: list[PendingResource[object]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, pending: PendingResource[object]) -> None:
        if not _discarded(pending):
            self._pending.append(pending)

    def reap(self) -> int:
        """Polls each once; returns how many settled."""
        if not self._pending:
            return 0
        before = len(self._pending)
        self._pending = [pending for pending in self._pending if not _discarded(pending)]
        return before - len(self._pending)

    def drain(self) -> None:
        """At shutdown: one last poll of each (the client closes next and frees the rest)."""
        self.reap()
        self._pending.clear()


def _discarded(pending: PendingResource[object]) -> bool:
    try:
        return pending.discard()
    except Exception:  # noqa: BLE001 - a failed close leaves nothing more to do
        log.debug("discarding %r failed", pending, exc_info=True)
        return True


class ConnectingSessions:
    """Which sessions are connecting, per request Image, in arrival order; see the module docstring."""

    def __init__(self, *, max_sessions: int = MAX_CONNECTING_SESSIONS,
                 max_per_image: int = MAX_CONNECTING_SESSIONS_PER_IMAGE) -> None:
        if max_per_image <= 0 or max_sessions < max_per_image:
            raise ValueError(f"connecting-session caps must satisfy 0 < per image ({max_per_image}) "
                             f"<= total ({max_sessions})")
        self.max_sessions = max_sessions
        self.max_per_image = max_per_image
        self._by_image: dict[Hashable, dict[int, None]] = {}  # insertion-ordered session ids
        self._image_of: dict[int, Hashable] = {}

    def __len__(self) -> int:
        return len(self._image_of)

    def __contains__(self, session_id: int) -> bool:
        return session_id in self._image_of

    def admit(self, image_key: Hashable) -> tuple[bool, int | None]:
        """Whether a connect from ``image_key`` may open a session, and the session to close first
        to make room for it (None when there is room)."""
        on_image = len(self._by_image.get(image_key, ()))
        if on_image >= self.max_per_image:
            return False, None
        if len(self._image_of) < self.max_sessions:
            return True, None
        busiest = max(self._by_image.values(), key=len)
        if len(busiest) <= on_image + 1:
            return False, None  # shared as fairly as it gets: the newcomer waits its turn
        return True, next(iter(busiest))

    def add(self, image_key: Hashable, session_id: int) -> None:
        self._by_image.setdefault(image_key, {})[session_id] = None
        self._image_of[session_id] = image_key

    def remove(self, session_id: int) -> None:
        image_key = self._image_of.pop(session_id, None)
        if image_key is None:
            return
        on_image = self._by_image[image_key]
        on_image.pop(session_id, None)
        if not on_image:
            del self._by_image[image_key]


class Closeable(Protocol):
    def close(self) -> None: ...


ClosableT = TypeVar("ClosableT", bound=Closeable)


class Settled(Generic[ClosableT]):
    """An add already carried out (a port without ``async_add_*``: unit-test fakes): the resource,
    or the error the blocking add raised."""

    def __init__(self, resource: ClosableT | None, error: Exception | None = None) -> None:
        self._resource = resource
        self._error = error

    @classmethod
    def of(cls, add: Callable[[], ClosableT]) -> Settled[ClosableT]:
        try:
            return cls(add())
        except Exception as error:  # noqa: BLE001 - raised again by poll, as an async add's refusal
            return cls(None, error)

    def poll(self) -> ClosableT | None:
        if self._error is not None:
            raise self._error
        return self._resource

    def discard(self) -> bool:
        if self._resource is not None:
            self._resource.close()
        return True
