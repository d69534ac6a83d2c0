"""A live publisher for the survival tests: sequence-numbered messages on one stream, kept recorded
by the archive across the archive's restarts, as a publishing application would do it.

    python -m tests.support.live_publisher --channel CH --stream-id N --messages COUNT --rate PER_S
        (--control-channel CH [--response-host HOST] | --archive-dir DIR) [--aeron-dir DIR]
        [--until-file FILE]

It asks the archive to record ``CH``/``N`` (StartRecording: REMOTE for a UDP channel, the archive
subscribes to the endpoint; LOCAL for IPC) and publishes messages 0..COUNT-1 (the sequence number
as 8 bytes little-endian, then filler of mixed sizes, ``payload_of``) on an exclusive publication
of its own media driver at PER_S messages/s. An offer the driver refuses (not connected, back
pressure) is retried, never skipped: each message is either published or still pending.

When its archive session goes silent (the archive was killed or restarted: ``is_connected``
notices a pinging archive's silence within seconds) it reconnects every half second and then
starts recording again, which makes a NEW recording. Not ExtendRecording: after a SIGKILL the
restarted archive stops the old recording at the last byte it had written, while the live
publication has moved on (what it sent to the dead archive's driver is in no recording), and
Aeron extends a recording only with an image that joins exactly at its stop position. So a real
application restarts the recording (as ``AeronArchive.startRecording`` after a reconnect does) and
readers follow the channel and stream (the source's ``channel``/``streamId`` with discovery).

Lines on stdout (flushed), for the test to follow::

    RECORDING <recordingId> at <position>    a recording of the stream started (START signal)
    SENT <n>                                 every 500 messages
    SENT ALL <count> position=<p>            every message published (or --until-file appeared)
    RECORDED <recordingId> stop=<p>          the last message recorded, the recording stopped
    DONE

The test stops this process by its PID (SIGTERM, SIGKILL after a timeout): ``LivePublisher``.
"""

from __future__ import annotations

import argparse
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: the process starts before it needs them
    from aeron_spark.archive.client.archive_client import ArchiveClient
    from aeron_spark.driver_integration.publication import ExclusivePublication

HEADER = struct.Struct("<q")
SIZES = (24, 100, 300, 60, 2000)  # 2000 bytes: longer than a UDP MTU's payload, so fragmented
RECONNECT_INTERVAL_S = 0.5
SESSION_CHECK_INTERVAL_S = 0.5
CONNECT_TIMEOUT_S = 3.0
REPOSITORY = Path(__file__).resolve().parents[2]


def payload_of(sequence: int) -> bytes:
    """Message ``sequence``: its number, then a filler that depends on it (any byte may be checked)."""
    size = SIZES[sequence % len(SIZES)]
    return HEADER.pack(sequence) + bytes((sequence * 7 + k) & 0xFF for k in range(size - HEADER.size))


def sequence_of(payload: bytes) -> int:
    return HEADER.unpack_from(payload)[0]


# --- the process ----------------------------------------------------------------------------------


def _say(line: str) -> None:
    print(line, flush=True)


