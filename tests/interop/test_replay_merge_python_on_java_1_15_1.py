"""Our Python ReplayMerge against the REAL Java 1.15.1 archive (its own ArchivingMediaDriver), over
the 1.15.x protocol: the archive has no MaxRecordedPositionRequest (67), so the merge's target comes
from RecordingPosition (12), and StopPosition (15) once the recording stopped. The live stream is our
exclusive publication on a dynamic-MDC channel from the test's C driver, recorded REMOTE by the Java
archive; our client on that C driver merges from position 0 while publishing goes on: every message
once, in order, ending MERGED.

The Java archive is started and stopped by PID by the ``java_archive`` fixture (tests/interop/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aeron_spark.archive.client import ArchiveClient, MergeState
from aeron_spark.driver_integration import AeronClient

from tests.interop.peer.interop_peer import RunningJavaArchive
from tests.support.replay_merge_run import (
    EXPECTED_STATES,
    first_visits,
    merge_while_publishing,
    recorded_live_stream,
)

pytestmark = pytest.mark.timeout(300)

TIMEOUT_S = 10.0


@pytest.fixture
def archive(java_archive: RunningJavaArchive, aeron_client: AeronClient) -> Iterator[ArchiveClient]:
    with ArchiveClient.connect(control_channel=java_archive.endpoint.control_channel, aeron=aeron_client,
                               protocol="legacy", timeout=TIMEOUT_S) as client:
        yield client


def test_python_replay_merge_on_the_java_1_15_1_archive_merges_with_every_message_once(
        archive: ArchiveClient, aeron_client: AeronClient) -> None:
    assert archive.is_legacy
    with recorded_live_stream(archive, aeron_client, 9301) as stream:
        stream.publish(1500)
        stream.await_recorded()
        with archive.replay_merge(stream.recording_id, stream_id=stream.stream_id, start_position=0,
                                  live_destination=stream.live_destination) as merge:
            run = merge_while_publishing(merge, stream, 1000)
            assert merge.state is MergeState.MERGED
            assert first_visits(merge.states_seen) == [*EXPECTED_STATES, MergeState.MERGED]
    assert run.indices == list(range(stream.published))
