"""Archive directories written for the Java tools to read: one by the Java 1.51 archive (its own
client recording), one by our sidecar (our client recording the same streams), each then stopped.

Shared by the catalog 3.1 tests and the ArchiveTool parity tests; every process is stopped by the
context manager that started it.
"""

from __future__ import annotations

import time
from pathlib import Path

from aeron_spark.archive.cli.sidecar_process import SidecarProcess
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.driver_integration import AeronClient
from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    RecordResult,
    payloads,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel

TIMEOUT = 15.0
SEGMENT = 128 * 1024
TERM = 64 * 1024
STREAMS = ((3001, 3000, 100), (3002, 200, 700))  # (stream id, messages, payload size)


def record_streams(client: ArchiveClient, aeron: AeronClient) -> list[int]:
    """Records each of `STREAMS` (our publication, UDP, 64 KiB terms) and waits for its stop."""
    ids = []
    for stream_id, count, size in STREAMS:
        channel = udp_channel(free_udp_port()) + f"|term-length={TERM}"
        client.start_recording(channel, stream_id, SourceLocation.REMOTE)
        publication = aeron.add_exclusive_publication(channel, stream_id)
        try:
            deadline = time.monotonic() + TIMEOUT
            while not publication.is_connected:
                assert time.monotonic() < deadline, "the archive did not subscribe"
                time.sleep(0.005)
            for payload in payloads(0, count, size):
                publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
            end = publication.position
            [descriptor] = [d for d in client.list_recordings() if d.stream_id == stream_id]
            while client.recording_position(descriptor.recording_id) < end:
                assert time.monotonic() < deadline, "the archive did not record the whole stream"
                time.sleep(0.005)
            client.stop_recording(channel, stream_id)
        finally:
            publication.close()
        while client.list_recording(descriptor.recording_id).stop_position != end:
            assert time.monotonic() < deadline, "the archive did not store the stop position"
            time.sleep(0.01)
        ids.append(descriptor.recording_id)
    return ids


def written_by_java(peer: ModernPeerInstallation, work: Path) -> tuple[Path, list[RecordResult]]:
    """`STREAMS` recorded by the Java client into a Java archive in ``work/archive``, then stopped."""
    with running_modern_java_archive(peer, work, archive_dir=work / "archive", segment_length=SEGMENT) as java:
        results = [java.client.record(udp_channel(free_udp_port()) + f"|term-length={TERM}", stream_id, count, size)
                   for stream_id, count, size in STREAMS]
    return work / "archive", results


def written_by_our_sidecar(directory: Path, client_name: str) -> Path:
    """`STREAMS` recorded by our client into our sidecar on ``directory`` (created), then stopped cleanly."""
    directory.mkdir()
    with SidecarProcess.start(directory, "--segment-length", str(SEGMENT)) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name=client_name)
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                record_streams(client, aeron)
        finally:
            aeron.close()
    return directory
