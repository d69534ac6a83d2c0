"""The fair benchmarks feed the Java archives with OUR bench program: over IPC our 1.53 C client
attached to the Java 1.15.1 or 1.51.0 driver (bench/fair_recording.py, bench/modern_java_archive.py),
over UDP from a C driver of its own to the 1.51.0 archive. That works only because the layouts it
uses did not change, so check every frame the Java archive recorded: header fields, term offsets,
PAD frames, payloads."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))
from archive_throughput import started  # noqa: E402 - bench/ is not a package
from bench_processes import PYTHON_BENCH_CLIENT, BenchClients, run_bench_client  # noqa: E402
from modern_java_archive import client_options  # noqa: E402
from modern_java_archive import started as started_modern  # noqa: E402

from tests.interop.peer.interop_peer import ensure_peer_built  # noqa: E402
from tests.interop.peer.modern_peer import ensure_modern_peer_built  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

TERM_LENGTH = 64 * 1024  # small terms: the run crosses many term ends (PAD frames, rotation)
HEADER = struct.Struct("<iBBhiiii")  # frame length, version, flags, type, term offset, session, stream, term id


@pytest.mark.parametrize(("size", "messages"), [(32, 50_000), (1024, 5_000)])
def test_our_c_client_records_correct_frames_into_the_java_archive(tmp_path, size, messages):
    peer_installation = ensure_peer_built()
    clients = BenchClients(peer_installation, tmp_path / "no-java-bench-client-needed")
    with started("java", peer_installation, tmp_path, "dedicated") as java:
        recorded = clients.python("record", str(java.details["aeronDir"]), "--publication-channel",
                                  f"aeron:ipc?term-length={TERM_LENGTH}", "--stream-id", "1001",
                                  "--messages", str(messages), "--size", str(size), "--publisher", "per-message")
        assert recorded["publisher"] == "c-per-message"
        assert recorded["stopPosition"] == recorded["publicationPosition"] > 0
        replayed = clients.python("replay", str(java.details["aeronDir"]),
                                  "--recording-id", str(recorded["recordingId"]), "--replay-stream-id", "2002")
        assert replayed["countedBytes"] == recorded["stopPosition"]
        (segment,) = sorted(java.archive_dir.glob("*.rec"))
        log = np.fromfile(segment, dtype=np.uint8)[:recorded["stopPosition"]].tobytes()
    assert_frames_of_the_bench_publisher(log, size, messages)


@pytest.mark.parametrize(("transport", "size", "messages"), [("ipc", 32, 50_000), ("udp", 1024, 5_000)])
def test_one_program_records_correct_frames_into_the_modern_java_archive(tmp_path, transport, size, messages):
    """bench/modern_java_archive.py's cases, small: the same options, the Java 1.51.0 archive."""
    with started_modern("java", ensure_modern_peer_built(), tmp_path, "shared") as java:
        connection, record_options, replay_options = client_options(java, transport)
        record_options[-1] = record_options[-1].replace("term-length=16777216", f"term-length={TERM_LENGTH}")
        client = [sys.executable, str(PYTHON_BENCH_CLIENT)]
        recorded = run_bench_client([*client, "record", *connection, *record_options, "--stream-id", "1001",
                                     "--messages", str(messages), "--size", str(size), "--publisher", "per-message"])
        assert recorded["stopPosition"] == recorded["publicationPosition"] > 0
        replayed = run_bench_client([*client, "replay", *connection, *replay_options,
                                     "--recording-id", str(recorded["recordingId"]), "--replay-stream-id", "2002"])
        assert replayed["countedBytes"] == recorded["stopPosition"]
        (segment,) = sorted(java.archive_dir.glob("*.rec"))
        log = np.fromfile(segment, dtype=np.uint8)[:recorded["stopPosition"]].tobytes()
    assert_frames_of_the_bench_publisher(log, size, messages)


def assert_frames_of_the_bench_publisher(log: bytes, size: int, messages: int) -> None:
    offset, index, pads, sessions = 0, 0, 0, set()
    initial_term_id = HEADER.unpack_from(log, 0)[7]
    while offset < len(log):
        length, version, flags, frame_type, term_offset, session, stream, term_id = HEADER.unpack_from(log, offset)
        assert (version, term_offset, stream, term_id - initial_term_id) == \
            (0, offset % TERM_LENGTH, 1001, offset // TERM_LENGTH), offset
        if frame_type == 0:  # PAD to the term end
            assert (offset + length) % TERM_LENGTH == 0
            pads += 1
        else:
            assert (length, flags, frame_type) == (32 + size, 0xC0, 1), offset
            payload = bytearray((j * 7) & 0xFF for j in range(size))  # the Java client's payload
            payload[:8] = struct.pack("<q", index)
            assert log[offset + 32:offset + 32 + size] == payload, f"message {index}"
            index += 1
        sessions.add(session)
        offset += (length + 31) & ~31
    assert index == messages and len(sessions) == 1
    assert pads > 0 or TERM_LENGTH % (32 + size + 31 & ~31) == 0
