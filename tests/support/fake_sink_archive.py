"""An in-memory archive for sink tests: implements sink_archive.SinkArchive and the source's ArchiveAccess.

Recordings hold the exact bytes appended (frames from the start position). Like the real archive:
a replay must start on a frame boundary inside [start, recorded), a truncate needs a stopped
recording and a frame boundary (the sink never truncates; tests use it to replay the race that is
why), an extension must continue at the stop position with the same
initial term id / term length / mtu, and every appended block's first frame must be stamped for
the publication's position (as offer_block checks). ``crash_after_appends`` makes an appender
raise after that many appends, leaving the recording ACTIVE with what it got (a dead commit).

Refusals that arbitrate between concurrent committers raise ``SinkConflict`` as the real adapter
does: ExtendRecording of an active recording (ACTIVE_RECORDING) or from a position that is not the
stop position (INVALID_EXTENSION). ``hooks`` run another committer at an exact point of this one:
``hooks[name]()`` is called on every ``before_start_appender``, ``after_start_appender``,
``before_describe`` and ``before_truncate`` while set (``once`` installs one that removes itself).
``discard`` purges a stopped recording.
"""

from __future__ import annotations

import contextlib
import random
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from aeron_spark.archive.codecs.recording_descriptor import NULL_POSITION, RecordingDescriptor
from aeron_spark.connector.options import ReplaySettings
from aeron_spark.connector.replay_pump import ReplayPump
from aeron_spark.connector.sink.sink_archive import SinkAppender, SinkArchive, SinkConflict, SinkState
from aeron_spark.connector.source.archive_access import ArchiveAccess
from aeron_spark.connector.sink.frames import PublicationLayout, TermBlock
from aeron_spark.connector.commit_markers import sink_alias
from aeron_spark.driver_integration.frame import scan_frames
from aeron_spark.driver_integration.position import (
    compute_term_id_from_position,
    position_bits_to_shift,
)

from tests.support.fake_image import pump_of


class InjectedCrash(RuntimeError):
    pass


@dataclass
class FakeSinkRecording:
    recording_id: int
    channel: str
    stream_id: int
    initial_term_id: int
    term_length: int
    mtu: int
    session_id: int
    start_position: int = 0
    data: bytearray = field(default_factory=bytearray)
    active: bool = True

    @property
    def position(self) -> int:
        return self.start_position + len(self.data)

    def descriptor(self) -> RecordingDescriptor:
        return RecordingDescriptor(
            recording_id=self.recording_id, start_timestamp=1, stop_timestamp=-1 if self.active else 2,
            start_position=self.start_position, stop_position=NULL_POSITION if self.active else self.position,
            initial_term_id=self.initial_term_id, segment_file_length=max(self.term_length, 1 << 20),
            term_buffer_length=self.term_length, mtu_length=self.mtu, session_id=self.session_id,
            stream_id=self.stream_id, stripped_channel=self.channel, original_channel=self.channel,
            source_identity="fake-sink")

    def boundaries(self) -> set[int]:
        data = np.frombuffer(bytes(self.data), dtype=np.uint8)
        offsets = scan_frames(data).offsets if data.size else np.empty(0, np.int64)
        return {self.start_position + int(o) for o in offsets} | {self.position}


