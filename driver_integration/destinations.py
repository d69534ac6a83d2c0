"""Destinations of a multi-destination subscription (MDS): ``aeron:udp?control-mode=manual``.

An MDS subscription has no endpoint of its own: each destination added to it (a UDP endpoint, or a
dynamic-MDC ``endpoint=...|control=...``) is another transport feeding the same Images. Two
transports carrying one session (e.g. an archive's replay and the live publication, which share the
session id, initial term id and term length) merge into one Image: whichever frame arrives first
fills the log, so a subscriber can switch from replay to live with no gap and no duplicate. That is
what ReplayMerge builds on; ``Image.active_transport_count`` tells how many transports currently feed
an image.

Adding and removing are asynchronous in the driver: ``DestinationRequest`` is the pending request
(``poll()`` it from a duty cycle), and ``Subscription.add_destination`` / ``remove_destination``
wait for it.
"""

from __future__ import annotations

import time
from typing import Literal

from ._capi import ffi, lib
from .channel_uri import ChannelUri, ChannelUriError
from .errors import AeronError, check, last_c_error

DestinationChange = Literal["add", "remove"]
MANUAL_CONTROL_MODE = "manual"


def require_manual_control(channel: str, change: DestinationChange, destination: str) -> None:
    """Raises ValueError unless ``channel`` is a multi-destination subscription channel: the driver
    would refuse the destination later, asynchronously, with a less helpful message."""
    try:
        uri = ChannelUri.parse(channel)
    except ChannelUriError:
        uri = None
    if uri is None or not uri.is_udp or uri.get("control-mode") != MANUAL_CONTROL_MODE:
        raise ValueError(f"cannot {change} destination {destination!r}: the subscription's channel "
                         f"{channel!r} is not a multi-destination subscription (needs aeron:udp with "
                         f"control-mode={MANUAL_CONTROL_MODE})")


class DestinationRequest:
    """A destination being added to or removed from a subscription, until the driver answers.

    ``poll()`` returns True once the driver applied it and raises AeronError if it refused (a bad
    URI, a port in use, an unknown destination, ...). Once it answered, C has freed the request: later
    polls return the same answer without touching it."""

    def __init__(self, async_pointer: object, *, change: DestinationChange, destination: str,
                 channel: str) -> None:
        self._async = async_pointer
        self.change: DestinationChange = change
        self.destination = destination
        self.channel = channel
        self._done = False
        self._error: AeronError | None = None

    @property
    def description(self) -> str:
        return _describe(self.change, self.destination, self.channel)

    def poll(self) -> bool:
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        result = lib.aeron_subscription_async_destination_poll(self._async)
        if result < 0:
            self._async = ffi.NULL
            self._error = last_c_error(self.description)
            raise self._error
        if result > 0:
            self._async = ffi.NULL
            self._done = True
        return self._done

    def wait(self, timeout_s: float) -> None:
        """Polls until the driver answered; AeronError after ``timeout_s`` seconds without one."""
        deadline = time.monotonic() + timeout_s
        pause = 0.0001
        while not self.poll():
            if time.monotonic() > deadline:
                raise AeronError(f"{self.description} timed out after {timeout_s}s without an answer "
                                 "from the media driver")
            time.sleep(pause)
            pause = min(pause * 2, 0.002)

    def __repr__(self) -> str:
        status = "failed" if self._error is not None else "done" if self._done else "pending"
        return f"DestinationRequest({self.description}, {status})"


def start_destination_request(client: object, subscription: object, *, change: DestinationChange,
                              destination: str, channel: str) -> DestinationRequest:
    """Sends the add or remove to the driver (``client``/``subscription``: live C pointers)."""
    require_manual_control(channel, change, destination)
    async_p = ffi.new("aeron_async_destination_t **")
    start = (lib.aeron_subscription_async_add_destination if change == "add"
             else lib.aeron_subscription_async_remove_destination)
    check(start(async_p, client, subscription, destination.encode()), _describe(change, destination, channel))
    return DestinationRequest(async_p[0], change=change, destination=destination, channel=channel)


def _describe(change: DestinationChange, destination: str, channel: str) -> str:
    preposition = "to" if change == "add" else "from"
    return f"{change} destination {destination!r} {preposition} subscription {channel!r}"
