"""Threading modes and the low-storage threshold, below the process: the mode's name and refusals,
one shared runner driving a conductor-like agent and a session agent, the options' checks, the
serve options, the mark file's aeron-spark area, and StartRecording/ExtendRecording against the
configured threshold."""

from __future__ import annotations

import dataclasses
import io
import struct
import threading
import time
from pathlib import Path

import pytest

from aeron_spark.archive import configuration as defaults
from aeron_spark.archive.cli import main as cli
from aeron_spark.archive.cli.serve_command import options_from_args
from aeron_spark.archive.codecs import ArchiveErrorCode, ExtendRecordingRequest, SourceLocation
from aeron_spark.archive.codecs.mark_file_layout import EXTENSION_OFFSET, MARK_FILE_NAME
from aeron_spark.archive.service.agent_runner import AgentRunner, threading_mode_name
from aeron_spark.archive.service.archive_service import ArchiveServiceOptions
from aeron_spark.archive.storage import segment
from aeron_spark.archive.storage.mark_file import ArchiveMarkFile, read_mark_file

from tests.unit.archive.service.request_handler_parts import (
    CONTROL_SESSION_ID, STREAM_ID, UDP_CHANNEL, opened_handlers, refused)
from tests.unit.archive.service.test_agent_runner import _CountingAgent, _Session
from tests.unit.archive.service.test_recording_requests import start
from tests.unit.archive.storage.test_maintenance import make_recording

MARK_SETTINGS = dict(archive_id=7, control_channel="aeron:udp?endpoint=localhost:8010", control_stream_id=10,
                     local_control_channel="aeron:ipc", local_control_stream_id=11,
                     events_channel="", events_stream_id=30, aeron_directory="/dev/shm/aeron-x")


@pytest.mark.parametrize(("text", "expected"), [("dedicated", "dedicated"), ("SHARED", "shared"),
                                                ("Dedicated ", "dedicated")])
def test_threading_modes_by_name_in_any_case(text: str, expected: str) -> None:
    assert threading_mode_name(text) == expected


def test_invoker_and_unknown_modes_are_refused_naming_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match="INVOKER.*not supported.*expected dedicated or shared"):
        threading_mode_name("invoker")
    with pytest.raises(ValueError, match="unknown threading mode 'pooled': expected dedicated or shared"):
        threading_mode_name("pooled")


class _Handing:
    """A conductor-like agent (never dormant) that hands a session to the session agent once."""

    def __init__(self, target: _CountingAgent) -> None:
        self.target = target
        self.handed = False
        self.thread: str | None = None

    def do_work(self) -> int:
        self.thread = threading.current_thread().name
        if not self.handed:
            self.handed = True
            self.target.add_session(_Session(cycles=3))
            return 1
        return 0


def test_a_shared_runner_drives_every_agent_on_one_thread_and_never_dozes() -> None:
    sessions = _CountingAgent()
    handing = _Handing(sessions)
    runner = AgentRunner([handing, sessions], name="archive-shared").start()
    try:
        assert sessions.retired.wait(2.0)  # handed over and run to the end on the same thread
        assert handing.thread == "archive-shared"
        polled = sessions.cycles
        time.sleep(0.2)
        assert sessions.cycles > polled  # the conductor is never dormant: the runner keeps cycling
    finally:
        runner.close()


def test_service_options_check_the_mode_and_the_threshold() -> None:
    options = ArchiveServiceOptions(archive_dir=Path("."))
    assert options.threading_mode == defaults.DEFAULT_THREADING_MODE == "dedicated"
    assert options.low_storage_threshold is None
    assert options.effective_low_storage_threshold == options.segment_file_length
    assert ArchiveServiceOptions(archive_dir=Path("."), threading_mode="SHARED").threading_mode == "shared"
    assert ArchiveServiceOptions(archive_dir=Path("."), low_storage_threshold=0).effective_low_storage_threshold == 0
    with pytest.raises(ValueError, match="expected dedicated or shared"):
        ArchiveServiceOptions(archive_dir=Path("."), threading_mode="both")
    with pytest.raises(ValueError, match="low_storage_threshold must be >= 0"):
        ArchiveServiceOptions(archive_dir=Path("."), low_storage_threshold=-1)


