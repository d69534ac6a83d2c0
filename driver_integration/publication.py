"""``Publication`` (concurrent) and ``ExclusivePublication`` over the Aeron C client.

``offer`` returns the new stream position (> 0) or one of Aeron's negative codes as an
:class:`OfferResult`; retryable codes are NOT_CONNECTED, BACK_PRESSURED and ADMIN_ACTION.
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyaeron as _pyaeron

from ._capi import ffi, lib
from .errors import AeronError, check, closed_error, last_c_error
from .frame import HEADER_LENGTH
from .pending_adds import PendingAdd
from .position import (
    compute_term_id_from_position,
    compute_term_offset_from_position,
    position_bits_to_shift,
    validate_term_length,
)

if TYPE_CHECKING:
    from collections.abc import Buffer

    from .client import AeronClient

RESERVED_VALUE_OFFSET = 24


class OfferResult(enum.IntEnum):
    """Aeron's negative results of offer / try_claim / offer_block / append_padding."""

    NOT_CONNECTED = -1
    BACK_PRESSURED = -2
    ADMIN_ACTION = -3
    CLOSED = -4
    MAX_POSITION_EXCEEDED = -5
    ERROR = -6

    @property
    def is_retryable(self) -> bool:
        return self in (OfferResult.NOT_CONNECTED, OfferResult.BACK_PRESSURED, OfferResult.ADMIN_ACTION)


def _result(value: int) -> int:
    """A position as is; a negative code as its OfferResult member."""
    return value if value >= 0 else OfferResult(value)


@dataclass(frozen=True, slots=True)
class InitialPosition:
    """Where an exclusive publication starts: channel params ``init-term-id``, ``term-id``,
    ``term-offset``, ``term-length`` (and ``mtu``), as Aeron's
    ``ChannelUriStringBuilder.initialPosition(position, initialTermId, termLength)``."""

    position: int
    initial_term_id: int
    term_length: int
    mtu: int | None = None

    def __post_init__(self) -> None:
        validate_term_length(self.term_length)
        if self.position < 0 or self.position % 32:
            raise ValueError(f"initial position {self.position} is invalid: must be >= 0 and a "
                             f"multiple of the frame alignment 32")
        if self.mtu is not None and (self.mtu < 64 or self.mtu % 32):
            raise ValueError(f"mtu {self.mtu} is invalid: must be a multiple of 32, at least 64")

    def channel_params(self) -> dict[str, str]:
        bits = position_bits_to_shift(self.term_length)
        params = {
            "init-term-id": str(self.initial_term_id),
            "term-id": str(compute_term_id_from_position(self.position, bits, self.initial_term_id)),
            "term-offset": str(compute_term_offset_from_position(self.position, bits)),
            "term-length": str(self.term_length),
        }
        if self.mtu is not None:
            params["mtu"] = str(self.mtu)
        return params

    def apply_to(self, channel: str) -> str:
        """``channel`` with these params appended (``|``-separated, Aeron URI syntax)."""
        joined = "|".join(f"{key}={value}" for key, value in self.channel_params().items())
        return f"{channel}{'|' if '?' in channel else '?'}{joined}"


class BufferClaim:
    """A claimed, not yet committed message in the log: write ``buffer`` then ``commit()``.

    As a context manager it commits on normal exit and aborts on an exception.
    """

    __slots__ = ("_claim", "buffer", "position", "_done")

    def __init__(self, claim: object, position: int) -> None:
        self._claim = claim
        self.buffer = memoryview(ffi.buffer(claim.data, claim.length))  # type: ignore[attr-defined]
        self.position = position  # the stream position after this message once committed
        self._done = False

    @property
    def length(self) -> int:
        return len(self.buffer)

    @property
    def reserved_value(self) -> int:
        return int(ffi.cast("int64_t *", self._claim.frame_header + RESERVED_VALUE_OFFSET)[0])  # type: ignore[attr-defined]

    @reserved_value.setter
    def reserved_value(self, value: int) -> None:
        self._check_open()
        ffi.cast("int64_t *", self._claim.frame_header + RESERVED_VALUE_OFFSET)[0] = value  # type: ignore[attr-defined]

    def _check_open(self) -> None:
        if self._done:
            raise closed_error("buffer claim (already committed or aborted)")

    def commit(self) -> None:
        self._check_open()
        self._done = True
        self.buffer.release()
        check(lib.aeron_buffer_claim_commit(self._claim), "aeron_buffer_claim_commit")

    def abort(self) -> None:
        self._check_open()
        self._done = True
        self.buffer.release()
        check(lib.aeron_buffer_claim_abort(self._claim), "aeron_buffer_claim_abort")

    def __enter__(self) -> BufferClaim:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if not self._done:
            self.abort() if exc_type is not None else self.commit()


@ffi.callback("int64_t(void *, uint8_t *, size_t)")
def _reserved_value_supplier(clientd, buffer, frame_length):
    return ffi.cast("int64_t *", clientd)[0]


