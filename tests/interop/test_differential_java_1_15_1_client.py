"""Differential test: the real Java 1.15.1 ``AeronArchive`` client asks the real Java 1.15.1 archive
and OUR sidecar the same questions, and the answers are compared field by field.

One ``scripted-session`` of the 1.15.1 peer (tests/interop/peer/java/.../ScriptedSession.java) per
archive: ONE AeronArchive connection that sends every request the 1.15.1 client has - Connect,
StartRecording, StopRecording, StopRecordingSubscription, ListRecordings, ListRecordingsForUri,
ListRecording, RecordingPosition, StopPosition, FindLastMatchingRecording, Replay, StopReplay,
ExtendRecording, TruncateRecording and CloseSession - with malformed inputs (unknown recording
ids, bad channels, unaligned and out-of-range positions, truncate and extend of an active
recording, ...). Each step prints its returned values or its error (exception class,
``ArchiveException.errorCode()``, message).

Both archives are fresh and reached the same way: the peer runs its own embedded Java 1.15.1 driver
(a 1.15.1 client cannot attach to our C driver) and talks to the archive over UDP (the Java
archive's own driver, or our sidecar's C driver). The script pins the publications' session ids,
initial term id, term length and MTU. Normalised (tests/interop/differential.py, the same rules as
the 1.51 differential test): UDP ports, the control session id, timestamps (only whether set),
correlation ids in descriptors, subscription ids and replay image session ids (replaced by their
order of first appearance), error texts (the exception class and error CODE are compared).

Differences from the Java 1.15.1 archive that stay (``VERSION_DEPENDENT``: ours answers as current
Aeron does) are each asserted below and listed in docs/interop.md ("Differences from the Java 1.15.1
archive").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop import differential
from tests.interop.differential import ScriptRun, step_differences
from tests.interop.legacy_script import (
    FRAMED,
    MESSAGES,
    SEGMENT_LENGTH,
    SESSION_ID,
    SIZE,
    run_java_client_script,
)
from tests.interop.peer.interop_peer import PeerInstallation, expected_digest
from tests.support.sidecar import running_sidecar

#: Steps where Java 1.15.1 answers otherwise and ours answers as current Aeron (1.51) does; each
#: is asserted on its own below.
VERSION_DEPENDENT = {
    "list-recordings-negative-from",  # 1.15.1: nothing; ours (and 1.51): from recording 0
    "find-last-matching-past-end",  # 1.15.1: ERROR UNKNOWN_RECORDING; ours (and 1.51): -1
    "stop-replay-again",  # 1.15.1: ERROR UNKNOWN_REPLAY; ours (and 1.51): OK
    "stop-replay-unknown",
    "extend-other-stream",  # 1.15.1 extends with another stream id; ours (and 1.51) refuse
}


@pytest.fixture(scope="module")
def runs(peer_installation: PeerInstallation, java_1_15_1_client_on_java_archive: ScriptRun,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ScriptRun]]:
    """The script against a fresh Java 1.15.1 archive (the session's run, conftest.py), then against
    a fresh sidecar, stopped by PID when its run ends (also on failure)."""
    work: Path = tmp_path_factory.mktemp("differential-1-15-1")
    with running_sidecar(work / "sidecar" / "archive",
                         extra_args=["--segment-length", str(SEGMENT_LENGTH)]) as sidecar:
        sidecar_run = run_java_client_script(peer_installation, "sidecar", sidecar.control_channel)
    yield {"java": java_1_15_1_client_on_java_archive, "sidecar": sidecar_run}


class Normaliser(differential.Normaliser):
    def result(self, name: str, result: Any) -> Any:
        if name == "connect":
            return {"controlSessionId": result["controlSessionId"]}  # "<control-session>"; not connectMs
        if name == "replay-follows-live" and result is not None:
            # Whether the replay image ended within 2 s of the recording's stop: Java 1.15.1 does not
            # always end it (about 1 run in 5 here), ours always does (asserted for ours below).
            return {k: v for k, v in result.items() if k != "ended"}
        if isinstance(result, dict) and "descriptors" in result:
            # Recording 1 is extended by a publication of session S+3: 1.15.1 keeps the session id
            # it started with (S+1) in the catalog, ours (as Aeron since) stores the extension's.
            # Asserted in test_version_dependent_answers; equal here.
            for descriptor in result["descriptors"]:
                if descriptor["recordingId"] == 1 and descriptor["sessionId"] in (SESSION_ID + 1, SESSION_ID + 3):
                    descriptor["sessionId"] = "<session of recording 1>"
        return result


# ---------------------------------------------------------------------------------------------


def test_both_archives_ran_the_whole_script(runs: dict[str, ScriptRun]) -> None:
    for run in runs.values():
        (done,) = [line for line in run.lines if line["event"] == "script-done"]
        assert done["steps"] == len(run.steps) > 80, run.archive
        assert not [line for line in run.lines if line["event"] == "async-error"], run.archive
    assert [s["step"] for s in runs["java"].steps] == [s["step"] for s in runs["sidecar"].steps]


def test_every_step_gets_the_same_answer(runs: dict[str, ScriptRun]) -> None:
    differences = step_differences(runs["java"], runs["sidecar"], Normaliser, skip=VERSION_DEPENDENT)
    assert not differences, f"{len(differences)} steps differ:\n" + "\n".join(differences)


def test_error_steps_are_archive_errors_with_1_15_1_codes(runs: dict[str, ScriptRun]) -> None:
    """Every refused step is an ArchiveException (an ERROR response, never a client timeout) whose
    code a 1.15.1 client knows (GENERIC 0 ... INVALID_EXTENSION 9)."""
    for run in runs.values():
        errors = [s for s in run.steps if not s["ok"]]
        assert len(errors) > 20, run.archive
        assert all(s["error"]["exception"] == "io.aeron.archive.client.ArchiveException" for s in errors), \
            [s for s in errors if s["error"]["exception"] != "io.aeron.archive.client.ArchiveException"]
        assert all(0 <= s["error"]["code"] <= 9 for s in errors), [s for s in errors if s["error"]["code"] > 9]


def _answer(run: ScriptRun, name: str) -> Any:
    step = run.step(name)
    return step["result"] if step["ok"] else {"errorCode": step["error"]["code"]}


def test_version_dependent_answers(runs: dict[str, ScriptRun]) -> None:
    """Where Java 1.15.1 differs from current Aeron, ours answers as current Aeron (docs/interop.md)."""
    java, ours = runs["java"], runs["sidecar"]
    assert _answer(java, "list-recordings-negative-from") == {"count": 0, "descriptors": []}
    assert [d["recordingId"] for d in _answer(ours, "list-recordings-negative-from")["descriptors"]] == [0]
    assert _answer(java, "find-last-matching-past-end") == {"errorCode": 5}  # UNKNOWN_RECORDING
    assert _answer(ours, "find-last-matching-past-end") == {"recordingId": -1}
    for step in ("stop-replay-again", "stop-replay-unknown"):
        assert _answer(java, step) == {"errorCode": 6}, step  # UNKNOWN_REPLAY
        assert java.step(step)["error"]["exception"] == "io.aeron.archive.client.ArchiveException"
        assert ours.step(step)["ok"], step
    assert java.step("extend-other-stream")["ok"]  # 1.15.1 does not check the stream id
    assert _answer(ours, "extend-other-stream") == {"errorCode": 5}
    (java_extended,) = _answer(java, "list-recording-extended")["descriptors"]
    (our_extended,) = _answer(ours, "list-recording-extended")["descriptors"]
    assert (java_extended["sessionId"], our_extended["sessionId"]) == (SESSION_ID + 1, SESSION_ID + 3)
    differing = {k for k in java_extended if java_extended[k] != our_extended[k]}
    assert differing <= {"sessionId", "controlSessionId", "correlationId", "startTimestamp", "stopTimestamp",
                         "strippedChannel", "originalChannel", "sourceIdentity"}
    assert (java_extended["stopPosition"], our_extended["stopPosition"]) == (400 * FRAMED, 400 * FRAMED)


@pytest.mark.parametrize("archive", ["java", "sidecar"])
def test_recordings_and_replays_are_byte_exact(runs: dict[str, ScriptRun], archive: str) -> None:
    """What the Java 1.15.1 client published, recorded and replayed, checked against the recomputed digests."""
    run = runs[archive]
    assert run.step("publish-a")["result"]["digest"] == expected_digest(0, MESSAGES, SIZE)
    assert run.step("publish-a")["result"]["position"] == MESSAGES * FRAMED
    middle = MESSAGES // 2
    replays = {  # step: (first message index, message count)
        "replay-whole": (0, MESSAGES),
        "replay-from-middle": (middle, MESSAGES - middle),
        "replay-bounded-length": (10, 25),
        "replay-length-max": (0, MESSAGES),
        "replay-length-null": (0, MESSAGES),
        "replay-extended": (0, 400),  # 300 recorded + 100 appended by extendRecording
        "replay-truncated": (0, 200),
        "replay-follows-live": (0, 150),  # 100 recorded, 50 more published while replaying, then stopped
    }
    if archive == "sidecar":  # the Java 1.15.1 archive does not always end it (see Normaliser)
        assert run.step("replay-follows-live")["result"]["ended"] is True
    for step, (first, count) in replays.items():
        result = run.step(step)["result"]
        assert result is not None, (step, run.step(step)["error"])
        assert (result["messages"], result["firstIndex"], result["lastIndex"]) == (count, first, first + count - 1), step
        assert result["digest"] == expected_digest(first, count, SIZE), step
        assert result["joinPosition"] == first * FRAMED, step
        assert result["lastPosition"] == (first + count) * FRAMED, step