def test_serve_takes_the_threading_mode_and_the_threshold_with_size_suffixes(tmp_path: Path) -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["serve", "--dir", str(tmp_path), "--threading-mode", "shared",
                              "--low-storage-threshold", "64m"])
    options = options_from_args(args)
    assert (options.threading_mode, options.low_storage_threshold) == ("shared", 64 * 1024 * 1024)
    assert options_from_args(parser.parse_args(["serve", "--dir", str(tmp_path), "--low-storage-threshold",
                                                "4096"])).low_storage_threshold == 4096


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--threading-mode", "invoker", "argument --threading-mode: threading mode 'invoker'"),
    ("--threading-mode", "both", "expected dedicated or shared"),
    ("--low-storage-threshold", "1x", "argument --low-storage-threshold: expected a byte count"),
    ("--low-storage-threshold", "-5", "must be >= 0")])
def test_bad_serve_values_name_the_option_and_what_it_accepts(tmp_path: Path, option: str, value: str,
                                                              message: str) -> None:
    err = io.StringIO()
    assert cli.main(["serve", "--dir", str(tmp_path), option, value], stdout=io.StringIO(), stderr=err) == 2
    assert message in err.getvalue()


def test_the_threading_mode_is_in_the_mark_files_aeron_spark_area_and_nowhere_java_reads(tmp_path: Path) -> None:
    plain, moded = tmp_path / "plain", tmp_path / "moded"
    plain.mkdir()
    moded.mkdir()
    with ArchiveMarkFile.create(plain, now_ms=1_000, pid=42, **MARK_SETTINGS):
        pass
    with ArchiveMarkFile.create(moded, now_ms=1_000, pid=42, threading_mode="shared", **MARK_SETTINGS):
        pass
    without, with_mode = (plain / MARK_FILE_NAME).read_bytes(), (moded / MARK_FILE_NAME).read_bytes()
    # The SBE block and the strings Java decodes are byte for byte those of a file without the area.
    assert with_mode[:EXTENSION_OFFSET] == without[:EXTENSION_OFFSET]
    assert with_mode[EXTENSION_OFFSET:EXTENSION_OFFSET + 8] == b"ASPKEXT1"
    (length,) = struct.unpack_from("<I", with_mode, EXTENSION_OFFSET + 8)
    assert with_mode[EXTENSION_OFFSET + 12:EXTENSION_OFFSET + 12 + length] == b"threadingMode=shared\n"
    assert read_mark_file(moded).threading_mode == "shared"
    assert read_mark_file(moded).to_dict()["threadingMode"] == "shared"
    assert read_mark_file(plain).threading_mode is None  # e.g. a Java archive's
    assert "threadingMode" not in read_mark_file(plain).to_dict()


def test_low_storage_space_names_the_usable_bytes_and_the_threshold(tmp_path: Path) -> None:
    message = segment.low_storage_space(tmp_path, 1 << 62)
    assert message is not None and "low storage space" in message
    assert f"<= the low storage threshold {1 << 62} bytes (--low-storage-threshold)" in message
    assert segment.low_storage_space(tmp_path, 0) is None


def test_start_and_extend_are_refused_at_the_configured_threshold_not_the_segment_length(tmp_path: Path) -> None:
    with opened_handlers(tmp_path, low_storage_threshold=1 << 62) as h:
        stopped = make_recording(h.catalog, tmp_path, 0, 4096)
        refused(lambda: start(h), ArchiveErrorCode.STORAGE_SPACE, "low storage threshold")
        refused(lambda: h.recordings.extend_recording(h.session, ExtendRecordingRequest(
            CONTROL_SESSION_ID, 30, stopped, STREAM_ID, SourceLocation.REMOTE, UDP_CHANNEL), auto_stop=False),
            ArchiveErrorCode.STORAGE_SPACE, "low storage threshold")
        assert h.aeron.subscriptions == []
        # A threshold of 0 refuses only a full file system: the same start now subscribes.
        settings = h.recordings.settings
        h.recordings.settings = dataclasses.replace(settings, options=settings.options.with_changes(low_storage_threshold=0))
        start(h)
        assert len(h.aeron.subscriptions) == 1
