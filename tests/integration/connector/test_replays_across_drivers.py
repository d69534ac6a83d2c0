"""The connector's archive access from a media driver that is not the archive's (another host).

The sidecar runs on its own embedded driver; the reading client runs on a second driver in this
process, which sees none of the archive's counters or IPC streams, exactly like a Spark executor
on another host. Only ``archive.controlChannel`` is given.
"""

from __future__ import annotations

import struct
import time

import pytest
from aeron_spark.driver_integration import MediaDriver
from aeron_spark.driver_integration.frame import HEADER_LENGTH, aligned_frame_length

from aeron_spark.connector.archive_connection import ArchiveUnavailable
from aeron_spark.connector.archive_reading import REPLAY_LIMIT_COUNTER_TYPE_ID
from aeron_spark.connector.replay_errors import ReplayEndpointUnreachable
from aeron_spark.connector.options import parse_connection, parse_replay
from aeron_spark.connector.source.archive_access import open_archive

from tests.support.ports import free_udp_port
from tests.support.sidecar_streams import ipc_archive, payloads, record_ipc

@pytest.fixture
def other_host_driver():
    with MediaDriver(threading_mode="shared") as driver:
        yield driver


def recorded(local_aeron, count: int = 300, seed: int = 7, keep_open: bool = False):
    archive = ipc_archive(local_aeron)
    recording_id, published, publication = record_ipc(archive, payloads(count, seed), keep_open=keep_open)
    return archive, recording_id, published, publication


def without_session_ids(frames: bytes) -> bytes:
    """The replayed frames with their session id zeroed: every replay has its own session id."""
    out = bytearray(frames)
    offset = 0
    while offset + HEADER_LENGTH <= len(out):
        length = struct.unpack_from("<i", out, offset)[0]
        if length <= 0:
            break
        out[offset + 12:offset + 16] = bytes(4)
        offset += aligned_frame_length(length)
    return bytes(out)


def replayed_bytes(access, recording_id: int, start: int, end: int, options: dict | None = None,
                   limit_counters: list | None = None) -> bytes:
    blocks = []
    with access.replay(recording_id, start, end, parse_replay(options or {})) as replay:
        for _position, block in replay:
            blocks.append(block)
            if limit_counters is not None:
                counters = access._client.aeron.counters_reader
                limit_counters.extend(counters.find(REPLAY_LIMIT_COUNTER_TYPE_ID))
    return without_session_ids(b"".join(blocks))


