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
APP_TIMEOUT_S = 600


def _run_app(args: dict, env: dict[str, str]) -> dict[str, dict]:
    process = subprocess.Popen([sys.executable, "-m", "tests.cluster.cluster_app", json.dumps(args)],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=APP_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    results = {}
    for line in stdout.splitlines():
        if line.startswith("{") and '"scenario"' in line:
            result = json.loads(line)
            results[result["scenario"]] = result
    results["_log"] = {"detail": stderr[-6000:], "returncode": process.returncode}
    return results


def _run_layout(layout: str, work: Path) -> dict[str, dict]:
    if layout == "modern-java-cluster":
        with running_modern_java_archive(ensure_modern_peer_built(), work) as java:
            return _run_cluster(_app_args(work, java.control_channel, layout), work, staging=False)
    with running_sidecar(work / "archive") as sidecar:
        args = _app_args(work, sidecar.control_channel, layout)
        if layout == "single-host":
            args.update(master="local[2]", options={"archive.dir": str(work / "archive")},
                        publisher_aeron_dir=sidecar.driver_dir)
            return _run_app(args, _environment())
        options = {}
        if layout == "cluster-response-channels":
            options["archive.responseChannel"] = f"aeron:udp?control-mode=response|control=localhost:{free_udp_port()}"
        results = _run_cluster(args, work, staging=True, extra_options=options)
        results["_replay_channels"] = {"replays": [
            line.split(" on ", 1)[1] for line in sidecar.stderr_lines
            if "replay_requests: replay" in line and " from " in line and " on " in line]}
        return results


def _app_args(work: Path, control_channel: str, layout: str) -> dict:
    return {"work_dir": str(work), "control_channel": control_channel, "record_port": free_udp_port(),
            "sink_port": free_udp_port(), "first_stream_id": 7100, "scenarios": LAYOUTS[layout], "staging_uri": None}


def _environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "AERON_DIR"}


def _run_cluster(args: dict, work: Path, *, staging: bool, extra_options: dict[str, str] | None = None) -> dict[str, dict]:
    """``local-cluster`` executors on embedded drivers, this app on a driver of its own, the archive
    reached at ``args["control_channel"]`` (plus ``extra_options``) only; sink staging on S3 (moto)
    when ``staging``."""
    env = _environment()
    driver_host_dir = work / "spark-driver-host-aeron"
    with running_driver_process(driver_host_dir), contextlib.ExitStack() as stack:
        if staging:
            args["staging_uri"] = stack.enter_context(running_s3_server()).staging_uri("cluster-staging")
        options = {"archive.controlChannel": args["control_channel"], **(extra_options or {})}
        args.update(master="local-cluster[2,1,1024]", options=options)
        args["spark_conf"] = {
            # No driver runs there: each executor's Python worker starts an embedded one.
            "spark.executorEnv.AERON_DIR": str(work / "executor-host-aeron"),
            "spark.task.maxFailures": "4",
        }
        env["AERON_DIR"] = str(driver_host_dir)
        return _run_app(args, env)


@pytest.fixture(scope="module")
def layout_results(tmp_path_factory):
    """Runs each layout's app once (on first use) and keeps its per-scenario results."""
    done: dict[str, dict[str, dict]] = {}

    def results(layout: str) -> dict[str, dict]:
        if layout not in done:
            done[layout] = _run_layout(layout, tmp_path_factory.mktemp(f"layout-{layout}"))
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
