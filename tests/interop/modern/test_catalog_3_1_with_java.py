"""One archive directory, two archives: catalog 3.1.0 against the real Java Aeron 1.51.0.

* The Java ArchiveTool gives the same answers (describe, verify, count-entries, checksum) on a
  directory our sidecar wrote as on one the Java archive wrote with the same streams.
* Our sidecar serves a directory the Java archive wrote: it lists the Java recordings, replays
  them byte-exactly and appends a new recording with the next id (which the Java tool verifies).
* The Java archive serves a directory our sidecar wrote: it lists and replays our recordings
  byte-exactly and appends with the next id.
* Our `aeron-archive` tool reads the Java directory; a directory `aeron-archive migrate` upgraded
  from our old 2.1.0 layout passes the Java tool's verify.

The Java side is `io.aeron:aeron-all:1.51.0` run from the jar by ``java_jar`` (a local helper:
the shared modern peer was not on main yet). The recordings on both sides are made by our
ArchiveClient and our publications over UDP, so the Java archive is driven as a Java user's
archive would be by a modern client; the replays are read by our client.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aeron_spark.archive.cli import main as tool
from aeron_spark.archive.cli.sidecar_process import SidecarProcess
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.driver_integration import AeronClient
from tests.interop.modern import java_jar
from tests.interop.peer.interop_peer import expected_digest, framed_length, payloads
from tests.support.ports import free_udp_port, udp_channel

pytestmark = pytest.mark.interop

TIMEOUT = 15.0
SEGMENT = 128 * 1024
TERM = 64 * 1024
STREAMS = ((3001, 3000, 100), (3002, 200, 700))  # (stream id, messages, payload size)


@pytest.fixture(scope="module")
def jar() -> Path:
    try:
        java_jar.java()
        return java_jar.ensure_jar()
    except (FileNotFoundError, OSError) as error:
        pytest.skip(f"Java Aeron 1.51.0 is not available: {error}")


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


def digest_of(messages) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.payload)
    return digest.hexdigest()


def replay_digest(client: ArchiveClient, recording_id: int, length: int) -> str:
    with client.replay(recording_id, 0, length, udp_channel(free_udp_port()), 4001) as replay:
        return digest_of(replay.messages(idle_timeout=TIMEOUT))


def check_replays(client: ArchiveClient) -> list:
    listed = sorted(client.list_recordings(), key=lambda d: d.recording_id)
    for descriptor, (stream_id, count, size) in zip(listed, STREAMS):
        assert descriptor.stream_id == stream_id
        assert descriptor.stop_position >= count * framed_length(size)  # + PAD frames at term ends
        assert replay_digest(client, descriptor.recording_id, descriptor.stop_position) == \
            expected_digest(0, count, size)
    return listed


def append_one(client: ArchiveClient, aeron: AeronClient, stream_id: int = 3009) -> int:
    channel = udp_channel(free_udp_port())
    client.start_recording(channel, stream_id, SourceLocation.REMOTE)
    publication = aeron.add_exclusive_publication(channel, stream_id)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not publication.is_connected:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        for payload in payloads(0, 50, 64):
            publication.offer_with_retry(payload.tobytes(), timeout=TIMEOUT)
        end = publication.position
        [descriptor] = [d for d in client.list_recordings() if d.stream_id == stream_id]
        while client.recording_position(descriptor.recording_id) < end:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        client.stop_recording(channel, stream_id)
    finally:
        publication.close()
    return descriptor.recording_id


@pytest.fixture(scope="module")
def java_dir(jar, aeron_client: AeronClient, tmp_path_factory) -> Path:
    """A directory the Java 1.51 archive wrote (then stopped)."""
    work = tmp_path_factory.mktemp("java-written")
    with java_jar.running_java_archive(work / "archive", _shm("java-written"), free_udp_port()) as java:
        with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client,
                                   timeout=TIMEOUT) as client:
            record_streams(client, aeron_client)
    return work / "archive"


@pytest.fixture(scope="module")
def our_dir(tmp_path_factory) -> Path:
    """A directory our sidecar wrote (then stopped cleanly)."""
    directory = tmp_path_factory.mktemp("ours-written") / "archive"
    directory.mkdir()
    with SidecarProcess.start(directory, "--segment-length", str(SEGMENT)) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="catalog-3-1-ours")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                record_streams(client, aeron)
        finally:
            aeron.close()
    return directory


def _shm(name: str) -> Path:
    return Path("/dev/shm") / f"aeron-catalog31-{name}-{free_udp_port()}"


def copy_of(directory: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(directory, target)
    return target


# ---------------------------------------------------------------- the Java ArchiveTool on both

_VOLATILE = {"startTimestamp", "stopTimestamp", "sessionId", "initialTermId", "strippedChannel",
             "originalChannel", "sourceIdentity", "controlSessionId", "correlationId"}


def tool_ok(directory: Path, *args: str) -> str:
    result = java_jar.archive_tool(directory, *args)
    assert result.returncode == 0, f"ArchiveTool {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result.stdout


def described(directory: Path) -> dict:
    """ArchiveTool describe, parsed: the mark file's and every descriptor's fields."""
    out = tool_ok(directory, "describe")
    mark = re.search(r"\[MarkFileHeader\]\(([^)]*)\):(.*)", out)
    assert mark is not None, out
    descriptors = [dict(re.findall(r"(\w+)=('[^']*'|[^|]*)", body))
                   for body in re.findall(r"\[RecordingDescriptor\]\([^)]*\):(.*)", out)]
    return {"markSbe": mark.group(1), "mark": dict(re.findall(r"(\w+)=('[^']*'|[^|]*)", mark.group(2))),
            "capacity": re.search(r"Catalog capacity in bytes: (\d+)", out).group(1),
            "descriptors": descriptors}


def test_archive_tool_describes_our_directory_as_its_own(java_dir: Path, our_dir: Path) -> None:
    theirs, ours = described(java_dir), described(our_dir)
    assert ours["markSbe"] == theirs["markSbe"]  # sbeTemplateId=200|sbeSchemaId=100|version 2|block 128
    assert set(ours["mark"]) == set(theirs["mark"])
    for field in ("version", "activityTimestamp", "controlStreamId", "headerLength"):
        assert ours["mark"][field] == theirs["mark"][field], field
    assert ours["mark"]["version"] == str(layout.ARCHIVE_FILE_VERSION)
    assert ours["capacity"] == theirs["capacity"] == str(layout.DEFAULT_CAPACITY)
    assert len(ours["descriptors"]) == len(theirs["descriptors"]) == len(STREAMS)
    for mine, java in zip(ours["descriptors"], theirs["descriptors"]):
        assert set(mine) == set(java)
        for field in set(mine) - _VOLATILE:
            assert mine[field] == java[field], field


def test_archive_tool_verify_and_count_entries_agree(java_dir: Path, our_dir: Path) -> None:
    for directory in (java_dir, our_dir):
        assert tool_ok(directory, "count-entries").strip().splitlines()[-1] == str(len(STREAMS))
        verified = tool_ok(directory, "verify", "-a")
        assert verified.count(") OK") == len(STREAMS), verified


def test_archive_tool_checksum_and_ours_write_the_same_bytes(our_dir: Path, tmp_path: Path) -> None:
    java_stamped = copy_of(our_dir, tmp_path, "java-stamped")
    our_stamped = copy_of(our_dir, tmp_path, "our-stamped")
    tool_ok(java_stamped, "checksum", "io.aeron.archive.checksum.Crc32c", "-a")
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(["checksum", "--dir", str(our_stamped), "--checksum", "CRC-32C"], stdout=out, stderr=err) == 0, \
        err.getvalue()
    for path in sorted(java_stamped.glob("*.rec")) + [java_stamped / "archive.catalog"]:
        assert path.read_bytes() == (our_stamped / path.name).read_bytes(), path.name
    with Catalog.open(our_stamped, read_only=True) as catalog:
        assert all(entry.checksum != 0 for entry in catalog.entries())
    verified = tool_ok(our_stamped, "verify", "-a", "-checksum", "io.aeron.archive.checksum.Crc32c")
    assert verified.count(") OK") == len(STREAMS), verified


# ---------------------------------------------------------------- serving the other's directory

def test_our_sidecar_serves_the_java_directory(java_dir: Path, tmp_path: Path) -> None:
    directory = copy_of(java_dir, tmp_path, "served-by-us")
    with SidecarProcess.start(directory, "--segment-length", str(SEGMENT)) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="catalog-3-1-serve-java")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                listed = check_replays(client)
                new_id = append_one(client, aeron)
                assert new_id == listed[-1].recording_id + 1
            out, err = io.StringIO(), io.StringIO()
            assert tool.main(["recordings", "--control-channel", sidecar.control_channel,
                              "--aeron-dir", sidecar.aeron_dir], stdout=out, stderr=err) == 0, err.getvalue()
            assert [json.loads(line)["recordingId"] for line in out.getvalue().splitlines()] == [0, 1, new_id]
        finally:
            aeron.close()
    verified = tool_ok(directory, "verify", "-a")  # and the Java tool still accepts the directory
    assert verified.count(") OK") == len(STREAMS) + 1, verified


def test_the_java_archive_serves_our_directory(our_dir: Path, tmp_path: Path, aeron_client: AeronClient) -> None:
    directory = copy_of(our_dir, tmp_path, "served-by-java")
    with java_jar.running_java_archive(directory, _shm("served-by-java"), free_udp_port()) as java:
        with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client,
                                   timeout=TIMEOUT) as client:
            listed = check_replays(client)
            assert append_one(client, aeron_client) == listed[-1].recording_id + 1
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(["verify", "--dir", str(directory)], stdout=out, stderr=err) == 0, out.getvalue()


# ---------------------------------------------------------------- our tool on the Java directory

def run_tool(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(list(args), stdout=out, stderr=err) == 0, err.getvalue() + out.getvalue()
    return out.getvalue()


def test_our_tool_reads_the_java_directory(java_dir: Path) -> None:
    directory = str(java_dir)
    described_json = json.loads(run_tool("describe", "--dir", directory, "--json"))
    assert described_json["markFile"]["version"] == "3.1.0" and described_json["problems"] == []
    java_descriptors = described(java_dir)["descriptors"]
    for ours, java in zip(described_json["recordings"], java_descriptors):
        for field, value in java.items():
            assert str(ours[field]) == value.strip("'"), field
    assert run_tool("count-entries", "--dir", directory).strip() == str(len(STREAMS))
    verified = run_tool("verify", "--dir", directory, "--dry-run")
    assert verified.count(": OK") == len(STREAMS)
    dumped = run_tool("dump", "--dir", directory, "--limit", "3", "0")
    assert dumped.count("type=DATA") == 3


def test_a_migrated_2_1_directory_passes_the_java_tool(tmp_path: Path, jar) -> None:
    from tests.unit.archive.storage.test_migration import build_old_directory, write_2_1_mark_file
    from tests.support.old_archives import V2_1
    build_old_directory(tmp_path, V2_1)
    write_2_1_mark_file(tmp_path)
    refused = java_jar.archive_tool(tmp_path, "describe")
    assert refused.returncode != 0  # Java refuses 2.1.0 (it asks for its own migrate)
    run_tool("migrate", str(tmp_path))
    assert struct.unpack_from("<i", (tmp_path / "archive.catalog").read_bytes(), 0)[0] == layout.ARCHIVE_FILE_VERSION
    assert tool_ok(tmp_path, "count-entries").strip().splitlines()[-1] == "2"  # 0, 1 VALID; 2 INVALID
    verified = tool_ok(tmp_path, "verify", "-a")
    assert verified.count(") OK") == 3, verified  # the INVALID one too, whose segments are whole:
    assert tool_ok(tmp_path, "count-entries").strip().splitlines()[-1] == "3"  # Java made it VALID again


@pytest.fixture(autouse=True)
def _no_stray_shm() -> Iterator[None]:
    yield
    for path in Path("/dev/shm").glob("aeron-catalog31-*"):
        shutil.rmtree(path, ignore_errors=True)


def test_a_java_1_15_1_directory_is_migrated_then_verified_by_java_and_served_by_us(
        peer_installation, tmp_path: Path, jar) -> None:
    """Real version-0 data: the Java 1.15.1 archive records over several 64 KiB segments
    (``<id>-<segmentIndex>.rec``); after `aeron-archive migrate` the Java 1.51 tool verifies it and
    our sidecar replays it with the 1.15.1 client's digest."""
    from tests.interop.peer.interop_peer import running_java_archive as running_java_1_15_archive

    segment = 64 * 1024
    with running_java_1_15_archive(peer_installation, tmp_path, segment_length=segment) as old:
        recorded = old.client.record(udp_channel(free_udp_port()) + "|term-length=65536", 3005, 2_000, 100)
        directory = old.archive_dir
    old_names = sorted(p.name for p in directory.glob("*.rec"))
    assert len(old_names) > 2 and f"{recorded.recording_id}-1.rec" in old_names
    assert java_jar.archive_tool(directory, "describe").returncode != 0  # 1.51 refuses version 0
    assert "migrated 0.0.0 -> 3.1.0" in run_tool("migrate", str(directory))
    assert sorted(p.name for p in directory.glob("*.rec")) == sorted(
        f"{recorded.recording_id}-{index * segment}.rec" for index in range(len(old_names)))
    verified = tool_ok(directory, "verify", "-a")
    assert verified.count(") OK") == 1, verified
    with SidecarProcess.start(directory, "--segment-length", str(segment)) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="catalog-3-1-migrated")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                [descriptor] = client.list_recordings()
                assert descriptor.stop_position == recorded.stop_position
                assert replay_digest(client, descriptor.recording_id, descriptor.stop_position) == recorded.digest
        finally:
            aeron.close()
