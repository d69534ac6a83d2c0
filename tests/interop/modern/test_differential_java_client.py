"""Differential test: the real Java 1.51.0 ``AeronArchive`` client asks the real Java 1.51.0 archive
and OUR sidecar the same questions, and the answers are compared field by field.

One ``scripted-session`` (tests/interop/peer/modern-java/.../ScriptedSession.java) per archive: ONE
AeronArchive connection that records (UDP and IPC), publishes, lists, queries positions, replays
(whole, from the middle, bounded by length, ...), stops recordings (by channel, subscription id and
identity), extends, truncates, runs the segment operations, stops replays, purges, and sends many
malformed requests (unknown recording ids, bad channels, unaligned and out-of-range positions, ...).
Each step prints its returned values or its error (exception class, Aeron error code, message).

Both archives are fresh, get the same inputs and are reached the same way: the peer runs its own
embedded Java driver and talks to the archive over UDP (the Java archive's own driver, or our
sidecar's C driver). The script pins everything a driver would otherwise choose at random (session
ids, initial term id, term length, MTU), so recording ids, positions, descriptors, correlation ids
and replay ids agree without normalisation. What IS normalised (see docs/interop.md,
"Differential test against the Java archive"): UDP ports, the archive id and control session id,
timestamps (only whether they are set), subscription ids and replay image session ids (allocated by
each driver: replaced by their order of first appearance), error message texts (the error CODE and
exception class must match), and the order of ListRecordingSubscriptions (a hash-map order in Java).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop import differential
from tests.interop.differential import ScriptRun, step_differences
from tests.interop.peer.modern_peer import (
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    expected_digest,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port, udp_channel
from tests.support.sidecar import running_sidecar

MESSAGES = 2000
SIZE = 96  # framed 128 B: a 64 KiB term holds exactly 512 messages, so message i starts at i * 128
FRAMED = 128
STREAM_ID = 1001
REPLAY_STREAM_ID = 2002
SESSION_ID = 4242
SEGMENT_LENGTH = 64 * 1024  # both archives; the script's term length is 64 KiB too


#: Steps where the Java archive's answer depends on its version and ours follows the newest
#: (each has its own test below; docs/interop.md lists them).
VERSION_DEPENDENT = {
    # 1.49-1.51 refuse to truncate a recording with a replay in progress (ACTIVE_RECORDING); 1.52
    # stops its replays and truncates (aeron-io/aeron#2055), as ours does.
    "truncate-during-replay",
}


def _run_script(installation: ModernPeerInstallation, archive: str, control_channel: str) -> ScriptRun:
    ports = {free_udp_port(): name for name in ("<channel>", "<channel-b>", "<replay>")}
    channel, channel_b, replay = (udp_channel(port) for port in ports)
    client = ModernPeerClient(installation, ModernArchiveEndpoint(control_channel=control_channel), timeout=120)
    lines = client.scripted_session(channel, channel_b, STREAM_ID, MESSAGES, SIZE, replay_channel=replay,
                                    replay_stream_id=REPLAY_STREAM_ID, session_id=SESSION_ID)
    return ScriptRun(archive, lines, ports)


@pytest.fixture(scope="module")
def runs(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ScriptRun]]:
    """The script against a fresh Java 1.51 archive, then against a fresh sidecar; each is stopped by
    PID when its run ends (also on failure)."""
    work: Path = tmp_path_factory.mktemp("differential")
    with running_modern_java_archive(modern_peer, work / "java", segment_length=SEGMENT_LENGTH,
                                     threading="shared") as java:
        java_run = _run_script(modern_peer, "java", java.control_channel)
    with running_sidecar(work / "sidecar" / "archive",
                         extra_args=["--segment-length", str(SEGMENT_LENGTH)]) as sidecar:
        sidecar_run = _run_script(modern_peer, "sidecar", sidecar.control_channel)
    yield {"java": java_run, "sidecar": sidecar_run}


# ---------------------------------------------------------------------------------------------
# Normalisation: only what must differ between two fresh archives (tests/interop/differential.py),
# plus this script's own rules


class Normaliser(differential.Normaliser):
    def result(self, name: str, result: Any) -> Any:
        if name == "connect":
            return {"archiveIdPresent": result["archiveIdPresent"],
                    "archiveProtocolVersion": result["archiveProtocolVersion"]}
        if name.startswith("list-recording-subscriptions") and result is not None:
            subscriptions = sorted(result["subscriptions"], key=lambda s: (s["streamId"], s["strippedChannel"]))
            if name == "list-recording-subscriptions-pseudo-index":
                # Which ones a pseudo index skips follows each archive's own iteration order
                # (Java: a hash map of "streamId:channel" keys) - only how many came back is compared.
                subscriptions = len(subscriptions)
            return {**result, "subscriptions": subscriptions}
        return result


def normalised(run: ScriptRun) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return differential.normalised(run, Normaliser)


# ---------------------------------------------------------------------------------------------


def test_both_archives_ran_the_whole_script(runs: dict[str, ScriptRun]) -> None:
    for run in runs.values():
        (done,) = [line for line in run.lines if line["event"] == "script-done"]
        assert done["steps"] == len(run.steps) > 100, run.archive
        assert not [line for line in run.lines if line["event"] == "async-error"], run.archive
    assert [s["step"] for s in runs["java"].steps] == [s["step"] for s in runs["sidecar"].steps]


def test_every_step_gets_the_same_answer(runs: dict[str, ScriptRun]) -> None:
    differences = step_differences(runs["java"], runs["sidecar"], Normaliser, skip=VERSION_DEPENDENT)
    assert not differences, f"{len(differences)} steps differ:\n" + "\n".join(differences)


def test_the_same_recording_signals_in_the_same_order(runs: dict[str, ScriptRun]) -> None:
    _, java_signals = normalised(runs["java"])
    _, sidecar_signals = normalised(runs["sidecar"])
    assert [s["signal"] for s in java_signals][:2] == ["START", "STOP"]
    # The one truncate only ours carries out (VERSION_DEPENDENT) sends one more DELETE of recording 0.
    extra = {"recordingId": 0, "subscriptionId": -1, "position": -1, "signal": "DELETE"}
    assert any(sidecar_signals[:i] + sidecar_signals[i + 1:] == java_signals
               for i, signal in enumerate(sidecar_signals) if signal == extra), \
        f"java:    {java_signals}\nsidecar: {sidecar_signals}"


def test_truncate_during_a_replay_is_refused_by_java_1_51_and_done_by_ours_as_by_1_52(
        runs: dict[str, ScriptRun]) -> None:
    java = runs["java"].step("truncate-during-replay")["result"]
    sidecar = runs["sidecar"].step("truncate-during-replay")["result"]
    assert java["action"]["errorCode"] == 2  # ACTIVE_RECORDING: "cannot truncate recording with active replay"
    assert sidecar["action"] == 0  # OK, no segment file deleted (the cut is inside the last segment)
    assert java["stopReplay"] == sidecar["stopReplay"] == "stopped"
    # Afterwards both truncate to the start (truncate-to-start), and the states agree again.
    assert runs["java"].step("truncate-to-start")["result"] == runs["sidecar"].step("truncate-to-start")["result"]


def test_error_steps_carry_aeron_error_codes(runs: dict[str, ScriptRun]) -> None:
    """The script's malformed requests are refused by both archives with an ArchiveException (an
    ERROR response), never a timeout: a step that timed out would hide a missing response."""
    for run in runs.values():
        errors = [s for s in run.steps if not s["ok"]]
        assert len(errors) > 40, run.archive
        assert all(s["error"]["exception"] == "io.aeron.archive.client.ArchiveException" for s in errors), \
            [s for s in errors if s["error"]["exception"] != "io.aeron.archive.client.ArchiveException"]


@pytest.mark.parametrize("archive", ["java", "sidecar"])
def test_recordings_and_replays_are_byte_exact(runs: dict[str, ScriptRun], archive: str) -> None:
    """What the Java client published, recorded and replayed, checked against the recomputed digests."""
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
        "replay-position-null": (0, 5),
        "replay-extended": (0, 400),  # 300 recorded + 100 appended by extendRecording
        "replay-truncated": (0, 200),
        "replay-after-segments": (3 * SEGMENT_LENGTH // FRAMED, MESSAGES - 3 * SEGMENT_LENGTH // FRAMED),
        "replay-migrated": (0, SEGMENT_LENGTH // FRAMED + 100),  # recording 2's segment moved under 3
        "replay-follows-live": (0, 150),  # 100 recorded, 50 more published while replaying, then stopped
    }
    assert run.step("replay-follows-live")["result"]["endOfStream"] is True
    for step, (first, count) in replays.items():
        result = run.step(step)["result"]
        assert result is not None, (step, run.step(step)["error"])
        assert (result["messages"], result["firstIndex"], result["lastIndex"]) == (count, first, first + count - 1), step
        assert result["digest"] == expected_digest(first, count, SIZE), step
        assert result["joinPosition"] == first * FRAMED, step
        assert result["lastPosition"] == (first + count) * FRAMED, step
