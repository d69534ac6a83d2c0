"""A seeded control-protocol fuzzer for a running sidecar, and the sidecar's anonymous memory.

``fuzz_messages(rng, ...)`` makes the request bytes; ``fuzz_session(...)`` opens one raw session
(tests/support/raw_archive_client.py), sends its share in bulk (offers retried on back pressure,
responses drained as it goes so the sidecar is never held back), closes the session and its
publications. Kinds of messages, in about equal shares:

* random bytes (0-300 of them);
* bad headers: wrong schema id, unknown template id, any version, block lengths 0 / short / huge;
* var-data length prefixes that are huge (up to 2^32-1, i.e. "negative" as int32) or just past
  the end;
* bad channels: very long (up to 4,500 characters), non-ASCII and invalid UTF-8 bytes, malformed
  URIs, on StartRecording(2), Replay, ExtendRecording, ListRecordingsForUri, Connect ...;
* valid requests from random or another session's session ids, with random correlation ids;
* valid requests of this session with out-of-range ids (recording, subscription, replay session).

Nothing sent can start a recording, a replay or a replication: every channel is invalid or every
id unknown, so a fuzz round leaves nothing behind in the archive but what it fails to clean up.
"""

from __future__ import annotations

import os
import random
import struct
import time
from dataclasses import dataclass, field

from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.driver_integration.client import AeronClient

from tests.support.raw_archive_client import RawArchiveClient

HEADER = struct.Struct("<HHHH")
VAR_LENGTH = struct.Struct("<I")
SCHEMA_ID = 101
BAD_RECORDING_IDS = (2**62, 2**63 - 1, -1, -5, -(2**63), 1_000_000, 7_777_777)
LOCAL = SourceLocation.LOCAL

MALFORMED_CHANNELS = (
    "", "aeron", "aeron:", "aeron:udp", "aeron:udp?", "aeron:udp?endpoint", "aeron:udp?endpoint=",
    "aeron:udp?endpoint=:", "aeron:udp?endpoint=999.999.999.999:1", "aeron:udp?endpoint=localhost:99999",
    "aeron:udp?endpoint=localhost:-1", "aeron:udp?=x", "aeron:udp?a=b|a=c|", "aeron:udp|endpoint=x",
    "aeron:ipc?session-id=x",
    "aeron:ipc?session-id=99999999999", "aeron:bogus", "aeron-spy:", "aeron-spy:aeron-spy:aeron:ipc",
    "aeron:udp?endpoint=[::1", "aeron:udp?control-mode=nonsense", "aeron:udp?interface=1.2.3.4/99",
    "aeron:ipc?alias", "\x00\x01\x02",
    "http://example.com/",
)


def _long_channel(rng: random.Random) -> str:
    return "aeron:bogus?x=" + "y" * rng.choice((100, 1000, 4076, 4090, 4500))


def _channel_bytes(rng: random.Random) -> bytes:
    """A bad channel as raw bytes (may be non-ASCII or invalid UTF-8)."""
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(MALFORMED_CHANNELS).encode("latin-1")
    if roll < 0.45:
        return _long_channel(rng).encode()
    if roll < 0.65:
        return ("aeron:udp?endpoint=" + "\u00e9\u4e2d\U0001f600" * rng.randint(1, 30)).encode()
    if roll < 0.8:
        return b"aeron:ipc?alias=" + bytes(rng.randrange(128, 256) for _ in range(rng.randint(1, 50)))
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))


def _with_channel(message_factory, channel: bytes) -> bytes:
    """``message_factory(placeholder)`` encoded, the placeholder (the channel, the last var field
    written with this text) replaced by ``channel``'s raw bytes."""
    placeholder = "\x7f" * len(channel)
    encoded = codecs.encode(message_factory(placeholder))
    at = encoded.rfind(placeholder.encode())
    return encoded[:at] + channel + encoded[at + len(channel):]


