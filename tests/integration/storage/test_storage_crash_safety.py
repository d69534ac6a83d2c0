"""SIGKILL of the sidecar during truncate, purge and purge-segments (detach + delete detached), then
restart: every recording is listed in the operation's before or after state and replays
byte-exactly up to its stop position, and `aeron-archive verify` (offline) is clean.

Each iteration starts a sidecar with ``AERON_ARCHIVE_STORAGE_FAULT=<point>:kill``
(archive/storage/fault_injection.py) so that it SIGKILLs itself at a named point of the operation,
or with no fault and a SIGKILL from the test after a random delay. The sidecars attach to one
standalone media driver, so the client outlives them. 20 iterations by default (~40 s);
``AERON_STORAGE_CRASH_ITERATIONS=200`` (and a seed, ``AERON_STORAGE_CRASH_SEED``) for a longer run.
"""

from __future__ import annotations

import io
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from aeron_spark.archive.cli import main as tool_module
from aeron_spark.archive.codecs import messages as codecs
from aeron_spark.archive.storage import fault_injection
from aeron_spark.driver_integration import AeronClient

from tests.support.driver_process import running_driver_process
from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import TIMEOUT, Published, as_pairs, expected, ipc_archive, payloads, record_ipc

pytestmark = pytest.mark.timeout(600)

SEGMENT = 64 * 1024  # tests/support/sidecar.py's --segment-length
ITERATIONS = int(os.environ.get("AERON_STORAGE_CRASH_ITERATIONS", "20"))
SEED = int(os.environ.get("AERON_STORAGE_CRASH_SEED", "13"))
POINTS = {
    "truncate": ("truncate-staged", "truncate-committed", "truncate-cut", None),
    "purge": ("purge-staged", "purge-committed", None),
    "purge-segments": ("segment-renamed", None),
}


@dataclass
class Recording:
    published: Published
    starts: set[int]  # acceptable start positions after a crash (before / after the operation)
    stops: set[int]
    may_vanish: bool = False


def check_archive(archive, recordings: dict[int, Recording], replay_stream: int) -> None:
    """Every recording listed in an acceptable state (pinned to it from now on), replaying exactly."""
    listed = {d.recording_id: d for d in archive.list_recordings()}
    for rid, recording in list(recordings.items()):
        d = listed.get(rid)
        if d is None:
            assert recording.may_vanish, f"recording {rid} is no longer listed"
            del recordings[rid]
            continue
        assert d.start_position in recording.starts and d.stop_position in recording.stops, (rid, d)
        recording.starts, recording.stops, recording.may_vanish = {d.start_position}, {d.stop_position}, False
        with archive.replay(rid, d.start_position, d.stop_position - d.start_position, "aeron:ipc",
                            replay_stream) as replay:
            got = as_pairs(list(replay.messages(idle_timeout=TIMEOUT)))
        assert got == expected(recording.published, d.start_position, d.stop_position), rid


def send_maintenance(archive, operation: str, rid: int, recording: Recording, rng: random.Random) -> None:
    """Sends the request without waiting for its answer (the sidecar may die first); records
    what states the recording may be found in afterwards."""
    starts = recording.published.starts
    session, correlation = archive.control_session_id, archive._transport.next_correlation_id()
    if operation == "truncate":
        position = rng.choice([s for s in starts if SEGMENT // 2 < s < recording.published.end - SEGMENT // 2])
        request = codecs.TruncateRecordingRequest(session, correlation, rid, position)
        recording.stops.add(position)
    elif operation == "purge":
        request = codecs.PurgeRecordingRequest(session, correlation, rid)
        recording.may_vanish = True
    else:
        request = codecs.PurgeSegmentsRequest(session, correlation, rid, 2 * SEGMENT)
        recording.starts.add(2 * SEGMENT)
    archive._send(request, operation)


def test_sigkill_during_maintenance_leaves_every_recording_listed_replayable_and_verify_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    rng = random.Random(SEED)
    directory = tmp_path / "archive"
    recordings: dict[int, Recording] = {}
    killed_at_point = 0
    with running_driver_process(tmp_path / "driver") as _driver:
        aeron = AeronClient(str(tmp_path / "driver"), client_name="crash-safety")
        try:
            for iteration in range(ITERATIONS + 1):
                operation = rng.choice(sorted(POINTS))
                point = rng.choice(POINTS[operation])
                last = iteration == ITERATIONS
                if point is None or last:
                    monkeypatch.delenv(fault_injection.ENV_VAR, raising=False)
                else:
                    monkeypatch.setenv(fault_injection.ENV_VAR, f"{point}:kill")
                sidecar = Sidecar(directory, aeron_dir=str(tmp_path / "driver"))
                try:
                    sidecar.start()
                    archive = ipc_archive(aeron)
                    try:
                        check_archive(archive, recordings, 3000 + iteration)
                        if last:
                            break
                        rid, published, _ = record_ipc(archive, payloads(300, seed=iteration), stream_id=1001)
                        assert published.end > 3 * SEGMENT
                        recordings[rid] = Recording(published, {0}, {published.end})
                        send_maintenance(archive, operation, rid, recordings[rid], rng)
                        deadline = time.monotonic() + (2.0 if point else rng.uniform(0.0, 0.03))
                        while sidecar.process.poll() is None and time.monotonic() < deadline:
                            time.sleep(0.002)
                        killed_at_point += sidecar.process.poll() is not None
                        assert point is None or sidecar.process.poll() is not None, \
                            f"{point} not reached:\n{sidecar.log_tail()}"
                    finally:
                        archive.close()
                finally:
                    if last:
                        sidecar.terminate()
                    sidecar.kill()
        finally:
            aeron.close()
    out, err = io.StringIO(), io.StringIO()
    code = tool_module.main(["verify", "--dir", str(directory)], stdout=out, stderr=err)
    assert code == 0, out.getvalue() + err.getvalue()
    assert "INVALID" not in out.getvalue() and "ERROR" not in out.getvalue(), out.getvalue()
    assert killed_at_point >= ITERATIONS // 2, killed_at_point
