"""format("aeron-archive-jvm") in Spark's real-time mode (and as a micro-batch source) over real
archives: our sidecar and the real Java archive 1.51. Each query runs in a process of its own
(tests/support/jvm_query_process.py: a Spark session with our jar and aeron-all on spark.jars),
stopped or killed by PID; the sidecar, the Java archive and the publishers are stopped by PID too."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from aeron_spark.archive.client import ArchiveClient
from tests.support.jvm_module import JvmModule
from tests.support.jvm_query_process import JvmQuery, delivered_rows
from tests.support.jvm_sink_query_process import JvmSinkQuery
from tests.support.live_publisher import LivePublisher, sequence_of
from tests.support.ports import free_udp_port
from tests.support.recorded_stream import recorded
from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

STREAM_ID = 4401
MESSAGES = 400
RATE = 200.0


def publish(sidecar: Sidecar, channel: str, messages: int, rate: float = RATE, *extra: str) -> LivePublisher:
    return LivePublisher((), "--channel", channel, "--stream-id", str(STREAM_ID), "--messages", str(messages),
                         "--rate", str(rate), "--control-channel", sidecar.control_channel,
                         "--aeron-dir", sidecar.driver_dir, *extra)


def query_settings(jvm_module: JvmModule, work: Path, options: dict[str, str], trigger: dict) -> dict:
    return {"jars": jvm_module.spark_jars, "options": options, "trigger": trigger,
            "checkpoint": str(work / "checkpoint"), "out": str(work / "out"), "stop_file": str(work / "stop")}


def sequences(rows: dict[str, list[tuple[int, int, bytes]]]) -> list[int]:
    return [sequence_of(payload) for file_rows in rows.values() for _, _, payload in file_rows]


def assert_in_order(rows: dict[str, list[tuple[int, int, bytes]]]) -> None:
    """Within each task's file: positions and sequence numbers strictly increase."""
    for name, file_rows in rows.items():
        positions = [position for _, position, _ in file_rows]
        assert positions == sorted(set(positions)), f"{name}: positions out of order or repeated"
        numbers = [sequence_of(payload) for _, _, payload in file_rows]
        assert numbers == sorted(set(numbers)), f"{name}: messages out of order or repeated"


@pytest.mark.parametrize("connection", ["udp", "udp-aeron-host", "response-channel"])
def test_real_time_query_over_live_sidecar_recording_delivers_every_message_in_order(
        sidecar: Sidecar, jvm_module: JvmModule, tmp_path: Path, connection: str) -> None:
    """``response-channel``: archive.responseChannel with control-mode=response, so the control session
    and every replay come over connections the query opens (no port of its own told to the archive).
    ``udp-aeron-host``: replays bind aeron.bindAddress (the wildcard) and the archive is told aeron.host."""
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    publisher = publish(sidecar, channel, MESSAGES)
    query = None
    options = {"archive.controlChannel": sidecar.control_channel, "channel": channel, "streamId": str(STREAM_ID),
               "startingPositions": "earliest"}
    if connection == "udp-aeron-host":
        options |= {"aeron.host": "127.0.0.1", "aeron.bindAddress": "0.0.0.0"}
    if connection == "response-channel":
        options["archive.responseChannel"] = f"aeron:udp?control-mode=response|control=localhost:{free_udp_port()}"
    try:
        publisher.wait_until(lambda: publisher.recordings(), "the recording started", 30)
        query = JvmQuery(query_settings(jvm_module, tmp_path, options, {"realTime": "5 seconds"}))
        publisher.wait_until(publisher.done, "every message published and recorded", 120)
        query.wait_for(lambda: len(sequences(delivered_rows(tmp_path / "out"))) >= MESSAGES,
                       f"{MESSAGES} rows", 120)
        query.stop()
        rows = delivered_rows(tmp_path / "out")
        assert sorted(sequences(rows)) == list(range(MESSAGES))
        assert_in_order(rows)
        assert query.failure() is None, query.output()
    finally:
        if query is not None:
            query.kill()
        publisher.stop()


