"""archive-mark.dat: layout, single-archive lock, stale takeover, read-only readers, error log."""

import logging
import os
import struct
import subprocess
import sys
import time

import pytest

from aeron_spark.archive.storage.catalog import ARCHIVE_FILE_VERSION
from aeron_spark.archive.storage.mark_file import (
    HEADER_LENGTH, MARK_FILE_NAME, ArchiveMarkFile, ArchiveRunningError, MarkFileError,
    decode_mark_file, maintenance_lock, pid_is_alive, read_error_log, read_mark_file,
    running_archive)

SETTINGS = dict(archive_id=0x1122334455, control_channel="aeron:udp?endpoint=localhost:8010",
                control_stream_id=10, local_control_channel="aeron:ipc", local_control_stream_id=11,
                events_channel="aeron:udp?control-mode=dynamic|control=localhost:8030",
                events_stream_id=30, aeron_directory="/dev/shm/aeron-test")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    assert not pid_is_alive(process.pid)
    return process.pid


def test_layout_byte_by_byte(tmp_path):
    with ArchiveMarkFile.create(tmp_path, error_buffer_length=64 * 1024, now_ms=1_000, **SETTINGS):
        data = (tmp_path / MARK_FILE_NAME).read_bytes()
    assert len(data) == HEADER_LENGTH + 64 * 1024
    # Aeron 1.47+: SBE message header {blockLength 128, templateId 200, schemaId 100, version 2}
    assert struct.unpack_from("<HHHH", data, 0) == (128, 200, 100, 2)
    assert struct.unpack_from("<i", data, 8)[0] == ARCHIVE_FILE_VERSION == 196864  # 3.1.0
    assert data[12:16] == bytes(4)
    assert struct.unpack_from("<qqq", data, 16) == (1_000, 1_000, os.getpid())
    assert struct.unpack_from("<iiiii", data, 40) == (10, 11, 30, 8192, 64 * 1024)
    assert struct.unpack_from("<q", data, 64)[0] == 0x1122334455
    assert data[72:136] == bytes(64)
    cursor = 136
    for expected in (SETTINGS["control_channel"], "aeron:ipc", SETTINGS["events_channel"],
                     "/dev/shm/aeron-test"):
        (size,) = struct.unpack_from("<I", data, cursor)
        assert data[cursor + 4:cursor + 4 + size] == expected.encode()
        cursor += 4 + size
    assert data[cursor:] == bytes(len(data) - cursor)


def test_reader_sees_everything_and_liveness(tmp_path):
    mark = ArchiveMarkFile.create(tmp_path, **SETTINGS)
    try:
        info = read_mark_file(tmp_path)
        assert info.is_live() and not info.terminated
        assert (info.pid, info.archive_id) == (os.getpid(), SETTINGS["archive_id"])
        assert (info.control_channel, info.control_stream_id) == (SETTINGS["control_channel"], 10)
        assert (info.local_control_channel, info.local_control_stream_id) == ("aeron:ipc", 11)
        assert (info.events_channel, info.events_stream_id) == (SETTINGS["events_channel"], 30)
        assert info.aeron_directory == "/dev/shm/aeron-test" and info.version_text == "3.1.0"
        assert running_archive(tmp_path) == info
        assert not info.is_live(now_ms=info.activity_timestamp + 10_001)
        mark.update_activity(info.activity_timestamp + 20_000)
        assert read_mark_file(tmp_path).activity_timestamp == info.activity_timestamp + 20_000
        assert info.to_dict()["live"] is True
    finally:
        mark.close()
    closed = read_mark_file(tmp_path)
    assert closed.terminated and not closed.is_live() and running_archive(tmp_path) is None


def test_second_archive_on_the_same_directory_fails_fast(tmp_path):
    with ArchiveMarkFile.create(tmp_path, **SETTINGS):
        started = time.monotonic()
        with pytest.raises(ArchiveRunningError, match="only one archive may run on a directory"):
            ArchiveMarkFile.create(tmp_path, **SETTINGS)
        assert time.monotonic() - started < 1
        assert read_mark_file(tmp_path).is_live()  # the loser changed nothing


