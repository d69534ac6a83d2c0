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

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from aeron_spark.archive.cli.sidecar_process import serve_command
from aeron_spark.archive.cli.serve_command import READY_PREFIX

pytestmark = pytest.mark.timeout(180)

REPOSITORY = Path(__file__).resolve().parents[2]
SUBNET = 10_213
CONTROL_PORT, RESPONSE_PORT, RECORD_PORT = 8010, 8011, 8020


def _run(*args: str, input: str | None = None) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, input=input, timeout=30)


def _netns_usable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, nftables)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"needs the {tool} command"
    probe = f"aeron-probe-{os.getpid()}"
    try:
        _run("ip", "netns", "add", probe)
        _run("ip", "netns", "exec", probe, "nft", "list", "tables")
    except (subprocess.CalledProcessError, OSError) as error:
        return f"network namespaces or nftables unusable here: {error}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@pytest.fixture(scope="module")
def namespaces() -> Iterator[tuple[str, str, str, str]]:
    """(archive namespace, its address, client namespace, its address)."""
    reason = _netns_usable()
    if reason is not None:
        pytest.fail(f"the response-channel firewall test cannot run: {reason}")
    tag = os.getpid() % 250 + 1
    archive_ns, client_ns = f"aeron-arch-{os.getpid()}", f"aeron-cli-{os.getpid()}"
    archive_ip, client_ip = f"10.213.{tag}.1", f"10.213.{tag}.2"
    veth_a, veth_c = f"va{os.getpid() % 100000}", f"vc{os.getpid() % 100000}"
    try:
        for ns in (archive_ns, client_ns):
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "link", "add", veth_a, "netns", archive_ns, "type", "veth", "peer", "name", veth_c,
             "netns", client_ns)
        _run("ip", "-n", archive_ns, "addr", "add", f"{archive_ip}/24", "dev", veth_a)
        _run("ip", "-n", client_ns, "addr", "add", f"{client_ip}/24", "dev", veth_c)
        _run("ip", "-n", archive_ns, "link", "set", veth_a, "up")
        _run("ip", "-n", client_ns, "link", "set", veth_c, "up")
        # The client's host admits only replies to what it sent (and its own loopback).
        _run("ip", "netns", "exec", client_ns, "nft", "-f", "-", input=(
            "table inet edge {\n"
            "  chain input {\n"
            "    type filter hook input priority 0; policy drop;\n"
            "    iif lo accept\n"
            "    ct state established,related accept\n"
            "  }\n"
            "}\n"))
        yield archive_ns, archive_ip, client_ns, client_ip
    finally:
        for ns in (archive_ns, client_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextlib.contextmanager
def sidecar_in(namespace: str, address: str, archive_dir: Path) -> Iterator[list[str]]:
    command = ["ip", "netns", "exec", namespace, *serve_command(
        archive_dir, "--control-channel", f"aeron:udp?endpoint={address}:{CONTROL_PORT}",
        "--segment-length", "64k", "--log-level", "INFO")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True).start()
    try:
        ready = threading.Event()

        def read() -> None:
            for line in process.stdout:
                if line.startswith(READY_PREFIX):
                    ready.set()
        threading.Thread(target=read, daemon=True).start()
        assert ready.wait(60), "".join(errors[-40:])
        yield errors
    finally:
        process.send_signal(signal.SIGTERM)  # `ip netns exec` execs the sidecar: this is its PID
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def client_in(namespace: str, *args: str, timeout: float = 60) -> dict:
    result = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-m", "tests.support.response_channel_client", *args],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=timeout)
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