def test_option_errors_name_the_option_and_an_unreachable_archive_fails_within_the_timeout(
        sidecar: Sidecar, jvm_module: JvmModule, tmp_path: Path) -> None:
    from tests.support.jvm_query_process import probe_results

    control = sidecar.control_channel
    nobody = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    probes = [
        {"archive.controlChannel": control, "chanel": "aeron:udp", "streamId": "1"},
        {"archive.controlChannel": control, "channel": "aeron:udp", "streamId": "x"},
        {"archive.controlChannel": control, "recordingIds": "1", "maxBytesPerTrigger": "lots"},
        {"archive.controlChannel": control, "recordingIds": "1", "startingPositions": "soon"},
        {"archive.controlChannel": control, "channel": "aeron:udp"},
        {"archive.controlChannel": "tcp://host", "recordingIds": "1"},
        {"archive.controlChannel": nobody, "recordingIds": "1", "archive.timeoutMs": "2000"},
        {"archive.controlChannel": control, "recordingIds": "1", "aeron.host": "two words"},
    ]
    settings = query_settings(jvm_module, tmp_path, {}, {}) | {"probes": probes}
    query = JvmQuery(settings)
    try:
        assert query.process.wait(300) == 0, query.output()
    finally:
        query.kill()
    results = probe_results(query.lines)
    assert len(results) == len(probes), query.output()
    errors = [result["error"] or "" for result in results]
    assert "unknown option 'chanel' for format aeron-archive-jvm. Did you mean 'channel' or 'channelPattern'?" in errors[0]
    assert "option streamId='x' is not valid; accepted: " in errors[1]
    assert "option maxBytesPerTrigger='lots' is not valid; accepted: a size > 0" in errors[2]
    assert "option startingPositions='soon' is not valid; accepted: earliest | latest" in errors[3]
    assert "option channel needs streamId too" in errors[4]
    assert "option archive.controlChannel='tcp://host' is not an Aeron channel" in errors[5]
    unreachable = results[6]
    assert f"archive.controlChannel={nobody}" in errors[6] and "archive.timeoutMs=2000" in errors[6], errors[6]
    # start() to the failure: the 2 s connect timeout plus the query's own start on a busy machine
    assert unreachable["seconds"] < 2.0 + 10.0, unreachable
    assert "option aeron.host='two words' is not valid; accepted: a host name or IP address of this host" in errors[7]


def test_micro_batches_capped_by_max_bytes_per_trigger_report_lag_metrics(
        sidecar: Sidecar, jvm_module: JvmModule, tmp_path: Path) -> None:
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    messages = 300
    term_length = 64 * 1024  # the smallest: the cap's rounding to term boundaries shows at this size
    publisher = publish(sidecar, f"{channel}|term-length={term_length}", messages, 2000.0)
    try:
        publisher.wait_until(publisher.done, "every message published and recorded", 120)
    finally:
        publisher.stop()
    cap = 32 * 1024
    query = JvmQuery(query_settings(jvm_module, tmp_path, {
        "archive.controlChannel": sidecar.control_channel, "channel": channel, "streamId": str(STREAM_ID),
        "startingPositions": "earliest", "maxBytesPerTrigger": "32k"}, {"processingTime": "200 milliseconds"}))
    try:
        def caught_up() -> bool:
            progress = [p for p in query.progress() if p["metrics"]]
            return bool(progress) and progress[-1]["metrics"].get("maxOffsetsBehindLatest") == "0" and \
                len(sequences(delivered_rows(tmp_path / "out"))) >= messages
        query.wait_for(caught_up, "every row read and no lag left", 180)
        query.stop()
    finally:
        query.kill()
    rows = delivered_rows(tmp_path / "out")
    assert sorted(sequences(rows)) == list(range(messages))  # each exactly once
    assert_in_order(rows)
    progress = [p for p in query.progress() if p["numInputRows"] > 0]
    assert len(progress) >= 3, progress  # the cap split the backlog into several batches
    ends = [max(int(position) for position in json_offset(p["endOffset"]).values()) for p in progress]
    # a capped end is rounded down to a term boundary, or is one step when the cap is below a term
    steps = [later - earlier for earlier, later in zip(ends, ends[1:])]
    assert all(step <= max(cap, term_length) for step in steps), steps
    lag = [int(p["metrics"]["maxOffsetsBehindLatest"]) for p in progress]
    assert lag[0] > 0 and lag[-1] == 0, lag
    assert {"avgOffsetsBehindLatest", "minOffsetsBehindLatest"} <= set(progress[0]["metrics"])


def json_offset(offset: str | dict) -> dict[str, int]:
    return offset if isinstance(offset, dict) else json.loads(offset)