class _PublicationBase:
    _kind = "publication"
    _offer = staticmethod(lib.aeron_publication_offer)
    _try_claim = staticmethod(lib.aeron_publication_try_claim)
    _position = staticmethod(lib.aeron_publication_position)
    _is_connected = staticmethod(lib.aeron_publication_is_connected)
    _is_closed = staticmethod(lib.aeron_publication_is_closed)
    _close = staticmethod(lib.aeron_publication_close)
    _constants = staticmethod(lib.aeron_publication_constants)

    def __init__(self, client: AeronClient, pointer: object) -> None:
        self._client = client
        self._pointer = pointer
        self._closed = False
        self._lock = threading.Lock()
        constants = ffi.new("aeron_publication_constants_t *")
        check(self._constants(pointer, constants), f"{self._kind} constants")
        self.channel: str = ffi.string(constants.channel).decode()
        self.stream_id: int = constants.stream_id
        self.session_id: int = constants.session_id
        self.initial_term_id: int = constants.initial_term_id
        self.term_buffer_length: int = constants.term_buffer_length
        self.position_bits_to_shift: int = constants.position_bits_to_shift
        self.max_payload_length: int = constants.max_payload_length
        self.max_message_length: int = constants.max_message_length
        self.max_possible_position: int = constants.max_possible_position
        self.registration_id: int = constants.registration_id
        self.original_registration_id: int = constants.original_registration_id
        self.mtu_length: int = self.max_payload_length + HEADER_LENGTH
        self._reserved = ffi.new("int64_t *")

    def _live(self) -> object:
        if self._closed:
            raise closed_error(f"{self._kind} {self.channel} stream {self.stream_id} "
                               f"session {self.session_id}")
        return self._pointer

    # -- offers --------------------------------------------------------------------------------
    def offer(self, data: Buffer, *, reserved_value: int = 0) -> int:
        """Append one message (fragmented if longer than ``max_payload_length``); returns the new
        position or an :class:`OfferResult` (negative)."""
        if self._closed:
            self._live()
        source = data if type(data) is bytes else ffi.from_buffer(data)  # bytes pass without a copy
        if reserved_value:
            self._reserved[0] = reserved_value
            result = self._offer(self._pointer, source, len(source), _reserved_value_supplier,
                                 self._reserved)
        else:
            result = self._offer(self._pointer, source, len(source), ffi.NULL, ffi.NULL)
        if result >= 0:
            return result
        if result == OfferResult.ERROR:
            raise last_c_error(f"offer of {len(source)} bytes on {self.channel}")
        return OfferResult(result)

    def offer_with_retry(self, data: Buffer, *, timeout: float = 5.0, reserved_value: int = 0) -> int:
        """Offer, retrying NOT_CONNECTED / BACK_PRESSURED / ADMIN_ACTION until ``timeout``
        seconds pass; returns the new position, raises AeronError otherwise."""
        deadline = time.monotonic() + timeout
        pause = 0.0
        while True:
            result = self.offer(data, reserved_value=reserved_value)
            if result >= 0:
                return result
            code = OfferResult(result)
            if not code.is_retryable:
                raise AeronError(f"offer on {self.channel} stream {self.stream_id} failed: {code.name}")
            if time.monotonic() >= deadline:
                raise AeronError(f"offer on {self.channel} stream {self.stream_id} timed out after "
                                 f"{timeout}s: still {code.name}")
            time.sleep(pause)
            pause = min(0.001, pause + 0.00005)

    def try_claim(self, length: int) -> BufferClaim | OfferResult:
        """Claim ``length`` bytes (at most ``max_payload_length``) to write in place."""
        pointer = self._live()
        if not 0 <= length <= self.max_payload_length:
            raise ValueError(f"try_claim length {length} is invalid: must be 0..{self.max_payload_length} "
                             f"(max_payload_length)")
        claim = ffi.new("aeron_buffer_claim_t *")
        result = self._try_claim(pointer, length, claim)
        if result >= 0:
            return BufferClaim(claim, result)
        if result == OfferResult.ERROR:
            raise last_c_error(f"try_claim of {length} bytes on {self.channel}")
        return OfferResult(result)

    # -- state ---------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Position the next message will be written at (or CLOSED, -4, once closed in C)."""
        return self._position(self._live())

    @property
    def is_connected(self) -> bool:
        return not self._closed and bool(self._is_connected(self._pointer))

    @property
    def is_closed(self) -> bool:
        return self._closed or bool(self._is_closed(self._pointer))

    def close(self) -> None:
        """Close (asynchronously in the C client); harmless when repeated."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close(self._pointer, ffi.NULL, ffi.NULL)
            self._client._forget(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(channel={self.channel!r}, stream_id={self.stream_id}, "
                f"session_id={self.session_id}{', closed' if self._closed else ''})")


class Publication(_PublicationBase):
    """Concurrent publication: offer/try_claim may be called from several threads.

    ``offer`` without a reserved value goes through pyaeron's own publication on the same
    channel and stream (the driver hands both clients the same log and session), because a
    pyaeron call costs far less than a cffi ABI call (about 2.8 M vs 1 M offers/s of 32 B
    measured here). The position it returns is then the publication's position right after the
    append: with other threads or processes offering at the same time it can lie beyond this
    message's end. Use ``try_claim`` (or ``offer(..., reserved_value=...)``) when the exact end
    position of each message matters.
    """

    def __init__(self, client: AeronClient, pointer: object, fast: object | None = None) -> None:
        super().__init__(client, pointer)
        self._fast = fast if fast is not None and fast.session_id == self.session_id else None  # type: ignore[attr-defined]
        if fast is not None and self._fast is None:
            fast.close()  # type: ignore[attr-defined]

    @property
    def uses_fast_offer(self) -> bool:
        """True when plain offers go through pyaeron's publication (see the class doc)."""
        return self._fast is not None

    def offer(self, data: Buffer, *, reserved_value: int = 0) -> int:
        fast = self._fast
        if fast is None or reserved_value or self._closed:
            return super().offer(data, reserved_value=reserved_value)
        try:
            appended = fast.offer(data)  # type: ignore[attr-defined]
        except _pyaeron.PublicationClosed:
            return OfferResult.CLOSED
        except _pyaeron.MaxPositionExceeded:
            return OfferResult.MAX_POSITION_EXCEEDED
        except _pyaeron.AeronError as error:
            raise AeronError(f"offer of {len(memoryview(data))} bytes on {self.channel}: {error}",
                             errmsg=str(error)) from error
        if appended is True:
            return fast.position  # type: ignore[attr-defined]
        return OfferResult(int(appended))

    def close(self) -> None:
        fast, self._fast = self._fast, None
        if fast is not None:
            fast.close()  # type: ignore[attr-defined]
        super().close()


