"""Errors raised by the Aeron driver layer."""

from __future__ import annotations

from ._capi import ffi, lib


class AeronError(Exception):
    """An Aeron C call failed, or an Aeron operation timed out.

    ``errcode`` and ``errmsg`` are Aeron's own ``aeron_errcode()`` / ``aeron_errmsg()`` (thread
    local in the C client) when the failure came from C; ``errcode`` is 0 otherwise.
    """

    def __init__(self, message: str, *, errcode: int = 0, errmsg: str = "") -> None:
        super().__init__(message)
        self.errcode = errcode
        self.errmsg = errmsg


class ResourceClosedError(AeronError):
    """A closed publication, subscription, image, counter, client or driver was used."""


def last_c_error(what: str) -> AeronError:
    """An AeronError for a C call that just failed, with Aeron's message and code."""
    code = lib.aeron_errcode()
    raw = lib.aeron_errmsg()
    text = ffi.string(raw).decode("utf-8", "replace") if raw != ffi.NULL else ""
    return AeronError(f"{what}: {text or 'no error text from Aeron'} (errcode {code})",
                      errcode=code, errmsg=text)


def check(result: int, what: str) -> int:
    """``result`` of a C call that returns -1 (or less) on failure; raises AeronError then."""
    if result < 0:
        raise last_c_error(what)
    return result


def closed_error(what: str) -> ResourceClosedError:
    return ResourceClosedError(f"{what} is closed")
