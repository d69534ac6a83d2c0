"""ArchiveTool parity: our `aeron-archive` and the real Java ArchiveTool (Aeron 1.51.0, catalog
3.1.0 as 1.52) on copies of the same directory, one our sidecar wrote and one the Java archive
wrote, for ``mark-invalid``, ``mark-valid``, ``describe-all``, ``delete-orphaned-segments``,
``compact`` and ``errors``.

Compared exactly: the state-change and compaction lines, the resulting catalog bytes and the files
left in the directory. Normalised where the formats legitimately differ:

* ``describe-all``: Java prints each descriptor with SBE's ``toString`` and ours prints
  ``RecordingDescriptor{...}`` (as our ``describe``): compared per line are the recording id,
  start and stop positions and the ``|STATE`` suffix, and the ``Catalog capacity in bytes`` line;
  the mark file lines differ in form (Java prints the SBE header) and are not compared.
* ``errors``: the archive's part is compared line by line (but for Aeron 1.51/1.52's "O distinct
  errors observed" typo, which ours prints with the digit 0 as Aeron after 1.52); the driver's part is not (the driver
  that wrote these directories is gone with its ``cnc.dat``: Java's tool then fails with an
  exception, ours says it cannot read the driver's log).
* Confirmation: Java reads "y" from stdin, ours gets ``--yes`` (it asks the same question otherwise).

The Java tool's process is started and waited for by `ModernPeerInstallation.archive_tool`.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from aeron_spark.archive.cli import main as tool
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile
from tests.interop.modern.written_archives import SEGMENT, written_by_java, written_by_our_sidecar
from tests.interop.peer.modern_peer import ModernPeerInstallation


@pytest.fixture(scope="module")
def java_written(modern_peer: ModernPeerInstallation, tmp_path_factory) -> Path:
    """A directory the Java 1.51 archive wrote (then stopped), recorded by the Java client."""
    return written_by_java(modern_peer, tmp_path_factory.mktemp("parity-java-written"))[0]


@pytest.fixture(scope="module")
def ours_written(tmp_path_factory) -> Path:
    """A directory our sidecar wrote (then stopped cleanly)."""
    return written_by_our_sidecar(tmp_path_factory.mktemp("parity-ours-written") / "archive", "archive-tool-parity")


@pytest.fixture(params=["ours-written", "java-written"])
def twin_dirs(request, tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of one written directory: (for the Java tool, for ours)."""
    source = request.getfixturevalue(request.param.replace("-", "_"))
    java_copy, our_copy = tmp_path / "java-tool", tmp_path / "our-tool"
    shutil.copytree(source, java_copy)
    shutil.copytree(source, our_copy)
    return java_copy, our_copy


def java_tool(peer: ModernPeerInstallation, directory: Path, *args: str, answer: str | None = None) -> str:
    result = peer.archive_tool(directory, *args, input=answer)
    assert result.returncode == 0, f"ArchiveTool {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result.stdout


def our_tool(directory: Path, *args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    code = tool.main([*args, "--dir", str(directory)], stdout=out, stderr=err)
    assert code == 0, f"aeron-archive {' '.join(args)}: {err.getvalue()}"
    return out.getvalue()


def entries(directory: Path) -> list[tuple[int, str, int, int]]:
    with Catalog.open(directory, read_only=True) as catalog:
        return [(e.descriptor.recording_id, e.state_name, e.descriptor.start_position, e.descriptor.stop_position)
                for e in catalog.entries()]


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".rec", ".catalog")))


def assert_same_directories(java_copy: Path, our_copy: Path) -> None:
    assert files(java_copy) == files(our_copy)
    assert entries(java_copy) == entries(our_copy)
    assert (java_copy / "archive.catalog").read_bytes() == (our_copy / "archive.catalog").read_bytes()


def described_all(out: str) -> tuple[str, list[tuple[str, str, str, str]]]:
    capacity = re.search(r"Catalog capacity in bytes: (\d+)", out)
    assert capacity is not None, out
    rows = []
    for line in out.splitlines():
        if re.search(r"\|(VALID|INVALID|DELETED)$", line):
            fields = dict(re.findall(r"(recordingId|startPosition|stopPosition)=(-?\d+)", line))
            rows.append((fields["recordingId"], fields["startPosition"], fields["stopPosition"],
                         line.rsplit("|", 1)[1]))
    return capacity.group(1), rows


