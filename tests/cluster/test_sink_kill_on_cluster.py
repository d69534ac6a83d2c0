"""The sink exactly once through a kill of the query mid-commit, in the cluster layout, staging on S3.

The query process (tests/spark/sink_query_process.py) is the Spark driver host: its media driver
is a standalone driver process named by ``AERON_DIR`` in its environment; its executors run in
``local-cluster[2,1,1024]`` with embedded drivers of their own; it reaches the archive sidecar
(on a third driver) through ``archive.controlChannel`` only, and the sink is recorded from a UDP
channel. Staging is on moto's S3 server on localhost. The scenario and its checks are those of
tests/spark/test_sink_failures.py::test_staging_on_s3_every_row_exactly_once_across_a_driver_kill_mid_commit.
Every process started here is stopped by PID (the query's process group, the driver process,
the sidecar), also on failure.
"""

from __future__ import annotations

import pytest

from tests.spark.test_sink_failures import exactly_once_through_a_kill_mid_commit, scene  # noqa: F401 - fixture
from tests.support.driver_process import running_driver_process
from tests.support.ports import free_udp_port
from tests.support.s3_server import running_s3_server

pytestmark = pytest.mark.timeout(600)


def test_the_sink_on_a_cluster_is_exactly_once_through_a_kill_mid_commit_with_staging_on_s3(
        scene, tmp_path, monkeypatch):  # noqa: F811 - the imported fixture
    driver_host = tmp_path / "spark-driver-host-aeron"
    with running_s3_server() as s3, running_driver_process(driver_host):
        monkeypatch.setenv("AERON_DIR", str(driver_host))  # inherited by the query processes only
        scene.layout_args = (
            "--control-channel", scene.sidecar.control_channel,
            "--sink-channel", f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}",
            "--master", "local-cluster[2,1,1024]",
            "--executor-aeron-dir", str(tmp_path / "executor-host-aeron"))  # no driver there: embedded ones
        try:
            exactly_once_through_a_kill_mid_commit(scene, s3)
        finally:
            scene.stop_all_queries()
