"""Network namespaces for the integration tests that need real separate hosts.

* :func:`require_network_namespaces`: fails the test (never skips it: a skipped proof proves
  nothing) naming what is missing - root, the ``ip`` command, ``nft`` when the test needs a
  firewall - or why namespaces do not work here.
* :func:`veth_namespaces`: two hosts joined by a veth pair, ``<subnet>.<tag>.1`` and ``.2``; the
  second host is either a new namespace or the root namespace. Everything made is removed on exit.
* :func:`in_namespace`, :func:`run_in_namespace`: a command run inside a namespace.
* :func:`sidecar_in`: the archive sidecar serving ``<address>:CONTROL_PORT`` in a namespace,
  stopped by its PID on exit.

Names and addresses carry this process's PID, so that concurrent test runs do not collide.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from aeron_spark.archive.cli.serve_command import READY_PREFIX
from aeron_spark.archive.cli.sidecar_process import serve_command

#: The UDP port the sidecar of :func:`sidecar_in` takes control requests on.
CONTROL_PORT = 8010
COMMAND_TIMEOUT_S = 30.0
SIDECAR_READY_TIMEOUT_S = 60.0
SIDECAR_STOP_TIMEOUT_S = 20.0

_link_numbers = itertools.count()  # keeps the veth names of one process's pairs apart


def run_command(*args: str, input: str | None = None) -> None:
    """Runs a set-up command (``ip``, ``nft``); CalledProcessError (with its output) if it fails."""
    subprocess.run(args, check=True, capture_output=True, text=True, input=input, timeout=COMMAND_TIMEOUT_S)


def network_namespaces_problem(*, nft: bool = False) -> str | None:
    """Why this host cannot run a namespace test (``nft``: one that also needs nftables), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, nftables)" if nft else "needs root (network namespaces)"
    for tool in ("ip", "nft") if nft else ("ip",):
        if shutil.which(tool) is None:
            return f"needs the {tool} command"
    probe = f"aeron-probe-{os.getpid()}"
    try:
        run_command("ip", "netns", "add", probe)
        if nft:
            run_command("ip", "netns", "exec", probe, "nft", "list", "tables")
    except (subprocess.CalledProcessError, OSError) as error:
        what = "network namespaces or nftables" if nft else "network namespaces"
        return f"{what} unusable here: {error}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def require_network_namespaces(test_name: str, *, nft: bool = False) -> None:
    """Fails the calling test (``test_name`` says which) when :func:`network_namespaces_problem` finds one."""
    problem = network_namespaces_problem(nft=nft)
    if problem is not None:
        pytest.fail(f"{test_name} cannot run: {problem}")


@dataclass(frozen=True)
class Host:
    """One end of a veth pair: its namespace (None: the root namespace) and its address."""

    namespace: str | None
    address: str


@contextlib.contextmanager
def veth_namespaces(subnet: str, first_namespace: str, second_namespace: str | None) -> Iterator[tuple[Host, Host]]:
    """Creates namespace ``<first_namespace>-<pid>`` (address ``<subnet>.<tag>.1``) and joins it by
    a veth pair to namespace ``<second_namespace>-<pid>``, or to the root namespace when
    ``second_namespace`` is None (address ``<subnet>.<tag>.2``). Loopback and both links are up.
    On exit the pair and the namespaces are deleted, also after a failed set-up."""
    pid = os.getpid()
    tag = pid % 250 + 1
    first = Host(f"{first_namespace}-{pid}", f"{subnet}.{tag}.1")
    second = Host(None if second_namespace is None else f"{second_namespace}-{pid}", f"{subnet}.{tag}.2")
    link = f"v{next(_link_numbers)}x{pid % 100000}"  # at most 15 characters, the kernel's limit
    first_device, second_device = f"{link}a", f"{link}b"
    namespaces = [host.namespace for host in (first, second) if host.namespace is not None]
    try:
        for namespace in namespaces:
            run_command("ip", "netns", "add", namespace)
            run_command("ip", "-n", namespace, "link", "set", "lo", "up")
        assert first.namespace is not None
        run_command("ip", "link", "add", first_device, "netns", first.namespace, "type", "veth",
                    "peer", "name", second_device, *_netns_option(second))
        for host, device in ((first, first_device), (second, second_device)):
            run_command("ip", *_namespace_option(host), "addr", "add", f"{host.address}/24", "dev", device)
            run_command("ip", *_namespace_option(host), "link", "set", device, "up")
        yield first, second
    finally:
        if second.namespace is None:  # the root end outlives the namespaces; deleting it deletes its peer
            subprocess.run(["ip", "link", "del", second_device], capture_output=True)
        for namespace in namespaces:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def _namespace_option(host: Host) -> list[str]:
    """``ip``'s option that runs a command in the host's namespace (none for the root namespace)."""
    return [] if host.namespace is None else ["-n", host.namespace]


def _netns_option(host: Host) -> list[str]:
    """``ip link add``'s option that puts a device into the host's namespace."""
    return [] if host.namespace is None else ["netns", host.namespace]


def in_namespace(namespace: str, command: Sequence[str]) -> list[str]:
    """The command line that runs ``command`` in ``namespace``; ``ip netns exec`` execs it, so a
    process started from it has the command's own PID."""
    return ["ip", "netns", "exec", namespace, *command]


def run_in_namespace(namespace: str, command: Sequence[str], *, timeout: float, cwd: Path | None = None,
                     input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs ``command`` in ``namespace`` to its end (killed after ``timeout``), output captured as text."""
    return subprocess.run(in_namespace(namespace, command), cwd=cwd, input=input, capture_output=True,
                          text=True, timeout=timeout)


@contextlib.contextmanager
def sidecar_in(namespace: str, address: str, archive_dir: Path) -> Iterator[list[str]]:
    """The archive sidecar in ``namespace``, control requests on ``<address>:CONTROL_PORT``, 64 KiB
    segments; yields the list its stderr lines are appended to. Waits for its ready line; on
    exit SIGTERM by its PID, SIGKILL if it does not stop in time."""
    command = in_namespace(namespace, serve_command(
        archive_dir, "--control-channel", f"aeron:udp?endpoint={address}:{CONTROL_PORT}",
        "--segment-length", "64k", "--log-level", "INFO"))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None and stderr is not None  # both piped above
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(stderr), daemon=True).start()
    try:
        ready = threading.Event()

        def read() -> None:
            for line in stdout:
                if line.startswith(READY_PREFIX):
                    ready.set()
        threading.Thread(target=read, daemon=True).start()
        assert ready.wait(SIDECAR_READY_TIMEOUT_S), "".join(errors[-40:])
        yield errors
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(SIDECAR_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
