"""``serve --threading-mode shared`` on a real sidecar: one thread runs the conductor, the recorder and
the replayer (two threads fewer than dedicated mode, everything else equal), the mark file and the
ready line say so, and the archive counters are Aeron's for SHARED threading as another process reads
them: the conductor's cycle counters (103, 104) labelled SHARED, measuring the one thread's whole
cycle while it records and replays, and no recorder or replayer cycle counters."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from aeron_spark.archive.storage.mark_file import read_mark_file
from aeron_spark.driver_integration import AeronClient

from tests.integration.service.test_sidecar_counters import archive_counters, snapshot
from tests.support.sidecar import running_sidecar
from tests.support.sidecar_streams import TIMEOUT, ipc_archive, payloads, record_ipc
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

ARCHIVE_ID = 779
SUFFIX = f" - archiveId={ARCHIVE_ID}"


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_shared_threading_runs_the_three_agents_on_one_thread(tmp_path: Path) -> None:
    with running_sidecar(tmp_path / "dedicated", ["--threading-mode", "dedicated"]) as dedicated, \
            running_sidecar(tmp_path / "shared", ["--threading-mode", "shared"]) as shared:
        assert (dedicated.ready["threadingMode"], shared.ready["threadingMode"]) == ("dedicated", "shared")
        assert read_mark_file(tmp_path / "shared").threading_mode == "shared"
        assert read_mark_file(tmp_path / "dedicated").threading_mode == "dedicated"
        # Same options, same embedded driver: only the agent threads differ (3 against 1). Counted
        # once both are idle (a start-up thread may still be ending right after the ready line).
        wait_until(lambda: thread_count(dedicated.pid) - thread_count(shared.pid) == 2,
                   "the shared sidecar to have two threads fewer than the dedicated one", timeout=TIMEOUT)


def test_shared_threading_counters_are_the_conductors_labelled_shared(tmp_path: Path) -> None:
    with running_sidecar(tmp_path / "archive", ["--threading-mode", "shared", "--archive-id", str(ARCHIVE_ID)]) \
            as sidecar:
        aeron_dir = sidecar.driver_dir
        cycle_counters = {label: row["type"] for label, row in archive_counters(snapshot(aeron_dir), ARCHIVE_ID).items()
                          if row["type"] in (103, 104)}
        assert cycle_counters == {
            "archive-conductor max cycle time in ns: SHARED" + SUFFIX: 103,
            "archive-conductor work cycle time exceeded count: threshold=100ms SHARED" + SUFFIX: 104}
        max_cycle = "archive-conductor max cycle time in ns: SHARED" + SUFFIX
        wait_until(lambda: archive_counters(snapshot(aeron_dir), ARCHIVE_ID)[max_cycle]["value"] > 0,
                   "the shared thread's max cycle time to be measured")
        aeron = AeronClient(sidecar.driver_dir, client_name="shared-threading")
        try:
            with ipc_archive(aeron) as archive:
                recording_id, published, _ = record_ipc(archive, payloads(200, seed=31))
                with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2005) as replay:
                    got = list(itertools.islice(replay.messages(idle_timeout=TIMEOUT), 200))
                assert [m.payload for m in got] == published.messages
        finally:
            aeron.close()
        after = archive_counters(snapshot(aeron_dir), ARCHIVE_ID)
        assert after[max_cycle]["value"] > 0
        assert not [label for label in after if label.startswith(("archive-recorder max cycle",
                                                                  "archive-replayer max cycle"))]