class ExclusivePublication(_PublicationBase):
    """Single-writer publication; adds ``offer_block`` and ``append_padding``."""

    _kind = "exclusive publication"
    _offer = staticmethod(lib.aeron_exclusive_publication_offer)
    _try_claim = staticmethod(lib.aeron_exclusive_publication_try_claim)
    _position = staticmethod(lib.aeron_exclusive_publication_position)
    _is_connected = staticmethod(lib.aeron_exclusive_publication_is_connected)
    _is_closed = staticmethod(lib.aeron_exclusive_publication_is_closed)
    _close = staticmethod(lib.aeron_exclusive_publication_close)
    _constants = staticmethod(lib.aeron_exclusive_publication_constants)

    def offer_block(self, buffer: Buffer, offset: int = 0, length: int | None = None) -> int:
        """Append pre-framed data (whole frames already stamped with this publication's session,
        stream, term id and term offsets; must not cross a term end). Returns the new position or
        an OfferResult; raises AeronError when Aeron rejects the block (its text explains why)."""
        pointer = self._live()
        source = ffi.from_buffer(buffer)
        if length is None:
            length = len(source) - offset
        if offset < 0 or length < 0 or offset + length > len(source):
            raise ValueError(f"offer_block range offset={offset} length={length} is outside the "
                             f"{len(source)}-byte buffer")
        result = lib.aeron_exclusive_publication_offer_block(pointer, source + offset, length)
        if result == OfferResult.ERROR:
            raise last_c_error(f"offer_block of {length} bytes on {self.channel}")
        return _result(result)

    def append_padding(self, length: int) -> int:
        """Append a padding frame of ``length`` payload bytes (``length + 32`` in the log)."""
        pointer = self._live()
        if not 0 <= length <= self.max_message_length:
            raise ValueError(f"padding length {length} is invalid: must be 0..{self.max_message_length}")
        return _result(lib.aeron_exclusive_publication_append_padding(pointer, length))


class PendingExclusivePublication(PendingAdd[ExclusivePublication]):
    """An exclusive publication the media driver is still adding
    (``AeronClient.async_add_exclusive_publication``, the C client's
    ``aeron_async_add_exclusive_publication``): ``poll()`` never blocks, so a duty-cycle agent can
    go on serving others while the driver builds the publication's log (milliseconds).

    Poll from one thread until it answers: the C client frees the registration only then. A
    caller that no longer wants the publication calls ``discard()`` until it returns True
    (``pending_adds.PendingAdd``).
    """

    def __init__(self, client: AeronClient, async_op: object, what: str, timeout: float, *,
                 channel: str | None = None) -> None:
        def wrap(owner: AeronClient, pointer: object) -> ExclusivePublication:
            publication = ExclusivePublication(owner, pointer)
            if channel is not None:  # as asked, not with the addresses a host lookup put in (Java's channel())
                publication.channel = channel
            return publication

        super().__init__(client, async_op, what, timeout,
                         c_poll=lib.aeron_async_add_exclusive_publication_poll,
                         out_type="aeron_exclusive_publication_t **", wrap=wrap)
