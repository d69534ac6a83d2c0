"""`aeron-archive serve`'s options as issue 4 names them, with Aeron's defaults, and its help."""

from __future__ import annotations

import io
from pathlib import Path

import pytest


pytestmark = pytest.mark.timeout(120)


def test_serve_options_and_their_defaults(tmp_path: Path):
    """`aeron-archive serve`'s options as issue 4 names them, with Aeron's defaults."""
    from aeron_spark.archive.cli import serve_command
    from aeron_spark.archive.cli import main as tool

    args = tool.build_parser().parse_args(["serve", "--dir", str(tmp_path)])
    options = serve_command.options_from_args(args)
    assert (options.control_channel, options.control_stream_id) == ("aeron:udp?endpoint=localhost:8010", 10)
    assert (options.local_control_channel, options.local_control_stream_id) == ("aeron:ipc", 11)
    assert options.recording_events_channel is None  # off by default
    assert options.aeron_dir is None  # an embedded driver
    assert (options.file_sync, options.checksum, options.archive_id) == (0, None, None)
    assert options.replay_checksum is None
    assert options.replay_buffer_length == 1024 * 1024 and options.connect_timeout_ms == 5_000
    assert options.segment_file_length == 128 * 1024 * 1024 and options.authenticator is None
    assert (options.idle_strategy, options.recorder_idle_strategy, options.replayer_idle_strategy) == \
        ("backoff", None, None)
    yielding = tool.build_parser().parse_args(["serve", "--dir", str(tmp_path), "--recorder-idle-strategy",
                                               "org.agrona.concurrent.YieldingIdleStrategy"])
    assert serve_command.options_from_args(yielding).recorder_idle_strategy == "yield"
    out = io.StringIO()
    assert tool.main(["serve", "--help"], stdout=out) == 0
    for option in ("--dir", "--aeron-dir", "--control-channel", "--control-stream-id",
                   "--local-control-channel", "--recording-events-channel", "--archive-id",
                   "--segment-length", "--file-sync", "--checksum", "--replay-checksum",
                   "--replay-buffer-length", "--auth-credentials-file"):
        assert option in out.getvalue(), option
    err = io.StringIO()
    assert tool.main(["serve", "--dir", str(tmp_path), "--file-sync", "3"], stderr=err) == 2
    assert "--file-sync" in err.getvalue()


def test_replication_channels_are_serve_options(tmp_path: Path):
    """Where a source archive replays to and answers while this archive replicates: UDP only."""
    from aeron_spark.archive.cli import serve_command
    from aeron_spark.archive.cli import main as tool

    defaults = serve_command.options_from_args(tool.build_parser().parse_args(["serve", "--dir", str(tmp_path)]))
    assert defaults.replication_channel == defaults.replication_response_channel == "aeron:udp?endpoint=localhost:0"
    args = tool.build_parser().parse_args([
        "serve", "--dir", str(tmp_path), "--replication-channel", "aeron:udp?endpoint=10.0.0.5:0",
        "--replication-response-channel", "aeron:udp?endpoint=10.0.0.5:0"])
    options = serve_command.options_from_args(args)
    assert options.replication_channel == options.replication_response_channel == "aeron:udp?endpoint=10.0.0.5:0"
    errors = io.StringIO()
    assert tool.main(["serve", "--dir", str(tmp_path), "--replication-channel", "aeron:ipc"], stderr=errors) == 2
    assert "--replication-channel" in errors.getvalue() and "UDP channel" in errors.getvalue()
