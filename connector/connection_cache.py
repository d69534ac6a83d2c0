"""Per-process cache of archive connections: Spark reuses its Python workers across tasks and
commits, so each worker keeps one connection per key instead of connecting every time.

A worker may sit idle for long; meanwhile the archive may close the session (a restart, or a
response publication left back-pressured: a modern archive pings each session every second, and a
client that reads nothing fills its response term in minutes). So:

* a cached connection is checked before it is handed out again (``is_connected``) and a closed
  one is replaced by a fresh connection, so the next task does not fail on it;
* connections used through `lease` are kept alive while no lease holds them: a daemon thread calls
  their ``keep_alive()`` every `KEEP_ALIVE_INTERVAL_S` (read what the archive sent, pings
  included, and tell it the client lives); one that fails is dropped and re-opened at the next
  lease. A connection is never touched by that thread while leased (archive clients are not
  thread-safe), and never if it was handed out by `get`, whose callers do not say when they are done.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, Protocol, TypeVar


class CachedConnection(Protocol):
    """What the cache needs of a connection: whether it still is one, a keep-alive while idle, and
    closing when it is dropped."""

    @property
    def is_connected(self) -> bool: ...

    def keep_alive(self) -> None: ...

    def close(self) -> None: ...


Key = TypeVar("Key", bound=Hashable)
Connection = TypeVar("Connection", bound=CachedConnection)

log = logging.getLogger(__name__)

#: How often idle leased-only connections are kept alive. Well inside the minutes a modern
#: archive's 1 s pings take to fill a response term, and cheap: one poll and one small offer.
KEEP_ALIVE_INTERVAL_S = 2.0


class _Cached(Generic[Connection]):
    __slots__ = ("connection", "holder", "unmanaged")

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.holder = threading.Lock()  # held by a lease, or by the keeper for one keep-alive
        self.unmanaged = False  # handed out by get(): its user may hold it at any time


class ConnectionCache(Generic[Key, Connection]):
    def __init__(self, opener: Callable[[Key], Connection], *,
                 keep_alive_interval_s: float = KEEP_ALIVE_INTERVAL_S) -> None:
        self._opener = opener
        self._entries: dict[Key, _Cached[Connection]] = {}
        self._lock = threading.Lock()
        self._keep_alive_interval_s = keep_alive_interval_s
        self._keeper: threading.Thread | None = None
        self.keep_alives = 0  # keep_alive() calls made (a metric, and what the tests watch)

    def get(self, key: Key) -> tuple[Connection, bool]:
        """The cached connection for ``key`` (opened on first use), and whether it was reused.
        Such a connection is not kept alive (the caller does not say when it is done with it)."""
        with self._lock:
            entry, reused = self._entry(key)
            entry.unmanaged = True
            return entry.connection, reused

    @contextlib.contextmanager
    def lease(self, key: Key) -> Iterator[tuple[Connection, bool]]:
        """The cached connection for ``key`` and whether it was reused, held by the caller for the
        ``with`` block; between leases it is kept alive."""
        while True:
            with self._lock:
                entry, reused = self._entry(key)
                self._start_keeper()
            entry.holder.acquire()  # waits out a keep-alive in progress (or another thread's lease)
            with self._lock:
                if self._entries.get(key) is entry:
                    break
            entry.holder.release()  # the keep-alive found it dead and dropped it: take a fresh one
        try:
            yield entry.connection, reused
        finally:
            entry.holder.release()

    def forget(self, key: Key) -> None:
        """Drop and close the connection for ``key`` (after it failed); closing errors are moot."""
        with self._lock:
            entry = self._entries.pop(key, None)
        if entry is not None:
            with contextlib.suppress(Exception):
                entry.connection.close()

    def keep_idle_connections_alive(self) -> int:
        """One round of the keeper: ``keep_alive()`` on every connection no one holds; a failing
        one is dropped. Returns how many were kept alive."""
        with self._lock:
            candidates = [(key, entry) for key, entry in self._entries.items() if not entry.unmanaged]
        kept = 0
        for key, entry in candidates:
            if not entry.holder.acquire(blocking=False):
                continue  # in use: its user talks to the archive itself
            try:
                entry.connection.keep_alive()
                kept += 1
                failed = not _still_connected(entry.connection)
            except Exception as error:  # noqa: BLE001 - a dead connection is re-opened at its next lease
                log.info("archive connection %r failed its keep-alive (%s): re-opened at next use", key, error)
                failed = True
            try:
                if failed:  # dropped while still held, so no lease can take it in between
                    with self._lock:
                        if self._entries.get(key) is entry:
                            del self._entries[key]
                    with contextlib.suppress(Exception):
                        entry.connection.close()
            finally:
                entry.holder.release()
        self.keep_alives += kept
        return kept

    def _entry(self, key: Key) -> tuple[_Cached[Connection], bool]:
        entry = self._entries.get(key)
        if entry is not None:
            if entry.holder.locked() or _still_connected(entry.connection):
                return entry, True
            del self._entries[key]
            with contextlib.suppress(Exception):
                entry.connection.close()
        entry = _Cached(self._opener(key))
        self._entries[key] = entry
        return entry, False

    def _start_keeper(self) -> None:
        if self._keeper is None and self._keep_alive_interval_s > 0:
            self._keeper = threading.Thread(target=self._keep_alive_loop, name="aeron-archive-keep-alive", daemon=True)
            self._keeper.start()

    def _keep_alive_loop(self) -> None:
        while True:
            time.sleep(max(self._keep_alive_interval_s, 0.01))
            try:
                self.keep_idle_connections_alive()
            except Exception:  # noqa: BLE001 - the keeper must outlive any one failure
                log.warning("archive connection keep-alive round failed", exc_info=True)


def _still_connected(connection: CachedConnection) -> bool:
    try:
        return bool(connection.is_connected)
    except Exception:  # noqa: BLE001 - a connection that cannot even say is not usable
        return False
