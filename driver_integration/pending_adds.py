"""Adds the media driver is still carrying out: the C client's ``aeron_async_add_*`` handles, polled
without blocking (``AeronClient.async_add_exclusive_publication``, ``AeronClient.async_add_counter``).

A duty-cycle agent (the archive's conductor) asks for a publication or a counter and goes on serving
others while the driver builds it; it polls the handle each cycle. The C client frees a handle only
when a poll reports its outcome (added, refused, or timed out after the client's driver timeout), so
a handle that is no longer wanted is `discard`-ed: polled until that outcome, and whatever arrives
closed. Dropping a handle unpolled would leak the C registration, and the driver's resource too
(a publication's log file) if the driver answered after all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ._capi import ffi
from .errors import AeronError, closed_error, last_c_error

if TYPE_CHECKING:
    from .client import AeronClient


class Closeable(Protocol):
    def close(self) -> None: ...


ResourceT = TypeVar("ResourceT", bound=Closeable)


class PendingAdd(Generic[ResourceT]):
    """One async add: ``poll`` until it returns the resource (or raises the driver's refusal or the
    local ``timeout``); `discard` when the caller no longer wants it. One thread polls it."""

    def __init__(self, client: AeronClient, async_op: object, what: str, timeout: float, *,
                 c_poll: Callable[[Any, Any], int], out_type: str,
                 wrap: Callable[[AeronClient, Any], ResourceT]) -> None:
        self._client = client
        self._async = async_op  # ffi.NULL once the C client freed it
        self._what = what
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._c_poll = c_poll
        self._out_type = out_type
        self._wrap = wrap
        self._resource: ResourceT | None = None
        self._failure: AeronError | None = None

    @property
    def what(self) -> str:
        return self._what

    @property
    def is_done(self) -> bool:
        """True once the driver answered (or the wait timed out): ``poll`` returns or raises at once."""
        return self._resource is not None or self._failure is not None

    def _poll_c(self) -> ResourceT | None:
        """One poll of the C handle (never after the client closed: it freed the handle)."""
        if self._client.is_closed:
            self._async = ffi.NULL
            raise closed_error(f"Aeron client ({self._client.aeron_dir})")
        out = ffi.new(self._out_type)
        result = self._c_poll(out, self._async)
        if result > 0:
            self._async = ffi.NULL  # freed by the C client once answered
            self._resource = self._client._adopt(self._wrap(self._client, out[0]))
            return self._resource
        if result < 0:
            self._async = ffi.NULL
            raise last_c_error(self._what)
        return None

    def poll(self) -> ResourceT | None:
        """The resource once the driver added it, None while it has not answered; raises
        AeronError (the driver's reason) when it refused it or did not answer in time."""
        if self._resource is not None:
            return self._resource
        if self._failure is not None:
            raise self._failure
        try:
            resource = self._poll_c()
        except AeronError as error:
            self._failure = error
            raise
        if resource is None and time.monotonic() > self._deadline:
            # The C handle stays live (its own driver timeout ends it): `discard` settles it.
            self._failure = AeronError(f"{self._what} timed out after {self._timeout}s without an answer "
                                       f"from the media driver in {self._client.aeron_dir}")
            raise self._failure
        return resource

    def discard(self) -> bool:
        """The caller no longer wants the resource: closes it if it is there, else polls the C handle
        once (closing what arrives). True once nothing is left to poll or close."""
        if self._resource is not None:
            self._resource.close()
            return True
        if self._async == ffi.NULL:
            return True
        try:
            resource = self._poll_c()
        except AeronError:
            return True  # refused, timed out by the C client, or the client closed: nothing was made
        if resource is None:
            return False
        resource.close()
        return True

    def __repr__(self) -> str:
        state = "added" if self._resource is not None else "failed" if self._failure is not None else "pending"
        return f"{type(self).__name__}({self._what}, {state})"