@pytest.mark.interop
def test_real_time_query_over_the_java_archive_follows_live_recordings_and_discovers_new_ones(
        jvm_module: JvmModule, tmp_path: Path) -> None:
    """The real Java archive 1.51 (own Java media driver, reached by its control channel only): one
    recording exists when the query starts, a second (another publisher session on the channel)
    starts while it runs and is discovered at the next real-time batch. Messages of 1500 bytes are
    fragmented (mtu 1408)."""
    import threading

    from tests.interop.peer.modern_peer import ensure_modern_peer_built, running_modern_java_archive

    channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    first, second, size = 100, 200, 1500
    with running_modern_java_archive(ensure_modern_peer_built(), tmp_path / "java") as java:
        java.client.start_recording(channel, STREAM_ID)
        java.client.publish(channel, STREAM_ID, first, size, fragmented=True)
        query = JvmQuery(query_settings(jvm_module, tmp_path, {
            "archive.controlChannel": java.control_channel, "channel": channel, "streamId": str(STREAM_ID),
            "startingPositions": "earliest"}, {"realTime": "5 seconds"}))
        try:
            query.wait_for(lambda: len(sequences(delivered_rows(tmp_path / "out"))) >= first, "the first recording", 120)
            publishing = threading.Thread(target=java.client.publish, args=(channel, STREAM_ID, second, size),
                                          kwargs={"first_index": first, "fragmented": True})
            publishing.start()
            query.wait_for(lambda: len(sequences(delivered_rows(tmp_path / "out"))) >= first + second,
                           "the second recording", 120)
            publishing.join(60)
            query.stop()
        finally:
            query.kill()
    rows = delivered_rows(tmp_path / "out")
    assert sorted(sequences(rows)) == list(range(first + second))
    assert_in_order(rows)
    assert {len(payload) for file_rows in rows.values() for _, _, payload in file_rows} == {size}
    assert len({recording for file_rows in rows.values() for recording, _, _ in file_rows}) == 2


def committed_positions(checkpoint: Path) -> tuple[int, dict[int, int]]:
    """The last committed batch id and its end offset (the offset log entry of that batch)."""
    commits = [int(path.name) for path in (checkpoint / "commits").iterdir() if path.name.isdigit()]
    assert commits, "no batch was committed before the kill"
    batch = max(commits)
    offset = (checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1]
    return batch, {int(recording): position for recording, position in json.loads(offset).items()}


SINK_STREAM_ID = 4402
#: What real-time mode into our JVM sink needs (docs/exactly-once.md): the allowlist check off, and the
#: override of async progress tracking's sink check on the writeStream.
REAL_TIME_CONF = {"spark.sql.streaming.realTimeMode.allowlistCheck": "false"}
REAL_TIME_SINK_OPTIONS = {"_asyncProgressTrackingOverrideSinkSupportCheck": "true"}
#: A real-time batch's length in the kill test; the kill lands at most KILL_WINDOW_S after a commit.
KILL_BATCH_S = 5
KILL_WINDOW_S = 2.5


def sink_rows(archive: ArchiveClient) -> dict[int, dict[tuple[int, int], int]]:
    """The kill test's output, read back from the sink's recordings: per run, (source recording,
    position) -> sequence number, in the order recorded (a key seen twice in one run would fail)."""
    runs: dict[int, dict[tuple[int, int], int]] = {}
    for messages in recorded(archive, SINK_STREAM_ID).values():
        for message in messages:
            run, recording, position, payload = message.decode().split(":")
            rows = runs.setdefault(int(run), {})
            key = (int(recording), int(position))
            assert key not in rows, f"run {run} wrote {key} twice"
            rows[key] = sequence_of(bytes.fromhex(payload))
    return runs


def last_commit_age_s(checkpoint: Path) -> float:
    commits = [path for path in (checkpoint / "commits").iterdir() if path.name.isdigit()]
    return time.time() - max(path.stat().st_mtime for path in commits) if commits else float("inf")


