"""A host name that the DNS never answers for does not stop the sidecar's media driver (issue 33,
"the stall"; docs/reliability.md, "A driver that stops ticking").

The sidecar runs in a network namespace whose DNS server does not answer: its resolv.conf
(``/etc/netns/<namespace>/resolv.conf``, which ``ip netns exec`` mounts over /etc/resolv.conf)
names 192.0.2.53 (TEST-NET-1), reached by the namespace's default route into the root namespace,
which drops it, so every lookup of a name not in /etc/hosts waits out the resolver's tries
(``timeout:6 attempts:2``: 12 s). A client on the sidecar's media driver then sends a ConnectRequest
whose response channel names such a host, so the sidecar asks its driver for a publication to it and
the driver resolves the name.

With the embedded driver in Aeron's SHARED threading mode the lookup ran on the driver's only
thread, the one that also stamps the keepalive: the keepalive went 12 s stale, past every client's
10 s driver timeout, so the sidecar's own Aeron client declared its driver dead and closed, and
the sidecar never answered anyone again (the chaos run's stall). With the conductor on a thread of
its own (the default now, ``driver_integration.media_driver.DEFAULT_THREADING_MODE``) the
keepalive stays fresh and, once the lookup has failed, a valid client is answered. (During the
lookup the driver still answers no client command: Aeron's C conductor works one client command
at a time, and the publication waits for the name.)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.cli.serve_command import READY_PREFIX
from aeron_spark.archive.cli.sidecar_process import parse_ready_line, serve_command
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.configuration import DEFAULT_LOCAL_CONTROL_CHANNEL, DEFAULT_LOCAL_CONTROL_STREAM_ID
from aeron_spark.driver_integration.client import AeronClient

from tests.support.netns import CONTROL_PORT, in_namespace, require_network_namespaces, run_command, veth_namespaces
from tests.support.stall_diagnostics import driver_heartbeat_age_ms, stall_report
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

#: timeout x attempts: 12 s, longer than the clients' 10 s driver timeout, as the system's 2 x 5 s.
UNANSWERED_DNS = "nameserver 192.0.2.53\noptions timeout:6 attempts:2\n"
LOOKUP_S = 12.0
UNRESOLVABLE_RESPONSE_CHANNEL = "aeron:udp?endpoint=archive-client.invalid:40999"
#: The keepalive is stamped once a second; a loaded 2-core machine adds up to ~3 s of scheduling
#: delay (measured 2.2-2.7 s at load 20), far below the lookup's 12 s.
MAX_KEEPALIVE_AGE_MS = 5_000
#: The driver looks the name up twice (the channel's parse, then the publication's endpoint) and answers
#: no client command meanwhile (Aeron's C conductor works one at a time).
VALID_CLIENT_TIMEOUT_S = 2 * LOOKUP_S + 10
READY_TIMEOUT_S = 90.0


@contextmanager
def namespace_without_dns(namespace: str, route_via: str) -> Iterator[None]:
    """``namespace`` gets a default route (its DNS queries leave and are dropped) and a resolv.conf
    naming a server nobody answers for; both removed on exit."""
    config_dir = Path("/etc/netns") / namespace
    config_dir.mkdir(parents=True, exist_ok=True)
    try:
        (config_dir / "resolv.conf").write_text(UNANSWERED_DNS)
        run_command("ip", "-n", namespace, "route", "add", "default", "via", route_via)
        yield
    finally:
        shutil.rmtree(config_dir, ignore_errors=True)


@contextmanager
def sidecar_in_namespace(namespace: str, address: str, archive_dir: Path) -> Iterator[dict[str, str]]:
    """The sidecar (its embedded driver) in ``namespace``; yields its ready line's fields; stopped by PID."""
    command = in_namespace(namespace, serve_command(
        archive_dir, "--control-channel", f"aeron:udp?endpoint={address}:{CONTROL_PORT}",
        "--segment-length", "64k", "--log-level", "INFO"))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    ready: list[dict[str, str]] = []

    def read(stdout=process.stdout) -> None:
        for line in stdout:
            if line.startswith(READY_PREFIX):
                ready.append(parse_ready_line(line))
    threading.Thread(target=read, daemon=True).start()
    try:
        wait_until(lambda: bool(ready) or process.poll() is not None, "the sidecar's ready line", READY_TIMEOUT_S)
        assert ready, f"the sidecar exited with {process.returncode} before it was ready"
        yield {**ready[0], "pid": str(process.pid)}
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def sample_keepalive(driver_dir: str, seconds: float, worst_age_ms: list[int]) -> None:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        worst_age_ms[0] = max(worst_age_ms[0], driver_heartbeat_age_ms(driver_dir))
        time.sleep(0.05)


