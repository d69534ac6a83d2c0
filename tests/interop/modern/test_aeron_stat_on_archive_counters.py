"""Java 1.51's **AeronStat** (``io.aeron.samples.AeronStat`` of the aeron-all jar) lists our sidecar's
archive counters as it lists a Java 1.51 archive's.

Both archives run DEDICATED threading (every agent its own thread) with Aeron's default cycle
thresholds, each with its own Aeron client on its own media driver: our sidecar on its embedded C
driver, the Java archive launched on its own (``Archive.launch``) on a Java media driver. (Launched
inside an ``ArchivingMediaDriver`` instead, a Java archive counts its errors in the driver's system
error counter and allocates no 101.) Comparable activity on both: one recording made and stopped,
and one control session (our Python client, connected over UDP) open while AeronStat runs
(``watch=false``, filtered to the archive counter types 101-113). AeronStat prints counter id, value
and label, not the type id: the type ids come from a counters reader of our own on the same driver,
matched by counter id. Compared:

* the same type ids, as many of each (one per archive-wide counter, three 103s and three 104s, one
  113 for the open session);
* the same labels once numbers are normalised (archive ids, session ids, source ports) and the
  version info (``version=1.51.0 commit=<sha>`` vs ours, ``version=<package version> commit=unknown``);
* the same allocation order (counter ids ascending): Aeron's ``Archive.Context.conclude`` order,
  then the session's 113.

Deliberate differences (docs/interop.md, "Archive counters and AeronStat"): the error counter's
version info names our package (its commit is not known to an installed package), values differ.
Every process is stopped by PID by the fixture that started it, also when the test fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.interop_peer import shm_tempdir
from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    running_modern_java_archive,
    start_modern_java_driver,
)
from tests.support.sidecar import running_sidecar
from tests.support.sidecar_streams import payloads, record_ipc

pytestmark = pytest.mark.timeout(300)

AERON_STAT_CLASS = "io.aeron.samples.AeronStat"
ARCHIVE_TYPES_PATTERN = "^(10[1-9]|11[0-3])$"
TIMEOUT_S = 30.0
_STAT_LINE = re.compile(r"^\s*(\d+):\s+(-?[\d,]+) - (.*)$")


def aeron_stat(peer: ModernPeerInstallation, aeron_dir: str) -> list[tuple[int, int, str]]:
    """(counter id, value, label) of every archive counter AeronStat prints for the driver in ``aeron_dir``."""
    command = peer.java_command(AERON_STAT_CLASS, "watch=false", f"type={ARCHIVE_TYPES_PATTERN}",
                                jvm_options=[f"-Daeron.dir={aeron_dir}"])
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False,
                               stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = []
    for line in completed.stdout.splitlines():
        matched = _STAT_LINE.match(line)
        if matched:
            rows.append((int(matched[1]), int(matched[2].replace(",", "")), matched[3]))
    assert rows, f"AeronStat printed no archive counter:\n{completed.stdout}"
    return rows


def normalised(label: str) -> str:
    label = re.sub(r"version=\S+ commit=\S+", "version=V commit=C", label)
    return re.sub(r"-?\d+", "N", label)


@contextmanager
def session_on(aeron_dir: str, control_channel: str) -> Iterator[ArchiveClient]:
    """Our client on the archive's driver: records a short stream, then stays connected."""
    with AeronClient(aeron_dir, client_name="aeron-stat-test") as aeron, \
            ArchiveClient.connect(control_channel=control_channel, aeron=aeron, timeout=TIMEOUT_S) as archive:
        record_ipc(archive, payloads(20, seed=5))
        yield archive


def listing(peer: ModernPeerInstallation, aeron_dir: str) -> list[tuple[int, str, str, int]]:
    """(type id, normalised label, label, value) of AeronStat's archive counters, in counter-id order."""
    rows = aeron_stat(peer, aeron_dir)
    with AeronClient(aeron_dir, client_name="aeron-stat-types") as aeron:
        reader = aeron.counters_reader
        return [(reader.type_id(counter_id), normalised(label), label, value)
                for counter_id, value, label in sorted(rows)]


def test_aeron_stat_lists_our_archive_counters_as_a_java_archives(modern_peer: ModernPeerInstallation,
                                                                    tmp_path: Path):
    with running_sidecar(tmp_path / "sidecar", ["--archive-id", "4242"]) as sidecar, \
            session_on(sidecar.driver_dir, sidecar.control_channel) as on_ours:
        ours = listing(modern_peer, sidecar.driver_dir)
        our_session_id = on_ours.control_session_id
    java_aeron_dir = shm_tempdir("aeron-java-driver-for-aeron-stat-")
    java_driver = start_modern_java_driver(modern_peer, aeron_dir=java_aeron_dir, log_dir=tmp_path)
    try:
        with running_modern_java_archive(modern_peer, tmp_path / "java", aeron_dir=java_aeron_dir,
                                         external_driver=True, threading="dedicated") as java, \
                session_on(str(java.aeron_dir), java.control_channel) as on_java:
            theirs = listing(modern_peer, str(java.aeron_dir))
            java_session_id = on_java.control_session_id
    finally:
        java_driver.stop()
        shutil.rmtree(java_aeron_dir, ignore_errors=True)

    print("ours:", *ours, "java:", *theirs, sep="\n")
    assert sorted(row[0] for row in ours) == sorted(row[0] for row in theirs) == \
        [101, 102, 103, 103, 103, 104, 104, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113]
    assert [row[:2] for row in ours] == [row[:2] for row in theirs]
    assert all(row[2].endswith(" - archiveId=4242") or row[0] == 101 for row in ours)

    def counts(rows: list[tuple[int, str, str, int]]) -> dict[int, int]:
        return {type_id: value for type_id, _, _, value in rows if type_id in (102, 111, 112)}

    # One session open, the recording stopped, no replay: the same counts on both.
    assert counts(ours) == counts(theirs) == {102: 1, 111: 0, 112: 0}
    # Both have written bytes (the recording); a 113's value is its control session id on both.
    assert all(value > 0 for rows in (ours, theirs) for type_id, _, _, value in rows if type_id == 106)
    assert [value for type_id, _, _, value in ours if type_id == 113] == [our_session_id]
    assert [value for type_id, _, _, value in theirs if type_id == 113] == [java_session_id]
