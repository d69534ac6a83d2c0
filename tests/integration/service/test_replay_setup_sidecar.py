"""A live read's replay set-up and close against the REAL sidecar (issue 25, live latency).

* the sidecar adds a replay's publication without blocking its conductor (polled each duty cycle):
  replays still start and answer as before, and a channel the media driver refuses is answered
  with the driver's reason, as a refused request;
* the connector sends no StopReplay for a replay it read to its range end (the archive ends a
  bounded replay itself), on the archive's driver (bounded by a limit counter) and from another
  driver over UDP (bounded by length); a replay left early is still stopped. Either way no replay
  session is left behind: the sidecar's replay-session count (counter type 112) returns to 0.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aeron_spark.archive.client import ArchiveError
from aeron_spark.archive.codecs.archive_counters import ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID
from aeron_spark.driver_integration import AeronClient, MediaDriver

from aeron_spark.connector.options import parse_connection, parse_replay
from aeron_spark.connector.source.archive_access import open_archive

from tests.support.sidecar_streams import ipc_archive, payloads, record_ipc
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

REPLAY_STREAM = 1977301


@pytest.fixture
def other_host_driver() -> Iterator[MediaDriver]:
    with MediaDriver(threading_mode="shared") as driver:
        yield driver


def replay_sessions(aeron: AeronClient) -> int:
    """The sidecar's replay-session count (its driver holds one archive: one such counter)."""
    counters = aeron.counters_reader
    [counter_id] = counters.find(ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID)
    return counters.value(counter_id)


def counting_stops(access) -> list[int]:
    stopped: list[int] = []
    stop_replay = access._client.stop_replay

    def stop(replay_session_id: int) -> None:
        stopped.append(replay_session_id)
        stop_replay(replay_session_id)
    access._client.stop_replay = stop
    return stopped


@pytest.mark.parametrize("layout", ["archive driver", "another driver"])
def test_a_replay_read_to_its_end_is_ended_by_the_archive_without_a_stop_replay(
        sidecar, local_aeron, other_host_driver, layout):
    archive = ipc_archive(local_aeron)
    recording_id, published, _ = record_ipc(archive, payloads(120, 11))
    connection = ({"archive.dir": str(sidecar.archive_dir)} if layout == "archive driver" else
                  {"archive.controlChannel": sidecar.control_channel, "aeron.dir": other_host_driver.dir})
    access = open_archive(parse_connection(connection))
    settings = parse_replay({"replay.streamId": str(REPLAY_STREAM)})
    try:
        assert access.replay_endpoints.shares_archive_driver == (layout == "archive driver")
        stopped = counting_stops(access)
        starts = published.starts
        ranges = [(starts[i], starts[i + 20]) for i in range(0, 100, 20)] + [(0, published.end)]
        for start, end in ranges:
            with access.replay(recording_id, start, end, settings) as blocks:
                assert sum(len(block) for _, block in blocks) == end - start
        assert stopped == []  # no StopReplay round trip for a replay read to its end
        wait_until(lambda: replay_sessions(local_aeron) == 0, "the archive to end every replay itself")

        # Left early (a reader that stops after one block): stopped, and ended as well.
        with access.replay(recording_id, 0, published.end, settings) as blocks:
            next(iter(blocks))
        assert len(stopped) == 1
        wait_until(lambda: replay_sessions(local_aeron) == 0, "the stopped replay to end")
    finally:
        access.close()
        archive.close()


def test_a_replay_channel_the_media_driver_refuses_is_answered_with_its_reason(sidecar, local_aeron):
    archive = ipc_archive(local_aeron)
    recording_id, published, _ = record_ipc(archive, payloads(10, 12))
    try:
        with pytest.raises(ArchiveError, match="media driver refused") as refused:
            archive.start_replay(recording_id, 0, published.end, "aeron:udp?endpoint=no-such-host.invalid:40123",
                                 REPLAY_STREAM)
        assert "ReplayRequest" in str(refused.value)
        # The conductor carried on: the next replay on the same session starts and is read whole.
        with archive.replay(recording_id, 0, published.end, "aeron:ipc", REPLAY_STREAM) as replay:
            assert len(list(replay.messages(idle_timeout=10.0))) == 10
        wait_until(lambda: replay_sessions(local_aeron) == 0, "the replay to end")
    finally:
        archive.close()
