"""UpdateChannel (107, Aeron 1.49+) against the real Java 1.51 archive and our sidecar.

Differential: the real Java 1.51 ``AeronArchive`` client (the modern peer's ``update-channel``) runs
the same sequence against a fresh Java archive and a fresh sidecar, each client on the archive's
own driver over IPC: two recordings, the channel of the first (stopped) one replaced by a longer
one (its catalog entry grows, the second entry moves), list, replay both; an unknown id; a
malformed channel; the channel of an active recording. Descriptors and error codes are compared
field by field. Then our client updates a channel on the Java archive, and the Java ArchiveTool
describes and verifies the sidecar's directory after its grown entry as it does the Java one.
Every process is stopped by PID, also on failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.codecs import ArchiveErrorCode, ControlResponseCode
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    running_modern_java_archive,
)
from tests.support.sidecar import running_sidecar

SEGMENT_LENGTH = 64 * 1024
RECORDED = "aeron:ipc?term-length=64k"
STREAM_ID = 3001
MESSAGES, SIZE = 40, 96
REPLAY_STREAM_ID = 3101
LONG = "aeron:udp?endpoint=localhost:40999|alias=" + "renamed-" * 30 + "|term-length=64k"
MALFORMED = "aeron:udp?endpoint"


def _sequence(client: ModernPeerClient) -> dict[str, Any]:
    done: dict[str, Any] = {}
    done["record"] = [client.record(RECORDED, STREAM_ID + i, MESSAGES, SIZE).fields for i in range(2)]
    ids = [r["recordingId"] for r in done["record"]]
    done["update-stopped"] = client.update_channel(ids[0], LONG)
    done["replay"] = [client.replay(i, replay_channel="aeron:ipc", replay_stream_id=REPLAY_STREAM_ID).fields
                      for i in ids]
    done["update-unknown"] = client.update_channel(99, "aeron:ipc")
    # The Java archive never answers this one: a 1.5 s message timeout bounds the wait.
    done["update-malformed"] = client.update_channel(ids[1], MALFORMED, message_timeout_ms=1500)
    done["update-active"] = client.update_channel(-1, "aeron:ipc?alias=renamed-active", active_channel=RECORDED,
                                                  stream_id=STREAM_ID + 2, messages=MESSAGES, size=SIZE)
    return done


@pytest.fixture(scope="module")
def runs(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work: Path = tmp_path_factory.mktemp("update-channel")
    found: dict[str, Any] = {}
    with running_modern_java_archive(modern_peer, work / "java", segment_length=SEGMENT_LENGTH,
                                     threading="shared") as java:
        found["java"] = _sequence(java.client)
        found["java_dir"] = java.archive_dir
        found["ours_on_java"] = _our_client_on_the_java_archive(java)
    with running_sidecar(work / "sidecar" / "archive", extra_args=["--segment-length", str(SEGMENT_LENGTH)]) as sidecar:
        endpoint = ModernArchiveEndpoint(control_channel=sidecar.control_channel, aeron_dir=Path(sidecar.driver_dir))
        found["sidecar"] = _sequence(ModernPeerClient(modern_peer, endpoint, timeout=120))
        found["sidecar_dir"] = sidecar.archive_dir
    yield found


def _our_client_on_the_java_archive(java) -> dict[str, Any]:
    """Our ArchiveClient (on the Java archive's own driver) updates recording 1's channel, lists,
    and is refused an unknown id; run after the Java client's sequence."""
    aeron = AeronClient(str(java.aeron_dir), client_name="update-channel-ours")
    try:
        with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron, timeout=10.0) as client:
            client.update_channel(1, "aeron:ipc?alias=ours|term-length=64k")
            listed = client.list_recording(1)
            with pytest.raises(ArchiveError) as unknown:
                client.update_channel(42, "aeron:ipc")
            return {"listed": listed, "unknown": unknown.value}
    finally:
        aeron.close()


# ---------------------------------------------------------------------------------------------


class _Normaliser:
    """Session ids and initial term ids (each driver's) by order of appearance; timestamps only
    set or not; the descriptors' correlation and control session ids dropped (the client's own
    counters)."""

    def __init__(self) -> None:
        self.sessions: dict[int, str] = {}
        self.term_ids: dict[int, str] = {}

    def session(self, value: int) -> str:
        return self.sessions.setdefault(value, f"session#{len(self.sessions)}")

    def descriptor(self, d: dict[str, Any] | None) -> dict[str, Any] | None:
        if d is None:
            return None
        out = {k: v for k, v in d.items() if k not in ("event", "controlSessionId", "correlationId")}
        out["startTimestamp"] = d["startTimestamp"] != -1
        out["stopTimestamp"] = d["stopTimestamp"] != -1
        out["sessionId"] = self.session(d["sessionId"])
        out["initialTermId"] = self.term_ids.setdefault(d["initialTermId"], f"term#{len(self.term_ids)}")
        for key in ("strippedChannel", "originalChannel"):
            out[key] = re.sub(r"session-id=(-?\d+)", lambda m: f"session-id={self.session(int(m.group(1)))}", d[key])
        return out

    def update(self, line: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in line.items() if k not in ("event", "publicationPosition")}
        if line.get("error"):
            out["error"] = {k: v for k, v in line["error"].items() if k != "message"}
        for key in ("during", "after"):
            if key in line:
                out[key] = self.descriptor(line[key])
        if "recordings" in line:
            out["recordings"] = [self.descriptor(d) for d in line["recordings"]]
        return out


