"""A flood of ConnectRequests whose response channels nobody can use, and the sidecar's footprint.

``flood_connects`` sends ``count`` ConnectRequests over several request publications
(``request_publications``: each one a request Image at the sidecar, as separate clients would be),
as fast as the publications take them.
Their response channels, in turn:

* garbage URIs (unparsable, refused by the media driver, or random bytes);
* UDP endpoints nobody listens on (the response publication never connects);
* IPC streams nobody subscribes to (never connects either);
* 4 KiB aliases on otherwise usable-looking channels.

``Footprint`` samples the process's open files, memory mappings and resident memory.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from aeron_spark.archive import codecs
from aeron_spark.driver_integration.client import AeronClient
from aeron_spark.driver_integration.publication import ExclusivePublication

from tests.support.control_fuzz import MALFORMED_CHANNELS
from tests.support.waiting import wait_until

KINDS = ("garbage URI", "unreachable UDP port", "unread IPC stream", "4 KiB alias")
ALIAS_LENGTH = 4000  # with the rest of the channel, about 4 KiB


def response_channel(kind: str, rng: random.Random) -> str:
    if kind == "garbage URI":
        if rng.random() < 0.7:
            return rng.choice(MALFORMED_CHANNELS)
        return "".join(chr(rng.randrange(32, 127)) for _ in range(rng.randint(1, 60)))
    if kind == "unreachable UDP port":
        # 127.0.0.2-254: loopback addresses nobody binds; the port is random
        return f"aeron:udp?endpoint=127.0.0.{rng.randint(2, 254)}:{rng.randint(20000, 60000)}"
    if kind == "unread IPC stream":
        return "aeron:ipc"
    alias = "a" * ALIAS_LENGTH
    return rng.choice((f"aeron:ipc?alias={alias}",
                       f"aeron:udp?endpoint=127.0.0.{rng.randint(2, 254)}:{rng.randint(20000, 60000)}|alias={alias}"))


@dataclass
class FloodResult:
    sent: dict[str, int]
    seconds: float


@contextmanager
def request_publications(aeron: AeronClient, targets: list[tuple[str, int]]) -> Iterator[list[ExclusivePublication]]:
    """One connected request publication per ``targets`` entry (channel, stream id), closed on exit."""
    publications: list[ExclusivePublication] = []
    try:
        for channel, stream_id in targets:
            publications.append(aeron.add_exclusive_publication(channel, stream_id))
        wait_until(lambda: all(publication.is_connected for publication in publications),
                   "the flood's request publications to connect", 10.0)
        yield publications
    finally:
        for publication in publications:
            publication.close()


def flood_connects(publications: list[ExclusivePublication], count: int, rng: random.Random,
                   *, timeout_s: float = 60.0) -> FloodResult:
    """Sends ``count`` ConnectRequests round-robin over ``publications`` (each one a request Image
    at the sidecar); returns what was sent, per kind."""
    sent = dict.fromkeys(KINDS, 0)
    started = time.monotonic()
    deadline = started + timeout_s
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        stream_id = rng.randint(1_000_000, 2_000_000_000) if kind == "unread IPC stream" else rng.randint(1, 9999)
        data = codecs.encode(codecs.AuthConnectRequest(
            rng.randint(0, 2**62), stream_id, codecs.PROTOCOL_SEMANTIC_VERSION,
            response_channel(kind, rng), b"", "flood"))
        publication = publications[index % len(publications)]
        while publication.offer(data) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"the flood's offers were refused for {timeout_s} s after {index} connects")
            time.sleep(0.0005)
        sent[kind] += 1
    return FloodResult(sent, time.monotonic() - started)


@dataclass(frozen=True)
class Footprint:
    open_files: int
    mappings: int
    rss_kb: int

    @classmethod
    def of(cls, pid: int) -> Footprint:
        open_files = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/maps") as maps:
            mappings = sum(1 for _ in maps)
        rss_kb = 0
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
        return cls(open_files, mappings, rss_kb)

    def __str__(self) -> str:
        return f"{self.open_files} open files, {self.mappings} mappings, RSS {self.rss_kb // 1024} MiB"