def connect_with_unresolvable_response_channel(aeron: AeronClient) -> None:
    """A ConnectRequest whose response channel names a host only DNS could resolve; nobody waits
    for its answer (there is none to receive)."""
    requests = aeron.add_exclusive_publication(DEFAULT_LOCAL_CONTROL_CHANNEL, DEFAULT_LOCAL_CONTROL_STREAM_ID)
    wait_until(lambda: requests.is_connected, "the request publication to connect", 10)
    request = codecs.encode(codecs.AuthConnectRequest(1, 20, codecs.PROTOCOL_SEMANTIC_VERSION,
                                                      UNRESOLVABLE_RESPONSE_CHANNEL, b"", "name=unresolvable"))
    wait_until(lambda: requests.offer(request) > 0, "the ConnectRequest to be sent", 10)


def test_a_response_channel_naming_a_host_the_dns_never_answers_for_leaves_the_driver_ticking(tmp_path: Path) -> None:
    require_network_namespaces("test_a_response_channel_naming_a_host_the_dns_never_answers_for_leaves_the_driver_ticking")
    with veth_namespaces("10.219", "aeron-dnsstall", None) as (archive_host, root_end), \
            namespace_without_dns(str(archive_host.namespace), root_end.address), \
            sidecar_in_namespace(str(archive_host.namespace), archive_host.address, tmp_path / "archive") as ready:
        driver_dir = ready["aeronDir"]
        worst_age_ms = [0]
        sampling = threading.Thread(target=sample_keepalive, args=(driver_dir, LOOKUP_S + 3, worst_age_ms))
        with AeronClient(driver_dir) as aeron:  # /dev/shm is shared: a client of the sidecar's driver
            sampling.start()
            connect_with_unresolvable_response_channel(aeron)
            sampling.join()
        failure = None if worst_age_ms[0] < MAX_KEEPALIVE_AGE_MS else (
            f"the sidecar's driver went {worst_age_ms[0]} ms without stamping its keepalive while it looked "
            f"up {UNRESOLVABLE_RESPONSE_CHANNEL}")
        started = time.monotonic()
        try:  # after the lookup: the sidecar's own Aeron client is alive, so the archive answers
            with ArchiveClient.connect(control_channel=DEFAULT_LOCAL_CONTROL_CHANNEL,
                                       control_stream_id=DEFAULT_LOCAL_CONTROL_STREAM_ID,
                                       response_channel="aeron:ipc", aeron_dir=driver_dir,
                                       timeout=VALID_CLIENT_TIMEOUT_S) as valid:
                valid.list_recordings(0, 1)
        except Exception as error:  # noqa: BLE001 - reported with the sidecar's state below
            failure = (failure or "") + f"\nafter the lookup the sidecar did not answer a valid client: {error}"
        answered_s = time.monotonic() - started
        assert failure is None, f"{failure}\n{stall_report(int(ready['pid']), driver_dir)}"
        print(f"keepalive at most {worst_age_ms[0]} ms old during the {LOOKUP_S:.0f} s lookup; a valid "
              f"client answered {answered_s:.2f} s after it")
    assert not os.path.exists(f"/etc/netns/{archive_host.namespace}")
