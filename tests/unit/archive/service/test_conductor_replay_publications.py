"""The conductor's duty cycle and the replay publications the media driver is still adding: each
cycle polls them (`ReplayRequests.poll_pending`), starts the replays whose publication is there,
and counts a refused one as an archive error while the client gets the driver's reason."""

from __future__ import annotations

from aeron_spark.archive.codecs import REPLAY_ALL_AND_STOP, ArchiveErrorCode, ReplayRequest
from aeron_spark.archive.service.conductor import ArchiveConductor, ConductorSettings
from aeron_spark.archive.service.service_options import ArchiveServiceOptions
from aeron_spark.archive.storage.catalog import Catalog
from aeron_spark.driver_integration.errors import AeronError

from tests.unit.archive.service.request_handler_parts import (
    CONTROL_SESSION_ID,
    FakeAeron,
    FakeRecorder,
    FakeReplayer,
    make_handlers,
    outbox,
)
from tests.unit.archive.storage.test_maintenance import make_recording


def conductor_with_pending_replay(tmp_path, catalog, aeron: FakeAeron):
    replayer = FakeReplayer()
    conductor = ArchiveConductor(aeron=aeron, catalog=catalog, settings=ConductorSettings(ArchiveServiceOptions(tmp_path), 1),
                                 recorder=FakeRecorder(), replayer=replayer, control_channels=[("aeron:ipc", 10)])
    session = make_handlers(tmp_path, catalog).session  # a control session to answer
    recording_id = make_recording(catalog, tmp_path, 0, 4096)
    aeron.hold_publications = True
    conductor.replays.replay(session, ReplayRequest(CONTROL_SESSION_ID, 90, recording_id, -1, REPLAY_ALL_AND_STOP,
                                                    2002, -1, -1, "aeron:udp?endpoint=localhost:40124"))
    return conductor, replayer, session


def test_each_duty_cycle_polls_the_pending_publications_and_starts_the_replay_once_added(tmp_path):
    aeron = FakeAeron()
    with Catalog.open(tmp_path) as catalog:
        conductor, replayer, session = conductor_with_pending_replay(tmp_path, catalog, aeron)
        [pending] = aeron.pending
        conductor.do_work()
        conductor.do_work()
        assert pending.polls == 3 and replayer.sessions == []  # once in the request, then once a cycle
        pending.held = False
        conductor.do_work()
        assert [s.publication for s in replayer.sessions] == [pending.publication]
        assert conductor.replays.pending_count == 0 and outbox(session) == []  # the OK waits for the replayer
        conductor.on_close()


def test_a_refused_publication_is_answered_and_counted_as_an_archive_error(tmp_path):
    aeron = FakeAeron()
    aeron.refusal = AeronError("add_exclusive_publication(...): (-1) invalid channel\n[driver] port out of range")
    with Catalog.open(tmp_path) as catalog:
        conductor, replayer, session = conductor_with_pending_replay(tmp_path, catalog, aeron)
        errors_before = conductor.demuxer.failures.total
        aeron.pending[0].held = False
        conductor.do_work()
        [answer] = outbox(session)
        assert (answer.correlation_id, answer.relevant_id) == (90, ArchiveErrorCode.GENERIC)
        assert answer.error_message == ("ReplayRequest: media driver refused: add_exclusive_publication(...): "
                                        "(-1) invalid channel | [driver] port out of range")
        assert conductor.demuxer.failures.total == errors_before + 1 and replayer.sessions == []
        conductor.on_close()
