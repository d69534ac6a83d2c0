"""`aeron-archive replicate` without real archives: its arguments (bad ones named, nothing sent),
its progress lines, and a whole run over the scripted fake archive of test_archive_client (signals
as JSON lines, the exit code at REPLICATE_END, a failure, and SIGINT stopping the replication)."""

from __future__ import annotations

import io
import json
import os
import signal
import threading

import pytest
from aeron_spark.archive import codecs
from aeron_spark.archive.cli import main as cli
from aeron_spark.archive.cli import replicate_command
from aeron_spark.archive.cli.output import EXIT_USAGE
from aeron_spark.archive.cli.replicate_command import ReplicationProgress, format_progress
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.codecs import ArchiveErrorCode, RecordingSignal
from aeron_spark.archive.codecs import ControlResponseCode as Code

from tests.unit.archive.client.test_archive_client import SESSION, FakeArchive

REPLICATION_ID = 808
SOURCE = "aeron:udp?endpoint=source-host:8010"
#: No driver, no route lookup: the fake archive is the whole connection.
CONNECTION = ("--control-channel", "aeron:udp?endpoint=replica-host:8010", "--aeron-dir", "/dev/shm/none",
              "--response-channel", "aeron:udp?endpoint=localhost:0", "--timeout", "2")


def run_tool(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def event(kind: RecordingSignal, position: int = 0, recording_id: int = 3) -> codecs.RecordingSignalEvent:
    return codecs.RecordingSignalEvent(SESSION, REPLICATION_ID, recording_id, -1, position, kind)


@pytest.fixture
def destination(monkeypatch: pytest.MonkeyPatch) -> FakeArchive:
    """The destination archive as a scripted fake: `ArchiveClient.connect` returns a client of it;
    the source cannot be reached (the progress lines show the destination only)."""
    archive = FakeArchive()
    archive.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = lambda m: [archive.ok(m, REPLICATION_ID)]
    archive.handlers[codecs.MaxRecordedPositionRequest.TEMPLATE_ID] = lambda m: [archive.ok(m, 4096)]
    connects: list[dict] = []

    def connect(**kw):
        connects.append(kw)
        if len(connects) > 1:
            raise replicate_command.ArchiveError("source unreachable from the test")
        return ArchiveClient(archive, timeout=2.0)
    monkeypatch.setattr(ArchiveClient, "connect", staticmethod(connect))
    archive.connects = connects  # type: ignore[attr-defined]
    return archive


# ---------------------------------------------------------------------------------------------
# arguments

def test_required_arguments_are_named() -> None:
    code, _, err = run_tool("replicate", *CONNECTION, "--recording-id", "1")
    assert code == EXIT_USAGE and "--src-control-channel" in err
    code, _, err = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE)
    assert code == EXIT_USAGE and "--recording-id" in err


@pytest.mark.parametrize(("extra", "named"), [
    (("--recording-id", "-1"), "--recording-id -1 is invalid"),
    (("--recording-id", "1", "--dst-recording-id", "-3"), "--dst-recording-id -3 is invalid"),
    (("--recording-id", "1", "--stop-position", "-2"), "--stop-position -2 is invalid"),
    (("--recording-id", "1", "--file-io-max-length", "0"), "--file-io-max-length 0 is invalid"),
    (("--recording-id", "1", "--until", "merge"), "--until merge needs --live-destination"),
    (("--recording-id", "1", "--until", "later"), "argument --until: invalid choice: 'later'"),
    (("--recording-id", "1", "--progress-interval", "-1"), "expected a number of seconds >= 0, got '-1'"),
])
def test_bad_arguments_are_named_before_anything_is_sent(destination: FakeArchive, extra, named: str) -> None:
    code, out, err = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE, *extra)
    assert code == EXIT_USAGE and out == ""
    assert named in err
    assert destination.connects == []  # type: ignore[attr-defined]


def test_source_credentials_come_from_the_named_environment_variable(destination: FakeArchive,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    destination.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = lambda m: [
        destination.ok(m, REPLICATION_ID), event(RecordingSignal.REPLICATE_END, -1)]
    monkeypatch.delenv("REPLICA_SRC_SECRET", raising=False)
    code, _, err = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE, "--recording-id", "5",
                            "--src-credentials-env", "REPLICA_SRC_SECRET")
    assert code == EXIT_USAGE and "--src-credentials-env REPLICA_SRC_SECRET: that environment variable is not set" in err
    monkeypatch.setenv("REPLICA_SRC_SECRET", "replica:s3cret")
    code, _, err = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE, "--recording-id", "5",
                            "--src-credentials-env", "REPLICA_SRC_SECRET", "--progress-interval", "0")
    assert code == 0, err
    assert destination.of_type(codecs.ReplicateRequest2)[0].encoded_credentials == b"replica:s3cret"
    assert "s3cret" not in err


def test_a_source_channel_that_is_no_aeron_uri_is_named(destination: FakeArchive) -> None:
    code, _, err = run_tool("replicate", *CONNECTION, "--src-control-channel", "source-host:8010",
                            "--recording-id", "1")
    assert code == EXIT_USAGE and "--src-control-channel 'source-host:8010' is invalid" in err


# ---------------------------------------------------------------------------------------------
# progress lines

def test_progress_against_the_source() -> None:
    progress = ReplicationProgress(7, 3, position=1_572_864, start_position=0, source_position=2_097_152,
                                   rate_bytes_per_s=12.5 * 1024 * 1024)
    assert progress.bytes_copied == 1_572_864
    assert format_progress(progress) == \
        "replication 7 -> recording 3: 1.50 MiB copied, position 1572864 of 2097152 (75.0%), 12.50 MiB/s"


