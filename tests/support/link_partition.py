"""A network partition between two hosts of ``tests/support/netns.py``: the veth link of a namespace
taken down (``ip link set DEV down`` inside it) and brought back up, as a cable pulled and plugged
in again. Packets between the hosts are lost meanwhile, in both directions; the addresses stay
configured, so the same endpoints work again once the link is up.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator

from tests.support.netns import run_command


def veth_device(namespace: str) -> str:
    """The name of the namespace's one veth device (its end of the pair)."""
    listing = subprocess.run(["ip", "-n", namespace, "-o", "link", "show", "type", "veth"], check=True,
                             capture_output=True, text=True, timeout=30).stdout
    names = [line.split(":", 2)[1].strip().split("@", 1)[0] for line in listing.splitlines() if line.strip()]
    if len(names) != 1:
        raise RuntimeError(f"namespace {namespace} has {len(names)} veth devices, expected one: {listing!r}")
    return names[0]


@contextlib.contextmanager
def link_down(namespace: str) -> Iterator[float]:
    """The namespace's link down for the ``with`` block (yields when it went down, monotonic
    seconds); back up on exit, also when the block fails."""
    device = veth_device(namespace)
    run_command("ip", "-n", namespace, "link", "set", device, "down")
    try:
        yield time.monotonic()
    finally:
        run_command("ip", "-n", namespace, "link", "set", device, "up")
