"""Host names in a channel are looked up here, on lookup threads, before the media driver sees the
channel: an async add (``AeronClient.async_add_exclusive_publication``) never makes the driver
resolve a name.

Why: Aeron's C driver carries out one client command at a time, and an add whose channel names a
host waits for that name's lookup (its native resource agent calls getaddrinfo). A DNS server that
does not answer costs two 5 s tries, so one client's response channel naming such a host left
the driver answering no client at all, the archive's own adds included, for 10 s or more
(issue 33; docs/reliability.md, "A driver that stops ticking"). Here the lookup takes one of a few
lookup threads; the driver gets the channel with the address in place of the name (``endpoint`` and
``control``, IPv4 first as Aeron resolves names), and a name that does not resolve fails the add
naming the host and the channel, as the driver's refusal would.
"""

from __future__ import annotations

import ipaddress
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, Protocol, TypeVar

from .channel_uri import CONTROL, ENDPOINT, ChannelUri, ChannelUriError
from .errors import AeronError

#: Lookups running at once; more wait their turn (each add still ends at its own timeout).
LOOKUP_THREADS = 4
HOST_KEYS = (ENDPOINT, CONTROL)

_queue: queue.SimpleQueue[tuple[Future[str], str]] = queue.SimpleQueue()
_threads: list[threading.Thread] = []
_threads_lock = threading.Lock()


def submit_lookup(host: str) -> Future[str]:
    """``look_up(host)`` on a lookup thread. The threads are daemons: a lookup the DNS never
    answers does not hold up the process's exit (a ThreadPoolExecutor's would)."""
    future: Future[str] = Future()
    _queue.put((future, host))
    with _threads_lock:
        if len(_threads) < LOOKUP_THREADS:
            thread = threading.Thread(target=_lookup_loop, name=f"aeron-host-lookup-{len(_threads)}", daemon=True)
            _threads.append(thread)
            thread.start()
    return future


def _forget_parent_threads() -> None:
    # A forked child has none of its parent's threads (nor may it touch a lock held at fork).
    global _queue, _threads_lock
    _queue = queue.SimpleQueue()
    _threads.clear()
    _threads_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_parent_threads)


def _lookup_loop() -> None:
    while True:
        future, host = _queue.get()
        if not future.set_running_or_notify_cancel():
            continue  # its add was discarded before the lookup began
        try:
            future.set_result(look_up(host))
        except BaseException as error:  # noqa: BLE001 - handed to the add's poll
            future.set_exception(error)


class PendingResult(Protocol):
    """What ``poll``/``discard`` need of the add made once the names are looked up (``PendingAdd``)."""

    @property
    def is_done(self) -> bool: ...

    def poll(self) -> object | None: ...

    def discard(self) -> bool: ...


ResourceT = TypeVar("ResourceT")


def host_names(channel: str) -> list[str]:
    """The host names (not IP literals) of a UDP channel's ``endpoint`` and ``control``; [] for IPC,
    for literals, and for a channel that does not parse (the driver then refuses it itself)."""
    try:
        uri = ChannelUri.parse(channel)
    except ChannelUriError:
        return []
    if not uri.is_udp:
        return []
    names = []
    for key in HOST_KEYS:
        host = _host_of(uri.get(key))
        if host is not None and not _is_literal(host) and host not in names:
            names.append(host)
    return names


def _host_of(address: str | None) -> str | None:
    if not address:
        return None
    host, separator, port = address.rpartition(":")
    if not separator or not host or host.startswith("["):
        return None  # no port (the driver refuses it) or a bracketed IPv6 literal
    return host


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def look_up(host: str) -> str:
    """The address Aeron would resolve ``host`` to (IPv4 first), as a channel writes it."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    ordered = sorted((info for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)),
                     key=lambda info: info[0] != socket.AF_INET)
    if not ordered:
        raise OSError(f"no IPv4 or IPv6 address for {host!r}")
    address = str(ordered[0][4][0])
    return address if ordered[0][0] == socket.AF_INET else f"[{address}]"


def with_addresses(channel: str, addresses: dict[str, str]) -> str:
    """``channel`` with each looked-up host of ``endpoint``/``control`` replaced by its address."""
    uri = ChannelUri.parse(channel)
    for key in HOST_KEYS:
        value = uri.get(key)
        host = _host_of(value)
        if value is not None and host in addresses:
            uri.set(key, addresses[host] + value[len(host):])
    return uri.build()


class PendingAfterLookup(Generic[ResourceT]):
    """An add whose channel names hosts: looked up on the lookup threads, then added (``start_add``
    with the addressed channel) and polled as that add. ``poll`` and ``discard`` behave as
    ``PendingAdd``'s; a name that does not resolve raises AeronError naming it."""

    def __init__(self, channel: str, names: list[str], start_add: Callable[[str], PendingResult],
                 what: str, timeout: float) -> None:
        self._channel = channel
        self._what = what
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._start_add = start_add
        self._lookups: dict[str, Future[str]] = {name: submit_lookup(name) for name in names}
        self._add: PendingResult | None = None
        self._failure: AeronError | None = None

    @property
    def what(self) -> str:
        return self._what

    @property
    def is_done(self) -> bool:
        """True once ``poll`` returns or raises at once: a lookup failed, or the driver answered the add."""
        return self._failure is not None or (self._add is not None and self._add.is_done)

    def _addresses(self) -> dict[str, str] | None:
        """Every name's address once all lookups ended; None while one runs; raises for a failed one."""
        if not all(lookup.done() for lookup in self._lookups.values()):
            if time.monotonic() > self._deadline:
                raise AeronError(f"{self._what} timed out after {self._timeout}s looking up "
                                 f"{', '.join(self._lookups)}")
            return None
        addresses = {}
        for name, lookup in self._lookups.items():
            try:
                addresses[name] = lookup.result()
            except OSError as error:
                raise AeronError(f"{self._what}: cannot resolve host {name!r} of channel {self._channel!r}: "
                                 f"{error}") from None
        return addresses

    def poll(self) -> ResourceT | None:
        if self._failure is not None:
            raise self._failure
        if self._add is None:
            try:
                addresses = self._addresses()
            except AeronError as error:
                self._failure = error
                raise
            if addresses is None:
                return None
            self._add = self._start_add(with_addresses(self._channel, addresses))
        return self._add.poll()  # type: ignore[return-value]  # start_add's resource is ResourceT

    def discard(self) -> bool:
        if self._add is not None:
            return self._add.discard()
        for lookup in self._lookups.values():
            lookup.cancel()  # one already running ends on its own; nothing was asked of the driver
        return True

    def __repr__(self) -> str:
        state = "failed" if self._failure is not None else "looking up" if self._add is None else repr(self._add)
        return f"{type(self).__name__}({self._what}, {state})"
