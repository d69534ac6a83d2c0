"""``Image``: one publisher session seen by a subscription (``aeron_image_t``).

Lifetime follows the C client's rules: every ``Image`` object holds one reference obtained from
``aeron_subscription_image_at_index`` / ``_by_session_id`` / ``_retain`` and gives it back with
``aeron_image_release`` on ``close()``, when garbage collected, or when its subscription or
client closes. While the reference is held the C image and its mapped log stay valid, even after
the image went unavailable.

Neither an Image nor its subscription is thread safe: poll one image from one thread.
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from ._capi import ffi, function_pointer, lib
from .errors import AeronError, check, closed_error
from .position import compute_position

_TERM_OFFSET_FIELD = struct.Struct("<i")
_TERM_OFFSET_FIELD_OFFSET = 8


@dataclass(frozen=True, slots=True)
class FrameHeader:
    """Header of a delivered message (for a reassembled message: its first frame's offset).

    ``position`` is the stream position just after the message (Aeron's ``header.position()``).
    """

    position: int
    session_id: int
    stream_id: int
    term_id: int
    term_offset: int
    flags: int
    type: int
    frame_length: int
    reserved_value: int
    initial_term_id: int


class Header:
    """The header of the message being delivered: a flyweight valid only inside the handler
    (like Aeron's ``Header``). Fields are read from C on first access; ``snapshot()`` keeps them.
    Using it after the handler returned raises AeronError instead of reading freed memory."""

    __slots__ = ("_pointer", "_values", "_frame", "_position", "_image_constants")

    def __init__(self) -> None:
        self._pointer: object = ffi.NULL
        self._values = ffi.new("aeron_header_values_t *")
        self._frame: object = None
        self._position: int | None = None
        self._image_constants: object = None

    def _reset(self, pointer: object) -> None:
        self._pointer = pointer
        self._frame = None
        self._position = None

    def _load(self) -> object:
        if self._frame is None:
            if self._pointer == ffi.NULL:
                raise AeronError("message header used after its handler returned: keep header.snapshot()")
            check(lib.aeron_header_values(self._pointer, self._values), "aeron_header_values")
            self._frame = self._values.frame
        return self._frame

    @property
    def position(self) -> int:
        """Stream position just after this message."""
        if self._position is None:
            if self._pointer == ffi.NULL:
                raise AeronError("message header used after its handler returned: keep header.snapshot()")
            self._position = lib.aeron_header_position(self._pointer)
        return self._position

    @property
    def image_correlation_id(self) -> int:
        """The correlation id of the Image this message came from (Aeron's
        ``((Image) header.context()).correlationId()``): the media driver's id of that Image, which
        a response publication names as ``response-correlation-id`` (``control-mode=response``)."""
        if self._pointer == ffi.NULL:
            raise AeronError("message header used after its handler returned: keep header.snapshot()")
        image = lib.aeron_header_context(self._pointer)
        if image == ffi.NULL:
            raise AeronError("this message header names no Image (aeron_header_context is NULL)")
        if self._image_constants is None:
            self._image_constants = ffi.new("aeron_image_constants_t *")
        check(lib.aeron_image_constants(image, self._image_constants), "aeron_image_constants")
        return self._image_constants.correlation_id  # type: ignore[attr-defined]

    @property
    def session_id(self) -> int:
        return self._load().session_id  # type: ignore[attr-defined]

    @property
    def stream_id(self) -> int:
        return self._load().stream_id  # type: ignore[attr-defined]

    @property
    def term_id(self) -> int:
        return self._load().term_id  # type: ignore[attr-defined]

    @property
    def term_offset(self) -> int:
        return self._load().term_offset  # type: ignore[attr-defined]

    @property
    def flags(self) -> int:
        return self._load().flags  # type: ignore[attr-defined]

    @property
    def type(self) -> int:
        return self._load().type  # type: ignore[attr-defined]

    @property
    def frame_length(self) -> int:
        return self._load().frame_length  # type: ignore[attr-defined]

    @property
    def reserved_value(self) -> int:
        return self._load().reserved_value  # type: ignore[attr-defined]

    @property
    def initial_term_id(self) -> int:
        self._load()
        return self._values.initial_term_id

    def snapshot(self) -> FrameHeader:
        frame = self._load()
        return FrameHeader(self.position, frame.session_id, frame.stream_id, frame.term_id,  # type: ignore[attr-defined]
                           frame.term_offset, frame.flags, frame.type, frame.frame_length,  # type: ignore[attr-defined]
                           frame.reserved_value, self._values.initial_term_id)  # type: ignore[attr-defined]


MessageHandler = Callable[[memoryview, Header], object]
"""``handler(payload, header)``; ``payload`` and ``header`` are only valid until it returns."""

BlockHandler = Callable[[memoryview, int, int, int], object]
"""``handler(block, position, session_id, term_id)``: ``block`` is a zero-copy view of whole frames
starting at stream ``position``; it is released when the handler returns (copy what you keep)."""


class _PollState:
    """What a C callback needs during one poll: the handler and the first exception it raised."""

    __slots__ = ("handler", "error", "header", "bits", "initial_term_id")

    def __init__(self, bits: int = 16, initial_term_id: int = 0) -> None:
        self.handler: Callable[..., object] | None = None
        self.error: BaseException | None = None
        self.header = Header()
        self.bits = bits
        self.initial_term_id = initial_term_id

    def raise_pending(self) -> None:
        error, self.error, self.handler = self.error, None, None
        if error is not None:
            raise error


@ffi.callback("void(void *, const uint8_t *, size_t, aeron_header_t *)")
def _on_message(clientd, buffer, length, header):
    """Delegate of the C fragment assemblers: one call per whole message, on the polling thread."""
    state: _PollState = ffi.from_handle(clientd)
    view = memoryview(ffi.buffer(buffer, length))
    flyweight = state.header
    flyweight._reset(header)
    try:
        state.handler(view, flyweight)  # type: ignore[misc]
    except BaseException as error:  # C cannot unwind: keep the first error for poll() to raise
        if state.error is None:
            state.error = error
    finally:
        flyweight._reset(ffi.NULL)
        _release_view(view)


def _release_view(view: memoryview) -> None:
    # Turn later use of a kept view into a ValueError instead of a read of reused memory.
    try:
        view.release()
    except BufferError:
        pass  # the handler exported it (e.g. numpy.frombuffer): its own responsibility


MESSAGE_HANDLER_POINTER = function_pointer("aeron_image_fragment_assembler_handler")


class _ImageHandle:
    """Owns one C reference to an image; releasing it is idempotent and thread safe."""

    __slots__ = ("pointer", "assembler", "state", "state_handle", "owners", "_lock", "__weakref__")

    def __init__(self, pointer: object, owners: list[set[_ImageHandle]], state: _PollState) -> None:
        self.pointer = pointer
        self.assembler = ffi.NULL
        self.state = state
        self.state_handle = ffi.new_handle(self.state)
        self.owners = owners
        self._lock = threading.Lock()
        for owner in owners:
            owner.add(self)

    def release(self) -> None:
        with self._lock:
            if self.pointer == ffi.NULL:
                return
            if self.assembler != ffi.NULL:
                lib.aeron_image_fragment_assembler_delete(self.assembler)
                self.assembler = ffi.NULL
            lib.aeron_image_release(self.pointer)
            self.pointer = ffi.NULL
        for owner in self.owners:
            owner.discard(self)


class Image:
    """A retained image. Create through ``Subscription.images`` / ``image_by_session_id`` or the
    subscription's ``on_available_image`` callback, never directly."""

    __slots__ = ("_handle", "_pointer", "_closed", "session_id", "correlation_id", "join_position",
                 "source_identity", "initial_term_id", "term_buffer_length", "mtu_length",
                 "position_bits_to_shift", "subscriber_position_id", "stream_id", "__weakref__")

    def __init__(self, pointer: object, *, stream_id: int, owners: list[set[_ImageHandle]],
                 retained: bool = True) -> None:
        constants = ffi.new("aeron_image_constants_t *")
        check(lib.aeron_image_constants(pointer, constants), "aeron_image_constants")
        self.stream_id = stream_id
        self.session_id: int = constants.session_id
        self.correlation_id: int = constants.correlation_id
        self.join_position: int = constants.join_position
        self.source_identity: str = ffi.string(constants.source_identity).decode("utf-8", "replace")
        self.initial_term_id: int = constants.initial_term_id
        self.term_buffer_length: int = constants.term_buffer_length
        self.mtu_length: int = constants.mtu_length
        self.position_bits_to_shift: int = constants.position_bits_to_shift
        self.subscriber_position_id: int = constants.subscriber_position_id
        if retained:
            state = _PollState(self.position_bits_to_shift, self.initial_term_id)
            self._handle: _ImageHandle | None = _ImageHandle(pointer, owners, state)
            self._pointer = pointer
            self._closed = False
            weakref.finalize(self, self._handle.release)
        else:  # a detached snapshot (unavailable-image notification): constants only
            self._handle = None
            self._pointer = ffi.NULL
            self._closed = True

    # -- state ---------------------------------------------------------------------------------
    def _live_pointer(self) -> object:
        if self._closed or self._handle is None or self._handle.pointer == ffi.NULL:
            self._closed = True
            raise closed_error(f"image session {self.session_id} (stream {self.stream_id})")
        return self._pointer

    @property
    def is_closed(self) -> bool:
        """True once closed here, or once the C client marked the image closed (unavailable)."""
        if self._closed or self._handle is None or self._handle.pointer == ffi.NULL:
            return True
        return bool(lib.aeron_image_is_closed(self._pointer))

    @property
    def position(self) -> int:
        """This subscriber's position in the stream."""
        return lib.aeron_image_position(self._live_pointer())

    @property
    def is_end_of_stream(self) -> bool:
        return bool(lib.aeron_image_is_end_of_stream(self._live_pointer()))

    @property
    def active_transport_count(self) -> int:
        """How many transports delivered to this image within the image liveness timeout: 2 while
        both a replay and the live stream feed one image of a multi-destination subscription; 0
        before any datagram arrived, and for IPC images."""
        return check(lib.aeron_image_active_transport_count(self._live_pointer()),
                     f"aeron_image_active_transport_count (session {self.session_id})")

    @property
    def end_of_stream_position(self) -> int:
        """Position of the end of stream, or INT64_MAX while the publisher is still open."""
        return lib.aeron_image_end_of_stream_position(self._live_pointer())

    # -- polling -------------------------------------------------------------------------------
    def poll(self, handler: MessageHandler, fragment_limit: int) -> int:
        """Deliver up to ``fragment_limit`` fragments' worth of WHOLE messages (fragments are
        reassembled in C) to ``handler(payload, header)``; returns the fragments consumed.

        If the handler raises, the remaining messages of this poll are still delivered (they are
        already consumed) and the first exception is raised afterwards.
        """
        pointer = self._live_pointer()
        handle = self._handle
        assert handle is not None
        if handle.assembler == ffi.NULL:
            assembler_p = ffi.new("aeron_image_fragment_assembler_t **")
            check(lib.aeron_image_fragment_assembler_create(assembler_p, _on_message, handle.state_handle),
                  "aeron_image_fragment_assembler_create")
            handle.assembler = assembler_p[0]
        state = handle.state
        state.handler = handler
        count = lib.aeron_image_poll(pointer, MESSAGE_HANDLER_POINTER, handle.assembler, fragment_limit)
        state.raise_pending()
        return check(count, f"aeron_image_poll (session {self.session_id})")

    def block_poll(self, handler: BlockHandler, block_length_limit: int) -> int:
        """Hand up to ``block_length_limit`` bytes of whole frames, in place, to
        ``handler(block, position, session_id, term_id)``; returns the bytes consumed.

        A block never crosses a term end. The view is released when the handler returns. If the
        handler raises, the block is still consumed and the exception is raised here.
        """
        pointer = self._live_pointer()
        state = self._handle.state  # type: ignore[union-attr]
        state.handler = handler
        consumed = lib.aeron_image_block_poll(pointer, _on_block, self._handle.state_handle,  # type: ignore[union-attr]
                                              block_length_limit)
        if state.error is not None:
            state.raise_pending()
        state.handler = None
        return check(consumed, f"aeron_image_block_poll (session {self.session_id})")

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release this reference to the image; harmless when repeated."""
        self._closed = True
        if self._handle is not None:
            self._handle.release()

    def __enter__(self) -> Image:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Image(session_id={self.session_id}, stream_id={self.stream_id}, "
                f"source={self.source_identity!r}, join_position={self.join_position}, "
                f"correlation_id={self.correlation_id}{', closed' if self._closed else ''})")


@ffi.callback("void(void *, const uint8_t *, size_t, int32_t, int32_t)")
def _on_block(clientd, buffer, length, session_id, term_id):
    """Block handler of ``aeron_image_block_poll``: one call per block, on the polling thread."""
    state: _PollState = ffi.from_handle(clientd)
    view = memoryview(ffi.buffer(buffer, length))
    try:
        term_offset = _TERM_OFFSET_FIELD.unpack_from(view, _TERM_OFFSET_FIELD_OFFSET)[0]
        position = compute_position(term_id, term_offset, state.bits, state.initial_term_id)
        state.handler(view, position, session_id, term_id)  # type: ignore[misc]
    except BaseException as error:  # C cannot unwind: keep the first error for block_poll()
        if state.error is None:
            state.error = error
    finally:
        _release_view(view)