class _Publisher:
    def __init__(self, args: argparse.Namespace) -> None:
        from aeron_spark.archive.client.archive_location import read_archive_location
        from aeron_spark.driver_integration import AeronClient
        self.args = args
        # One Aeron client for the process's life: the publication outlives every archive session.
        aeron_dir = args.aeron_dir or read_archive_location(args.archive_dir).aeron_dir
        assert aeron_dir, "--aeron-dir, or an archive directory whose mark file names the driver's"
        self.aeron = AeronClient(aeron_dir, client_name="survival-test publisher")
        self.client: ArchiveClient | None = None
        self.recording_id: int | None = None
        self.checked_at = 0.0
        self.publication: ExclusivePublication | None = None

    def connect(self) -> None:
        """Connects (retrying until it works) and starts recording the stream."""
        from aeron_spark.archive.client.archive_client import ArchiveClient, RecordingSignal, SourceLocation
        while True:
            try:
                if self.args.archive_dir:
                    client = ArchiveClient.from_mark_file(self.args.archive_dir, aeron=self.aeron,
                                                          timeout=CONNECT_TIMEOUT_S)
                else:
                    response = (f"aeron:udp?endpoint={self.args.response_host}:0" if self.args.response_host
                                else "aeron:udp?endpoint=localhost:0")
                    client = ArchiveClient.connect(control_channel=self.args.control_channel, aeron=self.aeron,
                                                   response_channel=response, timeout=CONNECT_TIMEOUT_S,
                                                   response_host=self.args.response_host)
                break
            except Exception as error:  # noqa: BLE001 - the archive is down: try again shortly
                _say(f"RECONNECTING {type(error).__name__}: {str(error)[:200]}")
                time.sleep(RECONNECT_INTERVAL_S)
        location = SourceLocation.LOCAL if self.args.channel.startswith("aeron:ipc") else SourceLocation.REMOTE
        client.start_recording(self.args.channel, self.args.stream_id, location)
        self.client = client
        if self.publication is None:
            self.publication = self.aeron.add_exclusive_publication(self.args.channel, self.args.stream_id)
        signal_event = client.await_recording_signal(RecordingSignal.START, timeout=30)
        self.recording_id = signal_event.recording_id
        _say(f"RECORDING {self.recording_id} at {signal_event.position}")
        self.checked_at = time.monotonic()

    def check_session(self) -> None:
        """Reconnects (and records anew) when the archive session went silent."""
        now = time.monotonic()
        if now - self.checked_at < SESSION_CHECK_INTERVAL_S:
            return
        self.checked_at = now
        if self.client is not None and self.client.is_connected:
            return
        _say("ARCHIVE LOST")
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001 - a dead session's close may fail; it is gone either way
                pass
        self.client = None
        self.connect()

    def publish(self, payload: bytes) -> int:
        publication = self.publication
        assert publication is not None, "connect() adds the publication"
        while True:
            result = publication.offer(payload)
            if result >= 0:
                return result
            self.check_session()
            time.sleep(0.001)

    def await_recorded(self, position: int) -> None:
        """Waits until the current recording holds ``position``, then stops recording."""
        while True:
            self.check_session()
            try:
                assert self.client is not None and self.recording_id is not None, "check_session() connected"
                recorded = self.client.recording_position(self.recording_id)
            except Exception as error:  # noqa: BLE001 - the archive went away meanwhile: reconnect
                _say(f"POSITION FAILED {str(error)[:200]}")
                self.checked_at = 0.0
                continue
            if recorded >= position:
                break
            time.sleep(0.05)
        assert self.client is not None, "check_session() connected"
        self.client.stop_recording(self.args.channel, self.args.stream_id)
        _say(f"RECORDED {self.recording_id} stop={position}")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channel", required=True)
    parser.add_argument("--stream-id", type=int, required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True, help="messages per second")
    parser.add_argument("--until-file", help="stop publishing (before --messages) once this file exists")
    parser.add_argument("--control-channel")
    parser.add_argument("--response-host", help="the address of this host the archive reaches")
    parser.add_argument("--archive-dir", help="an archive on this host's driver, found by its mark file")
    parser.add_argument("--aeron-dir", help="the media driver to publish on (default: the archive's)")
    args = parser.parse_args(argv)
    if not args.control_channel and not args.archive_dir:
        parser.error("give --control-channel or --archive-dir")
    if not args.aeron_dir and not args.archive_dir:
        parser.error("give --aeron-dir (the driver to publish on) with --control-channel")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    publisher = _Publisher(args)
    publisher.connect()
    interval = 1.0 / args.rate
    next_at = time.monotonic()
    position = 0
    until = Path(args.until_file) if args.until_file else None
    sent = 0
    for sequence in range(args.messages):
        if until is not None and sequence % 50 == 0 and until.exists():
            break
        position = publisher.publish(payload_of(sequence))
        sent = sequence + 1
        if (sequence + 1) % 500 == 0:
            _say(f"SENT {sequence + 1}")
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            publisher.check_session()
            next_at = max(next_at, time.monotonic() - 1.0)  # catch up after a stall, not in one burst
    _say(f"SENT ALL {sent} position={position}")
    publisher.await_recorded(position)
    _say("DONE")
    return 0


# --- the test's side ------------------------------------------------------------------------------


class LivePublisher:
    """This module run as a process (``command`` given by the caller: e.g. inside a namespace),
    its stdout collected by a thread; stopped by PID."""

    STOP_TIMEOUT_S = 15.0

    def __init__(self, command_prefix: Sequence[str], *args: str) -> None:
        command = [*command_prefix, sys.executable, "-m", "tests.support.live_publisher", *args]
        self.lines: list[str] = []
        self.process = subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def sent(self) -> int:
        counts = [int(line.split()[1]) for line in self.lines if line.startswith("SENT ") and
                  line.split()[1].isdigit()]
        return max(counts, default=0)

    def recordings(self) -> list[int]:
        return [int(line.split()[1]) for line in self.lines if line.startswith("RECORDING ")]

    def done(self) -> bool:
        return "DONE" in self.lines

    def output(self, last: int = 40) -> str:
        return "\n".join(self.lines[-last:])

    def wait_until(self, condition, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None and not condition():
                self._reader.join(5)
                if condition():
                    return
                raise AssertionError(f"the publisher exited ({self.process.returncode}) before {what}:\n"
                                     + self.output())
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for the publisher: {what}:\n"
                                     + self.output())
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL when it does not exit in time; reaped."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(self.STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(self.STOP_TIMEOUT_S)
        self._reader.join(5)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
