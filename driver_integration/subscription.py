"""``Subscription`` (``aeron_subscription_t``), including ``aeron-spy:`` channels.

Image notifications: ``on_available_image(image)`` and ``on_unavailable_image(image)`` run on the
**Aeron client conductor thread** (a C thread, not the one that created the subscription), so
keep them trivial, e.g. ``queue.put(image)``, and do the work on your own thread.

* ``on_available_image`` receives a retained :class:`Image`: it is yours (``close()`` it when
  done; otherwise it is released when garbage collected or when the subscription closes). Taking
  the reference inside the notification means no data is missed even if the image goes away
  before your thread looks at it.
* ``on_unavailable_image`` receives a closed snapshot :class:`Image` carrying only the constant
  facts (session id, correlation id, source identity, join position, ...). Match it to the
  image you hold by ``correlation_id``.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._capi import ffi, function_pointer, lib
from .channel_uri import MAX_URI_LENGTH, SPY_PREFIX
from .destinations import DestinationRequest, start_destination_request
from .errors import AeronError, check, closed_error
from .image import Image, MessageHandler, _ImageHandle, _on_message, _PollState
from .pending_adds import PendingAdd

if TYPE_CHECKING:
    from .client import AeronClient

ImageCallback = Callable[[Image], object]
_FRAGMENT_ASSEMBLER_HANDLER = function_pointer("aeron_fragment_assembler_handler")
# Room for the channel plus a resolved endpoint longer than the ``host:0`` it replaces.
_RESOLVED_CHANNEL_SLACK = 128
# A formatted socket address (``[IPv6%scope]:port``) fits with room to spare.
_SOCKET_ADDRESS_LENGTH = 256


class _SubscriptionState:
    """Shared by the Subscription and the C notification callbacks (which may fire before the
    Subscription object exists, while the add is still completing)."""

    def __init__(self, client_handles: set[_ImageHandle], stream_id: int,
                 on_available: ImageCallback | None, on_unavailable: ImageCallback | None) -> None:
        self.image_handles: set[_ImageHandle] = set()
        self.client_handles = client_handles
        self.stream_id = stream_id
        self.on_available = on_available
        self.on_unavailable = on_unavailable
        self.closed = False

    def owners(self) -> list[set[_ImageHandle]]:
        return [self.image_handles, self.client_handles]


def _report_callback_error(which: str) -> None:
    print(f"aeron_spark: exception in {which} callback (conductor thread):", file=sys.stderr)
    traceback.print_exc()


@ffi.callback("void(void *, aeron_subscription_t *, aeron_image_t *)")
def _on_available_image(clientd, subscription, image):
    state: _SubscriptionState = ffi.from_handle(clientd)
    try:
        if state.closed or state.on_available is None:
            return
        # The image is in the subscription's image list by now, so retaining it is valid.
        check(lib.aeron_subscription_image_retain(subscription, image), "aeron_subscription_image_retain")
        state.on_available(Image(image, stream_id=state.stream_id, owners=state.owners()))
    except BaseException:
        _report_callback_error("on_available_image")


@ffi.callback("void(void *, aeron_subscription_t *, aeron_image_t *)")
def _on_unavailable_image(clientd, subscription, image):
    state: _SubscriptionState = ffi.from_handle(clientd)
    try:
        if state.on_unavailable is not None:
            state.on_unavailable(Image(image, stream_id=state.stream_id, owners=[], retained=False))
    except BaseException:
        _report_callback_error("on_unavailable_image")


class Subscription:
    """Created by ``AeronClient.add_subscription``. Not thread safe: poll from one thread."""

    def __init__(self, client: AeronClient, pointer: object, state: _SubscriptionState) -> None:
        self._client = client
        self._pointer = pointer
        self._state = state
        self._lock = threading.Lock()
        constants = ffi.new("aeron_subscription_constants_t *")
        check(lib.aeron_subscription_constants(pointer, constants), "aeron_subscription_constants")
        self.channel: str = ffi.string(constants.channel).decode()
        self.stream_id: int = constants.stream_id
        self.registration_id: int = constants.registration_id
        self._poll_state = _PollState()
        self._poll_state_handle = ffi.new_handle(self._poll_state)
        self._assembler = ffi.NULL

    def _live(self) -> object:
        if self._state.closed:
            raise closed_error(f"subscription {self.channel} stream {self.stream_id}")
        return self._pointer

    @property
    def is_closed(self) -> bool:
        return self._state.closed or bool(lib.aeron_subscription_is_closed(self._pointer))

    @property
    def is_connected(self) -> bool:
        """True when at least one image is connected."""
        return bool(lib.aeron_subscription_is_connected(self._live()))

    @property
    def image_count(self) -> int:
        return lib.aeron_subscription_image_count(self._live())

    @property
    def images(self) -> list[Image]:
        """A retained Image for each current image (close them, or let the subscription do it)."""
        pointer = self._live()
        result = []
        for index in range(lib.aeron_subscription_image_count(pointer)):
            image = lib.aeron_subscription_image_at_index(pointer, index)
            if image == ffi.NULL:
                break  # the list shrank meanwhile
            result.append(Image(image, stream_id=self.stream_id, owners=self._state.owners()))
        return result

    def image_by_session_id(self, session_id: int) -> Image | None:
        image = lib.aeron_subscription_image_by_session_id(self._live(), session_id)
        if image == ffi.NULL:
            return None
        return Image(image, stream_id=self.stream_id, owners=self._state.owners())

    def poll(self, handler: MessageHandler, fragment_limit: int) -> int:
        """Deliver WHOLE messages from all images (fragments reassembled per session, in C) to
        ``handler(payload, header)``; returns the number of fragments consumed.

        ``payload`` is released when the handler returns. If the handler raises, the rest of this
        poll is still delivered and the first exception is raised afterwards.
        """
        pointer = self._live()
        if self._assembler == ffi.NULL:
            assembler_p = ffi.new("aeron_fragment_assembler_t **")
            check(lib.aeron_fragment_assembler_create(assembler_p, _on_message, self._poll_state_handle),
                  "aeron_fragment_assembler_create")
            self._assembler = assembler_p[0]
        state = self._poll_state
        state.handler = handler
        count = lib.aeron_subscription_poll(pointer, _FRAGMENT_ASSEMBLER_HANDLER, self._assembler,
                                            fragment_limit)
        state.raise_pending()
        return check(count, f"aeron_subscription_poll ({self.channel})")

    def resolved_channel(self) -> str | None:
        """The channel with a wildcard endpoint port (``endpoint=host:0``) replaced by the address
        and port the driver bound, which is what a publisher must use; None while the driver has
        not bound it yet. Other channels (IPC, spy, concrete port, no endpoint) come back as is."""
        pointer = self._live()
        if self.channel.startswith(SPY_PREFIX):
            return self.channel  # a spy binds nothing, and Aeron's URI parser rejects the prefix (-1)
        # Without a wildcard port Aeron strcpy()s the channel into the buffer unbounded: the first
        # buffer must hold the whole channel. A resolved channel longer than the buffer comes back
        # truncated with a length >= the buffer's, so retry with a larger one.
        size = max(MAX_URI_LENGTH + 1, len(self.channel.encode()) + 1 + _RESOLVED_CHANNEL_SLACK)
        while True:
            buffer = ffi.new("char[]", size)
            length = check(lib.aeron_subscription_try_resolve_channel_endpoint_port(pointer, buffer, size),
                           f"aeron_subscription_try_resolve_channel_endpoint_port ({self.channel})")
            if length == 0:
                return None
            if length < size:
                return ffi.string(buffer, length).decode()
            size = length + 1

    def await_resolved_channel(self, timeout_s: float) -> str:
        """:meth:`resolved_channel`, waiting up to ``timeout_s`` seconds for the driver to bind."""
        if not isinstance(timeout_s, (int, float)) or math.isnan(timeout_s) or timeout_s < 0:
            raise ValueError(f"timeout_s {timeout_s!r} is invalid: must be a number of seconds >= 0")
        deadline = time.monotonic() + timeout_s
        while True:
            resolved = self.resolved_channel()
            if resolved is not None:
                return resolved
            if time.monotonic() >= deadline:
                raise AeronError(f"the media driver did not resolve the endpoint port of subscription "
                                 f"{self.channel} (stream {self.stream_id}) within {timeout_s}s")
            time.sleep(0.001)

    def resolved_endpoint(self) -> str | None:
        """The first local socket address (``host:port``) the driver bound for this subscription,
        None while it has bound none. On a multi-destination subscription that is its first
        destination's: how a destination added with port 0 learns its port."""
        buffer = ffi.new("char[]", _SOCKET_ADDRESS_LENGTH)
        found = check(lib.aeron_subscription_resolved_endpoint(self._live(), buffer, _SOCKET_ADDRESS_LENGTH),
                      f"aeron_subscription_resolved_endpoint ({self.channel})")
        return ffi.string(buffer).decode() if found > 0 else None

    # -- multi-destination (control-mode=manual): see ``destinations`` -------------------------
    def add_destination_async(self, destination: str) -> DestinationRequest:
        """Asks the driver to add ``destination`` (a UDP channel with an endpoint) as another
        transport of this multi-destination subscription; poll the request until it is done."""
        return start_destination_request(self._client._live(), self._live(), change="add",
                                         destination=destination, channel=self.channel)

    def remove_destination_async(self, destination: str) -> DestinationRequest:
        """Asks the driver to remove ``destination`` (the URI it was added with)."""
        return start_destination_request(self._client._live(), self._live(), change="remove",
                                         destination=destination, channel=self.channel)

    def add_destination(self, destination: str) -> None:
        """`add_destination_async`, waiting (the client's timeout) for the driver to apply it."""
        self.add_destination_async(destination).wait(self._client.timeout)

    def remove_destination(self, destination: str) -> None:
        """`remove_destination_async`, waiting (the client's timeout) for the driver to apply it."""
        self.remove_destination_async(destination).wait(self._client.timeout)

    def close(self) -> None:
        """Release every Image obtained from this subscription, then close it; idempotent."""
        with self._lock:
            if self._state.closed:
                return
            self._state.closed = True
            for handle in list(self._state.image_handles):
                handle.release()
            if self._assembler != ffi.NULL:
                lib.aeron_fragment_assembler_delete(self._assembler)
                self._assembler = ffi.NULL
            lib.aeron_subscription_close(self._pointer, ffi.NULL, ffi.NULL)
            self._client._forget(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Subscription(channel={self.channel!r}, stream_id={self.stream_id}, "
                f"registration_id={self.registration_id}{', closed' if self._state.closed else ''})")


# Referenced by the client when it registers notifications.
AVAILABLE_IMAGE_CALLBACK = _on_available_image
UNAVAILABLE_IMAGE_CALLBACK = _on_unavailable_image


class PendingSubscription(PendingAdd[Subscription]):
    """A subscription the media driver is still adding (``AeronClient.async_add_subscription``):
    ``registration_id`` is known at once (the subscription's id, as Aeron's asyncAddSubscription
    returns it); ``poll()`` never blocks; ``discard()`` when unwanted."""

    def __init__(self, client: AeronClient, async_op: object, what: str, timeout: float,
                 state: _SubscriptionState, registration_id: int) -> None:
        super().__init__(client, async_op, what, timeout, c_poll=lib.aeron_async_add_subscription_poll,
                         out_type="aeron_subscription_t **",
                         wrap=lambda owner, pointer: Subscription(owner, pointer, state))
        self.registration_id = registration_id
