"""A client behind a firewall that admits nothing inbound reaches the archive over response channels.

Two network namespaces joined by a veth pair: the sidecar in ``archive`` (10.213.N.1), our client
process in ``client`` (10.213.N.2), whose nftables input chain drops every packet that does not
belong to a flow the client started (``ct state established,related``) - a host behind NAT or a
stateful firewall. Control, recording (the client publishes, the archive records REMOTE), listing
and a replay all work over ``control-mode=response`` channels, byte for byte; the same client
with a plain UDP response channel (an endpoint of the client's host) cannot connect, which shows
the firewall does what it says.

Needs root, ``ip netns`` and ``nft`` (``./run-tests`` installs Debian's nftables when missing); fails
naming what is missing otherwise - a skipped proof proves nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.netns import (
    CONTROL_PORT, in_namespace, require_network_namespaces, run_command, run_in_namespace, sidecar_in, veth_namespaces)

pytestmark = pytest.mark.timeout(180)

REPOSITORY = Path(__file__).resolve().parents[3]
RESPONSE_PORT, RECORD_PORT = 8011, 8020
#: The client's host admits only replies to what it sent (and its own loopback).
CLIENT_FIREWALL = (
    "table inet edge {\n"
    "  chain input {\n"
    "    type filter hook input priority 0; policy drop;\n"
    "    iif lo accept\n"
    "    ct state established,related accept\n"
    "  }\n"
    "}\n")


@pytest.fixture(scope="module")
def namespaces() -> Iterator[tuple[str, str, str, str]]:
    """(archive namespace, its address, client namespace, its address)."""
    require_network_namespaces("the response-channel firewall test", nft=True)
    with veth_namespaces("10.213", "aeron-arch", "aeron-cli") as (archive, client):
        assert archive.namespace is not None and client.namespace is not None
        run_command(*in_namespace(client.namespace, ["nft", "-f", "-"]), input=CLIENT_FIREWALL)
        yield archive.namespace, archive.address, client.namespace, client.address


def client_in(namespace: str, *args: str, timeout: float = 60) -> dict:
    result = run_in_namespace(namespace, [sys.executable, "-m", "tests.support.response_channel_client", *args],
                              cwd=REPOSITORY, timeout=timeout)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(lines[-1])


def test_a_client_that_admits_nothing_inbound_records_lists_and_replays_over_response_channels(namespaces, tmp_path):
    archive_ns, archive_ip, client_ns, client_ip = namespaces
    control = f"aeron:udp?endpoint={archive_ip}:{CONTROL_PORT}"
    response = f"aeron:udp?control-mode=response|control={archive_ip}:{RESPONSE_PORT}"
    with sidecar_in(archive_ns, archive_ip, tmp_path / "archive") as sidecar_log:
        # The firewall is real: a plain response endpoint on the client's host is never reached.
        blocked = client_in(client_ns, "--control", control, "--response", f"aeron:udp?endpoint={client_ip}:0",
                            "--record-channel", f"aeron:udp?endpoint={archive_ip}:{RECORD_PORT}",
                            "--connect-only", "--timeout", "3")
        assert "error" in blocked and "AuthConnectRequest" in blocked["error"], blocked
        done = client_in(client_ns, "--control", control, "--response", response,
                         "--record-channel", f"aeron:udp?endpoint={archive_ip}:{RECORD_PORT}")
        assert "error" not in done, (done, "".join(sidecar_log[-40:]))
        assert done["listed"] == [done["recording_id"]]
        assert done["replayed"] == done["sent"] == 300
        assert done["replayed_digest"] == done["sent_digest"]
