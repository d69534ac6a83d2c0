"""Receiving one replay: waiting for its image, then polling it block by block to the range end.

``ReplayPump.next_block(consume)`` hands each block to ``consume`` while the view still points
into the term buffer (one copy, made by the caller where it wants the bytes); ``pumped_blocks``
and ``replayed_blocks`` copy each block out. While nothing arrives, both ask the replay's ``ReplayWatch`` whether the
archive failed it, and once per stalled position whether the stall can ever end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar, cast

from aeron_spark.driver_integration import BlockHandler, Image, Subscription

from aeron_spark.connector.replay_errors import (
    NOT_CONNECTED_TEXT,
    ReplayEndpointUnreachable,
    ReplayFailed,
    ReplayImageTimeout,
    ReplayWatch,
)

REPLAY_BLOCK_LIMIT = 1 << 20
#: A replay idle this long (at most half the idle timeout) is examined once per position: the
#: frame there may cross the range end, which the archive never sends (a bounded replay sends
#: whole frames only), so waiting longer cannot help.
STALL_PROBE_AFTER_MS = 200
T = TypeVar("T")


class PolledImage(Protocol):
    """What ``ReplayPump`` asks of a replay's ``Image``."""

    @property
    def is_closed(self) -> bool: ...

    @property
    def is_end_of_stream(self) -> bool: ...

    def block_poll(self, handler: BlockHandler, block_length_limit: int) -> int: ...


class BlockPump(Protocol):
    """A replay handed out block by block (``ReplayPump``; the unit tests' fakes use it too)."""

    def next_block(self, consume: Callable[[memoryview, int], T]) -> tuple[int, T] | None:
        """(block position, what ``consume(view, position)`` returned) for the next block; None
        at the range end. The view is valid only during ``consume``."""
        ...


def await_image(subscription: Subscription, session_id: int, timeout_ms: int, recording_id: int,
                watch: ReplayWatch | None = None) -> Image:
    deadline = time.monotonic() + timeout_ms / 1000.0
    while time.monotonic() < deadline:
        image = subscription.image_by_session_id(session_id)
        if image is not None:
            return image
        if watch is not None:
            watch.check()  # an archive that fails the replay after its OK never sends the image
        time.sleep(0.001)
    raise ReplayImageTimeout(f"recording {recording_id}: replay image did not appear within {timeout_ms} ms")


def await_udp_image(subscription: Subscription, session_id: int, timeout_ms: int, recording_id: int,
                    watch: ReplayWatch, told_channel: str) -> Image:
    """``await_image`` for a replay sent to this worker over UDP: when it does not arrive, the
    error names the endpoint the archive was told and the options that choose it."""
    try:
        return await_image(subscription, session_id, timeout_ms, recording_id, watch)
    except ReplayFailed as error:
        if not isinstance(error, ReplayImageTimeout) and NOT_CONNECTED_TEXT not in str(error):
            raise  # the archive failed the replay for another reason, told in its own words
        raise ReplayEndpointUnreachable(
            f"recording {recording_id}: the replay sent to this worker's endpoint {told_channel} did not arrive "
            f"({error}); the archive must reach that address over UDP: set aeron.host to an address of this host "
            f"the archive can reach (and aeron.bindAddress when the local address differs, e.g. behind NAT), "
            f"open its port to the archive host, or set replay.channel") from error


class ReplayPump:
    """Polls one replay image block by block; ``next_block(consume)`` hands the block to
    ``consume(view, position)`` while the view still points into the term buffer, so a caller
    that copies it straight to where it is needed makes the only copy.

    While no block arrives it asks ``watch`` (when given) whether the archive failed the replay,
    and once per stalled position whether the stall can ever end. A replay that ends early or
    stalls fails naming ``archive`` (its control endpoint, when given): after an archive restart
    or a network partition that is what an operator looks at."""

    def __init__(self, image: PolledImage, recording_id: int, start: int, end: int, idle_timeout_ms: int,
                 watch: ReplayWatch | None = None, archive: str | None = None) -> None:
        self._image = image
        self._recording_id = recording_id
        self._from = f" from the archive at {archive}" if archive else ""
        self._end = end
        self._idle_timeout_ms = idle_timeout_ms
        self._watch = watch
        self._stall_probe_s = min(STALL_PROBE_AFTER_MS, idle_timeout_ms / 2) / 1000.0
        self._probed_at: int | None = None
        self.position = start
        # (position, length, what consume returned) of the block the last poll handed over
        self._result: list[tuple[int, int, object]] = []
        self._consume: Callable[[memoryview, int], object] = _copied

    def _on_block(self, view: memoryview, position: int, _session_id: int, _term_id: int) -> None:
        self._result.append((position, len(view), self._consume(view, position)))

    def next_block(self, consume: Callable[[memoryview, int], T]) -> tuple[int, T] | None:
        """(block position, what ``consume`` returned) for the next block; None at the range end."""
        if self.position >= self._end:
            return None
        self._consume = consume
        idle_since = time.monotonic()
        image, result, watch = self._image, self._result, self._watch
        while True:
            result.clear()
            image.block_poll(self._on_block, min(REPLAY_BLOCK_LIMIT, self._end - self.position))
            if result:
                position, length, value = result[0]
                result.clear()
                self.position = position + length
                return position, cast(T, value)  # what this call's consume returned
            if watch is not None:
                watch.check()
            if image.is_closed or image.is_end_of_stream:
                reason = watch.explain_end() if watch is not None else ""
                raise ReplayFailed(
                    f"recording {self._recording_id}: replay{self._from} ended at {self.position}, before "
                    f"{self._end}" + (f": {reason}" if reason else ""))
            idle_s = time.monotonic() - idle_since
            if watch is not None and self._probed_at != self.position and idle_s >= self._stall_probe_s:
                self._probed_at = self.position
                watch.stalled(self.position)
            if idle_s > self._idle_timeout_ms / 1000.0:
                raise ReplayFailed(
                    f"recording {self._recording_id}: replay{self._from} made no progress at {self.position} "
                    f"for {self._idle_timeout_ms} ms (replay.idleTimeoutMs)")
            time.sleep(0.0005)


def _copied(view: memoryview, _position: int) -> bytes:
    # Copied: the view points into the term buffer and is only valid during the callback.
    return bytes(view)


def pumped_blocks(pump: ReplayPump) -> Iterator[tuple[int, bytes]]:
    """Each block of ``pump`` copied out; the image stays open (its owner closes it)."""
    while (block := pump.next_block(_copied)) is not None:
        yield block


def replayed_blocks(image: Image, recording_id: int, start: int, end: int, idle_timeout_ms: int,
                    watch: ReplayWatch | None = None, archive: str | None = None) -> Iterator[tuple[int, bytes]]:
    """``pumped_blocks`` of a new pump on ``image``, which is closed when the blocks end."""
    pump = ReplayPump(image, recording_id, start, end, idle_timeout_ms, watch, archive)
    try:
        yield from pumped_blocks(pump)
    finally:
        image.close()
