"""The ``aeron-archive`` client commands on a host with no media driver answer a remote archive.

The archive sidecar runs in a network namespace of its own (10.214.N.1, joined to the root
namespace's 10.214.N.2 by a veth pair) and records a stream there. From the root namespace,
where no media driver runs at the command's Aeron directory, the real console script
(``.venv/bin/aeron-archive``) lists the recording and replays it: it embeds a driver for the
command's duration (``--aeron-driver`` auto) and tells the archive the address of this host that
routes to it (never ``localhost``), then removes the driver's directory. An archive that does
not answer fails within ``--timeout`` naming the endpoint and the option.

Needs root and ``ip netns``; fails naming what is missing otherwise - a skipped proof proves nothing.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aeron_spark.driver_integration.media_driver import default_base_directory
from aeron_spark.driver_integration.process_driver import EMBEDDED_DIR_PREFIX, is_driver_active
from tests.support.netns import CONTROL_PORT, require_network_namespaces, run_in_namespace, sidecar_in, veth_namespaces

pytestmark = pytest.mark.timeout(180)

CONSOLE_SCRIPT = Path(sys.executable).parent / "aeron-archive"
UNUSED_PORT = 8099
MESSAGES = 50
RECORDED_STREAM_ID = 1001

#: Run in the archive's namespace: records MESSAGES messages of aeron:ipc stream 1001 through the
#: sidecar's own driver (found by its mark file) and prints the recording id.
RECORD_SCRIPT = """
import json, sys, time
from aeron_spark.archive.client.archive_client import ArchiveClient, RecordingSignal, SourceLocation
archive_dir, count, stream_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with ArchiveClient.from_mark_file(archive_dir) as client:
    client.start_recording("aeron:ipc", stream_id, SourceLocation.LOCAL)
    publication = client.aeron.add_exclusive_publication("aeron:ipc", stream_id)
    recording_id = client.await_recording_signal(RecordingSignal.START).recording_id
    for index in range(count):
        publication.offer_with_retry(f"message-{index}".encode())
    end = publication.position
    deadline = time.monotonic() + 20
    while client.recording_position(recording_id) < end and time.monotonic() < deadline:
        time.sleep(0.01)
    client.stop_recording("aeron:ipc", stream_id)
    publication.close()
    print(json.dumps({"recording_id": recording_id, "stop_position": end}))
"""


@pytest.fixture(scope="module")
def archive_namespace() -> Iterator[tuple[str, str]]:
    """(the archive's namespace, its address); the root namespace reaches it over a veth pair."""
    require_network_namespaces("the remote CLI test")
    with veth_namespaces("10.214", "aeron-carch", None) as (archive, _root):
        assert archive.namespace is not None
        yield archive.namespace, archive.address


def record_in(namespace: str, archive_dir: Path) -> dict:
    result = run_in_namespace(namespace, [sys.executable, "-c", RECORD_SCRIPT, str(archive_dir), str(MESSAGES),
                                          str(RECORDED_STREAM_ID)], timeout=60)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def aeron_archive(*args: str, aeron_dir: Path, timeout: float = 60) -> tuple[int, str, str, int]:
    """Runs the console script in the root namespace with ``aeron_dir`` as Aeron's directory:
    (exit code, stdout, stderr, its pid)."""
    process = subprocess.Popen([str(CONSOLE_SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, AERON_DIR=str(aeron_dir)))
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    return process.returncode, out, err, process.pid


def embedded_driver_dirs(pid: int) -> list[str]:
    return glob.glob(os.path.join(default_base_directory(), f"{EMBEDDED_DIR_PREFIX}{pid}-*"))


def test_client_commands_on_a_host_without_a_driver_list_and_replay_a_remote_archive(archive_namespace, tmp_path):
    namespace, archive_ip = archive_namespace
    archive_dir = tmp_path / "archive"
    no_driver_dir = tmp_path / "no-driver"  # where the commands look for a running driver
    control = f"aeron:udp?endpoint={archive_ip}:{CONTROL_PORT}"
    with sidecar_in(namespace, archive_ip, archive_dir) as sidecar_log:
        recorded = record_in(namespace, archive_dir)
        assert not is_driver_active(str(no_driver_dir))

        code, out, err, pid = aeron_archive("recordings", "--control-channel", control, "--timeout", "10",
                                            aeron_dir=no_driver_dir)
        assert code == 0, (err, "".join(sidecar_log[-40:]))
        listed = [json.loads(line) for line in out.splitlines()]
        [descriptor] = [d for d in listed if d["recordingId"] == recorded["recording_id"]]
        assert descriptor["streamId"] == RECORDED_STREAM_ID
        assert descriptor["stopPosition"] == recorded["stop_position"]
        assert embedded_driver_dirs(pid) == []  # the command's own driver is gone with it
        root_ip = archive_ip.rsplit(".", 1)[0] + ".2"
        told = [line for line in sidecar_log if "responses on aeron:udp" in line]
        elsewhere = [line for line in told if f"endpoint={root_ip}:" not in line]
        assert told and not elsewhere, told  # the routed address of this host, never localhost

        code, out, err, pid = aeron_archive("replay", str(recorded["recording_id"]), "--control-channel", control,
                                            "--timeout", "10", aeron_dir=no_driver_dir)
        assert code == 0, (err, "".join(sidecar_log[-40:]))
        payloads = [base64.b64decode(json.loads(line)["payload"]) for line in out.splitlines()]
        assert payloads == [f"message-{index}".encode() for index in range(MESSAGES)]
        assert embedded_driver_dirs(pid) == []
        assert not no_driver_dir.exists()


def test_an_archive_that_does_not_answer_fails_fast_naming_the_endpoint_and_the_option(archive_namespace, tmp_path):
    _, archive_ip = archive_namespace
    silent = f"aeron:udp?endpoint={archive_ip}:{UNUSED_PORT}"  # the namespace is up, nothing listens
    code, _, err, pid = aeron_archive("recordings", "--control-channel", silent, "--timeout", "2",
                                      aeron_dir=tmp_path / "no-driver", timeout=30)
    assert code == 3, err
    assert silent in err and "--control-channel" in err, err
    assert embedded_driver_dirs(pid) == []
