"""The archive SIGKILLed and restarted on the same directory and control endpoint, under a streaming
read and under a sink commit (issue 26, deliverable 5): every row exactly once afterwards.

Layout (one machine, three "hosts" by media driver): the archive sidecar is a process of its own
(its embedded media driver; UDP control endpoint); the Spark query runs in another process on a
standalone media driver (``AERON_DIR``), reaching the archive by ``archive.controlChannel`` only,
so killing the archive kills nothing of Spark's (as when the archive host's process dies).

1. **During a streaming read** (``tail_query_process``: source -> ``foreachBatch`` files): a
   publisher (tests/support/live_publisher.py, on the Spark host's driver, publishing over UDP)
   keeps a live recording going; once the query has delivered rows, the sidecar is SIGKILLed, and
   restarted 3 s later. The publisher notices and records anew (a new recording, see its module for
   why not an extension); the query follows the stream by ``channel``/``streamId``. Either the
   query keeps going, or it fails with an error naming the archive's endpoint and is restarted from
   its checkpoint. Afterwards its batches hold every recorded message exactly once (compared with a
   raw replay of every recording of the stream).
2. **During a sink commit** (tests/spark/sink_query_process.py: source -> our sink, AvailableNow): the
   commit of batch 2 is paused with its rows appended and recorded but no marker (the sink's
   fault-injection point ``before-marker``); the sidecar is SIGKILLed there, restarted 3 s later,
   and the commit let go. The committer's attempt on the dead session fails; it retries once on a
   fresh connection (the restarted archive recovered the sink recording, so the retry truncates the
   dead attempt's rows and appends the batch again), or the query fails naming the archive and is
   restarted from its checkpoint. Either way the sink recording ends with every input row exactly
   once (raw replay: data, markers, nothing after the last marker; and the source's read-back).

Every process started here (sidecars, publisher, query process trees, the driver) is stopped by
its PID, also on failure.
"""

from __future__ import annotations

import json
import time

import pytest

from aeron_spark.archive.client.archive_client import ArchiveClient
from tests.spark.test_sink_failures import (  # noqa: F401 - scene is a fixture
    PAUSE_TIMEOUT_S,
    RUN_TIMEOUT_S,
    assert_committed_prefix,
    assert_exactly_once,
    connect,
    pause_file_of,
    run_to_the_end,
    scene,
    settled_recording_position,
    sink_recording_id,
)
from tests.support.driver_process import running_driver_process
from tests.support.live_publisher import LivePublisher
from tests.support.ports import free_udp_port
from tests.support.sidecar import Sidecar
from tests.support.survival_checks import PauseReleaser, assert_every_row_exactly_once, recorded_stream, sequence_gaps
from tests.support.tail_query_process import TailRun, delivered_rows

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

STREAM_ID = 4711
RATE_PER_S = 200
DOWN_FOR_S = 3.0
QUERY_START_TIMEOUT_S = 240.0
CATCH_UP_TIMEOUT_S = 180.0