def test_second_archive_in_another_process_is_refused_by_liveness(tmp_path):
    """A live archive that holds no flock (e.g. Java Aeron) is detected by timestamp and pid."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with ArchiveMarkFile.create(tmp_path, pid=sleeper.pid, **SETTINGS) as mark:
            mark.close(clean=False)  # drops the flock, leaves a fresh timestamp of a live pid
        with pytest.raises(ArchiveRunningError, match=f"already running .*pid {sleeper.pid}"):
            ArchiveMarkFile.create(tmp_path, **SETTINGS)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_stale_mark_of_a_dead_process_is_taken_over_with_a_log_line(tmp_path, caplog):
    pid = dead_pid()
    first = ArchiveMarkFile.create(tmp_path, pid=pid, **SETTINGS)
    first.record_error("java.io.IOException: disk full")
    first.close(clean=False)  # crash: the timestamp is fresh, the process is gone
    assert not read_mark_file(tmp_path).is_live()
    with caplog.at_level(logging.INFO):
        with ArchiveMarkFile.create(tmp_path, **dict(SETTINGS, archive_id=7)):
            info = read_mark_file(tmp_path)
            assert info.pid == os.getpid() and info.archive_id == 7 and info.is_live()
            assert read_error_log(tmp_path) == []
    assert f"taking over a stale mark file: archive pid {pid}" in caplog.text
    assert "its process is gone" in caplog.text
    saved = list(tmp_path.glob("*-error.log"))
    assert len(saved) == 1 and "disk full" in saved[0].read_text()


def test_mark_with_an_old_timestamp_is_stale_even_if_the_pid_exists(tmp_path, caplog):
    with ArchiveMarkFile.create(tmp_path, now_ms=now_ms() - 60_000, **SETTINGS) as mark:
        mark.close(clean=False)
    with ArchiveMarkFile.create(tmp_path, **SETTINGS):
        pass
    assert "no activity for" in caplog.text


def test_clean_shutdown_is_taken_over_quietly(tmp_path, caplog):
    with ArchiveMarkFile.create(tmp_path, **SETTINGS):
        pass
    with ArchiveMarkFile.create(tmp_path, **SETTINGS):
        pass
    assert "stale" not in caplog.text


def test_read_only_readers_change_nothing(tmp_path):
    with ArchiveMarkFile.create(tmp_path, **SETTINGS):
        before = (tmp_path / MARK_FILE_NAME).read_bytes()
        read_mark_file(tmp_path)
        running_archive(tmp_path)
        read_error_log(tmp_path)
        assert (tmp_path / MARK_FILE_NAME).read_bytes() == before


def test_missing_mark_file_is_a_clear_error(tmp_path):
    with pytest.raises(MarkFileError, match="archive-mark.dat is missing"):
        read_mark_file(tmp_path)
    assert running_archive(tmp_path) is None


def test_error_log_is_distinct_and_counts_observations(tmp_path):
    with ArchiveMarkFile.create(tmp_path, error_buffer_length=4096, **SETTINGS) as mark:
        assert mark.record_error("first", now_ms=10)
        assert mark.record_error("second", now_ms=20)
        assert mark.record_error("first", now_ms=30)
        errors = read_error_log(tmp_path)
        assert [(e.error, e.observation_count, e.first_observation_timestamp,
                 e.last_observation_timestamp) for e in errors] == [
            ("first", 2, 10, 30), ("second", 1, 20, 20)]
        data = (tmp_path / MARK_FILE_NAME).read_bytes()
        assert struct.unpack_from("<iiqq", data, HEADER_LENGTH) == (24 + 5, 2, 30, 10)
        assert struct.unpack_from("<i", data, HEADER_LENGTH + 32)[0] == 24 + 6  # aligned to 8
        big = "x" * 3000
        assert mark.record_error(big)
        assert not mark.record_error(big + "y")  # full: refused, nothing overwritten
        assert len(read_error_log(tmp_path)) == 3


def test_maintenance_lock_excludes_archives_both_ways(tmp_path):
    with maintenance_lock(tmp_path):  # no mark file: nothing to lock
        pass
    with ArchiveMarkFile.create(tmp_path, **SETTINGS):
        with pytest.raises(ArchiveRunningError):
            with maintenance_lock(tmp_path):
                pass
    with maintenance_lock(tmp_path):
        with pytest.raises(ArchiveRunningError, match="locked by another archive or archive tool"):
            ArchiveMarkFile.create(tmp_path, **SETTINGS)


def test_modern_layout_with_sbe_header_is_readable():
    block = struct.pack("<i4xqqqiiiii4xq", (3 << 16) | (1 << 8), 5, 4, 321, 1, 2, 3, 8192, 1 << 20, 9)
    strings = b"".join(struct.pack("<I", len(s)) + s for s in (b"c", b"l", b"e", b"/d"))
    data = struct.pack("<HHHH", 128, 200, 100, 2) + block + bytes(64) + strings + bytes(100)
    info = decode_mark_file(data)
    assert (info.pid, info.archive_id, info.version_text) == (321, 9, "3.1.0")
    assert (info.control_channel, info.aeron_directory) == ("c", "/d")


@pytest.mark.parametrize("bad, message", [
    (dict(control_channel="caf\u00e9"), "control_channel must be ASCII"),
    (dict(aeron_directory="d" * 9000), "header has room for 8056"),
    (dict(error_buffer_length=100), "error_buffer_length must be"),
])
def test_bad_settings_are_rejected(tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        ArchiveMarkFile.create(tmp_path, **dict(SETTINGS, **bad))
    assert not (tmp_path / MARK_FILE_NAME).exists() or running_archive(tmp_path) is None


def test_pid_is_alive():
    assert pid_is_alive(os.getpid())
    assert not pid_is_alive(dead_pid())
    assert not pid_is_alive(0) and not pid_is_alive(-5)


def test_read_location_accepts_file_or_directory(tmp_path):
    from aeron_spark.archive.client.archive_location import read_archive_location as read_location
    with ArchiveMarkFile.create(tmp_path, **SETTINGS):
        for where in (tmp_path, tmp_path / MARK_FILE_NAME):
            location = read_location(where)
            assert (location.control_channel, location.control_stream_id) == (SETTINGS["control_channel"], 10)
            assert location.aeron_dir == "/dev/shm/aeron-test"


def _old_mark_file(version: int, *, with_error_log: bool) -> bytes:
    """A 1.24-1.46 (block at 0, error log) or <= 1.23 (no header/error-log fields) mark file."""
    data = bytearray(HEADER_LENGTH + (4096 if with_error_log else 0))
    struct.pack_into("<i4xqqqiii", data, 0, version, -1, 5, 4242, 10, 11, 30)
    if with_error_log:
        struct.pack_into("<ii4xq", data, 44, HEADER_LENGTH, 4096, 9)
        struct.pack_into("<iiqq", data, HEADER_LENGTH, 24 + 3, 1, 7, 7)
        data[HEADER_LENGTH + 24:HEADER_LENGTH + 27] = b"old"
    cursor = 128
    for text in (b"aeron:udp?endpoint=localhost:8010", b"aeron:ipc", b"", b"/dev/shm/old"):
        struct.pack_into("<I", data, cursor, len(text))
        data[cursor + 4:cursor + 4 + len(text)] = text
        cursor += 4 + len(text)
    return bytes(data)


@pytest.mark.parametrize("version, with_error_log", [((2 << 16) | (1 << 8), True), (0, False)])
def test_older_layouts_are_still_read(tmp_path, version, with_error_log):
    (tmp_path / MARK_FILE_NAME).write_bytes(_old_mark_file(version, with_error_log=with_error_log))
    info = read_mark_file(tmp_path)
    assert (info.version, info.pid, info.control_stream_id, info.events_stream_id) == (version, 4242, 10, 30)
    assert info.terminated and info.aeron_directory == "/dev/shm/old"
    assert info.control_channel == "aeron:udp?endpoint=localhost:8010"
    assert [e.error for e in read_error_log(tmp_path)] == (["old"] if with_error_log else [])
    with ArchiveMarkFile.create(tmp_path, **SETTINGS) as mark:  # taken over, rewritten 1.47+
        assert mark.info().version == ARCHIVE_FILE_VERSION
    assert struct.unpack_from("<HH", (tmp_path / MARK_FILE_NAME).read_bytes(), 0) == (128, 200)


@pytest.mark.parametrize("version, with_error_log", [((2 << 16) | (1 << 8), True), (0, False)])
def test_migrate_rewrites_an_older_mark_file_in_the_current_layout(tmp_path, version, with_error_log):
    from aeron_spark.archive.storage.mark_file import rewrite_as_current
    (tmp_path / MARK_FILE_NAME).write_bytes(_old_mark_file(version, with_error_log=with_error_log))
    assert rewrite_as_current(tmp_path)
    data = (tmp_path / MARK_FILE_NAME).read_bytes()
    assert struct.unpack_from("<HHHHi", data, 0) == (128, 200, 100, 2, ARCHIVE_FILE_VERSION)
    info = read_mark_file(tmp_path)
    assert (info.pid, info.control_stream_id, info.events_stream_id, info.header_length) == (4242, 10, 30, 8192)
    assert info.terminated and info.aeron_directory == "/dev/shm/old"
    assert info.archive_id == (9 if with_error_log else -1)
    assert [e.error for e in read_error_log(tmp_path)] == (["old"] if with_error_log else [])
    assert len(data) % 4096 == 0 and len(data) >= 8192 + info.error_buffer_length
    assert not rewrite_as_current(tmp_path)  # already current