def test_a_reader_on_another_driver_gets_udp_replays_bounded_by_length(sidecar, local_aeron, other_host_driver):
    archive, recording_id, published, _ = recorded(local_aeron)
    reference = open_archive(parse_connection({"archive.dir": str(sidecar.archive_dir)}))
    remote = open_archive(parse_connection({"archive.controlChannel": sidecar.control_channel,
                                            "aeron.dir": other_host_driver.dir}))
    try:
        assert reference.replay_endpoints.shares_archive_driver
        assert not remote.replay_endpoints.shares_archive_driver
        told = remote.replay_endpoints.subscribe(None, 1977101, 42).told
        assert told.startswith("aeron:udp?endpoint=127.0.0.1:") and not told.endswith(":0"), told
        assert "127.0.0.1:" in remote._client.response_channel and ":0" not in remote._client.response_channel
        limits_on_the_shared_driver: list[int] = []
        expected = replayed_bytes(reference, recording_id, 0, published.end, limit_counters=limits_on_the_shared_driver)
        limits_on_another_driver: list[int] = []
        got = replayed_bytes(remote, recording_id, 0, published.end, limit_counters=limits_on_another_driver)
        assert len(got) == published.end and got == expected
        assert limits_on_the_shared_driver, "on the archive's driver a replay is bounded by a limit counter"
        assert not limits_on_another_driver, "a counter id must never be sent to an archive on another driver"
        middle = published.starts[len(published.starts) // 2]
        assert replayed_bytes(remote, recording_id, middle, published.end) == expected[middle:]
    finally:
        remote.close()
        reference.close()
        archive.close()


def test_a_live_recording_replays_to_another_driver_up_to_the_recorded_end(sidecar, local_aeron, other_host_driver):
    archive, recording_id, published, publication = recorded(local_aeron, keep_open=True)
    remote = open_archive(parse_connection({"archive.controlChannel": sidecar.control_channel,
                                            "aeron.dir": other_host_driver.dir}))
    try:
        assert remote.live_position(recording_id) == published.end
        assert len(replayed_bytes(remote, recording_id, 0, published.end)) == published.end
    finally:
        remote.close()
        publication.close()
        archive.close()


def test_concurrent_replays_in_one_worker_never_mix(sidecar, local_aeron, other_host_driver):
    archive = ipc_archive(local_aeron)
    first_id, first, _ = record_ipc(archive, payloads(200, 1), stream_id=1001)
    second_id, second, _ = record_ipc(archive, payloads(200, 2), stream_id=1002)
    remote = open_archive(parse_connection({"archive.controlChannel": sidecar.control_channel,
                                            "aeron.dir": other_host_driver.dir}))
    try:
        results: dict[int, list[bytes]] = {first_id: [], second_id: []}
        # Both replays run at once, drained in turns (a Python worker runs one task at a time;
        # the point is two sessions on one endpoint).
        with remote.replay(first_id, 0, first.end, parse_replay({})) as one, \
                remote.replay(second_id, 0, second.end, parse_replay({})) as two:
            pending = {first_id: one, second_id: two}
            while pending:
                for recording_id, blocks in list(pending.items()):
                    block = next(blocks, None)
                    if block is None:
                        del pending[recording_id]
                    else:
                        results[recording_id].append(block[1])
        reference = open_archive(parse_connection({"archive.dir": str(sidecar.archive_dir)}))
        try:
            assert without_session_ids(b"".join(results[first_id])) == replayed_bytes(reference, first_id, 0, first.end)
            assert without_session_ids(b"".join(results[second_id])) == replayed_bytes(reference, second_id, 0, second.end)
        finally:
            reference.close()
    finally:
        remote.close()
        archive.close()


def test_a_replay_endpoint_the_archive_cannot_reach_fails_fast_naming_it_and_the_option(
        sidecar, local_aeron, other_host_driver):
    archive, recording_id, published, _ = recorded(local_aeron, count=50)
    # Responses reach this process (the response channel is explicit); replays are told to go to
    # 127.0.0.3, where nothing of this process is bound: as an address the archive cannot reach.
    remote = open_archive(parse_connection({
        "archive.controlChannel": sidecar.control_channel, "aeron.dir": other_host_driver.dir,
        "archive.responseChannel": "aeron:udp?endpoint=127.0.0.1:0", "archive.timeoutMs": "3000",
        "aeron.host": "127.0.0.3", "aeron.bindAddress": "127.0.0.1"}))
    try:
        started = time.monotonic()
        with pytest.raises(ReplayEndpointUnreachable) as raised:
            replayed_bytes(remote, recording_id, 0, published.end, {"replay.idleTimeoutMs": "60000"})
        elapsed = time.monotonic() - started
        message = str(raised.value)
        assert "aeron:udp?endpoint=127.0.0.3:" in message and "aeron.host" in message, message
        assert elapsed < 15, f"took {elapsed:.1f} s, not the 60 s idle timeout"
    finally:
        remote.close()
        archive.close()


def test_an_unreachable_archive_fails_fast_naming_the_control_channel(other_host_driver):
    control_channel = f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"
    started = time.monotonic()
    with pytest.raises(ArchiveUnavailable) as raised:
        open_archive(parse_connection({"archive.controlChannel": control_channel, "aeron.dir": other_host_driver.dir,
                                       "archive.timeoutMs": "1500"}))
    assert f"archive.controlChannel={control_channel}" in str(raised.value)
    assert time.monotonic() - started < 10


def test_on_the_archives_driver_live_positions_are_gathered_from_its_rec_pos_counters(sidecar, local_aeron):
    archive, recording_id, published, publication = recorded(local_aeron, keep_open=True)
    access = open_archive(parse_connection({"archive.dir": str(sidecar.archive_dir)}))
    try:
        assert access.live_positions([recording_id]) == {recording_id: published.end}  # counter found
        assert access.live_positions([recording_id]) == {recording_id: published.end}  # gathered
        archive.stop_recording_by_identity(recording_id)
        deadline = time.monotonic() + 10
        while access.live_positions([recording_id]) != {recording_id: None}:  # its counter freed
            assert time.monotonic() < deadline, "the stopped recording still has a live position"
            time.sleep(0.01)
    finally:
        access.close()
        publication.close()
        archive.close()
