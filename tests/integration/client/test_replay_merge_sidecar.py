"""Our ReplayMerge against our sidecar, real processes: the sidecar (its own embedded driver) records
a live UDP stream published from the test's C driver; our client, on that C driver, replays it from
position 0 into a multi-destination subscription and merges into the live stream while publishing
goes on: every message once, in order, ending MERGED, then the live stream alone. The failures name
their state: an unknown recording, a live destination nothing publishes to.

The sidecar is stopped by PID by ``running_sidecar``, also when a test fails."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aeron_spark.archive.client import ArchiveClient, MergeState, ReplayMergeError
from aeron_spark.driver_integration import AeronClient

from tests.support.ports import free_udp_port
from tests.support.replay_merge_run import (
    EXPECTED_STATES,
    first_visits,
    merge_while_publishing,
    position_of,
    recorded_live_stream,
)
from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = pytest.mark.timeout(180)

TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    with running_sidecar(Path(tmp_path_factory.mktemp("replay-merge-sidecar"))) as running:
        yield running


@pytest.fixture
def archive(sidecar: Sidecar, aeron_client: AeronClient) -> Iterator[ArchiveClient]:
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT_S) as client:
        yield client


@pytest.mark.parametrize(("recorded", "live"), [(2000, 1500), (300, 0)], ids=["publishing-during-merge", "idle"])
def test_replay_merge_from_position_0_delivers_every_message_once_in_order_and_merges(
        archive: ArchiveClient, aeron_client: AeronClient, sidecar: Sidecar, recorded: int, live: int) -> None:
    with recorded_live_stream(archive, aeron_client, 9101) as stream:
        stream.publish(recorded)
        stream.await_recorded()
        with archive.replay_merge(stream.recording_id, stream_id=stream.stream_id, start_position=0,
                                  live_destination=stream.live_destination) as merge:
            run = merge_while_publishing(merge, stream, live)
            assert merge.state is MergeState.MERGED and merge.is_live_added
            assert first_visits(merge.states_seen) == [*EXPECTED_STATES, MergeState.MERGED]
            assert merge.image is not None and merge.image.position == stream.publication.position
            replay_session_id = merge.replay_session_id
            assert "session-id=" in merge.replay_channel and "eos=false" in merge.replay_channel
        assert merge.state is MergeState.CLOSED
    assert run.indices == list(range(stream.published))  # each once, in order, to the end
    assert run.positions == sorted(set(run.positions))
    assert run.merged_at_message is not None and run.merged_at_message >= recorded
    # Merged: the replay destination was removed and the sidecar ended the replay on StopReplay.
    stopped = f"replay {replay_session_id} of recording {stream.recording_id} ended: stop replay"
    deadline = time.monotonic() + TIMEOUT_S
    while not any(stopped in line for line in sidecar.stderr_lines):
        assert time.monotonic() < deadline, f"the sidecar never logged {stopped!r}"
        time.sleep(0.01)


def test_replay_merge_from_the_middle_of_the_recording_starts_there(
        archive: ArchiveClient, aeron_client: AeronClient) -> None:
    with recorded_live_stream(archive, aeron_client, 9104) as stream:
        stream.publish(1500)
        stream.await_recorded()
        start = position_of(1000)  # in the third 64 KiB term
        with archive.replay_merge(stream.recording_id, stream_id=stream.stream_id, start_position=start,
                                  live_destination=stream.live_destination,
                                  replay_destination=f"aeron:udp?endpoint=localhost:{free_udp_port()}") as merge:
            assert merge.state is MergeState.GET_RECORDING_POSITION  # a concrete replay port: nothing to resolve
            run = merge_while_publishing(merge, stream, 500, first_index=1000)
            assert merge.is_merged and merge.image is not None and merge.image.join_position == start
    assert run.indices == list(range(1000, stream.published))


def test_closing_a_merge_before_it_merged_stops_its_replay(
        archive: ArchiveClient, aeron_client: AeronClient, sidecar: Sidecar) -> None:
    with recorded_live_stream(archive, aeron_client, 9105) as stream:
        stream.publish(200)
        stream.await_recorded()
        merge = archive.replay_merge(stream.recording_id, stream_id=stream.stream_id,
                                     live_destination=stream.live_destination)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while merge.image is None:  # the replay runs; the live stream is not added yet
                assert time.monotonic() < deadline, f"no replay Image: {merge!r}"
                merge.do_work()
            replay_session_id = merge.replay_session_id
            assert merge.state in (MergeState.CATCHUP, MergeState.ATTEMPT_LIVE_JOIN)
        finally:
            merge.close()
        assert merge.state is MergeState.CLOSED and merge.subscription.is_closed
        merge.close()  # idempotent
        stopped = f"replay {replay_session_id} of recording {stream.recording_id} ended: stop replay"
        while not any(stopped in line for line in sidecar.stderr_lines):
            assert time.monotonic() < deadline, f"the sidecar never logged {stopped!r}"
            time.sleep(0.01)


def test_an_unknown_recording_fails_in_get_recording_position(archive: ArchiveClient) -> None:
    with archive.replay_merge(987_654, stream_id=9102,
                              live_destination=f"aeron:udp?endpoint=localhost:0|control=localhost:{free_udp_port()}",
                              replay_destination="aeron:udp?endpoint=localhost:0") as merge:
        with pytest.raises(ReplayMergeError) as failed:
            for _ in range(10_000):
                merge.poll(lambda data, header: None, 10)
        assert failed.value.state is MergeState.GET_RECORDING_POSITION
        assert "failed in state GET_RECORDING_POSITION" in str(failed.value)
        assert "987654" in str(failed.value)
        assert merge.has_failed and merge.failure is failed.value
        with pytest.raises(ReplayMergeError):  # every later poll says so again
            merge.poll(lambda data, header: None, 10)
    archive.list_recordings(0, 1)  # the session is still usable


def test_a_live_destination_nothing_publishes_to_fails_naming_the_state(
        archive: ArchiveClient, aeron_client: AeronClient) -> None:
    with recorded_live_stream(archive, aeron_client, 9103) as stream:
        stream.publish(100)
        stream.await_recorded()
        nowhere = f"aeron:udp?endpoint=localhost:0|control=localhost:{free_udp_port()}"
        with archive.replay_merge(stream.recording_id, stream_id=stream.stream_id, live_destination=nowhere,
                                  progress_timeout_s=1.5) as merge:
            received: list[int] = []
            deadline = time.monotonic() + TIMEOUT_S  # by time, not by count: a fast poll loop must outlast 1.5 s
            with pytest.raises(ReplayMergeError) as failed:
                while time.monotonic() < deadline:
                    merge.poll(lambda data, header: received.append(1), 64)
            assert failed.value.state in (MergeState.CATCHUP, MergeState.ATTEMPT_LIVE_JOIN)
            assert re.search(r"failed in state (CATCHUP|ATTEMPT_LIVE_JOIN): no progress for 1\.\d s", str(failed.value))
            assert "the live destination added" in str(failed.value) and "has not joined" in str(failed.value)
            assert merge.is_live_added and len(received) == 100  # the replayed part arrived
