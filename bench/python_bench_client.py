"""The benchmark's client for OUR sidecar over IPC (the Java client cannot attach to our C driver).

Same algorithm as ``bench/java/.../ArchiveBenchClient.java`` (which does this for the Java archive
in its own driver), printing the same JSON line:

``record``: StartRecording of ``aeron:ipc`` (LOCAL), one ExclusivePublication publishing
``--messages`` unfragmented messages of ``--size`` bytes as fast as it can, while a second thread
polls RecordingPosition over the control protocol every ~0.5 ms. Throughput = bytes between the
first observed position past the start and the first observation of the final position / time
between those two observations.

``--publisher per-message`` (the fair benchmark, ``bench/fair_recording.py``) offers one message at
a time, as the Java client does, through a loop in C (``bench/per_message_publisher.py``; a Python
loop is the fallback and says so in the result's ``publisher`` field).
``--publisher block`` (the default, ``bench/archive_throughput.py``'s tables) appends pre-framed
blocks (``offer_block``, headers and the 8-byte message index stamped with numpy): the log bytes
are the same (at a term end, where fewer than one frame fits, a plain ``offer`` writes the PAD
frame and rotates, exactly as a per-message publisher's offer does), but the publisher's cost per
message is far below a per-message offer's, so that comparison favours our archive's side.

``replay``: replays the whole recording to an ``aeron:ipc`` subscription in this process that
block-polls the image and only counts bytes.

Where the archive is and how it is reached are options, so that one program feeds any archive
(``bench/modern_java_archive.py`` drives the Java 1.51 archive and ours with it): the control
channel/stream and protocol (default: the 1.15 protocol on ``aeron:ipc`` stream 11, what
``bench/archive_throughput.py`` needs), the recorded channel (``--channel``; a UDP one is recorded
REMOTE) and the replay channel. ``--embedded-driver`` runs a C driver of this process's own instead
of attaching to ``--aeron-dir``: the publisher then reaches the archive's driver over UDP.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from aeron_spark.archive.client.archive_client import ArchiveClient, SourceLocation
from aeron_spark.archive.client.replay_subscription import replay_image_session_id
from aeron_spark.archive.client.response_routing import ArchiveError
from aeron_spark.archive.codecs.constants import ArchiveErrorCode
from aeron_spark.driver_integration.client import AeronClient
from aeron_spark.driver_integration.media_driver import MediaDriver
from aeron_spark.driver_integration.frame import (
    HDR_TYPE_DATA,
    HEADER_LENGTH,
    UNFRAGMENTED,
    aligned_frame_length,
)
from aeron_spark.driver_integration.publication import ExclusivePublication
from per_message_publisher import PerMessagePublisher  # bench/ is this script's sys.path[0]
from spread_causes import TimedWindow

PROBE_INTERVAL_S = 0.0005
BLOCK_BYTES = 256 * 1024
BLOCK_POLL_LIMIT = 1024 * 1024
TIMEOUT_S = 300.0


class BlockPublisher:
    """Publishes unfragmented messages as pre-framed blocks; the log ends up as per-message offers
    would leave it (same headers, payloads, PAD frames at term ends)."""

    def __init__(self, publication: ExclusivePublication, size: int, block_bytes: int = BLOCK_BYTES) -> None:
        if not 0 <= size <= publication.max_payload_length:
            raise ValueError(f"size {size} is invalid: unfragmented messages need 0..{publication.max_payload_length}")
        self.publication = publication
        self.size = size
        self.frame_length = aligned_frame_length(HEADER_LENGTH + size)
        self.term_length = publication.term_buffer_length
        self.frames_per_block = max(1, min(block_bytes, self.term_length) // self.frame_length)
        self.block = np.zeros(self.frames_per_block * self.frame_length, dtype=np.uint8)
        rows = self.block.reshape(self.frames_per_block, self.frame_length)
        rows[:, HEADER_LENGTH:HEADER_LENGTH + size] = (np.arange(size) * 7 & 0xFF).astype(np.uint8)
        self.words = self.block.view("<i4").reshape(self.frames_per_block, self.frame_length // 4)
        self.longs = self.block.view("<i8").reshape(self.frames_per_block, self.frame_length // 8)
        self.words[:, 0] = HEADER_LENGTH + size
        self.block.reshape(self.frames_per_block, self.frame_length)[:, 5] = UNFRAGMENTED
        self.block.reshape(self.frames_per_block, self.frame_length)[:, 6] = HDR_TYPE_DATA
        self.words[:, 3] = publication.session_id
        self.words[:, 4] = publication.stream_id
        self.frame_offsets = np.arange(self.frames_per_block, dtype=np.int32) * self.frame_length
        self.back_pressured = 0
        self.back_pressured_seconds = 0.0

    def _payload(self, index: int) -> bytes:
        row = self.block[HEADER_LENGTH:HEADER_LENGTH + self.size].copy()
        if self.size >= 8:
            row[:8] = np.frombuffer(int(index).to_bytes(8, "little", signed=True), dtype=np.uint8)
        return row.tobytes()

    def publish(self, messages: int, deadline: float) -> None:
        publication = self.publication
        mask = self.term_length - 1
        shift = publication.position_bits_to_shift
        index = 0
        refused_since = 0.0  # perf_counter of the first refusal of the current streak, 0.0 when none
        while index < messages:
            position = publication.position
            term_offset = position & mask
            count = min(self.frames_per_block, (self.term_length - term_offset) // self.frame_length,
                        messages - index)
            if count == 0:
                result = publication.offer(self._payload(index))  # pads the term end and rotates
                if result > 0:
                    index += 1
                    if refused_since:
                        self.back_pressured_seconds += time.perf_counter() - refused_since
                        refused_since = 0.0
                    continue
            else:
                self.words[:count, 2] = term_offset + self.frame_offsets[:count]
                term_id = publication.initial_term_id + (position >> shift)
                self.words[:count, 5] = (term_id + 2**31) % 2**32 - 2**31  # int32 wrap-around
                if self.size >= 8:
                    self.longs[:count, 4] = np.arange(index, index + count, dtype=np.int64)
                result = publication.offer_block(self.block, 0, count * self.frame_length)
                if result > 0:
                    index += count
                    if refused_since:
                        self.back_pressured_seconds += time.perf_counter() - refused_since
                        refused_since = 0.0
                    continue
            refused_since = refused_since or time.perf_counter()
            self.back_pressured += 1
            if self.back_pressured & 0xFFFF == 0 and time.monotonic() > deadline:
                raise TimeoutError(f"publisher back-pressured until the deadline at message {index}")
            os.sched_yield()  # as the Java client: a spinning publisher would starve the archive


class PositionProbe(threading.Thread):
    """Polls RecordingPosition on its own thread (the archive client is used only here meanwhile)."""

    def __init__(self, archive: ArchiveClient, recording_id: int, timed: TimedWindow | None = None) -> None:
        super().__init__(name="position-probe", daemon=True)
        self.timed = timed
        self.archive = archive
        self.recording_id = recording_id
        self.target: int | None = None
        self.first: tuple[int, float] | None = None
        self.end: tuple[int, float] | None = None
        self.probes = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            start: int | None = None
            while True:
                position = self.archive.recording_position(self.recording_id)
                now = time.perf_counter()
                self.probes += 1
                if start is None:
                    start = position
                elif self.first is None and position > start:
                    self.first = (position, now)
                    if self.timed is not None:
                        self.timed.begin()
                target = self.target
                if target is not None and position >= target:
                    self.end = (position, now)
                    if self.timed is not None:
                        self.timed.end()
                    return
                time.sleep(PROBE_INTERVAL_S)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.failure = error


@dataclass(frozen=True)
class ControlEndpoint:
    """How this client reaches the archive. The default is the 1.15 protocol on the archive's local
    IPC control stream, as the Java 1.15.1 bench client speaks it."""

    channel: str = "aeron:ipc"
    stream_id: int = 11
    response_channel: str = "aeron:ipc"
    protocol: Literal["legacy", "modern"] = "legacy"


def connect(aeron: AeronClient, endpoint: ControlEndpoint) -> ArchiveClient:
    return ArchiveClient.connect(control_channel=endpoint.channel, control_stream_id=endpoint.stream_id,
                                 response_channel=endpoint.response_channel, aeron=aeron, protocol=endpoint.protocol)


def recording_fragment(channel: str) -> str:
    """What FindLastMatchingRecording looks for in the recorded channel: a UDP recording's original
    channel also carries its session id (the Java archive puts it before the endpoint)."""
    return channel.partition("?")[2] or channel


def find_recording(archive: ArchiveClient, channel: str, stream_id: int, session_id: int) -> int:
    """The recording of this publication, or -1 while the catalog does not list it yet."""
    try:
        return archive.find_last_matching_recording(0, channel, stream_id, session_id)
    except ArchiveError as error:
        # The Java 1.15.1 archive answers "min recording id outside valid range" while its catalog is
        # still empty (as ArchiveBenchClient.findRecording handles it).
        if error.error_code == ArchiveErrorCode.UNKNOWN_RECORDING:
            return -1
        raise


def record(aeron: AeronClient, stream_id: int, messages: int, size: int,
           publication_channel: str = "aeron:ipc", publisher_kind: str = "block", *,
           endpoint: ControlEndpoint = ControlEndpoint(), channel: str = "aeron:ipc",
           timed: TimedWindow | None = None) -> dict[str, object]:
    """Records ``channel`` (LOCAL over IPC, REMOTE otherwise), published on ``publication_channel``
    (the same endpoint, with e.g. a term length)."""
    deadline = time.monotonic() + TIMEOUT_S
    source = SourceLocation.LOCAL if channel.startswith("aeron:ipc") else SourceLocation.REMOTE
    with connect(aeron, endpoint) as archive:
        archive.start_recording(channel, stream_id, source)
        publication = aeron.add_exclusive_publication(publication_channel, stream_id)
        try:
            while not publication.is_connected:
                if time.monotonic() > deadline:
                    raise TimeoutError("the recording subscription did not connect")
                time.sleep(0.001)
            while (recording_id := find_recording(archive, recording_fragment(channel), stream_id,
                                                  publication.session_id)) < 0:
                if time.monotonic() > deadline:
                    raise TimeoutError("the recording did not appear in the catalog")
                time.sleep(0.001)
            start_position = publication.position
            probe = PositionProbe(archive, recording_id, timed)
            probe.start()
            publisher: BlockPublisher | PerMessagePublisher
            if publisher_kind == "block":
                publisher = BlockPublisher(publication, size)
                publisher_name = "python-block"
            else:
                publisher = PerMessagePublisher(publication, size)
                publisher_name = f"{publisher.implementation}-per-message"
            began = time.perf_counter()
            publisher.publish(messages, deadline)
            publish_seconds = time.perf_counter() - began
            end_position = publication.position
            probe.target = end_position
            probe.join(TIMEOUT_S)
            if probe.is_alive() or probe.failure is not None or probe.first is None or probe.end is None:
                raise RuntimeError(f"recording {recording_id} did not reach {end_position}: {probe.failure!r}")
            archive.stop_recording(channel, stream_id)
            while (stop_position := archive.stop_position(recording_id)) < 0:
                time.sleep(0.001)
        finally:
            publication.close()
    (first_position, first_time), (last_position, last_time) = probe.first, probe.end
    return {"event": "recorded", "recordingId": recording_id, "startPosition": start_position,
            "stopPosition": stop_position, "publicationPosition": end_position, "messages": messages,
            "size": size, "measuredFromPosition": first_position, "measuredToPosition": last_position,
            "measuredBytes": last_position - first_position, "measuredSeconds": last_time - first_time,
            "probes": probe.probes, "publishSeconds": publish_seconds,
            "backPressuredOffers": publisher.back_pressured,
            "backPressuredSeconds": round(publisher.back_pressured_seconds, 6), "publisher": publisher_name,
            "clientThreads": own_thread_times(), **timed_result(timed)}


def timed_result(timed: TimedWindow | None) -> dict[str, object]:
    return {} if timed is None or timed.result is None else {"timedWindow": timed.result}


def replay(aeron: AeronClient, recording_id: int, replay_stream_id: int, *,
           endpoint: ControlEndpoint = ControlEndpoint(), channel: str = "aeron:ipc",
           timed: TimedWindow | None = None) -> dict[str, object]:
    with connect(aeron, endpoint) as archive:
        descriptor = archive.list_recording(recording_id)
        if descriptor is None or descriptor.stop_position <= descriptor.start_position:
            raise RuntimeError(f"recording {recording_id} has no stopped data: {descriptor}")
        start, length = descriptor.start_position, descriptor.stop_position - descriptor.start_position
        subscription = aeron.add_subscription(channel, replay_stream_id)
        try:
            replay_session_id = archive.start_replay(recording_id, start, length, channel, replay_stream_id)
            deadline = time.monotonic() + TIMEOUT_S
            while (image := subscription.image_by_session_id(replay_image_session_id(replay_session_id))) is None:
                if time.monotonic() > deadline:
                    raise TimeoutError("no replay image")
                time.sleep(0.0001)
            counted = [0]

            def count(block: memoryview, position: int, session_id: int, term_id: int) -> None:
                counted[0] += len(block)

            end = start + length
            first_time = 0.0
            first_block = 0
            # Empty polls after the first block: the subscriber waiting for the archive's replayer.
            empty_polls, starved_seconds, starved_since = 0, 0.0, 0.0
            while image.position < end:
                consumed = image.block_poll(count, BLOCK_POLL_LIMIT)
                if consumed and not first_time:
                    first_time, first_block = time.perf_counter(), consumed
                    if timed is not None:
                        timed.begin()
                elif not consumed and image.is_closed:
                    raise RuntimeError(f"replay image closed at {image.position} before {end}")
                if not consumed:
                    if first_time:
                        empty_polls += 1
                        starved_since = starved_since or time.perf_counter()
                    os.sched_yield()  # as the Java client: let the archive's replayer run (2 cores)
                elif starved_since:
                    starved_seconds += time.perf_counter() - starved_since
                    starved_since = 0.0
            last_time = time.perf_counter()
            if timed is not None:
                timed.end()
            image.close()
        finally:
            subscription.close()
    return {"event": "replayed", "recordingId": recording_id, "replaySessionId": replay_session_id,
            "position": start, "length": length, "countedBytes": counted[0],
            "measuredBytes": counted[0] - first_block, "measuredSeconds": last_time - first_time,
            "emptyPolls": empty_polls, "starvedSeconds": round(starved_seconds, 6), "clientThreads": own_thread_times(),
            **timed_result(timed)}


def own_thread_times() -> dict[str, list[float]]:
    """[CPU seconds, run-queue wait seconds] of each thread of this process so far (``/proc/self/task``;
    the wait is ``schedstat``'s second field): whether the publisher or subscriber was held off a CPU."""
    times: dict[str, list[float]] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            task = Path("/proc/self/task", tid)
            name = (task / "comm").read_text().strip()
            stat = (task / "stat").read_text().rpartition(")")[2].split()
            wait = int((task / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile, or no schedstats in this kernel
        key = name if tid != str(os.getpid()) else "main (publisher / subscriber)"
        cpu = (int(stat[11]) + int(stat[12])) / ticks
        if key in times:
            key = f"{key}#{tid}"
        times[key] = [round(cpu, 3), round(wait, 3)]
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("record", "replay"))
    driver = parser.add_mutually_exclusive_group(required=True)
    driver.add_argument("--aeron-dir", help="the archive's media driver directory (IPC)")
    driver.add_argument("--embedded-driver", action="store_true",
                        help="run a C driver in this process; reach the archive over UDP")
    parser.add_argument("--control-channel", default=ControlEndpoint.channel)
    parser.add_argument("--control-stream-id", type=int, default=ControlEndpoint.stream_id)
    parser.add_argument("--response-channel", default=ControlEndpoint.response_channel)
    parser.add_argument("--protocol", choices=("legacy", "modern"), default=ControlEndpoint.protocol,
                        help="control protocol: legacy = 1.15.x (the default), modern = 1.12.0 (Aeron 1.5x)")
    parser.add_argument("--channel", default="aeron:ipc",
                        help="the recorded channel (aeron:ipc: LOCAL; a UDP endpoint: REMOTE)")
    parser.add_argument("--replay-channel", default="aeron:ipc")
    parser.add_argument("--stream-id", type=int, default=1001)
    parser.add_argument("--publication-channel", default=None,
                        help="channel of the publication (--channel with e.g. a term-length; default --channel)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--publisher", choices=("block", "per-message"), default="block",
                        help="pre-framed blocks (offer_block) or one offer per message, in C")
    parser.add_argument("--recording-id", type=int)
    parser.add_argument("--replay-stream-id", type=int, default=2002)
    parser.add_argument("--watch-pid", type=int, default=None,
                        help="the archive's pid: report its CPU and run-queue wait and the machine's state over "
                             "exactly the timed window (timedWindow in the result)")
    args = parser.parse_args(argv)
    if args.command == "replay" and args.recording_id is None:
        parser.error("replay needs --recording-id")
    endpoint = ControlEndpoint(args.control_channel, args.control_stream_id, args.response_channel, args.protocol)
    timed = TimedWindow(args.watch_pid) if args.watch_pid is not None else None
    # The embedded driver's files go to /dev/shm (MediaDriver's default), as the archives' do.
    driver = MediaDriver(threading_mode="shared") if args.embedded_driver else None
    try:
        with AeronClient(driver.dir if driver is not None else args.aeron_dir, client_name="archive-bench") as aeron:
            if args.command == "record":
                result = record(aeron, args.stream_id, args.messages, args.size,
                                args.publication_channel or args.channel, args.publisher,
                                endpoint=endpoint, channel=args.channel, timed=timed)
            else:
                result = replay(aeron, args.recording_id, args.replay_stream_id, endpoint=endpoint,
                                channel=args.replay_channel, timed=timed)
    finally:
        if driver is not None:
            driver.close()
            shutil.rmtree(driver.dir, ignore_errors=True)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