@dataclass
class FakeSinkArchive:
    term_length: int = 64 * 1024
    mtu: int = 1408
    max_block: int = 4096
    archive_id: int = 42
    recordings: dict[int, FakeSinkRecording] = field(default_factory=dict)
    next_recording_id: int = 5
    crash_after_appends: int | None = None
    crash_in_seal: bool = False
    calls: dict[str, int] = field(default_factory=dict)
    hooks: dict[str, Callable[[], None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)  # catalog changes, for threaded tests
    closed: bool = False
    # SinkArchive.committed_states: None keeps nothing between commits (test_known_state sets a dict)
    committed_states: dict[tuple[str, int], SinkState] | None = None

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    # --- SinkArchive ---------------------------------------------------------------------------
    def find_sink_recordings(self, sink_id: str, stream_id: int) -> list[RecordingDescriptor]:
        self._count("find")
        fragment = f"alias={sink_alias(sink_id)}"
        return [r.descriptor() for _, r in sorted(list(self.recordings.items()))  # list(): atomic for threaded tests
                if r.stream_id == stream_id and fragment in r.channel]

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        self._hook("before_describe")
        self._count("describe")
        recording = self.recordings.get(recording_id)
        return None if recording is None else recording.descriptor()

    @contextlib.contextmanager
    def read(self, recording_id: int, start: int, end: int) -> Iterator[Iterator[tuple[int, bytes]]]:
        self._count("read")
        recording = self.recordings[recording_id]
        boundaries = recording.boundaries()
        if start not in boundaries or start < recording.start_position or start >= recording.position:
            raise RuntimeError(f"INVALID_POSITION replay position {start} does not point to a valid frame")
        if end > recording.position:
            raise RuntimeError(f"INVALID_POSITION replay end {end} > recorded {recording.position}")
        ordered = sorted(b for b in boundaries if start < b <= end)
        out: list[tuple[int, bytes]] = []
        position = start
        while position < end:
            fitting = [b for b in ordered if position < b <= position + self.max_block]
            stop = fitting[-1] if fitting else next(b for b in ordered if b > position)
            out.append((position, bytes(recording.data[position - recording.start_position:stop - recording.start_position])))
            position = stop
        yield iter(out)

    def truncate(self, recording_id: int, position: int) -> None:
        self._hook("before_truncate")
        self._count("truncate")
        recording = self.recordings[recording_id]
        if recording.active:
            raise RuntimeError(f"ACTIVE_RECORDING cannot truncate active recording {recording_id}")
        if position not in recording.boundaries() or position < recording.start_position:
            raise RuntimeError(f"INVALID_POSITION truncate position {position}")
        del recording.data[position - recording.start_position:]

    def stop_active(self, recording_id: int) -> None:
        self._count("stop_active")
        self.recordings[recording_id].active = False

    def _hook(self, name: str) -> None:
        hook = self.hooks.get(name)
        if hook is not None:
            hook()

    def once(self, name: str, action: Callable[[], None]) -> None:
        """Runs ``action`` at the next ``name`` point only."""
        def run_once() -> None:
            self.hooks.pop(name, None)
            action()
        self.hooks[name] = run_once

    def start_appender(self, recording: RecordingDescriptor | None, sink_id: str) -> FakeAppender:
        self._hook("before_start_appender")
        appender = self._start_appender(recording, sink_id)
        self._hook("after_start_appender")
        return appender

    def discard(self, recording_id: int) -> None:
        self._count("discard")
        with self.lock:
            recording = self.recordings[recording_id]
            if recording.active:
                raise RuntimeError(f"ACTIVE_RECORDING cannot purge active recording {recording_id}")
            del self.recordings[recording_id]

    def _start_appender(self, recording: RecordingDescriptor | None, sink_id: str) -> FakeAppender:
        self._count("start_appender")
        session_id = random.randint(1, 1 << 30)
        if recording is None:
            with self.lock:
                rid = self.next_recording_id
                self.next_recording_id += 1
                target = FakeSinkRecording(rid, f"aeron:ipc?alias={sink_alias(sink_id)}|session-id={session_id}",
                                           1001, initial_term_id=random.randint(-1000, 1000),
                                           term_length=self.term_length, mtu=self.mtu, session_id=session_id)
                self.recordings[rid] = target
        else:
            with self.lock:
                target = self.recordings[recording.recording_id]
                if target.active:
                    raise SinkConflict(f"ACTIVE_RECORDING cannot extend active recording {target.recording_id}")
                if recording.stop_position != target.position:
                    raise SinkConflict(f"INVALID_EXTENSION join {recording.stop_position} != stop {target.position}")
                target.active = True
                target.session_id = session_id
        return FakeAppender(self, target, session_id)

    def close(self) -> None:
        self.closed = True

    # --- the source's ArchiveAccess --------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return not self.closed

    def keep_alive(self) -> None:
        pass

    def list_matching_since(self, channel_fragment: str, stream_id: int,
                            from_recording_id: int) -> tuple[list[RecordingDescriptor], int]:
        found = self.list_matching(channel_fragment, stream_id, from_recording_id)
        return found, max([from_recording_id, *(d.recording_id + 1 for d in found)])

    def has_recording_from(self, from_recording_id: int) -> bool:
        return any(recording_id >= from_recording_id for recording_id in list(self.recordings))

    def list_matching(self, channel_fragment: str, stream_id: int, from_recording_id: int) -> list[RecordingDescriptor]:
        return [r.descriptor() for rid, r in sorted(self.recordings.items())
                if rid >= from_recording_id and r.stream_id == stream_id and channel_fragment in r.channel]

    def list_from(self, from_recording_id: int) -> list[RecordingDescriptor]:
        return [r.descriptor() for rid, r in sorted(self.recordings.items()) if rid >= from_recording_id]

    def live_position(self, recording_id: int) -> int | None:
        recording = self.recordings.get(recording_id)
        return recording.position if recording is not None and recording.active else None

    def live_positions(self, recording_ids: list[int]) -> dict[int, int | None]:
        return {recording_id: self.live_position(recording_id) for recording_id in recording_ids}

    def replay(self, recording_id: int, start: int, end: int,
               settings: ReplaySettings) -> contextlib.AbstractContextManager[Iterator[tuple[int, bytes]]]:
        self._count("replay")
        return self.read(recording_id, start, end)

    @contextlib.contextmanager
    def replay_pump(self, recording_id: int, start: int, end: int,
                    settings: ReplaySettings) -> Iterator[ReplayPump]:
        with self.replay(recording_id, start, end, settings) as replayed:
            yield pump_of(replayed, recording_id, start, end, settings)


class FakeAppender:
    def __init__(self, archive: FakeSinkArchive, recording: FakeSinkRecording, session_id: int) -> None:
        self._archive = archive
        self._recording = recording
        self._layout = PublicationLayout(recording.initial_term_id, recording.term_length, recording.mtu,
                                         session_id, recording.stream_id)
        self.appends = 0
        self.refused_offers = 0  # the fake never refuses an offer
        self.back_pressure_s = 0.0

    @property
    def recording_id(self) -> int:
        return self._recording.recording_id

    @property
    def layout(self) -> PublicationLayout:
        return self._layout

    @property
    def position(self) -> int:
        return self._recording.position

    def append(self, block: TermBlock) -> None:
        crash_after = self._archive.crash_after_appends
        if crash_after is not None and self.appends >= crash_after:
            raise InjectedCrash(f"injected crash after {self.appends} appends")
        if block.position != self.position:
            raise AssertionError(f"block at {block.position}, publication at {self.position}")
        _length, _v, _flags, _type, term_offset, session_id, stream_id, term_id, _r = struct.unpack_from(
            "<iBBHiiiiq", block.data.tobytes(), 0)
        layout = self._layout
        expected_term_id = compute_term_id_from_position(block.position, position_bits_to_shift(layout.term_length),
                                                         layout.initial_term_id)
        assert (term_offset, session_id, stream_id, term_id) == (
            block.position % layout.term_length, layout.session_id, layout.stream_id, expected_term_id), \
            "first frame not stamped for the publication's position"
        assert block.position // layout.term_length == (block.end - 1) // layout.term_length, "block crosses a term"
        self._recording.data += block.data.tobytes()
        self.appends += 1

    def seal(self) -> RecordingDescriptor:
        if self._archive.crash_in_seal:
            raise InjectedCrash("injected crash before the recording stopped (marker recorded)")
        self._recording.active = False
        return self._recording.descriptor()

    def abandon(self) -> None:
        # A crash leaves the recording active until autoStop notices the publication is gone; tests
        # that model that set crash_after_appends and inspect the still-active recording.
        if self._archive.crash_after_appends is None and not self._archive.crash_in_seal:
            self._recording.active = False


def _implements_the_protocols(archive: FakeSinkArchive,
                              appender: FakeAppender) -> tuple[SinkArchive, ArchiveAccess, SinkAppender]:
    return archive, archive, appender  # tools/typecheck checks the fakes against the Protocols here
