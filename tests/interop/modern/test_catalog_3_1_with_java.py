"""One archive directory, two archives: catalog 3.1.0 against the real Java Aeron 1.51.0.

* The Java ArchiveTool gives the same answers (describe, verify, count-entries, checksum) on a
  directory our sidecar wrote as on one the Java archive wrote with the same streams.
* Our sidecar serves a directory the Java archive wrote: it lists the Java recordings, replays
  them byte-exactly and appends a new recording with the next id (which the Java tool verifies).
* The Java archive serves a directory our sidecar wrote: it lists and replays our recordings
  byte-exactly and appends with the next id.
* Our `aeron-archive` tool reads the Java directory; a directory `aeron-archive migrate` upgraded
  from our old 2.1.0 layout passes the Java tool's verify.

The Java side is `io.aeron:aeron-all:1.51.0` through the modern peer
(`tests.interop.peer.modern_peer`: its archive, its ArchiveTool and the real 1.51.0 AeronArchive
client). The Java archive's recordings are made by the Java client (the peer's digests are the
reference for our replays); ours by our client and publications; the Java client lists and
replays our directory when the Java archive serves it.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import struct
import time
from pathlib import Path

import pytest

from aeron_spark.archive.cli import main as tool
from aeron_spark.archive.cli.sidecar_process import SidecarProcess
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import SourceLocation
from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.driver_integration import AeronClient
from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    expected_digest,
    framed_length,
    payloads,
    running_modern_java_archive,
)
from tests.interop.modern.written_archives import (
    SEGMENT,
    STREAMS,
    TIMEOUT,
    record_streams,
    written_by_java,
    written_by_our_sidecar,
)
from tests.support.ports import free_udp_port, udp_channel



@pytest.fixture(scope="module")
def peer(modern_peer: ModernPeerInstallation) -> ModernPeerInstallation:
    return modern_peer


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
def java_recordings(peer: ModernPeerInstallation, tmp_path_factory) -> tuple[Path, list]:
    """A directory the Java 1.51 archive wrote (then stopped), recorded by the Java client:
    (directory, the peer's RecordResults)."""
    return written_by_java(peer, tmp_path_factory.mktemp("java-written"))


@pytest.fixture(scope="module")
def java_dir(java_recordings) -> Path:
    return java_recordings[0]


@pytest.fixture(scope="module")
def our_dir(tmp_path_factory) -> Path:
    """A directory our sidecar wrote (then stopped cleanly)."""
    return written_by_our_sidecar(tmp_path_factory.mktemp("ours-written") / "archive", "catalog-3-1-ours")


def copy_of(directory: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(directory, target)
    return target


# ---------------------------------------------------------------- the Java ArchiveTool on both

_VOLATILE = {"startTimestamp", "stopTimestamp", "sessionId", "initialTermId", "strippedChannel",
             "originalChannel", "sourceIdentity", "controlSessionId", "correlationId"}


def tool_ok(peer: ModernPeerInstallation, directory: Path, *args: str) -> str:
    result = peer.archive_tool(directory, *args)
    assert result.returncode == 0, f"ArchiveTool {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result.stdout


def described(peer: ModernPeerInstallation, directory: Path) -> dict:
    """ArchiveTool describe, parsed: the mark file's and every descriptor's fields."""
    out = tool_ok(peer, directory, "describe")
    mark = re.search(r"\[MarkFileHeader\]\(([^)]*)\):(.*)", out)
    assert mark is not None, out
    descriptors = [dict(re.findall(r"(\w+)=('[^']*'|[^|]*)", body))
                   for body in re.findall(r"\[RecordingDescriptor\]\([^)]*\):(.*)", out)]
    return {"markSbe": mark.group(1), "mark": dict(re.findall(r"(\w+)=('[^']*'|[^|]*)", mark.group(2))),
            "capacity": re.search(r"Catalog capacity in bytes: (\d+)", out).group(1),
            "descriptors": descriptors}


def test_archive_tool_describes_our_directory_as_its_own(peer, java_dir: Path, our_dir: Path) -> None:
    theirs, ours = described(peer, java_dir), described(peer, our_dir)
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


def test_archive_tool_verify_and_count_entries_agree(peer, java_dir: Path, our_dir: Path) -> None:
    for directory in (java_dir, our_dir):
        assert tool_ok(peer, directory, "count-entries").strip().splitlines()[-1] == str(len(STREAMS))
        verified = tool_ok(peer, directory, "verify", "-a")
        assert verified.count(") OK") == len(STREAMS), verified


def test_archive_tool_checksum_and_ours_write_the_same_bytes(peer, our_dir: Path, tmp_path: Path) -> None:
    java_stamped = copy_of(our_dir, tmp_path, "java-stamped")
    our_stamped = copy_of(our_dir, tmp_path, "our-stamped")
    tool_ok(peer, java_stamped, "checksum", "io.aeron.archive.checksum.Crc32c", "-a")
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(["checksum", "--dir", str(our_stamped), "--checksum", "CRC-32C"], stdout=out, stderr=err) == 0, \
        err.getvalue()
    for path in sorted(java_stamped.glob("*.rec")) + [java_stamped / "archive.catalog"]:
        assert path.read_bytes() == (our_stamped / path.name).read_bytes(), path.name
    with Catalog.open(our_stamped, read_only=True) as catalog:
        assert all(entry.checksum != 0 for entry in catalog.entries())
    verified = tool_ok(peer, our_stamped, "verify", "-a", "-checksum", "io.aeron.archive.checksum.Crc32c")
    assert verified.count(") OK") == len(STREAMS), verified


# ---------------------------------------------------------------- serving the other's directory

def test_our_sidecar_serves_the_java_directory(peer, java_recordings, tmp_path: Path) -> None:
    java_dir, recorded = java_recordings
    directory = copy_of(java_dir, tmp_path, "served-by-us")
    with SidecarProcess.start(directory, "--segment-length", str(SEGMENT)) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="catalog-3-1-serve-java")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                listed = check_replays(client)
                for descriptor, result in zip(listed, recorded):  # the Java client's own digests
                    assert (descriptor.recording_id, descriptor.stop_position) == \
                        (result.recording_id, result.stop_position)
                    assert replay_digest(client, descriptor.recording_id, descriptor.stop_position) == result.digest
                new_id = append_one(client, aeron)
                assert new_id == listed[-1].recording_id + 1
            out, err = io.StringIO(), io.StringIO()
            assert tool.main(["recordings", "--control-channel", sidecar.control_channel,
                              "--aeron-dir", sidecar.aeron_dir], stdout=out, stderr=err) == 0, err.getvalue()
            assert [json.loads(line)["recordingId"] for line in out.getvalue().splitlines()] == [0, 1, new_id]
        finally:
            aeron.close()
    verified = tool_ok(peer, directory, "verify", "-a")  # and the Java tool still accepts the directory
    assert verified.count(") OK") == len(STREAMS) + 1, verified


def test_the_java_archive_serves_our_directory(peer, our_dir: Path, tmp_path: Path) -> None:
    """The real Java archive on our directory, the real Java client listing and replaying it."""
    directory = copy_of(our_dir, tmp_path, "served-by-java")
    with running_modern_java_archive(peer, tmp_path, archive_dir=directory, segment_length=SEGMENT) as java:
        listed = sorted(java.client.list_recordings(), key=lambda d: d["recordingId"])
        with Catalog.open(our_dir, read_only=True) as ours:
            expected = [d.to_aeron_dict() for d in ours.descriptors()]
        assert [{k: v for k, v in d.items() if k not in ("controlSessionId", "correlationId")} for d in listed] == \
            [{k: v for k, v in d.items() if k not in ("controlSessionId", "correlationId")} for d in expected]
        for descriptor, (_, count, size) in zip(listed, STREAMS):
            replayed = java.client.replay(descriptor["recordingId"], replay_channel=udp_channel(free_udp_port()),
                                          replay_stream_id=4005)
            assert replayed.messages == count and replayed.digest == expected_digest(0, count, size)
        appended = java.client.record(udp_channel(free_udp_port()), 3010, 20, 64)
        assert appended.recording_id == listed[-1]["recordingId"] + 1
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(["verify", "--dir", str(directory)], stdout=out, stderr=err) == 0, out.getvalue()
    assert out.getvalue().count(": OK") == len(STREAMS) + 1


# ---------------------------------------------------------------- our tool on the Java directory

def run_tool(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert tool.main(list(args), stdout=out, stderr=err) == 0, err.getvalue() + out.getvalue()
    return out.getvalue()


def test_our_tool_reads_the_java_directory(peer, java_dir: Path) -> None:
    directory = str(java_dir)
    described_json = json.loads(run_tool("describe", "--dir", directory, "--json"))
    assert described_json["markFile"]["version"] == "3.1.0" and described_json["problems"] == []
    java_descriptors = described(peer, java_dir)["descriptors"]
    for ours, java in zip(described_json["recordings"], java_descriptors):
        for field, value in java.items():
            assert str(ours[field]) == value.strip("'"), field
    assert run_tool("count-entries", "--dir", directory).strip() == str(len(STREAMS))
    verified = run_tool("verify", "--dir", directory, "--dry-run")
    assert verified.count(": OK") == len(STREAMS)
    dumped = run_tool("dump", "--dir", directory, "--limit", "3", "0")
    assert dumped.count("type=DATA") == 3


def test_a_migrated_2_1_directory_passes_the_java_tool(peer, tmp_path: Path) -> None:
    from tests.unit.archive.storage.test_migration import build_old_directory, write_2_1_mark_file
    from tests.support.old_archives import V2_1
    build_old_directory(tmp_path, V2_1)
    write_2_1_mark_file(tmp_path)
    refused = peer.archive_tool(tmp_path, "describe")
    assert refused.returncode != 0  # Java refuses 2.1.0 (it asks for its own migrate)
    run_tool("migrate", str(tmp_path))
    assert struct.unpack_from("<i", (tmp_path / "archive.catalog").read_bytes(), 0)[0] == layout.ARCHIVE_FILE_VERSION
    assert tool_ok(peer, tmp_path, "count-entries").strip().splitlines()[-1] == "2"  # 0, 1 VALID; 2 INVALID
    verified = tool_ok(peer, tmp_path, "verify", "-a")
    assert verified.count(") OK") == 3, verified  # the INVALID one too, whose segments are whole:
    assert tool_ok(peer, tmp_path, "count-entries").strip().splitlines()[-1] == "3"  # Java made it VALID again


def test_a_java_1_15_1_directory_is_migrated_then_verified_by_java_and_served_by_us(
        peer_installation, peer, tmp_path: Path) -> None:
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
    assert peer.archive_tool(directory, "describe").returncode != 0  # 1.51 refuses version 0
    assert "migrated 0.0.0 -> 3.1.0" in run_tool("migrate", str(directory))
    assert sorted(p.name for p in directory.glob("*.rec")) == sorted(
        f"{recorded.recording_id}-{index * segment}.rec" for index in range(len(old_names)))
    verified = tool_ok(peer, directory, "verify", "-a")
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


def test_a_purge_marks_the_entry_deleted_for_both_archives(peer, java_dir: Path, our_dir: Path,
                                                           tmp_path: Path) -> None:
    """Our purge writes DELETED, which the Java tool and archive skip; a Java purge's DELETED
    entry is skipped by our catalog and sidecar, and the next id still follows it."""
    ours = copy_of(our_dir, tmp_path, "purged-by-us")
    with SidecarProcess.start(ours, "--segment-length", str(SEGMENT)) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="catalog-3-1-purge")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                client.purge_recording(0)
        finally:
            aeron.close()
    assert tool_ok(peer, ours, "count-entries").strip().splitlines()[-1] == str(len(STREAMS) - 1)
    assert "recordingId=0|" not in tool_ok(peer, ours, "describe")
    with running_modern_java_archive(peer, tmp_path / "java-on-purged", archive_dir=ours,
                                     segment_length=SEGMENT) as java:
        assert [d["recordingId"] for d in java.client.list_recordings()] == [1]
        assert java.client.record(udp_channel(free_udp_port()), 3011, 10, 64).recording_id == len(STREAMS)

    theirs = copy_of(java_dir, tmp_path, "purged-by-java")
    with running_modern_java_archive(peer, tmp_path / "java-purging", archive_dir=theirs,
                                     segment_length=SEGMENT) as java:
        java.client.purge(1)
    with Catalog.open(theirs, read_only=True) as catalog:
        assert [(e.descriptor.recording_id, e.state) for e in catalog.entries()] == [
            (0, layout.VALID), (1, layout.DELETED)]
    assert run_tool("count-entries", "--dir", str(theirs)).strip() == "1"
    with SidecarProcess.start(theirs, "--segment-length", str(SEGMENT)) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="catalog-3-1-java-purged")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                assert [d.recording_id for d in client.list_recordings()] == [0]
                assert append_one(client, aeron) == 2
        finally:
            aeron.close()


def test_descriptor_checksums_our_sidecar_keeps_pass_the_java_verify(peer, tmp_path: Path) -> None:
    """With ``--checksum crc32c`` our sidecar stamps frames and keeps each descriptor's checksum
    up to date through the recording's updates (stop position, timestamps): Java's
    ``verify -checksum`` recomputes both and agrees."""
    directory = tmp_path / "archive"
    directory.mkdir()
    with SidecarProcess.start(directory, "--segment-length", str(SEGMENT), "--checksum", "crc32c") as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="catalog-3-1-checksum")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron,
                                       timeout=TIMEOUT) as client:
                record_streams(client, aeron)
        finally:
            aeron.close()
    with Catalog.open(directory, read_only=True) as catalog:
        assert all(entry.checksum != 0 for entry in catalog.entries())
    verified = tool_ok(peer, directory, "verify", "-a", "-checksum", "io.aeron.archive.checksum.Crc32c")
    assert verified.count(") OK") == len(STREAMS), verified
