"""Helpers for the Spark source tests over the REAL sidecar (`aeron-archive serve` subprocess).

* `RecordingArchive` wraps one running sidecar: an Aeron client on its embedded driver, an
  `ArchiveClient` on its control channel, and ways to record messages and wait until the archive
  has them. Every publication it makes is closed by `close()`.
* `Recorded` is what a recording should read back as: (position after the message, payload)
  in publication order, the positions being the ones Aeron's ``offer`` returned.
* `numbered_payloads` makes payloads that say which message they are, of sizes that cover the
  cases that matter (tiny, exactly one MTU payload, one byte more = two fragments, several
  fragments).
* `start_stream` / `run_available_now` / `wait_until` run streaming queries the same way in
  every test (the source's checkpointLocation is the query's).
"""

from __future__ import annotations

import itertools
import json
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from aeron_spark.archive.client import SecretCredentials
from aeron_spark.archive.client.archive_client import ArchiveClient, SourceLocation
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import Sidecar


# Small terms: term boundaries (partition splits, byte caps) every 64 KiB; segments are 64 KiB
# too (the sidecar fixture's --segment-length), so segment-level maintenance is cheap to reach.
TERM_LENGTH = 64 * 1024
IPC_CHANNEL = f"aeron:ipc?term-length={TERM_LENGTH // 1024}k"
MTU_PAYLOAD = 1408 - 32  # IPC MTU minus the data header: the largest unfragmented message
PAYLOAD_SIZES = (4, 40, 300, MTU_PAYLOAD, MTU_PAYLOAD + 1, 3000, 8000)  # max: term / 8
WAIT_S = 60.0


def numbered_payloads(first: int, count: int, sizes: Iterable[int] = PAYLOAD_SIZES) -> list[bytes]:
    """Message i is its index (4 bytes, little-endian) padded with a byte pattern to its size."""
    cycle = list(sizes)
    payloads = []
    for index in range(first, first + count):
        size = cycle[index % len(cycle)]
        payloads.append(struct.pack("<I", index) + bytes((index + k) & 0xFF for k in range(size - 4)))
    return payloads


def payload_index(payload: bytes) -> int:
    return struct.unpack_from("<I", payload)[0]


@dataclass
class Recorded:
    """What one recording must read back as."""

    recording_id: int
    messages: list[tuple[int, bytes]] = field(default_factory=list)  # (end position, payload)

    def rows(self, after: int = -1, up_to: int | None = None) -> list[tuple[int, int, bytes]]:
        """(recording_id, position, payload) of the messages ending in (after, up_to]."""
        return [(self.recording_id, position, payload) for position, payload in self.messages
                if position > after and (up_to is None or position <= up_to)]

    @property
    def end(self) -> int:
        return self.messages[-1][0]