def _requests_with_ids(session: int, correlation: int, rng: random.Random) -> list:
    recording_id = rng.choice(BAD_RECORDING_IDS)
    big = rng.choice((2**63 - 1, -(2**63), -1, 2**40, rng.getrandbits(63)))
    return [
        codecs.ReplayRequest(session, correlation, recording_id, 0, 64, 3999, 0, 0, "aeron:ipc"),
        codecs.BoundedReplayRequest(session, correlation, recording_id, 0, 64, 0, 3999, 0, 0, "aeron:ipc"),
        codecs.ExtendRecordingRequest(session, correlation, recording_id, 1001, LOCAL, "aeron:ipc"),
        codecs.StopRecordingByIdentityRequest(session, correlation, recording_id),
        codecs.RecordingPositionRequest(session, correlation, recording_id),
        codecs.StopPositionRequest(session, correlation, recording_id),
        codecs.StartPositionRequest(session, correlation, recording_id),
        codecs.MaxRecordedPositionRequest(session, correlation, recording_id),
        codecs.TruncateRecordingRequest(session, correlation, recording_id, big),
        codecs.PurgeRecordingRequest(session, correlation, recording_id),
        codecs.DetachSegmentsRequest(session, correlation, recording_id, big),
        codecs.DeleteDetachedSegmentsRequest(session, correlation, recording_id),
        codecs.PurgeSegmentsRequest(session, correlation, recording_id, big),
        codecs.AttachSegmentsRequest(session, correlation, recording_id),
        codecs.ListRecordingRequest(session, correlation, recording_id),
        codecs.ListRecordingsRequest(session, correlation, big, rng.choice((0, 1, -1, 2**31 - 1))),
        codecs.StopReplayRequest(session, correlation, big),
        codecs.StopAllReplaysRequest(session, correlation, recording_id),
        codecs.StopRecordingSubscriptionRequest(session, correlation, big),
        codecs.StopReplicationRequest(session, correlation, big),
        codecs.ListRecordingSubscriptionsRequest(session, correlation, rng.choice((0, -1, 2**31 - 1)),
                                                 rng.choice((0, -1, 2**31 - 1)), 1, 1001, "aeron:ipc"),
        codecs.FindLastMatchingRecordingRequest(session, correlation, big, rng.choice((0, -1)), 1001,
                                                "aeron:ipc"),
        codecs.KeepAliveRequest(session, correlation),
        codecs.ArchiveIdRequest(session, correlation),
    ]


def _channel_requests(session: int, correlation: int, rng: random.Random) -> list:
    """Factories of requests whose last var field is a channel (placeholder substituted later)."""
    recording_id = rng.choice(BAD_RECORDING_IDS)
    stream = rng.choice((1001, 0, -1, 2**31 - 1))
    return [
        lambda ch: codecs.StartRecordingRequest(session, correlation, stream, LOCAL, ch),
        lambda ch: codecs.StartRecordingRequest2(session, correlation, stream, SourceLocation.REMOTE, 0, ch),
        lambda ch: codecs.StopRecordingRequest(session, correlation, stream, ch),
        lambda ch: codecs.ReplayRequest(session, correlation, recording_id, 0, 64, stream, 0, 0, ch),
        lambda ch: codecs.ExtendRecordingRequest2(session, correlation, recording_id, stream, LOCAL, 0, ch),
        lambda ch: codecs.ListRecordingsForUriRequest(session, correlation, 0, 10, stream, ch),
        lambda ch: codecs.ConnectRequest(correlation, stream, 0, ch),
    ]


@dataclass
class FuzzMix:
    """Which kinds one fuzz message was, counted (printed by the tests)."""
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1