def test_a_streaming_read_delivers_every_row_once_across_an_archive_sigkill_and_restart(tmp_path):
    started = time.monotonic()
    driver_host = tmp_path / "spark-host-aeron"
    archive_dir = tmp_path / "archive"
    record_port = free_udp_port()
    fragment = f"endpoint=127.0.0.1:{record_port}"
    channel = f"aeron:udp?{fragment}|term-length=64k"
    until = tmp_path / "publishing-done"
    sidecars: list[Sidecar] = []
    publisher: LivePublisher | None = None
    run: TailRun | None = None
    with running_driver_process(driver_host):
        try:
            first = Sidecar(archive_dir)
            sidecars.append(first.start())
            control_port = first.control_port
            publisher = LivePublisher([], "--channel", channel, "--stream-id", str(STREAM_ID), "--messages", "100000",
                                      "--rate", str(RATE_PER_S), "--control-channel", first.control_channel,
                                      "--aeron-dir", str(driver_host), "--until-file", str(until))
            publisher.wait_until(lambda: len(publisher.recordings()) == 1, "its first recording", 60)
            run = TailRun(tmp_path, first.control_channel, fragment, STREAM_ID, driver_host)
            run.start()
            run.wait_for(lambda: len(delivered_rows(run.out)) > 200, "rows of the live recording",
                         QUERY_START_TIMEOUT_S, restart=False)
            before_kill = len(delivered_rows(run.out))

            first.kill()  # SIGKILL by PID; its embedded media driver dies with it
            killed_at = time.monotonic()
            time.sleep(DOWN_FOR_S)
            second = Sidecar(archive_dir, control_port=control_port)
            sidecars.append(second.start())
            print(f"archive down for {time.monotonic() - killed_at:.1f} s (SIGKILL to ready again)")
            publisher.wait_until(lambda: len(publisher.recordings()) == 2, "recording anew after the restart", 90)
            new_recording = publisher.recordings()[-1]
            run.wait_for(lambda: any(r == new_recording for r, _, _ in delivered_rows(run.out)),
                         f"rows of the new recording {new_recording}", CATCH_UP_TIMEOUT_S)
            time.sleep(2.0)  # a little more live data
            until.touch()
            publisher.wait_until(publisher.done, "the last message recorded", 90)

            client = ArchiveClient.connect(control_channel=second.control_channel, aeron_dir=second.driver_dir)
            try:
                recorded = recorded_stream(client, fragment, STREAM_ID, "aeron:ipc")
            finally:
                client.close()
            assert sorted(recorded.ranges) == publisher.recordings(), (recorded.ranges, publisher.output())
            run.wait_for(lambda: len(delivered_rows(run.out)) >= len(recorded.messages),
                         f"all {len(recorded.messages)} recorded messages", CATCH_UP_TIMEOUT_S)
            run.stop()
            delivered = delivered_rows(run.out)
            assert_every_row_exactly_once(delivered, recorded)
            for failure in run.failures:  # a failed run names the archive it lost
                assert f"localhost:{control_port}" in failure, failure
            print(f"delivered {len(delivered)} rows exactly once ({before_kill} before the kill) from recordings "
                  f"{recorded.ranges}; query runs: {len(run.queries)}, failures: {run.failures}; driver-side "
                  f"calls made again on a new connection: {sum(len(q.reconnects()) for q in run.queries)}; "
                  f"publisher sequence numbers in no recording (sent to the dead archive): {sequence_gaps(recorded)}; "
                  f"{time.monotonic() - started:.0f} s")
        finally:
            if run is not None:
                run.kill_all()
            if publisher is not None:
                publisher.stop()
            for sidecar in sidecars:
                sidecar.terminate()
                sidecar.kill()
            for sidecar in sidecars:
                print(f"sidecar {sidecar.pid if sidecar.running else '-'} log tail:\n{sidecar.log_tail(30)}")


def test_a_sink_commit_delivers_every_row_once_across_an_archive_sigkill_and_restart(
        scene, tmp_path, monkeypatch):  # noqa: F811 - the imported fixture
    started = time.monotonic()
    driver_host = tmp_path / "spark-host-aeron"
    pause = pause_file_of(scene)
    torn_batch = 2
    with running_driver_process(driver_host):
        monkeypatch.setenv("AERON_DIR", str(driver_host))  # inherited by the query processes only
        scene.layout_args = ("--control-channel", scene.sidecar.control_channel,
                             "--sink-channel", f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}")
        releaser: PauseReleaser | None = None
        try:
            run = scene.start_query("--fault", f"before-marker:{torn_batch}:{pause}", "--read-back")
            run.wait_until(pause.exists, f"the commit of batch {torn_batch} to pause before its marker",
                           PAUSE_TIMEOUT_S)
            hint = scene.checkpoint / "aeron-sink-staging" / scene.sink_id / "_committed.json"
            committed_end = json.loads(hint.read_text())["committed_end"]
            client = connect(scene.sidecar)
            try:  # kill once the paused batch's rows are recorded: the restart recovers them as debris
                recording_id = sink_recording_id(client, scene.sink_id, scene.stream_id)
                settled_recording_position(client, recording_id, beyond=committed_end)
            finally:
                client.close()
            control_port = scene.sidecar.control_port
            scene.sidecar.kill()  # SIGKILL by PID, mid-commit
            killed_at = time.monotonic()
            time.sleep(DOWN_FOR_S)
            scene.sidecar = Sidecar(scene.archive_dir, control_port=control_port).start()
            print(f"archive down for {time.monotonic() - killed_at:.1f} s (SIGKILL to ready again)")
            after_restart = assert_committed_prefix(scene)
            assert after_restart.markers[-1][1].batch_id == torn_batch - 1 and after_restart.after_last_marker > 0
            releaser = PauseReleaser(pause)  # the commit goes on against the restarted archive
            code = run.wait_exit(RUN_TIMEOUT_S)
            releaser.stop()
            final = run
            if code != 0:
                failure = run.line_starting("QUERY FAILED")
                text = "\n".join(run.lines[run.lines.index(failure):]) if failure is not None else ""
                assert f"localhost:{control_port}" in text, run.output()  # the error names the archive
                print("the query failed naming the archive:", text[-1500:])
                final = run_to_the_end(scene)
            else:
                assert run.line_starting("QUERY DONE") is not None, run.output()
                print(f"the query kept going (commit paused {releaser.released} time(s) after the restart)")
            assert torn_batch in final.finished_batches()
            assert_exactly_once(scene, final)
            print(f"sink exactly once across the archive's SIGKILL mid-commit: {time.monotonic() - started:.0f} s")
        finally:
            if releaser is not None:
                releaser.stop()
            scene.stop_all_queries()