def test_killed_real_time_query_restarts_from_its_checkpoint_without_loss(
        sidecar: Sidecar, archive: ArchiveClient, jvm_module: JvmModule, tmp_path: Path) -> None:
    """Source -> JVM sink in real-time mode (rows reach the sink's recording as they arrive), SIGKILL
    of the whole query process tree in the middle of a real-time batch, after rows of that batch were
    recorded, then a restart from the checkpoint: every message arrives; the rows delivered twice are
    exactly the first run's rows after the last committed batch's end, and there are some."""
    channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    until = tmp_path / "stop-publishing"  # the publisher runs until both runs of the query are under way
    publisher = publish(sidecar, channel, 1_000_000, 100.0, "--until-file", str(until))
    checkpoint = tmp_path / "checkpoint"

    def run_settings(run: int) -> dict:
        return {"jars": jvm_module.spark_jars, "conf": REAL_TIME_CONF, "trigger": {"realTime": f"{KILL_BATCH_S} seconds"},
                "checkpoint": str(checkpoint), "stop_file": str(tmp_path / f"stop-{run}"),
                "source": {"format": "aeron-archive-jvm", "options": {
                    "archive.controlChannel": sidecar.control_channel, "channel": channel,
                    "streamId": str(STREAM_ID), "startingPositions": "earliest"}},
                # The run, then the input row's key and payload: duplicates are told apart per run.
                "select": [f"CONCAT('{run}:', CAST(recording_id AS STRING), ':', CAST(position AS STRING), ':', "
                           "hex(payload)) AS value"],
                "sink": {"archive.controlChannel": sidecar.control_channel, "streamId": str(SINK_STREAM_ID),
                         "channel": f"aeron:udp?endpoint=localhost:{free_udp_port()}", **REAL_TIME_SINK_OPTIONS}}

    def mid_batch_rows_recorded() -> bool:
        """Rows of the running batch (after the last commit's end) are in the sink's recording, and
        the batch has most of its length still to run (so no commit lands before the kill)."""
        if len(first.progress()) < 2 or last_commit_age_s(checkpoint) > KILL_WINDOW_S:
            return False
        _, committed = committed_positions(checkpoint)
        if last_commit_age_s(checkpoint) > KILL_WINDOW_S:
            return False
        return any(position > committed.get(recording, -1)
                   for recording, position in sink_rows(archive).get(1, {}))

    first = second = None
    try:
        publisher.wait_until(lambda: publisher.recordings(), "the recording started", 30)
        first = JvmSinkQuery(run_settings(1))
        first.wait_for(mid_batch_rows_recorded, "rows of an uncommitted batch in the sink's recording", 180)
        first.kill()
        committed_batch, committed = committed_positions(checkpoint)
        second = JvmSinkQuery(run_settings(2))
        second.wait_for(lambda: len(second.progress()) >= 1, "a batch of the restarted query", 120)
        until.touch()
        publisher.wait_until(publisher.done, "every message published and recorded", 120)
        messages = int(next(line for line in publisher.lines if line.startswith("SENT ALL")).split()[2])

        def everything_delivered() -> bool:
            runs = sink_rows(archive)
            return {n for rows in runs.values() for n in rows.values()} >= set(range(messages))

        second.wait_for(everything_delivered, "every message delivered", 180)
        second.stop()
        assert second.failure() is None, second.output()
    finally:
        for query in (first, second):
            if query is not None:
                query.kill()
        publisher.stop()
    runs = sink_rows(archive)
    run_1, run_2 = runs.get(1, {}), runs.get(2, {})
    assert set(run_1.values()) | set(run_2.values()) == set(range(messages))  # nothing lost
    duplicates = set(run_1) & set(run_2)
    after_commit = {key for key in run_1 if key[1] > committed.get(key[0], -1)}
    assert duplicates == after_commit, (committed_batch, committed, len(duplicates), len(after_commit))
    assert duplicates, "the kill landed mid-batch after rows of it were recorded: some rows are delivered again"
    assert all(position > committed.get(recording, -1) for recording, position in run_2), "re-read a committed row"
    assert sorted(run_2) == list(run_2), "the restarted run wrote out of order"
    print(f"kill after batch {committed_batch}: {len(run_1)} rows in run 1, {len(duplicates)} delivered again")


def embedded_driver_dirs() -> set[str]:
    """The media driver directories AeronConnections launched (one per JVM: <aeron default>-spark-<pid>)."""
    from glob import glob
    return {path for path in glob("/dev/shm/aeron-*-spark-*")}