class RecordingArchive:
    """One running sidecar, a client of it, and publications recorded by it."""

    def __init__(self, sidecar: Sidecar, credentials: SecretCredentials | None = None) -> None:
        self.sidecar = sidecar
        self.aeron = AeronClient(sidecar.driver_dir, client_name="spark-source-tests")
        self.client = ArchiveClient.connect(
            control_channel=sidecar.control_channel, aeron=self.aeron,
            credentials=credentials.connect_credentials() if credentials else None,
            on_challenge=credentials.on_challenge if credentials else None)
        self._stream_ids = itertools.count(3001)
        self._publications: list[object] = []
        self._lock = threading.Lock()  # the ArchiveClient is one-thread-at-a-time

    @property
    def archive_dir(self) -> str:
        return str(self.sidecar.archive_dir)

    def new_stream_id(self) -> int:
        """A stream id no other test records (replays use replay.streamId, 1977101 by default)."""
        return next(self._stream_ids)

    def start_recording(self, stream_id: int, channel: str = IPC_CHANNEL) -> None:
        with self._lock:
            self.client.start_recording(channel, stream_id, SourceLocation.LOCAL)

    def stop_recording(self, stream_id: int, channel: str = IPC_CHANNEL) -> None:
        with self._lock:
            self.client.stop_recording(channel, stream_id)

    def publication(self, stream_id: int, channel: str = IPC_CHANNEL):
        publication = self.aeron.add_exclusive_publication(channel, stream_id)
        self._publications.append(publication)
        return publication

    def recording_of(self, publication, timeout: float = WAIT_S) -> int:
        """The recording id of the image of ``publication`` (waits for the archive to start it)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [d.recording_id for d in self.client.list_recordings_for_uri(
                    0, None, "aeron:ipc", publication.stream_id) if d.session_id == publication.session_id]
            if found:
                return found[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no recording of session {publication.session_id} within {timeout} s")
            time.sleep(0.01)

    def await_recorded(self, recording_id: int, position: int, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                recorded = self.client.max_recorded_position(recording_id)
            if recorded >= position:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"recording {recording_id} reached {recorded}, not {position}, "
                                     f"within {timeout} s")
            time.sleep(0.005)

    def publish(self, publication, recorded: Recorded, payloads: Iterable[bytes],
                reserved_value: Callable[[int], int] | None = None) -> None:
        for payload in payloads:
            value = reserved_value(payload_index(payload)) if reserved_value else 0
            position = publication.offer_with_retry(payload, timeout=WAIT_S, reserved_value=value)
            recorded.messages.append((position, payload))

    def record(self, payloads: list[bytes], *, stream_id: int | None = None, stop: bool = False,
               reserved_value: Callable[[int], int] | None = None) -> tuple[Recorded, object]:
        """A new recording of ``payloads`` (waits until the archive has all of them)."""
        stream_id = stream_id if stream_id is not None else self.new_stream_id()
        self.start_recording(stream_id)
        publication = self.publication(stream_id)
        recorded = Recorded(self.recording_of(publication))
        self.publish(publication, recorded, payloads, reserved_value)
        self.await_recorded(recorded.recording_id, recorded.end)
        if stop:
            self.stop_recording(stream_id)
            self.await_stopped(recorded.recording_id)
        return recorded, publication

    def await_stopped(self, recording_id: int, timeout: float = WAIT_S) -> int:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                stop = self.client.stop_position(recording_id)
            if stop >= 0:
                return stop
            if time.monotonic() > deadline:
                raise AssertionError(f"recording {recording_id} did not stop within {timeout} s")
            time.sleep(0.005)

    def close(self) -> None:
        for publication in self._publications:
            try:
                publication.close()
            except Exception:  # noqa: BLE001 - teardown is best effort
                pass
        self.client.close()
        self.aeron.close()


class BackgroundPublisher:
    """Publishes payloads from a thread, a few at a time with pauses, until done or stopped."""

    def __init__(self, archive: RecordingArchive, publication, recorded: Recorded,
                 payloads: list[bytes], per_burst: int = 20, pause_s: float = 0.02) -> None:
        self._archive = archive
        self._publication = publication
        self._recorded = recorded
        self._payloads = payloads
        self._per_burst = per_burst
        self._pause_s = pause_s
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="background-publisher", daemon=True)

    def _run(self) -> None:
        try:
            for start in range(0, len(self._payloads), self._per_burst):
                if self._stop.is_set():
                    return
                self._archive.publish(self._publication, self._recorded,
                                      self._payloads[start:start + self._per_burst])
                time.sleep(self._pause_s)
        except BaseException as error:  # noqa: BLE001 - reported by join()
            self.error = error

    def __enter__(self) -> "BackgroundPublisher":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)

    def join(self) -> None:
        self._thread.join(WAIT_S)
        if self._thread.is_alive():
            raise AssertionError("the background publisher did not finish")
        if self.error is not None:
            raise AssertionError(f"the background publisher failed: {self.error!r}") from self.error


# --- queries --------------------------------------------------------------------------------------


def stream_reader(spark, archive: RecordingArchive, checkpoint: Path, **options: object):
    reader = (spark.readStream.format("aeron-archive")
              .option("archive.dir", archive.archive_dir)
              .option("checkpointLocation", str(checkpoint)))
    for name, value in options.items():
        reader = reader.option(name.replace("_", "."), str(value))
    return reader.load()


def start_stream(spark, archive: RecordingArchive, checkpoint: Path, *, sink: str = "memory",
                 query_name: str | None = None, output: Path | None = None,
                 trigger: dict | None = None, **options: object):
    writer = stream_reader(spark, archive, checkpoint, **options).writeStream.option(
        "checkpointLocation", str(checkpoint))
    if sink == "memory":
        writer = writer.format("memory").queryName(query_name)
    else:
        writer = writer.format(sink).option("path", str(output))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


def run_available_now(spark, archive: RecordingArchive, checkpoint: Path, **kwargs):
    """Runs one AvailableNow query to its end; returns the query (raises its failure)."""
    query = start_stream(spark, archive, checkpoint, **kwargs)
    try:
        finished = query.awaitTermination(WAIT_S)
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"the AvailableNow query did not finish within {WAIT_S} s"
    return query


def rows_of(dataframe) -> list[tuple[int, int, bytes]]:
    return sorted((row.recording_id, row.position, bytes(row.payload))
                  for row in dataframe.select("recording_id", "position", "payload").collect())


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S,
               query=None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the query failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def progress_offsets(progress) -> tuple[dict[int, int] | None, dict[int, int]]:
    """(start offset, end offset) of the only source of a query progress entry."""
    source = progress["sources"][0] if isinstance(progress, dict) else progress.sources[0]
    start = source["startOffset"] if isinstance(source, dict) else source.startOffset
    end = source["endOffset"] if isinstance(source, dict) else source.endOffset

    def parse(offset) -> dict[int, int] | None:
        if isinstance(offset, str):
            offset = json.loads(offset)
        if offset is None:
            return None
        return {int(key): value for key, value in offset.items()}

    return parse(start), parse(end)


def input_rows(progress) -> int:
    return progress["numInputRows"] if isinstance(progress, dict) else progress.numInputRows
