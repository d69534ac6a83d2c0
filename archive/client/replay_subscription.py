"""`ReplaySubscription`: the subscription and Image of one replay started by `ArchiveClient.replay`.

The archive publishes a replay on an exclusive publication whose session id is the low 32 bits
of the replaySessionId (as Aeron's ArchiveConductor and AeronArchive.startReplay), starting at
the requested position, so the Image's positions are the recording's positions. `messages()`
yields whole (reassembled) messages with the position each starts at and the position after it,
until the replay's end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aeron_spark.driver_integration import Header, Image, Subscription
from aeron_spark.driver_integration.position import compute_position

DEFAULT_FRAGMENT_LIMIT = 64


def replay_image_session_id(replay_session_id: int) -> int:
    """The replay Image's session id: the low 32 bits of the replaySessionId, as a signed int32."""
    low = replay_session_id & 0xFFFF_FFFF
    return low - (1 << 32) if low >= 1 << 31 else low


@dataclass(frozen=True, slots=True)
class ReplayedMessage:
    position: int  # stream position where the message starts (replay from here to get it again)
    next_position: int  # stream position just after it (Aeron's header.position())
    payload: bytes


class ReplayError(Exception):
    """The replay image went away before the replay reached its end."""


class ReplaySubscription:
    """A running replay: ``subscription``, ``image``, ``replay_session_id``, ``recording_id``,
    ``end_position`` (None when the replay follows a live recording or runs to the stop)."""

    def __init__(self, *, subscription: Subscription, image: Image, recording_id: int,
                 replay_session_id: int, end_position: int | None,
                 check_errors: Callable[[], None] = lambda: None) -> None:
        self.subscription = subscription
        self.image = image
        self.recording_id = recording_id
        self.replay_session_id = replay_session_id
        self.end_position = end_position
        self._check_errors = check_errors

    @property
    def position(self) -> int:
        """How far this subscriber has consumed the replay."""
        return self.image.position

    @property
    def join_position(self) -> int:
        return self.image.join_position

    @property
    def is_done(self) -> bool:
        """True once the end position is reached or the image reached its end of stream."""
        if self.image.is_closed:
            return True
        if self.end_position is not None and self.image.position >= self.end_position:
            return True
        return self.image.is_end_of_stream

    def poll(self, handler: Callable[[memoryview, Header], object],
             fragment_limit: int = DEFAULT_FRAGMENT_LIMIT) -> int:
        """``Image.poll`` on the replay image: whole messages to ``handler(payload, header)``."""
        return self.image.poll(handler, fragment_limit)

    def messages(self, *, idle_timeout: float | None = None,
                 fragment_limit: int = DEFAULT_FRAGMENT_LIMIT) -> Iterator[ReplayedMessage]:
        """Every replayed message until `is_done`. Raises the archive's ArchiveError if it
        reports the replay failed, and ReplayError when ``idle_timeout`` seconds pass without
        data (None: wait as long as the image lives)."""
        image = self.image
        bits = image.position_bits_to_shift
        initial_term_id = image.initial_term_id
        batch: list[ReplayedMessage] = []

        def on_message(payload: memoryview, header: Header) -> None:
            start = compute_position(header.term_id, header.term_offset, bits, initial_term_id)
            batch.append(ReplayedMessage(start, header.position, bytes(payload)))

        consumed = image.position
        idle_since = time.monotonic()
        idle = 0
        while True:
            batch.clear()
            count = image.poll(on_message, fragment_limit) if not image.is_closed else 0
            for message in batch:
                consumed = message.next_position
                if self.end_position is None or message.position < self.end_position:
                    yield message
            if count:
                if self.end_position is not None and consumed >= self.end_position:
                    return
                idle_since = time.monotonic()
                idle = 0
                continue
            if not image.is_closed:
                # Padding (a term's end) moves the image position without a message: a replay
                # whose range ends with padding is complete once the image has passed it.
                consumed = max(consumed, image.position)
                if self.end_position is not None and consumed >= self.end_position:
                    return
            if image.is_closed or image.is_end_of_stream:
                # Nothing more can arrive: a replay that stopped short of its end failed.
                if self.end_position is not None and consumed < self.end_position:
                    self._check_errors()
                    raise ReplayError(
                        f"replay {self.replay_session_id} of recording {self.recording_id} ended "
                        f"at position {consumed} before {self.end_position}")
                return
            self._check_errors()
            if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                raise ReplayError(
                    f"replay {self.replay_session_id} of recording {self.recording_id} made no "
                    f"progress for {idle_timeout} s at position {consumed}")
            idle += 1
            time.sleep(0 if idle < 10 else 0.0005)

    def close(self) -> None:
        """Releases the image (the subscription is closed by the client's ``replay`` block)."""
        self.image.close()

    def __repr__(self) -> str:
        return (f"ReplaySubscription(recording_id={self.recording_id}, "
                f"replay_session_id={self.replay_session_id}, end_position={self.end_position})")