def test_progress_of_a_resumed_replica_counts_from_where_it_resumed() -> None:
    progress = ReplicationProgress(7, 3, position=3 * 1024 * 1024, start_position=2 * 1024 * 1024,
                                   source_position=4 * 1024 * 1024, rate_bytes_per_s=0.0)
    assert format_progress(progress) == \
        "replication 7 -> recording 3: 1.00 MiB copied, position 3145728 of 4194304 (50.0%), 0.00 MiB/s"


def test_progress_without_the_source_or_a_recording_yet() -> None:
    progress = ReplicationProgress(7, -1, position=-1, start_position=0, source_position=None, rate_bytes_per_s=0.0)
    assert progress.bytes_copied == 0
    assert format_progress(progress) == \
        "replication 7: 0.00 MiB copied, position 0 (source position unknown), 0.00 MiB/s"


# ---------------------------------------------------------------------------------------------
# a run over the fake destination

def test_a_replication_is_followed_to_its_end(destination: FakeArchive) -> None:
    def replicate(m):
        return [destination.ok(m, REPLICATION_ID), event(RecordingSignal.REPLICATE),
                event(RecordingSignal.EXTEND), event(RecordingSignal.SYNC, 4096),
                event(RecordingSignal.REPLICATE_END, -1), event(RecordingSignal.STOP, 4096)]  # Java's order
    destination.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = replicate

    code, out, err = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE,
                              "--src-control-stream-id", "12", "--recording-id", "5", "--stop-position", "4096",
                              "--replication-channel", "aeron:udp?endpoint=replica-host:0")
    assert code == 0, err
    (sent,) = destination.of_type(codecs.ReplicateRequest2)
    assert (sent.src_recording_id, sent.src_control_channel, sent.src_control_stream_id, sent.stop_position,
            sent.replication_channel, sent.dst_recording_id) == \
        (5, SOURCE, 12, 4096, "aeron:udp?endpoint=replica-host:0", -1)
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0] == {"event": "replication-started", "replicationId": REPLICATION_ID, "srcRecordingId": 5}
    assert [line["signal"] for line in lines[1:-1]] == ["REPLICATE", "EXTEND", "SYNC", "REPLICATE_END", "STOP"]
    assert lines[-1]["event"] == "replicated" and lines[-1]["dstRecordingId"] == 3
    assert (lines[-1]["position"], lines[-1]["endedWith"], lines[-1]["stopped"]) == (4096, "REPLICATE_END", False)
    assert "does not answer this host" in err  # the source's position is unknown here


def test_until_sync_returns_at_sync(destination: FakeArchive) -> None:
    destination.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = lambda m: [
        destination.ok(m, REPLICATION_ID), event(RecordingSignal.REPLICATE), event(RecordingSignal.EXTEND),
        event(RecordingSignal.SYNC, 4096)]
    code, out, _ = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE, "--recording-id", "5",
                            "--until", "sync", "--progress-interval", "0")
    assert code == 0
    assert json.loads(out.splitlines()[-1])["endedWith"] == "SYNC"


def test_a_failed_replication_exits_1_with_the_archive_message(destination: FakeArchive) -> None:
    destination.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = lambda m: [
        destination.ok(m, REPLICATION_ID), event(RecordingSignal.REPLICATE),
        codecs.ControlResponse(SESSION, REPLICATION_ID, ArchiveErrorCode.REPLICATION_CONNECTION_FAILURE, Code.ERROR,
                               destination.version, "failed to connect to source archive"),
        event(RecordingSignal.REPLICATE_END, -1)]
    code, out, err = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE, "--recording-id", "5",
                              "--progress-interval", "0")
    assert code == 1
    assert "REPLICATION_CONNECTION_FAILURE" in err and "failed to connect to source archive" in err
    assert [json.loads(line).get("signal") for line in out.splitlines()] == [None, "REPLICATE", "REPLICATE_END"]


def test_sigint_stops_the_replication_and_exits_130(destination: FakeArchive) -> None:
    destination.handlers[codecs.ReplicateRequest2.TEMPLATE_ID] = lambda m: [
        destination.ok(m, REPLICATION_ID), event(RecordingSignal.REPLICATE), event(RecordingSignal.EXTEND)]
    destination.handlers[codecs.StopReplicationRequest.TEMPLATE_ID] = lambda m: [
        destination.ok(m), event(RecordingSignal.STOP, 2048), event(RecordingSignal.REPLICATE_END, -1)]
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    previous = signal.getsignal(signal.SIGINT)
    timer.start()
    try:
        code, out, err = run_tool("replicate", *CONNECTION, "--src-control-channel", SOURCE, "--recording-id", "5",
                                  "--progress-interval", "0.05")
    finally:
        timer.cancel()
    assert code == replicate_command.EXIT_INTERRUPTED == 130
    assert signal.getsignal(signal.SIGINT) is previous  # the command's handler is gone again
    (stop,) = destination.of_type(codecs.StopReplicationRequest)
    assert stop.replication_id == REPLICATION_ID
    assert "interrupted: stopping replication 808" in err
    assert "replication 808 -> recording 3:" in err  # progress lines while it ran
    last = json.loads(out.splitlines()[-1])
    assert (last["signals"], last["stopped"], last["endedWith"]) == \
        (["REPLICATE", "EXTEND", "STOP", "REPLICATE_END"], True, "REPLICATE_END")