def fuzz_message(rng: random.Random, session: int, other_sessions: list[int], mix: FuzzMix) -> bytes:
    correlation = rng.getrandbits(64) - 2**63 if rng.random() < 0.5 else rng.randint(0, 10**6)
    kind = rng.randrange(7)
    if kind == 0:
        mix.add("random bytes")
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    if kind == 1:
        mix.add("bad header")
        valid = codecs.encode(rng.choice(_requests_with_ids(session, correlation, rng)))
        block_length, template_id, schema_id, version = HEADER.unpack_from(valid)
        which = rng.randrange(4)
        if which == 0:
            schema_id = rng.choice((0, 100, 102, 0xFFFF))
        elif which == 1:
            template_id = rng.choice((0, 20, 21, 25, 99, 200, 0xFFFF))
        elif which == 2:
            version = rng.choice((0, 1, 5, 99, 0xFFFF))
        else:
            block_length = rng.choice((0, 1, 7, block_length - 1, block_length + 1, 0x7FFF, 0xFFFF))
        return HEADER.pack(block_length, template_id, schema_id, version) + valid[HEADER.size:]
    if kind == 2:
        mix.add("huge var length")
        factory = rng.choice(_channel_requests(session, correlation, rng))
        channel = b"aeron:ipc"
        encoded = _with_channel(factory, channel)
        at = len(encoded) - len(channel) - VAR_LENGTH.size
        length = rng.choice((2**32 - 1, 2**31, 2**31 - 1, 2**30, 2**30 + 1, len(channel) + 1, 65536))
        data = encoded[:at] + VAR_LENGTH.pack(length) + encoded[at + VAR_LENGTH.size:]
        return data if rng.random() < 0.7 else data[:rng.randint(HEADER.size, len(data))]
    if kind == 3:
        mix.add("bad channel")
        factory = rng.choice(_channel_requests(session, correlation, rng))
        return _with_channel(factory, _channel_bytes(rng))
    if kind == 4:
        mix.add("foreign or random session")
        other = rng.choice(other_sessions) if other_sessions and rng.random() < 0.5 else rng.getrandbits(64) - 2**63
        return codecs.encode(rng.choice(_requests_with_ids(other, correlation, rng)))
    if kind == 5:
        mix.add("random correlation id, out-of-range ids")
        return codecs.encode(rng.choice(_requests_with_ids(session, correlation, rng)))
    mix.add("challenge/close of another session")
    other = rng.choice(other_sessions) if other_sessions and rng.random() < 0.3 else rng.getrandbits(64) - 2**63
    if rng.random() < 0.5:
        return codecs.encode(codecs.ChallengeResponse(other, correlation, bytes(rng.randrange(256) for _ in range(8))))
    return codecs.encode(codecs.CloseSessionRequest(other))


@dataclass
class SessionResult:
    sent: int
    responses: int
    control_session_id: int
    seconds: float


def fuzz_session(aeron: AeronClient, control_channel: str, control_stream_id: int, rng: random.Random,
                 count: int, other_sessions: list[int], mix: FuzzMix, response_stream_id: int) -> SessionResult:
    """Connects, sends ``count`` fuzz messages in bulk (draining responses), closes. The session's
    id is appended to ``other_sessions`` so later sessions can use it as a foreign id."""
    started = time.monotonic()
    client = RawArchiveClient(aeron, control_channel, control_stream_id, response_stream_id=response_stream_id)
    responses = 0

    def on_fragment(payload, header) -> None:
        nonlocal responses
        responses += 1

    try:
        answer = client.connect()
        assert answer.code == codecs.ControlResponseCode.OK, answer
        session = client.control_session_id
        assert session is not None, "an OK answer names the session"
        for index in range(count):
            data = fuzz_message(rng, session, other_sessions, mix)
            while client.requests.offer(data) < 0:
                if client.responses.poll(on_fragment, 1000) == 0:
                    time.sleep(0.0005)
            if index % 64 == 0:
                client.responses.poll(on_fragment, 1000)
        # the session may have been closed by a fuzzed CloseSession of its own id; that is fine
        client.close_session()
        deadline, quiet_since = time.monotonic() + 2.0, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 0.1:
            if client.responses.poll(on_fragment, 1000) == 0:
                time.sleep(0.005)
            else:
                quiet_since = time.monotonic()
        other_sessions.append(session)
        return SessionResult(count, responses, session, time.monotonic() - started)
    finally:
        client.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_anon_kb(pid: int) -> int:
    """The process's anonymous resident memory (RssAnon in /proc/<pid>/status), KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError(f"no RssAnon in /proc/{pid}/status")
