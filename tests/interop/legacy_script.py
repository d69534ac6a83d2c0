"""The 1.15.1 scripted session (the peer's ``scripted-session``, ScriptedSession.java): its inputs,
and running it against one archive. Shared by the differential test of the Java 1.15.1 client
(test_differential_java_1_15_1_client.py) and by the test of our client in ``protocol="legacy"``
against the Java 1.15.1 archive (test_python_client_vs_java_archive.py), which compares its own
answers with the Java client's run against a fresh Java 1.15.1 archive. Test code."""

from __future__ import annotations

from tests.interop.differential import ScriptRun
from tests.interop.peer.interop_peer import ArchiveEndpoint, PeerClient, PeerInstallation
from tests.support.ports import free_udp_port, udp_channel

MESSAGES = 2000
SIZE = 96  # framed 128 B: a 64 KiB term holds exactly 512 messages, so message i starts at i * 128
FRAMED = 128
STREAM_ID = 1001
REPLAY_STREAM_ID = 2002
SESSION_ID = 4242
SEGMENT_LENGTH = 64 * 1024  # every archive the script runs against; its term length is 64 KiB too
TERM_LENGTH = 64 * 1024
MTU = 1408
INITIAL_TERM_ID = 7
UNKNOWN_ID = 987_654
#: The placeholders the script's UDP ports are normalised to, in the order of its channel options.
PORT_NAMES = ("<channel>", "<channel-b>", "<replay>")


def run_java_client_script(installation: PeerInstallation, archive: str, control_channel: str) -> ScriptRun:
    """The Java 1.15.1 client's scripted session (its own embedded Java driver, over UDP)."""
    ports = {free_udp_port(): name for name in PORT_NAMES}
    channel, channel_b, replay = (udp_channel(port) for port in ports)
    client = PeerClient(installation, ArchiveEndpoint(control_channel=control_channel, response_channel=None),
                        timeout=120)
    lines = client.scripted_session(channel, channel_b, STREAM_ID, MESSAGES, SIZE, replay_channel=replay,
                                    replay_stream_id=REPLAY_STREAM_ID, session_id=SESSION_ID)
    return ScriptRun(archive, lines, ports)