def test_mark_invalid_mark_valid_and_describe_all_agree(modern_peer, twin_dirs) -> None:
    java_copy, our_copy = twin_dirs
    for command in (("mark-invalid", "0"), ("mark-invalid", "0"), ("mark-valid", "0"), ("mark-invalid", "1")):
        assert our_tool(our_copy, *command) == java_tool(modern_peer, java_copy, *command), command
        assert_same_directories(java_copy, our_copy)
    java_rows, our_rows = described_all(java_tool(modern_peer, java_copy, "describe-all")), \
        described_all(our_tool(our_copy, "describe-all"))
    assert our_rows == java_rows
    assert [row[3] for row in our_rows[1]] == ["VALID", "INVALID"]


def test_delete_orphaned_segments_and_compact_agree(modern_peer, twin_dirs) -> None:
    java_copy, our_copy = twin_dirs
    last = max(int(name.split("-")[1].split(".")[0]) for name in files(our_copy) if name.startswith("1-"))
    for directory in twin_dirs:  # a file past recording 1's stop, one below recording 0's start
        (directory / f"1-{last + 4 * SEGMENT}.rec").write_bytes(bytes(SEGMENT))
        (directory / f"0-{-SEGMENT}.rec").write_bytes(bytes(SEGMENT))
    java_tool(modern_peer, java_copy, "delete-orphaned-segments", "1", answer="y\n")
    our_tool(our_copy, "delete-orphaned-segments", "1", "--yes")
    assert_same_directories(java_copy, our_copy)
    assert f"1-{last + 4 * SEGMENT}.rec" not in files(our_copy)
    java_tool(modern_peer, java_copy, "delete-orphaned-segments", answer="y\n")
    our_tool(our_copy, "delete-orphaned-segments", "--yes")
    assert_same_directories(java_copy, our_copy)

    java_tool(modern_peer, java_copy, "mark-invalid", "0")
    our_tool(our_copy, "mark-invalid", "0")
    java_out = java_tool(modern_peer, java_copy, "compact", answer="y\n")
    our_out = our_tool(our_copy, "compact", "--yes")
    result = re.search(r"Compaction result: .*", java_out)
    assert result is not None, java_out
    assert result.group(0) in our_out.splitlines()
    assert_same_directories(java_copy, our_copy)
    assert [entry[0] for entry in entries(our_copy)] == [1]
    assert not any(name.startswith("0-") for name in files(our_copy))
    # The compacted catalog is still one the Java tool verifies.
    assert java_tool(modern_peer, our_copy, "verify", "-a").count(") OK") == 1


def test_errors_prints_the_archive_log_as_the_java_tool(modern_peer, twin_dirs) -> None:
    java_copy, our_copy = twin_dirs
    result = modern_peer.archive_tool(java_copy, "errors")  # fails at the gone driver's cnc.dat
    java_lines = result.stdout.splitlines()
    our_lines = our_tool(our_copy, "errors").splitlines()
    archive_part = java_lines[:java_lines.index(next(line for line in java_lines if line.startswith("Aeron driver error log")))]
    # Aeron <= 1.52 prints the letter O for an empty log ("O distinct errors observed"), fixed
    # upstream after 1.52 (aeron-io/aeron#2110); ours prints the digit.
    archive_part = [line.replace("O distinct errors observed", "0 distinct errors observed") for line in archive_part]
    assert our_lines[:len(archive_part)] == archive_part
    assert our_lines[len(archive_part)].startswith("Aeron driver error log (directory: ")


def test_errors_prints_recorded_errors_as_the_java_tool(modern_peer, ours_written, tmp_path: Path) -> None:
    """A mark file holding two distinct errors (one seen twice), read by both tools."""
    directory = tmp_path / "with-errors"
    shutil.copytree(ours_written, directory)
    with ArchiveMarkFile.create(directory, archive_id=7, control_channel="aeron:udp?endpoint=localhost:8010",
                                control_stream_id=10, local_control_channel="aeron:ipc", local_control_stream_id=11,
                                events_channel="aeron:ipc", events_stream_id=30,
                                aeron_directory=str(tmp_path / "gone-driver")) as mark:
        mark.record_error("java.io.IOException: No space left on device", now_ms=1_700_000_000_123)
        mark.record_error("io.aeron.exceptions.TimeoutException: client liveness", now_ms=1_700_000_001_000)
        mark.record_error("java.io.IOException: No space left on device", now_ms=1_700_000_002_456)
    java_lines = modern_peer.archive_tool(directory, "errors").stdout.splitlines()
    our_lines = our_tool(directory, "errors").splitlines()
    end = java_lines.index(f"Aeron driver error log (directory: {tmp_path / 'gone-driver'}):")
    assert our_lines[:end + 1] == java_lines[:end + 1]
    assert "2 distinct errors observed." in our_lines
