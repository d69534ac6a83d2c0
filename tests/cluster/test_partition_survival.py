"""A network partition between the Spark host and the archive host (issue 26, deliverable 5): the
archive host's link down for 10 s during a live tail and during a sink commit; afterwards every row
exactly once.

Hosts: the archive sidecar runs in a network namespace of its own (``<subnet>.N.1``, its embedded
media driver, control on ``<address>:8010``: tests/support/netns.py); the Spark query runs in the
root namespace (``<subnet>.N.2``) in a process of its own on a standalone media driver
(``AERON_DIR``), reaching the archive by ``archive.controlChannel`` only: control responses and
replays come to it over UDP across the veth link. The partition takes the namespace's end of that
link down (tests/support/link_partition.py) and brings it back up 10 s later.

1. **Live tail**: a publisher on the archive host (tests/support/live_publisher.py, IPC on the
   archive's driver, recorded LOCAL) publishes all along, partition included; the query
   (tests/support/tail_query_process.py, ``foreachBatch`` files) tails the recording with its
   timeouts shorter than the partition (``archive.timeoutMs=4000``, ``replay.idleTimeoutMs=5000``),
   so the partition outlasts them: a trigger or a task fails, naming the archive's endpoint, and
   the query is restarted from its checkpoint (Spark retries a failed task itself, ``local[2,3]``,
   but a failure of the driver-side source - ``latestOffset`` - ends the query: a supervisor
   restarts it, as TailRun does). After the link is back the restarted query catches up, and its
   batches hold every message published, exactly once (a raw replay of the recording; the
   publisher's sequence numbers have no gap: nothing was lost on the archive host).
2. **Sink commit**: a query writing to our sink (tests/spark/sink_query_process.py, recorded from a
   UDP channel on the archive host) pauses the commit of batch 2 with its rows appended and
   recorded but no marker (fault point ``before-marker``); the link goes down, the commit is let go
   (its marker cannot reach the archive), and the link comes back 10 s later. Whether that commit
   succeeds late or fails (and the query is restarted from its checkpoint), the sink recording
   ends with every input row exactly once.

Needs root and ``ip netns``; fails naming what is missing otherwise - a skipped proof proves
nothing. Every process started here is stopped by its PID, also on failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.client.archive_location import read_archive_location
from tests.spark.source_fixtures import Recorded
from tests.spark.test_sink_failures import (
    PAUSE_TIMEOUT_S,
    RUN_TIMEOUT_S,
    Scene,
    assert_exactly_once,
    connect,
    pause_file_of,
    run_to_the_end,
    settled_recording_position,
    sink_recording_id,
)
from tests.support.driver_process import running_driver_process
from tests.support.link_partition import link_down
from tests.support.live_publisher import LivePublisher, sequence_of
from tests.support.netns import CONTROL_PORT, Host, in_namespace, require_network_namespaces, sidecar_in, veth_namespaces
from tests.support.survival_checks import PauseReleaser, assert_every_row_exactly_once, recorded_stream
from tests.support.tail_query_process import TailRun, delivered_rows

pytestmark = [pytest.mark.timeout(600)]

PARTITION_S = 10.0
STREAM_ID = 4712
RATE_PER_S = 200
QUERY_START_TIMEOUT_S = 240.0
CATCH_UP_TIMEOUT_S = 180.0
SHORT_TIMEOUTS = ("--option", "archive.timeoutMs=4000", "--option", "replay.idleTimeoutMs=5000",
                  "--master", "local[2,3]", "--spark-log-level", "WARN")


@pytest.fixture(scope="module")
def hosts() -> Iterator[tuple[Host, Host]]:
    """(the archive host: a namespace, the Spark host: the root namespace), joined by a veth pair."""
    require_network_namespaces("the partition survival tests")
    with veth_namespaces("10.216", "aeron-part", None) as pair:
        yield pair


def archive_control(archive: Host) -> str:
    return f"aeron:udp?endpoint={archive.address}:{CONTROL_PORT}"


def test_a_live_tail_delivers_every_row_once_across_a_10_s_partition(hosts, tmp_path):
    started = time.monotonic()
    archive, spark_host = hosts
    assert archive.namespace is not None
    archive_dir = tmp_path / "archive"
    driver_host = tmp_path / "spark-host-aeron"
    until = tmp_path / "publishing-done"
    control = archive_control(archive)
    publisher: LivePublisher | None = None
    run: TailRun | None = None
    with sidecar_in(archive.namespace, archive.address, archive_dir) as sidecar_log, \
            running_driver_process(driver_host):
        try:
            publisher = LivePublisher(in_namespace(archive.namespace, []), "--channel", "aeron:ipc?term-length=64k",
                                      "--stream-id", str(STREAM_ID), "--messages", "100000", "--rate", str(RATE_PER_S),
                                      "--archive-dir", str(archive_dir), "--until-file", str(until))
            publisher.wait_until(lambda: len(publisher.recordings()) == 1, "its recording", 60)
            run = TailRun(tmp_path, control, "aeron:ipc", STREAM_ID, driver_host, *SHORT_TIMEOUTS)
            run.start()
            run.wait_for(lambda: len(delivered_rows(run.out)) > 200, "rows of the live recording",
                         QUERY_START_TIMEOUT_S, restart=False)
            with link_down(archive.namespace) as down_at:
                before = len(delivered_rows(run.out))
                time.sleep(PARTITION_S)
                during = len(delivered_rows(run.out)) - before
            print(f"link down {time.monotonic() - down_at:.1f} s; rows delivered meanwhile: {during}")
            sent_at_link_up = publisher.sent()
            run.wait_for(lambda: len(delivered_rows(run.out)) >= sent_at_link_up,
                         f"the {sent_at_link_up} messages sent by the end of the partition", CATCH_UP_TIMEOUT_S)
            caught_up = time.monotonic()
            until.touch()
            publisher.wait_until(publisher.done, "the last message recorded", 90)

            client = ArchiveClient.from_mark_file(archive_dir)  # on the archive's driver: shared memory
            try:
                recorded = recorded_stream(client, "aeron:ipc", STREAM_ID, "aeron:ipc")
            finally:
                client.close()
            sequences = [sequence_of(payload) for _, _, payload in recorded.messages]
            assert sequences == list(range(len(sequences))), "the archive host lost messages"
            run.wait_for(lambda: len(delivered_rows(run.out)) >= len(recorded.messages),
                         f"all {len(recorded.messages)} recorded messages", CATCH_UP_TIMEOUT_S)
            run.stop()
            delivered = delivered_rows(run.out)
            assert_every_row_exactly_once(delivered, recorded)
            # The partition outlasted the timeouts: something failed and was retried - a task (Spark
            # retried it), a driver-side call (made again on a fresh connection) or the query (restarted).
            lost_tasks = [text for query in run.queries for text in query.lost_tasks()]
            reconnects = [line for query in run.queries for line in query.reconnects()]
            assert run.failures or lost_tasks or reconnects, "nothing noticed a partition longer than the timeouts"
            for failure in run.failures + lost_tasks:  # each failure names the archive's endpoint
                assert f"{archive.address}:{CONTROL_PORT}" in failure, failure[-3000:]
            print(f"delivered {len(delivered)} rows exactly once; caught up {caught_up - down_at - PARTITION_S:.1f} s "
                  f"after the link came back; query runs: {len(run.queries)}; query failures: {run.failures}; "
                  f"tasks lost and retried by Spark: {len(lost_tasks)}; driver-side calls made again on a new "
                  f"connection: {len(reconnects)}; {time.monotonic() - started:.0f} s")
            endpoint = f"{archive.address}:{CONTROL_PORT}"
            for text in lost_tasks[:3]:
                print("lost task:", text.splitlines()[0][:200], "...",
                      next((line for line in text.splitlines() if endpoint in line), "")[:600])
            for line in reconnects[:3]:
                print("reconnect:", line[:600])
        finally:
            if run is not None:
                run.kill_all()
            if publisher is not None:
                publisher.stop()
            print("sidecar log tail:\n" + "".join(sidecar_log[-30:]))


SINK_INPUT_STREAM_ID = 4300
SINK_INPUT_MESSAGES = 2000  # ~1 MB of mixed sizes: ~8 micro-batches of 128 KiB
SINK_STREAM_ID = 4301
SINK_PORT = 8030  # in the archive's namespace: the sink recording's UDP endpoint


def test_a_sink_commit_delivers_every_row_once_across_a_10_s_partition(hosts, tmp_path, monkeypatch):
    started = time.monotonic()
    archive, _spark_host = hosts
    assert archive.namespace is not None
    archive_dir = tmp_path / "archive"
    driver_host = tmp_path / "spark-host-aeron"
    control = archive_control(archive)
    scene: Scene | None = None
    releaser: PauseReleaser | None = None
    with sidecar_in(archive.namespace, archive.address, archive_dir) as sidecar_log, \
            running_driver_process(driver_host):
        try:
            recorded_input = record_input(archive.namespace, archive_dir)
            # The test reads the archive through its own driver (shared memory reaches across namespaces).
            archive_side = SimpleNamespace(control_channel=control,
                                           driver_dir=read_archive_location(archive_dir).aeron_dir)
            scene = Scene(tmp_path, sink_id="partition", stream_id=SINK_STREAM_ID, sidecar=archive_side,
                          recorded=recorded_input, queries=[])
            scene.layout_args = ("--control-channel", control,
                                 "--sink-channel", f"aeron:udp?endpoint={archive.address}:{SINK_PORT}")
            monkeypatch.setenv("AERON_DIR", str(driver_host))  # the Spark host's driver, for the query only
            pause = pause_file_of(scene)
            torn_batch = 2
            run = scene.start_query("--fault", f"before-marker:{torn_batch}:{pause}", "--read-back")
            run.wait_until(pause.exists, f"the commit of batch {torn_batch} to pause before its marker",
                           PAUSE_TIMEOUT_S)
            hint = scene.checkpoint / "aeron-sink-staging" / scene.sink_id / "_committed.json"
            committed_end = json.loads(hint.read_text())["committed_end"]
            client = connect(archive_side)
            try:
                recording_id = sink_recording_id(client, scene.sink_id, scene.stream_id)
                settled_recording_position(client, recording_id, beyond=committed_end)
            finally:
                client.close()
            with link_down(archive.namespace) as down_at:
                releaser = PauseReleaser(pause)  # the commit goes on: its marker cannot reach the archive
                time.sleep(PARTITION_S)
            print(f"link down {time.monotonic() - down_at:.1f} s during the commit of batch {torn_batch}")
            code = run.wait_exit(RUN_TIMEOUT_S)
            releaser.stop()
            final = run
            if code != 0:
                failure = run.line_starting("QUERY FAILED")
                text = "\n".join(run.lines[run.lines.index(failure):]) if failure is not None else run.output()
                print("the query failed:", text[-1500:])
                final = run_to_the_end(scene)
            else:
                assert run.line_starting("QUERY DONE") is not None, run.output()
                print(f"the query kept going (the commit paused {releaser.released} time(s))")
            assert torn_batch in final.finished_batches()
            assert_exactly_once(scene, final)
            print(f"sink exactly once across a {PARTITION_S:.0f} s partition mid-commit: "
                  f"{time.monotonic() - started:.0f} s")
        finally:
            if releaser is not None:
                releaser.stop()
            if scene is not None:
                scene.stop_all_queries()
            print("sidecar log tail:\n" + "".join(sidecar_log[-30:]))


def record_input(namespace: str, archive_dir: Path) -> Recorded:
    """The sink query's input: a stopped recording of SINK_INPUT_MESSAGES messages, published on
    the archive host; what it holds, read back with a raw replay."""
    publisher = LivePublisher(in_namespace(namespace, []), "--channel", "aeron:ipc?term-length=64k",
                              "--stream-id", str(SINK_INPUT_STREAM_ID), "--messages", str(SINK_INPUT_MESSAGES),
                              "--rate", "20000", "--archive-dir", str(archive_dir))
    try:
        publisher.wait_until(publisher.done, "the input recorded", 120)
    finally:
        publisher.stop()
    client = ArchiveClient.from_mark_file(archive_dir)
    try:
        stream = recorded_stream(client, "aeron:ipc", SINK_INPUT_STREAM_ID, "aeron:ipc")
    finally:
        client.close()
    [recording_id] = stream.ranges
    return Recorded(recording_id, [(position, payload) for _, position, payload in stream.messages])
