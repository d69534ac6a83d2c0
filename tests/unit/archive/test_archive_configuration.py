"""`aeron_spark.archive.configuration`: the one home of the sidecar's and the client's defaults.

Every reader (serve's argparse defaults and help, ArchiveServiceOptions, ConductorSettings, the
client's connect) takes them from there, and the module stays pure (no project imports, no I/O).
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.cli import main as cli
from aeron_spark.archive.cli.output import ToolError
from aeron_spark.archive.cli.serve_command import options_from_args
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.archive.service.archive_service import ArchiveServiceOptions
from aeron_spark.archive.service.conductor_settings import ConductorSettings


def test_the_module_imports_nothing_of_the_project() -> None:
    probe = ("import sys, aeron_spark.archive.configuration; "
             "print(sorted(m for m in sys.modules if m.startswith('aeron_spark')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['aeron_spark', 'aeron_spark.archive', 'aeron_spark.archive.configuration']"


@pytest.mark.parametrize(("length", "text"), [
    (128 * 1024 * 1024, "128m"), (64 * 1024, "64k"), (1024 ** 3, "1g"), (1536, "1536"), (3 * 1024 * 1024, "3m")])
def test_byte_length_text(length: int, text: str) -> None:
    assert defaults.byte_length_text(length) == text


def test_service_options_and_conductor_settings_default_to_the_configuration() -> None:
    options = ArchiveServiceOptions(archive_dir=Path("."))
    assert (options.control_channel, options.control_stream_id) == (
        defaults.DEFAULT_CONTROL_CHANNEL, defaults.DEFAULT_CONTROL_STREAM_ID)
    assert (options.local_control_channel, options.local_control_stream_id) == (
        defaults.DEFAULT_LOCAL_CONTROL_CHANNEL, defaults.DEFAULT_LOCAL_CONTROL_STREAM_ID)
    assert options.segment_file_length == defaults.DEFAULT_SEGMENT_LENGTH == 128 * 1024 * 1024
    assert options.replay_buffer_length == defaults.DEFAULT_REPLAY_BUFFER_LENGTH
    assert options.connect_timeout_ms == defaults.DEFAULT_CONNECT_TIMEOUT_MS
    assert options.idle_strategy == defaults.DEFAULT_IDLE_STRATEGY
    settings = ConductorSettings(options, archive_id=1)  # derived from the options: no defaults of its own
    for name in ("segment_file_length", "file_sync", "replay_buffer_length", "max_concurrent_recordings",
                 "max_concurrent_replays", "connect_timeout_ms", "session_idle_timeout_ms"):
        assert getattr(settings, name) == getattr(options, name), name


def test_serve_without_options_gives_the_service_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AERON_ARCHIVE_IDLE_STRATEGY", "AERON_ARCHIVE_RECORDER_IDLE_STRATEGY",
                     "AERON_ARCHIVE_REPLAYER_IDLE_STRATEGY"):
        monkeypatch.delenv(variable, raising=False)
    args = cli.build_parser().parse_args(["serve", "--dir", str(tmp_path)])
    from_cli = options_from_args(args)
    assert from_cli == dataclasses.replace(ArchiveServiceOptions(archive_dir=tmp_path), archive_dir=tmp_path)


def test_serve_help_states_the_defaults_from_the_configuration() -> None:
    out = io.StringIO()
    assert cli.main(["serve", "--help"], stdout=out, stderr=io.StringIO()) == 0
    text = " ".join(out.getvalue().split())
    assert f"default {defaults.DEFAULT_CONTROL_CHANNEL}" in text
    assert "(default 128m)" in text and "[64k, 1g]" in text
    assert f"default {defaults.DEFAULT_CONNECT_TIMEOUT_MS}" in text


def test_segment_lengths_take_k_m_and_g_and_the_bounds_come_from_the_configuration(tmp_path: Path) -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["serve", "--dir", str(tmp_path), "--segment-length", "1g"])
    assert args.segment_length == defaults.MAX_SEGMENT_LENGTH
    too_short = parser.parse_args(["serve", "--dir", str(tmp_path), "--segment-length", "32k"])
    with pytest.raises(ToolError, match=r"--segment-length 32768 must be in \[64k, 1g\]"):
        options_from_args(too_short)


def test_the_client_connects_with_the_configuration_defaults() -> None:
    parameters = inspect.signature(ArchiveClient.connect).parameters
    assert parameters["control_channel"].default == defaults.DEFAULT_CONTROL_CHANNEL
    assert parameters["control_stream_id"].default == defaults.DEFAULT_CONTROL_STREAM_ID
    assert parameters["response_channel"].default == defaults.DEFAULT_RESPONSE_CHANNEL
    assert parameters["response_stream_id"].default == defaults.DEFAULT_RESPONSE_STREAM_ID
    assert parameters["timeout"].default == defaults.DEFAULT_TIMEOUT_S


def test_the_sessions_and_storage_default_to_the_configuration() -> None:
    from aeron_spark.archive.cli.sidecar_process import SidecarProcess
    from aeron_spark.archive.service.control_session import ControlSession
    from aeron_spark.archive.service.recording_session import RecordingSession
    from aeron_spark.archive.service.replay_plan import plan_replay
    from aeron_spark.archive.service.replay_session import ReplaySession
    from aeron_spark.archive.storage.catalog import Catalog
    from aeron_spark.archive.storage.segment import default_direct_io

    def default(function: Callable[..., object], name: str) -> object:
        return inspect.signature(function).parameters[name].default

    control = ControlSession
    assert default(control, "connect_timeout_ms") == defaults.DEFAULT_CONNECT_TIMEOUT_MS
    assert default(control, "liveness_check_interval_ms") == defaults.DEFAULT_SESSION_LIVENESS_CHECK_INTERVAL_MS
    assert default(control, "idle_timeout_ms") == defaults.DEFAULT_SESSION_IDLE_TIMEOUT_MS
    assert default(ReplaySession, "connect_timeout_ns") == defaults.DEFAULT_CONNECT_TIMEOUT_MS * 1_000_000
    assert default(ReplaySession, "replay_buffer_length") == defaults.DEFAULT_REPLAY_BUFFER_LENGTH
    assert default(plan_replay, "replay_buffer_length") == defaults.DEFAULT_REPLAY_BUFFER_LENGTH
    assert default(RecordingSession, "file_io_max_length") == defaults.DEFAULT_FILE_IO_MAX_LENGTH
    assert default(Catalog.open, "file_sync") == defaults.DEFAULT_CATALOG_FILE_SYNC
    assert default_direct_io() is defaults.DEFAULT_SEGMENT_DIRECT_IO
    assert default(SidecarProcess.start, "timeout_s") == defaults.DEFAULT_SIDECAR_START_TIMEOUT_S
    assert default(SidecarProcess.stop, "grace_s") == defaults.DEFAULT_SIDECAR_STOP_GRACE_S


@pytest.mark.parametrize("level", [-1, 3])
def test_a_file_sync_level_outside_the_configured_ones_is_refused_naming_them(tmp_path: Path, level: int) -> None:
    from aeron_spark.archive.storage.catalog import Catalog

    with pytest.raises(ValueError, match=r"file_sync must be one of \(0, 1, 2\)"):
        Catalog.open(tmp_path, file_sync=level)
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["serve", "--dir", str(tmp_path), "--file-sync", str(level)])