@pytest.mark.cluster
def test_real_time_query_on_a_local_cluster_each_executor_on_its_own_media_driver(
        sidecar: Sidecar, jvm_module: JvmModule, tmp_path: Path) -> None:
    """local-cluster[2,1,1024]: two executor JVMs, each launching an embedded Java media driver of its
    own (no AERON_DIR), two recordings (channelPattern over two channels) read at once, one per core."""
    ports = [free_udp_port(), free_udp_port()]
    channels = [f"aeron:udp?endpoint=localhost:{port}" for port in ports]
    per_channel = 200
    before = embedded_driver_dirs()
    publishers = [publish(sidecar, channel, per_channel, 100.0) for channel in channels]
    query = None
    try:
        for publisher in publishers:
            publisher.wait_until(lambda p=publisher: p.recordings(), "the recording started", 30)
        pattern = f"localhost:({ports[0]}|{ports[1]})$"
        settings = query_settings(jvm_module, tmp_path, {
            "archive.controlChannel": sidecar.control_channel, "channelPattern": pattern,
            "streamId": str(STREAM_ID), "startingPositions": "earliest"}, {"realTime": "5 seconds"})
        query = JvmQuery(settings | {"master": "local-cluster[2,1,1024]",
                                     "conf": {"spark.executor.memory": "768m", "spark.task.maxFailures": "1"}})
        query.wait_for(lambda: len(sequences(delivered_rows(tmp_path / "out"))) >= 2 * per_channel,
                       f"{2 * per_channel} rows", 240)
        drivers = embedded_driver_dirs() - before
        query.stop()
    finally:
        if query is not None:
            query.kill()
        for publisher in publishers:
            publisher.stop()
    rows = delivered_rows(tmp_path / "out")
    assert_in_order(rows)
    assert sorted(sequences(rows)) == sorted(list(range(per_channel)) * 2)
    assert len({recording for file_rows in rows.values() for recording, _, _ in file_rows}) == 2
    assert len(drivers) >= 3, drivers  # the Spark driver's and one per executor


@pytest.mark.interop
@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_recording_purged_under_a_running_real_time_query_follows_fail_on_data_loss(
        jvm_module: JvmModule, tmp_path: Path, fail_on_data_loss: str) -> None:
    """The real Java archive purges a recording the running query reads: with failOnDataLoss=true the
    query fails naming the recording and the option; with false it warns and goes on."""
    from tests.interop.peer.modern_peer import ensure_modern_peer_built, running_modern_java_archive

    channel = f"aeron:udp?endpoint=localhost:{free_udp_port()}"
    with running_modern_java_archive(ensure_modern_peer_built(), tmp_path / "java") as java:
        recorded = java.client.record(channel, STREAM_ID, 200, 256)
        query = JvmQuery(query_settings(jvm_module, tmp_path, {
            "archive.controlChannel": java.control_channel, "recordingIds": str(recorded.recording_id),
            "startingPositions": "earliest", "failOnDataLoss": fail_on_data_loss}, {"realTime": "5 seconds"}))
        try:
            query.wait_for(lambda: len(sequences(delivered_rows(tmp_path / "out"))) >= 200, "the recording read", 120)
            java.client.purge(recorded.recording_id)
            batches_at_purge = len(query.progress())
            if fail_on_data_loss == "true":
                query.wait_for(lambda: query.failure() is not None, "the query failing", 120)
                failure = query.failure() or ""
                assert f"recording {recorded.recording_id} is no longer in the archive" in failure, failure
                assert "failOnDataLoss=false" in failure, failure
            else:
                query.wait_for(lambda: len(query.progress()) >= batches_at_purge + 2, "two more batches", 120)
                assert query.failure() is None, query.output()
                query.stop()
        finally:
            query.kill()


def test_credentials_log_in_to_a_sidecar_with_authentication(jvm_module: JvmModule, tmp_path: Path) -> None:
    """archive.credentials against a sidecar that answers with an HMAC challenge
    (--auth-challenge-only): the right secret runs, a wrong one fails naming the archive, and no
    message shows either secret."""
    from tests.support.jvm_query_process import probe_results

    principal, secret, wrong = "rt-reader", "rt-canary-secret-5521", "rt-wrong-secret-7730"
    server_file = tmp_path / "archive.credentials"
    server_file.write_text(f"{principal}:{secret}\n")
    with running_sidecar(tmp_path / "archive", ["--auth-credentials-file", str(server_file),
                                                "--auth-challenge-only"]) as secured:
        probes = [{"archive.controlChannel": secured.control_channel, "recordingIds": "0",
                   "archive.credentials": f"{principal}:{credentials}", "archive.timeoutMs": "3000"}
                  for credentials in (secret, wrong)]
        query = JvmQuery(query_settings(jvm_module, tmp_path, {}, {}) | {"probes": probes, "probe_timeout_s": 8})
        try:
            assert query.process.wait(300) == 0, query.output()
        finally:
            query.kill()
    right, wrong_result = probe_results(query.lines)
    assert right["error"] is None, right
    assert "could not connect to the Aeron archive at archive.controlChannel=" in (wrong_result["error"] or ""), \
        wrong_result
    assert secret not in query.output(10_000) and wrong not in query.output(10_000)
