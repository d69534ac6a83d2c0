"""Our Python ReplayMerge against the REAL modern Java archive (the modern peer's Aeron, its own Java
media driver): the Java archive records a live UDP stream (dynamic MDC) that our publication on the
test's C driver keeps publishing; our client, on that C driver, reaches the archive over UDP, replays
the recording from position 0 into a multi-destination subscription and merges into the live stream:
every message once, in order, ending MERGED, then the live stream alone. The target comes from the
Java archive's MaxRecordedPosition (67), the replay is the Java archive's (Long.MAX_VALUE length,
``session-id`` of the live stream, ``linger=0|eos=false``), and StopReplay ends it.

The reverse, the Java 1.51 ``ReplayMerge`` against our sidecar, is
``test_java_tools_on_our_sidecar.py::test_java_replay_merge_on_our_sidecar_merges_with_every_message_once``.

The Java archive is started and stopped by PID by ``running_modern_java_archive``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aeron_spark.archive.client import ArchiveClient, MergeState, ReplayMergeError
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    RunningModernJavaArchive,
    running_modern_java_archive,
)
from tests.support.ports import free_udp_port
from tests.support.replay_merge_run import (
    EXPECTED_STATES,
    first_visits,
    merge_while_publishing,
    recorded_live_stream,
)

pytestmark = pytest.mark.timeout(300)

TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def java(modern_peer: ModernPeerInstallation, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[RunningModernJavaArchive]:
    with running_modern_java_archive(modern_peer, tmp_path_factory.mktemp("replay-merge-java")) as archive:
        yield archive


@pytest.fixture
def archive(java: RunningModernJavaArchive, aeron_client: AeronClient) -> Iterator[ArchiveClient]:
    with ArchiveClient.connect(control_channel=java.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT_S) as client:
        yield client


@pytest.mark.parametrize(("recorded", "live"), [(2000, 1500), (300, 0)], ids=["publishing-during-merge", "idle"])
def test_python_replay_merge_on_the_java_archive_delivers_every_message_once_and_merges(
        archive: ArchiveClient, aeron_client: AeronClient, recorded: int, live: int) -> None:
    with recorded_live_stream(archive, aeron_client, 9201) as stream:
        stream.publish(recorded)
        stream.await_recorded()
        with archive.replay_merge(stream.recording_id, stream_id=stream.stream_id, start_position=0,
                                  live_destination=stream.live_destination) as merge:
            run = merge_while_publishing(merge, stream, live)
            assert merge.state is MergeState.MERGED and merge.is_live_added
            assert first_visits(merge.states_seen) == [*EXPECTED_STATES, MergeState.MERGED]
            assert merge.image is not None and merge.image.position == stream.publication.position
            assert f"session-id={stream.publication.session_id}" in merge.replay_channel
        assert merge.state is MergeState.CLOSED
        # The Java archive recorded the whole live stream meanwhile.
        stream.await_recorded()
    assert run.indices == list(range(stream.published))  # each once, in order, to the end
    assert run.positions == sorted(set(run.positions))
    assert run.merged_at_message is not None and run.merged_at_message >= recorded


def test_an_unknown_recording_on_the_java_archive_fails_in_get_recording_position(archive: ArchiveClient) -> None:
    with archive.replay_merge(424_242, stream_id=9202,
                              live_destination=f"aeron:udp?endpoint=localhost:0|control=localhost:{free_udp_port()}"
                              ) as merge:
        with pytest.raises(ReplayMergeError) as failed:
            for _ in range(10_000):
                merge.poll(lambda data, header: None, 10)
    assert failed.value.state is MergeState.GET_RECORDING_POSITION
    assert "failed in state GET_RECORDING_POSITION" in str(failed.value) and "424242" in str(failed.value)
