"""The source and the sink with the archive, the Spark driver and the executors on different hosts.

Hosts are simulated as ../shared/reference/cluster-deployment-notes.md describes: the archive
sidecar on its own embedded media driver; the Spark driver program (tests/cluster/cluster_app.py)
on a standalone driver process named by ``AERON_DIR`` in its environment; Spark
``local-cluster[2,1,1024]`` executors (separate JVMs and Python workers) whose ``AERON_DIR``
holds no driver, so each Python worker starts an embedded one (``aeron.driver=auto``). Queries are
given ``archive.controlChannel`` only: no directory, counter or IPC stream of the archive is
visible to any Spark process. Sink staging is on an S3 server on localhost (moto); the kill of a
query mid-commit is in test_sink_kill_on_cluster.py.

The ``single-host`` layout runs the same scenarios on ``local[2]`` with ``archive.dir`` only; the
``cluster-response-channels`` layout runs some of them on the cluster with a response channel
(``archive.responseChannel`` with ``control-mode=response``). The ``modern-java-cluster`` layout
is the cluster layout with the real Java Aeron 1.51.0 archive (tests/interop/peer/modern_peer.py:
its own Java media driver, only its control channel given) in place of the sidecar, for the reads
(the sink into it: tests/spark/test_modern_java_archive.py).
The three layouts on local-cluster run in one app, one after the other on one Spark session (a
local-cluster start costs tens of seconds here), each on its own archive.
Every process started here is stopped here, by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.peer.modern_peer import ensure_modern_peer_built, running_modern_java_archive
from tests.support.driver_process import running_driver_process
from tests.support.ports import free_udp_port
from tests.support.s3_server import running_s3_server
from tests.support.sidecar import running_sidecar

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
COMMON_SCENARIOS = ["batch_read", "available_now", "tail_live", "discovery", "restart_from_checkpoint",
                    "sink_batch_write"]
LAYOUTS = {
    "cluster": COMMON_SCENARIOS + ["executor_killed_mid_read"],
    "single-host": COMMON_SCENARIOS,
    # The cluster with archive.responseChannel=control-mode=response: every Spark process reaches
    # the archive over connections it opens (control, replays), none is told an address of its own.
    "cluster-response-channels": ["batch_read", "available_now", "sink_batch_write"],
    "modern-java-cluster": ["batch_read", "tail_live", "discovery"],
}
# The layouts on local-cluster run in one app (one Spark session, one local-cluster start), each on
# its own archive; "cluster" last, as its last scenario kills an executor.
CLUSTER_LAYOUTS = ("cluster-response-channels", "modern-java-cluster", "cluster")
APP_TIMEOUT_S = 900


def _run_app(args: dict, env: dict[str, str]) -> dict[str, dict[str, dict]]:
    """Runs the app; its per-scenario results by layout, each layout's with the app's ``_log``."""
    process = subprocess.Popen([sys.executable, "-m", "tests.cluster.cluster_app", json.dumps(args)],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=APP_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = {"detail": stderr[-6000:], "returncode": process.returncode}
    results: dict[str, dict[str, dict]] = {phase["layout"]: {"_log": log} for phase in args["phases"]}
    for line in stdout.splitlines():
        if line.startswith("{") and '"scenario"' in line:
            result = json.loads(line)
            results[result["layout"]][result["scenario"]] = result
    return results


def _phase(layout: str, control_channel: str, options: dict[str, str], **extra: str) -> dict:
    return {"layout": layout, "control_channel": control_channel, "record_port": free_udp_port(),
            "sink_port": free_udp_port(), "options": options, "scenarios": LAYOUTS[layout], **extra}


def _run_single_host(work: Path) -> dict[str, dict[str, dict]]:
    with running_sidecar(work / "archive") as sidecar:
        phase = _phase("single-host", sidecar.control_channel, {"archive.dir": str(work / "archive")},
                       publisher_aeron_dir=sidecar.driver_dir)
        return _run_app({"work_dir": str(work), "first_stream_id": 7100, "master": "local[2]", "phases": [phase]},
                        _environment())


def _environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "AERON_DIR"}


def _run_cluster_layouts(work: Path) -> dict[str, dict[str, dict]]:
    """``local-cluster`` executors on embedded drivers, this app on a driver of its own; each layout's
    archive reached at its control channel (plus its options) only: a sidecar each for "cluster" and
    "cluster-response-channels" (sink staging on S3, moto), the Java 1.51.0 archive for
    "modern-java-cluster"."""
    env = _environment()
    driver_host_dir = work / "spark-driver-host-aeron"
    with contextlib.ExitStack() as stack:
        java = stack.enter_context(running_modern_java_archive(ensure_modern_peer_built(), work))
        sidecars = {}
        for layout in ("cluster", "cluster-response-channels"):
            (work / layout).mkdir()
            sidecars[layout] = stack.enter_context(running_sidecar(work / layout / "archive"))
        staging_uri = stack.enter_context(running_s3_server()).staging_uri("cluster-staging")
        stack.enter_context(running_driver_process(driver_host_dir))
        response_channel = f"aeron:udp?control-mode=response|control=localhost:{free_udp_port()}"
        phases = {
            "cluster": _phase("cluster", sidecars["cluster"].control_channel,
                              {"archive.controlChannel": sidecars["cluster"].control_channel},
                              staging_uri=staging_uri),
            "cluster-response-channels": _phase(
                "cluster-response-channels", sidecars["cluster-response-channels"].control_channel,
                {"archive.controlChannel": sidecars["cluster-response-channels"].control_channel,
                 "archive.responseChannel": response_channel}, staging_uri=staging_uri),
            "modern-java-cluster": _phase("modern-java-cluster", java.control_channel,
                                          {"archive.controlChannel": java.control_channel}),
        }
        args = {"work_dir": str(work), "first_stream_id": 7100, "master": "local-cluster[2,1,1024]",
                "phases": [phases[layout] for layout in CLUSTER_LAYOUTS],
                "spark_conf": {
                    # No driver runs there: each executor's Python worker starts an embedded one.
                    "spark.executorEnv.AERON_DIR": str(work / "executor-host-aeron"),
                    "spark.task.maxFailures": "4",
                }}
        env["AERON_DIR"] = str(driver_host_dir)
        results = _run_app(args, env)
        for layout, sidecar in sidecars.items():
            results[layout]["_replay_channels"] = {"replays": [
                line.split(" on ", 1)[1] for line in sidecar.stderr_lines
                if "replay_requests: replay" in line and " from " in line and " on " in line]}
        return results


@pytest.fixture(scope="module")
def layout_results(tmp_path_factory):
    """Runs each layout's app once (on first use: the cluster layouts together) and keeps its
    per-scenario results."""
    done: dict[str, dict[str, dict]] = {}

    def results(layout: str) -> dict[str, dict]:
        if layout not in done:
            if layout == "single-host":
                done.update(_run_single_host(tmp_path_factory.mktemp("layout-single-host")))
            else:
                done.update(_run_cluster_layouts(tmp_path_factory.mktemp("layout-cluster")))
        return done[layout]

    return results


@pytest.mark.parametrize("layout, scenario", [(layout, scenario) for layout in LAYOUTS for scenario in LAYOUTS[layout]])
def test_scenario(layout_results, layout: str, scenario: str) -> None:
    results = layout_results(layout)
    result = results.get(scenario)
    assert result is not None, f"{layout}: the app did not report {scenario}: {results['_log']}"
    assert result["ok"], f"{layout} / {scenario}:\n{result['detail']}"


def test_with_a_response_channel_every_replay_goes_over_a_response_channel(layout_results) -> None:
    replays = layout_results("cluster-response-channels")["_replay_channels"]["replays"]
    assert replays and all("control-mode=response" in channel and "response-correlation-id=" in channel
                           for channel in replays), replays