def _normalised(run: dict[str, Any]) -> dict[str, Any]:
    n = _Normaliser()
    for record in run["record"]:
        n.session(record["sessionId"])
    return {name: n.update(run[name]) for name in ("update-stopped", "update-unknown", "update-active")}


def test_the_java_client_gets_the_same_answers_and_descriptors_from_both(runs):
    java, ours = _normalised(runs["java"]), _normalised(runs["sidecar"])
    assert ours == java
    stopped = java["update-stopped"]
    assert stopped["ok"] and stopped["error"] is None
    first, second = stopped["recordings"]
    assert first["originalChannel"] == LONG
    assert first["strippedChannel"] == "aeron:udp?endpoint=localhost:40999|alias=" + "renamed-" * 30
    assert second["originalChannel"].startswith(RECORDED) and second["streamId"] == STREAM_ID + 1
    # Aeron answers an unknown id with the response code RECORDING_UNKNOWN (not an ERROR); its
    # client throws "unexpected response code: RECORDING_UNKNOWN" with errorCode GENERIC.
    assert java["update-unknown"]["error"]["code"] == ArchiveErrorCode.GENERIC
    assert "RECORDING_UNKNOWN" in runs["sidecar"]["update-unknown"]["error"]["message"]
    assert len(java["update-unknown"]["recordings"]) == 2
    active = java["update-active"]
    assert active["ok"] and active["during"]["stopPosition"] == -1
    assert active["during"]["originalChannel"] == active["after"]["originalChannel"] == "aeron:ipc?alias=renamed-active"
    assert active["after"]["stopPosition"] == runs["java"]["update-active"]["publicationPosition"]


def test_replays_after_the_update_are_byte_exact_on_both(runs):
    for name in ("java", "sidecar"):
        run = runs[name]
        for record, replay in zip(run["record"], run["replay"]):
            assert replay["recordingId"] == record["recordingId"]
            assert replay["digest"] == record["digest"], name
            assert replay["lastPosition"] <= record["stopPosition"]


def test_a_malformed_channel_java_never_answers_ours_refuses(runs):
    """Listed difference (docs/interop.md): Aeron's URI parse error escapes its handler (no
    response; the client times out), ours answers ERROR GENERIC. Neither changes the catalog."""
    java, ours = runs["java"]["update-malformed"], runs["sidecar"]["update-malformed"]
    assert not java["ok"] and java["error"]["code"] is None and "Timeout" in java["error"]["exception"]
    assert not ours["ok"] and ours["error"]["code"] == ArchiveErrorCode.GENERIC
    assert ours["error"]["exception"].endswith("ArchiveException")
    n_java, n_ours = _Normaliser(), _Normaliser()
    assert [n_ours.descriptor(d) for d in ours["recordings"]] == [n_java.descriptor(d) for d in java["recordings"]]
    assert ours["recordings"][1]["originalChannel"].startswith(RECORDED)


def test_our_client_updates_a_channel_on_the_java_archive(runs):
    found = runs["ours_on_java"]
    assert found["listed"].original_channel == "aeron:ipc?alias=ours|term-length=64k"
    assert found["listed"].stripped_channel == "aeron:ipc?alias=ours"
    assert found["listed"].stream_id == STREAM_ID + 1
    assert found["unknown"].code == ControlResponseCode.RECORDING_UNKNOWN
    assert found["unknown"].error_code == ArchiveErrorCode.UNKNOWN_RECORDING


def _described(peer: ModernPeerInstallation, directory: Path) -> list[dict[str, str]]:
    result = peer.archive_tool(directory, "describe")
    assert result.returncode == 0, result.stdout + result.stderr
    return [dict(re.findall(r"(\w+)=('[^']*'|[^|]*)", body))
            for body in re.findall(r"\[RecordingDescriptor\]\([^)]*\):(.*)", result.stdout)]


def test_the_java_archive_tool_accepts_our_catalog_after_a_grown_entry(runs, modern_peer):
    ours, java = _described(modern_peer, runs["sidecar_dir"]), _described(modern_peer, runs["java_dir"])
    assert len(ours) == len(java) == 3
    assert ours[0]["originalChannel"].strip("'") == LONG
    volatile = {"startTimestamp", "stopTimestamp", "sessionId", "initialTermId", "originalChannel", "strippedChannel",
                "controlSessionId", "correlationId"}
    for mine, theirs in zip(ours, java):
        assert set(mine) == set(theirs)
        assert {k: v for k, v in mine.items() if k not in volatile} == \
               {k: v for k, v in theirs.items() if k not in volatile}
    verified = modern_peer.archive_tool(runs["sidecar_dir"], "verify", "-a")
    assert verified.returncode == 0 and verified.stdout.count(") OK") == 3, verified.stdout + verified.stderr
