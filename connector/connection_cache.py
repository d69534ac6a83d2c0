"""Per-process cache of archive connections: Spark reuses its Python workers across tasks and
commits, so each worker keeps one connection per key instead of connecting every time.

A worker may sit idle for long; meanwhile the archive may close the session (an idle timeout,
a restart). A cached connection is checked before it is handed out again (``is_connected``,
when it has one) and a closed one is replaced by a fresh connection, so the next task does not
fail on it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Connection = TypeVar("Connection")


class ConnectionCache(Generic[Key, Connection]):
    def __init__(self, opener: Callable[[Key], Connection]) -> None:
        self._opener = opener
        self._connections: dict[Key, Connection] = {}
        self._lock = threading.Lock()

    def get(self, key: Key) -> tuple[Connection, bool]:
        """The cached connection for ``key`` (opened on first use), and whether it was reused."""
        with self._lock:
            connection = self._connections.get(key)
            if connection is not None:
                if _still_connected(connection):
                    return connection, True
                del self._connections[key]
                with contextlib.suppress(Exception):
                    connection.close()
            connection = self._opener(key)
            self._connections[key] = connection
            return connection, False

    def forget(self, key: Key) -> None:
        """Drop and close the connection for ``key`` (after it failed); closing errors are moot."""
        with self._lock:
            connection = self._connections.pop(key, None)
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()


def _still_connected(connection: object) -> bool:
    """Connections without ``is_connected`` (test fakes) are taken as connected."""
    try:
        return bool(getattr(connection, "is_connected", True))
    except Exception:  # noqa: BLE001 - a connection that cannot even say is not usable
        return False
