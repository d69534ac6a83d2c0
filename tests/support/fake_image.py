"""A stand-in for a replay's ``Image`` in unit tests: blocks handed over like ``Image.block_poll``
(a view into a term buffer that is overwritten once the handler returns), so the fakes' replays go
through the real ``ReplayPump`` exactly as production's do."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from aeron_spark.driver_integration import BlockHandler

from aeron_spark.connector.options import ReplaySettings
from aeron_spark.connector.replay_pump import ReplayPump


class FakeImage:
    """Delivers ``blocks`` ((position, bytes) pairs) one per poll, after ``idle_polls`` empty polls
    each; ends its stream after ``end_of_stream_after`` blocks when that is set."""

    def __init__(self, blocks: Iterable[tuple[int, bytes]], idle_polls: int = 1,
                 end_of_stream_after: int | None = None) -> None:
        self._blocks = list(blocks)
        self._idle = idle_polls
        self._polls = 0
        self._delivered = 0
        self._eos_after = end_of_stream_after
        self.closed = False
        self.is_closed = False
        self.position = self._blocks[0][0] if self._blocks else 0

    @property
    def is_end_of_stream(self) -> bool:
        return self._eos_after is not None and self._delivered >= self._eos_after

    def block_poll(self, handler: BlockHandler, block_length_limit: int) -> int:
        self._polls += 1
        if self._polls % (self._idle + 1) or not self._blocks or self.is_end_of_stream:
            return 0
        position, data = self._blocks.pop(0)
        assert len(data) <= block_length_limit
        term = bytearray(data)
        view = memoryview(term)
        handler(view, position, 1, 2)
        term[:] = b"\xee" * len(term)  # the term buffer is reused once the handler returns
        with contextlib.suppress(BufferError):
            view.release()
        self._delivered += 1
        self.position = position + len(data)
        return len(data)

    def close(self) -> None:
        self.closed = True


def pump_of(blocks: Iterable[tuple[int, bytes]], recording_id: int, start: int, end: int,
            settings: ReplaySettings, idle_polls: int = 0) -> ReplayPump:
    """The real ``ReplayPump`` over a ``FakeImage`` of ``blocks`` (a fake archive's replay)."""
    return ReplayPump(FakeImage(blocks, idle_polls=idle_polls), recording_id, start, end, settings.idle_timeout_ms)
