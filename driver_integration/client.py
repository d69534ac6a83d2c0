"""``AeronClient``: one Aeron C client (``aeron_t``) connected to a media driver directory.

The C client runs its own conductor thread (it talks to the driver and fires image
notifications). The ``add_*`` calls here are blocking: an async add polled until the driver
answers or ``timeout`` passes. Closing the client closes everything it created.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyaeron

from ._capi import COUNTER_MAX_KEY_LENGTH, COUNTER_MAX_LABEL_LENGTH, ffi, lib
from .errors import AeronError, check, closed_error, last_c_error
from .counters import Counter, CountersReader, PendingCounter
from .host_lookup import PendingAfterLookup, host_names
from .publication import ExclusivePublication, InitialPosition, PendingExclusivePublication, Publication
from .subscription import (
    AVAILABLE_IMAGE_CALLBACK,
    PendingSubscription,
    UNAVAILABLE_IMAGE_CALLBACK,
    ImageCallback,
    Subscription,
    _SubscriptionState,
)

if TYPE_CHECKING:
    from .image import _ImageHandle
    from .media_driver import MediaDriver

log = logging.getLogger(__name__)

# Every add and close waits for the client's conductor thread to see the driver's answer; with
# Aeron's default idle sleep of 16 ms that made each take ~30 ms (a bounded replay needs three).
# The C client reads this only from the environment, when a context is initialised: a value the
# user set wins. 1 ms costs ~1,000 cheap wake-ups a second per client.
CLIENT_IDLE_SLEEP_ENV = "AERON_CLIENT_IDLE_SLEEP_DURATION"
DEFAULT_CLIENT_IDLE_SLEEP = "1ms"
os.environ.setdefault(CLIENT_IDLE_SLEEP_ENV, DEFAULT_CLIENT_IDLE_SLEEP)


class AeronClient:
    """Connects to the media driver whose directory is ``aeron_dir`` (embedded or external)."""

    def __init__(self, aeron_dir: str, *, client_name: str | None = None, timeout: float = 10.0,
                 driver_timeout: float = 10.0, fast_offer: bool = True) -> None:
        """``timeout``: how long a blocking add waits for the driver's answer.
        ``driver_timeout``: how long the driver may stay silent before the client declares it
        dead (Aeron's driver timeout; kept separate because a short one kills healthy clients).
        ``fast_offer``: let concurrent publications offer through pyaeron (a second, lazily
        created client on the same driver; see ``Publication``)."""
        if timeout <= 0:
            raise ValueError(f"timeout {timeout} is invalid: must be a positive number of seconds")
        if driver_timeout < 1:
            raise ValueError(f"driver_timeout {driver_timeout} is invalid: must be at least 1 second")
        self.aeron_dir = aeron_dir
        self.timeout = timeout
        self.last_async_error: tuple[int, str] | None = None
        # Aeron's default error handler exits the process; ours logs and keeps the error.
        self._error_handler = ffi.callback("aeron_error_handler_t", self._on_async_error)
        self.fast_offer = fast_offer
        self._pyaeron: pyaeron.Aeron | None = None
        self._lock = threading.RLock()
        self._resources: dict[int, Any] = {}
        self._image_handles: set[_ImageHandle] = set()
        self._keepalive: list[object] = []  # notification handles the conductor may still use
        self._owned_driver: MediaDriver | None = None
        self._counters_reader: CountersReader | None = None
        self._aeron = ffi.NULL
        context_p = ffi.new("aeron_context_t **")
        check(lib.aeron_context_init(context_p), "aeron_context_init")
        self._context = context_p[0]
        try:
            check(lib.aeron_context_set_dir(self._context, aeron_dir.encode()), "set client dir")
            check(lib.aeron_context_set_driver_timeout_ms(self._context, int(driver_timeout * 1000)),
                  "set driver timeout")
            check(lib.aeron_context_set_error_handler(self._context, self._error_handler, ffi.NULL),
                  "set error handler")
            if client_name is not None:
                check(lib.aeron_context_set_client_name(self._context, client_name.encode()),
                      f"set client name {client_name!r}")
            aeron_p = ffi.new("aeron_t **")
            check(lib.aeron_init(aeron_p, self._context),
                  f"connect to the media driver in {aeron_dir} (aeron_init)")
            self._aeron = aeron_p[0]
            check(lib.aeron_start(self._aeron), "aeron_start")
        except BaseException:
            self._release()
            raise

    def _on_async_error(self, _clientd: object, errcode: int, message: object) -> None:
        # Runs on the Aeron client conductor thread (driver timeouts, async errors).
        text = ffi.string(message).decode(errors="replace") if message != ffi.NULL else ""
        self.last_async_error = (errcode, text)
        log.error("Aeron client error (%d) in %s: %s", errcode, self.aeron_dir, text)

    @classmethod
    def with_embedded_driver(cls, *, client_name: str | None = None, timeout: float = 10.0,
                             **driver_options: object) -> AeronClient:
        """A client that owns a fresh embedded MediaDriver; closing the client stops the driver."""
        from .media_driver import MediaDriver

        driver = MediaDriver(None, **driver_options)
        try:
            client = cls(driver.dir, client_name=client_name, timeout=timeout)
        except BaseException:
            driver.close()
            raise
        client._owned_driver = driver
        return client

    @property
    def driver(self) -> MediaDriver | None:
        """The embedded driver this client owns (``with_embedded_driver``), else None."""
        return self._owned_driver

    # -- identity ------------------------------------------------------------------------------
    def _live(self) -> object:
        if self._aeron == ffi.NULL:
            raise closed_error(f"Aeron client ({self.aeron_dir})")
        return self._aeron

    @property
    def is_closed(self) -> bool:
        return self._aeron == ffi.NULL

    @property
    def client_id(self) -> int:
        return lib.aeron_client_id(self._live())

    def next_correlation_id(self) -> int:
        return lib.aeron_next_correlation_id(self._live())

    @property
    def counters_reader(self) -> CountersReader:
        if self._counters_reader is None:
            self._counters_reader = CountersReader(self, lib.aeron_counters_reader(self._live()))
        return self._counters_reader

    # -- adding resources ----------------------------------------------------------------------
    def _await(self, poll: Callable[[Any, Any], int], out_type: str, async_op: object, what: str) -> object:
        out = ffi.new(out_type)
        deadline = time.monotonic() + self.timeout
        pause = 0.0001
        while True:
            result = poll(out, async_op)
            if result > 0:
                return out[0]
            if result < 0:
                raise last_c_error(what)
            if time.monotonic() > deadline:
                raise AeronError(f"{what} timed out after {self.timeout}s without an answer from the "
                                 f"media driver in {self.aeron_dir}")
            time.sleep(pause)
            pause = min(pause * 2, 0.002)

    def _adopt(self, resource: Any) -> Any:
        with self._lock:
            if self._aeron == ffi.NULL:
                resource.close()
                raise closed_error(f"Aeron client ({self.aeron_dir})")
            self._resources[id(resource)] = resource
        return resource

    def _forget(self, resource: object) -> None:
        with self._lock:
            self._resources.pop(id(resource), None)

    def add_publication(self, channel: str, stream_id: int) -> Publication:
        """A concurrent publication (shared by every adder of the same channel and stream)."""
        what = f"add_publication({channel!r}, {stream_id})"
        async_p = ffi.new("aeron_async_add_publication_t **")
        check(lib.aeron_async_add_publication(async_p, self._live(), channel.encode(), stream_id), what)
        pointer = self._await(lib.aeron_async_add_publication_poll, "aeron_publication_t **", async_p[0], what)
        return self._adopt(Publication(self, pointer, self._fast_publication(channel, stream_id)))

    def _fast_publication(self, channel: str, stream_id: int) -> object | None:
        """pyaeron's publication on the same channel and stream (see ``Publication``), or None."""
        if not self.fast_offer:
            return None
        try:
            with self._lock:
                if self._pyaeron is None:
                    self._pyaeron = pyaeron.Aeron(dir=self.aeron_dir)
                pyaeron_client = self._pyaeron
            return pyaeron_client.add_publication(channel, stream_id)
        except pyaeron.AeronError:
            return None  # the plain cffi path still works

    def add_exclusive_publication(self, channel: str, stream_id: int, *,
                                  initial_position: InitialPosition | None = None) -> ExclusivePublication:
        """An exclusive publication, optionally starting at ``initial_position`` (adds the
        init-term-id/term-id/term-offset/term-length[/mtu] channel params)."""
        if initial_position is not None:
            channel = initial_position.apply_to(channel)
        what = f"add_exclusive_publication({channel!r}, {stream_id})"
        async_p = ffi.new("aeron_async_add_exclusive_publication_t **")
        check(lib.aeron_async_add_exclusive_publication(async_p, self._live(), channel.encode(), stream_id),
              what)
        pointer = self._await(lib.aeron_async_add_exclusive_publication_poll,
                              "aeron_exclusive_publication_t **", async_p[0], what)
        return self._adopt(ExclusivePublication(self, pointer))

    def async_add_exclusive_publication(self, channel: str, stream_id: int, *,
                                        initial_position: InitialPosition | None = None
                                        ) -> PendingExclusivePublication | PendingAfterLookup[ExclusivePublication]:
        """``add_exclusive_publication`` without waiting: the request is sent to the driver and
        the returned ``PendingExclusivePublication`` is polled until the publication is there
        (or the driver's refusal, or ``timeout``, raises). Host names in the channel are looked up
        first, off the driver (``host_lookup.PendingAfterLookup``)."""
        if initial_position is not None:
            channel = initial_position.apply_to(channel)
        what = f"add_exclusive_publication({channel!r}, {stream_id})"
        names = host_names(channel)
        if names:  # looked up here, not by the driver: it answers nobody while it resolves (host_lookup)
            return PendingAfterLookup(channel, names, lambda addressed: self._send_exclusive_add(
                addressed, stream_id, what, requested_channel=channel), what, self.timeout)
        return self._send_exclusive_add(channel, stream_id, what)

    def _send_exclusive_add(self, channel: str, stream_id: int, what: str, *,
                            requested_channel: str | None = None) -> PendingExclusivePublication:
        """``what`` and ``requested_channel`` name the channel as the caller gave it (before any host
        was looked up); the publication's ``channel`` is that one, as Java's ``channel()`` is."""
        async_p = ffi.new("aeron_async_add_exclusive_publication_t **")
        check(lib.aeron_async_add_exclusive_publication(async_p, self._live(), channel.encode(), stream_id),
              what)
        return PendingExclusivePublication(self, async_p[0], what, self.timeout, channel=requested_channel)

    def add_subscription(self, channel: str, stream_id: int, *,
                         on_available_image: ImageCallback | None = None,
                         on_unavailable_image: ImageCallback | None = None) -> Subscription:
        """A subscription (``aeron:udp``, ``aeron:ipc`` or ``aeron-spy:...`` channels).

        The image callbacks run on the Aeron client conductor thread: see ``subscription``.
        """
        async_op, what, state = self._request_subscription(channel, stream_id, on_available_image,
                                                           on_unavailable_image)
        pointer = self._await(lib.aeron_async_add_subscription_poll, "aeron_subscription_t **", async_op, what)
        return self._adopt(Subscription(self, pointer, state))

    def async_add_subscription(self, channel: str, stream_id: int, *,
                               on_available_image: ImageCallback | None = None,
                               on_unavailable_image: ImageCallback | None = None) -> PendingSubscription:
        """``add_subscription`` without waiting: the returned ``PendingSubscription`` knows its
        registration id at once and is polled until the subscription is there (or the driver's
        refusal, or ``timeout``, raises). Image callbacks may fire before the poll returns it."""
        async_op, what, state = self._request_subscription(channel, stream_id, on_available_image,
                                                           on_unavailable_image)
        registration_id = lib.aeron_async_add_subscription_get_registration_id(async_op)
        return PendingSubscription(self, async_op, what, self.timeout, state, registration_id)

    def _request_subscription(self, channel: str, stream_id: int, on_available_image: ImageCallback | None,
                              on_unavailable_image: ImageCallback | None
                              ) -> tuple[object, str, _SubscriptionState]:
        """Sends a subscription's add to the driver: the C handle to poll, what errors name, and the
        state the image callbacks share with the Subscription."""
        what = f"add_subscription({channel!r}, {stream_id})"
        state = _SubscriptionState(self._image_handles, stream_id, on_available_image, on_unavailable_image)
        handle = ffi.new_handle(state)
        if on_available_image is not None or on_unavailable_image is not None:
            with self._lock:
                self._keepalive.append(handle)  # the conductor may call back even after close
        async_p = ffi.new("aeron_async_add_subscription_t **")
        check(lib.aeron_async_add_subscription(
            async_p, self._live(), channel.encode(), stream_id,
            AVAILABLE_IMAGE_CALLBACK if on_available_image is not None else ffi.NULL, handle,
            UNAVAILABLE_IMAGE_CALLBACK if on_unavailable_image is not None else ffi.NULL, handle), what)
        return async_p[0], what, state

    def add_counter(self, type_id: int, key: bytes, label: str) -> Counter:
        """Allocate a counter in the driver; it is freed when closed or when this client closes."""
        async_op, what = self._request_counter(type_id, key, label)
        pointer = self._await(lib.aeron_async_add_counter_poll, "aeron_counter_t **", async_op, what)
        return self._adopt(Counter(self, pointer))

    def async_add_counter(self, type_id: int, key: bytes, label: str) -> PendingCounter:
        """``add_counter`` without waiting: the returned ``PendingCounter`` is polled until the
        counter is there (or the driver's refusal, or ``timeout``, raises)."""
        async_op, what = self._request_counter(type_id, key, label)
        return PendingCounter(self, async_op, what, self.timeout)

    def _request_counter(self, type_id: int, key: bytes, label: str) -> tuple[object, str]:
        """Sends a counter's allocation to the driver: the C handle to poll, and what errors name."""
        label_bytes = label.encode()
        if len(key) > COUNTER_MAX_KEY_LENGTH:
            raise ValueError(f"counter key of {len(key)} bytes is too long: at most {COUNTER_MAX_KEY_LENGTH}")
        if len(label_bytes) > COUNTER_MAX_LABEL_LENGTH:
            raise ValueError(f"counter label of {len(label_bytes)} bytes is too long: at most "
                             f"{COUNTER_MAX_LABEL_LENGTH}")
        what = f"add_counter(type_id={type_id}, label={label!r})"
        async_p = ffi.new("aeron_async_add_counter_t **")
        check(lib.aeron_async_add_counter(async_p, self._live(), type_id, key, len(key), label_bytes,
                                          len(label_bytes)), what)
        return async_p[0], what

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every resource this client made, the client, and an owned driver; idempotent."""
        with self._lock:
            resources = list(self._resources.values())
        for resource in resources:
            resource.close()
        for handle in list(self._image_handles):
            handle.release()
        with self._lock:
            if self._pyaeron is not None:
                self._pyaeron.close()
                self._pyaeron = None
            self._release()
        if self._owned_driver is not None:
            self._owned_driver.close()

    def _release(self) -> None:
        if self._aeron != ffi.NULL:
            aeron, self._aeron = self._aeron, ffi.NULL
            lib.aeron_close(aeron)  # joins the conductor thread: no callback runs after this
            self._keepalive.clear()
        if self._context != ffi.NULL:
            lib.aeron_context_close(self._context)
            self._context = ffi.NULL

    def __enter__(self) -> AeronClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AeronClient(dir={self.aeron_dir!r}{', closed' if self.is_closed else ''})"
