"""A client process for the network-namespace test of response channels
(tests/integration/service/test_response_channels_netns.py): run inside the client's namespace as
``python -m tests.support.response_channel_client --control C --response R --record-channel P``.

On an embedded media driver of its own it connects to the archive with ``--response``, records
``--messages`` deterministic messages it publishes to ``--record-channel`` (the archive records
them REMOTE), lists the recording, replays it over ``--replay`` (default: the response channel)
and prints one JSON line: what it published and what came back (SHA-256 of the payloads).
Any failure prints ``{"error": ...}`` and exits 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import RecordingSignal, SourceLocation
from aeron_spark.driver_integration import AeronClient, MediaDriver

RECORDED_STREAM = 1001
REPLAY_STREAM = 2001


def messages(count: int) -> list[bytes]:
    return [(b"%06d:" % i) + bytes((i + j) % 251 + 1 for j in range(16 + (i * 53) % 2500)) for i in range(count)]


def run(args: argparse.Namespace) -> dict:
    with MediaDriver(threading_mode="shared") as driver, AeronClient(driver.dir) as aeron:
        with ArchiveClient.connect(control_channel=args.control, response_channel=args.response,
                                   aeron=aeron, timeout=args.timeout) as archive:
            result: dict = {"connected": True, "archive_id": archive.archive_id}
            if args.connect_only:
                return result
            subscription_id = archive.start_recording(args.record_channel, RECORDED_STREAM, SourceLocation.REMOTE)
            publication = aeron.add_exclusive_publication(args.record_channel, RECORDED_STREAM)
            sent = messages(args.messages)
            end = 0
            for message in sent:
                end = publication.offer_with_retry(message, timeout=args.timeout)
            recording_id = -1
            deadline = time.monotonic() + args.timeout
            while recording_id < 0:
                recording_id = archive.find_last_matching_recording(0, "", RECORDED_STREAM, publication.session_id)
                assert time.monotonic() < deadline, "no recording of the published stream"
            while archive.recording_position(recording_id) < end:
                assert time.monotonic() < deadline, "the recording did not reach the end"
                time.sleep(0.005)
            archive.stop_recording_subscription(subscription_id)
            archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id)
            listed = [d.recording_id for d in archive.list_recordings()]
            with archive.replay(recording_id, 0, end, args.replay or args.response, REPLAY_STREAM) as replay:
                got = [m.payload for m in replay.messages(idle_timeout=args.timeout)]
            result.update(recording_id=recording_id, listed=listed, end=end, sent=len(sent), replayed=len(got),
                          sent_digest=hashlib.sha256(b"".join(sent)).hexdigest(),
                          replayed_digest=hashlib.sha256(b"".join(got)).hexdigest())
            return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--control", required=True)
    parser.add_argument("--response", required=True)
    parser.add_argument("--record-channel", required=True)
    parser.add_argument("--replay")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--connect-only", action="store_true")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(run(args)), flush=True)
        return 0
    except Exception as error:  # noqa: BLE001 - reported to the test as JSON
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
