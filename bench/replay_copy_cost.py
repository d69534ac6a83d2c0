"""What each step of a replay block costs, in CPU seconds per GB, on the real driver.

Run from the repository root (a microbenchmark, not a test)::

    .venv/bin/python bench/replay_copy_cost.py [--frame 1024] [--gigabytes 2] [--rounds 3]

The replayer's duty cycle per block is: ``preadv`` of up to 1 MiB from a segment file (in the
page cache) into the replay buffer, ``prepare_block`` (find frames, rewrite session/stream ids
with numpy), ``offer_block`` (copy into the replay publication's term). This runs those steps
alone, in one thread, on an IPC exclusive publication of an embedded C driver (16 MiB terms, as
the fair benchmark) drained by a block-polling subscription in the same loop, and times each step
with ``time.thread_time`` (CPU of this thread only), alternating the rounds. It tells how much a
single-copy replay (no ``preadv`` into a buffer) could save at most: the ``preadv`` share.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from aeron_spark.archive.service.replay_blocks import prepare_block
from aeron_spark.driver_integration.client import AeronClient
from aeron_spark.driver_integration.media_driver import MediaDriver

TERM = 16 * 1024 * 1024
BLOCK = 1024 * 1024
STREAM = 1001


def frames_file(path: Path, frame: int, length: int) -> None:
    """``length`` bytes of back-to-back DATA frames of ``frame`` bytes (headers' term fields are
    rewritten per block before offering, so only lengths and types matter here)."""
    words = np.zeros(length // 4, dtype="<i4").reshape(-1, frame // 4)
    words[:, 0] = frame
    words[:, 1] = (1 << 16) | (0xC0 << 8)  # version 0, flags BEGIN|END, type DATA (u16 at byte 6)
    path.write_bytes(words.tobytes())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frame", type=int, default=1024, help="frame length, a power of two >= 64")
    parser.add_argument("--gigabytes", type=float, default=2.0, help="bytes replayed per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    frame = args.frame
    file_length = 256 * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="replay-cost-", dir="/var/tmp") as directory, \
            MediaDriver(term_buffer_length=TERM) as driver:
        segment = Path(directory) / "segment.rec"
        frames_file(segment, frame, file_length)
        fd = os.open(segment, os.O_RDONLY)
        os.pread(fd, file_length, 0)  # into the page cache
        client = AeronClient(driver.dir)
        subscription = client.add_subscription("aeron:ipc", STREAM)
        publication = client.add_exclusive_publication(f"aeron:ipc?term-length={TERM}", STREAM)
        while (image := subscription.image_by_session_id(publication.session_id)) is None:
            time.sleep(0.001)
        buffer = np.zeros(BLOCK, dtype=np.uint8)
        view = memoryview(buffer)
        words = buffer.view("<i4").reshape(-1, frame // 4)
        session_id, initial_term_id = publication.session_id, publication.initial_term_id
        totals = {"preadv": 0.0, "prepare_block": 0.0, "offer_block": 0.0}
        replayed = 0
        drain = lambda *block: None  # noqa: E731
        for _ in range(args.rounds):
            goal = int(args.gigabytes * 1e9)
            done = 0
            while done < goal:
                position = publication.position
                file_offset = position % file_length
                start = time.thread_time()
                length = os.preadv(fd, [view], file_offset)
                read = time.thread_time()
                term_offset = position & (TERM - 1)
                term_id = initial_term_id + (position >> 24)
                words[:, 2] = np.arange(term_offset, term_offset + BLOCK, frame, dtype=np.int32)
                words[:, 5] = term_id
                prepared = time.thread_time()
                prepare_block(buffer, length, BLOCK, session_id, STREAM, term_offset=term_offset, term_id=term_id)
                stamped = time.thread_time()
                while publication.offer_block(buffer, 0, length) < 0:
                    image.block_poll(drain, BLOCK)
                offered = time.thread_time()
                image.block_poll(drain, BLOCK)
                totals["preadv"] += read - start
                totals["prepare_block"] += stamped - prepared
                totals["offer_block"] += offered - stamped
                done += length
            replayed += done
        os.close(fd)
        client.close()
    gigabytes = replayed / 1e9
    print(f"replay block steps, {frame}-byte frames, {gigabytes:.1f} GB, CPU seconds per GB "
          f"(load {os.getloadavg()[0]:.1f}):")
    for step, seconds in totals.items():
        print(f"  {step:14s} {seconds / gigabytes:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
