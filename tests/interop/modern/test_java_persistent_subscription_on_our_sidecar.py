"""Aeron 1.51's Java ``PersistentSubscription`` against our sidecar (issue 32, point 5).

The modern peer's ``persistent-subscription`` command (its own embedded Java driver, UDP control to
our sidecar) publishes N messages on a dynamic-MDC live channel that our sidecar records (REMOTE),
then opens a real ``PersistentSubscription`` on that recording from position 0 (or a mid position)
and polls it while the publisher goes on: the recorded messages replay byte for byte (SHA-256 over
every payload in arrival order), it joins the live stream, and the messages published after the
join arrive live; every index once and in order, ending at the publication's position.

What the subscription asks our sidecar for: ListRecording, Replay (position, length
``REPLAY_ALL_AND_FOLLOW``) to a replay channel whose endpoint port it resolved itself (port 0, the
"dynamic port" kind) or to a fixed endpoint (the "session specific" kind, whose subscription
filters on the replay session id), MaxRecordedPosition to decide when to add the live subscription,
and StopReplay once live; with a ``control-mode=response`` replay channel also ReplayToken and a
Replay request sent on the response-correlated request publication. The
replay ends once it is live.

Our sidecar and every peer JVM are real processes, each stopped by PID by the fixture or call that
started it, also when a test fails.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.peer.modern_peer import (
    ModernArchiveEndpoint,
    ModernPeerClient,
    ModernPeerInstallation,
    expected_digest,
    framed_length,
)
from tests.interop.peer.interop_peer import single_event
from tests.support.ports import free_udp_port
from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = pytest.mark.timeout(300)

SIZE = 100
FRAMED = framed_length(SIZE)  # 160: every message one frame, so message i starts at i * FRAMED
STREAM_ID = 3101


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    work: Path = tmp_path_factory.mktemp("persistent-subscription")
    with running_sidecar(work / "sidecar") as running:
        yield running


@pytest.fixture(scope="module")
def java_client(modern_peer: ModernPeerInstallation, sidecar: Sidecar) -> ModernPeerClient:
    return ModernPeerClient(modern_peer, ModernArchiveEndpoint(control_channel=sidecar.control_channel),
                            timeout=120.0)


def persistent_read(client: ModernPeerClient, *, messages: int, live_messages: int, after_live: int,
                    position: int | None = None, replay_channel: str | None = None) -> dict[str, Any]:
    live_channel = f"aeron:udp?control=localhost:{free_udp_port()}|control-mode=dynamic"
    args = ["--live-channel", live_channel, "--live-stream-id", str(STREAM_ID), "--messages", str(messages),
            "--live-messages", str(live_messages), "--after-live-messages", str(after_live),
            "--size", str(SIZE), "--timeout-ms", "60000", *client.endpoint.options()]
    if position is not None:
        args += ["--position", str(position)]
    if replay_channel is not None:
        args += ["--replay-channel", replay_channel]
    return single_event(client.run("persistent-subscription", *args), "persistent-subscription-read")


@pytest.mark.parametrize("replay_channel", [None, "fixed-endpoint", "response-channel"],
                         ids=["dynamic-port", "session-specific", "response-channel"])
@pytest.mark.parametrize(("first", "live_messages"), [(0, 1500), (1200, 0)],
                         ids=["from-0-publishing-during-replay", "from-mid-position-idle"])
def test_java_persistent_subscription_replays_byte_exact_then_joins_live(
        sidecar: Sidecar, java_client: ModernPeerClient, first: int, live_messages: int, replay_channel: str | None) -> None:
    recorded, after_live = 2000, 300
    channel = {"fixed-endpoint": f"aeron:udp?endpoint=localhost:{free_udp_port()}",
               "response-channel": f"aeron:udp?control-mode=response|control=localhost:{free_udp_port()}",
               None: None}[replay_channel]
    read = persistent_read(java_client, messages=recorded, live_messages=live_messages, after_live=after_live,
                           position=first * FRAMED if first else None, replay_channel=channel)

    total = recorded + live_messages + after_live
    # Every message from the start position once and in order, byte for byte, to the end.
    assert (read["firstIndex"], read["lastIndex"], read["messages"]) == (first, total - 1, total - first)
    assert read["digest"] == expected_digest(first, total - first, SIZE)
    assert read["lastPosition"] == read["publicationPosition"] == total * FRAMED
    # The recorded part came from our sidecar's replay, then it joined the live stream once and
    # stayed: the messages published after the join arrived live.
    assert read["replayedMessages"] >= recorded - first
    assert read["liveMessages"] >= after_live
    assert (read["live"], read["liveJoined"], read["liveLeft"]) == (True, 1, 0)
    assert read["joinedAtMessage"] >= recorded - first
    assert read["publishedMessages"] == total
    # Once live it sent StopReplay and removed the replay subscription: our sidecar ended the
    # (follow-the-recording) replay on whichever of the two it saw first.
    stopped = re.compile(rf"replay \d+ of recording {read['recordingId']} ended: "
                         "(stop replay|publication is not connected)")
    deadline = time.monotonic() + 30.0
    while not any(stopped.search(line) for line in sidecar.stderr_lines):
        assert time.monotonic() < deadline, (
            "timed out waiting for the sidecar to end the replay; its replay lines: " +
            "\n".join(line for line in sidecar.stderr_lines if "replay" in line.lower())[-3000:])
        time.sleep(0.01)
