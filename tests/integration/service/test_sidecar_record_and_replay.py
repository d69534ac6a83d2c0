"""Record -> list -> replay through the real sidecar: over UDP with term rotation, fragmented
messages and segment rollover; a recording that ends with a term's padding; replays that verify
CRC-32C checksums (and end with an error at a damaged frame). Uses the ``sidecar`` and
``local_aeron`` fixtures of tests/integration/conftest.py."""

from __future__ import annotations

import pytest
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.codecs import RecordingSignal, SourceLocation
from aeron_spark.archive.client.replay_subscription import ReplayedMessage, replay_image_session_id
from aeron_spark.driver_integration import AeronClient

from tests.support.ports import udp_channel
from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import (
    RECORDED_STREAM,
    TERM,
    TIMEOUT,
    as_pairs,
    await_recorded,
    expected,
    ipc_archive,
    payloads,
    publish,
    record_ipc,
)

pytestmark = pytest.mark.timeout(120)


def test_udp_record_list_replay_with_term_rotation_and_fragments(sidecar: Sidecar, aeron_client: AeronClient):
    """Everything over UDP between the test's driver and the sidecar's embedded driver: control,
    the recorded stream (64 KiB terms, so several term rotations with padding and a 64 KiB
    segment rollover) and the replay; positions and payloads identical to what was published."""
    channel = f"{udp_channel()}|term-length={TERM}"
    with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron_client,
                               timeout=TIMEOUT) as archive:
        subscription_id = archive.start_recording(channel, RECORDED_STREAM, SourceLocation.REMOTE)
        publication = aeron_client.add_exclusive_publication(channel, RECORDED_STREAM)
        try:
            recording_id = archive.await_recording_signal(
                RecordingSignal.START, subscription_id=subscription_id).recording_id
            published = publish(publication, payloads(300, seed=4))
            assert published.end > 3 * TERM  # several term rotations
            assert any(len(m) > 1408 for m in published.messages)  # fragmented messages
            await_recorded(archive, recording_id, published.end)
            archive.stop_recording(channel, RECORDED_STREAM)
            assert archive.await_recording_signal(RecordingSignal.STOP, recording_id=recording_id).position \
                == published.end
        finally:
            publication.close()

        [descriptor] = [d for d in archive.list_recordings() if d.recording_id == recording_id]
        assert (descriptor.start_position, descriptor.stop_position) == (0, published.end)
        assert (descriptor.term_buffer_length, descriptor.stream_id) == (TERM, RECORDED_STREAM)
        assert descriptor.original_channel == channel
        assert len(list(sidecar.archive_dir.glob(f"{recording_id}-*.rec"))) > 1  # segment rollover

        with archive.replay(recording_id, 0, published.end, udp_channel(), 2001) as replay:
            assert replay.image.session_id == replay_image_session_id(replay.replay_session_id)
            replayed = list(replay.messages(idle_timeout=TIMEOUT))
        assert as_pairs(replayed) == expected(published)
        assert replayed[-1].next_position == published.end

        middle = published.starts[150]
        with archive.replay(recording_id, middle, published.end - middle, udp_channel(), 2002) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published, middle)


def test_replay_of_a_recording_that_ends_with_term_padding_completes(sidecar: Sidecar, local_aeron: AeronClient):
    """A recording truncated at a term boundary ends with the padding frame of that term (what a
    crash can also leave). Its replay delivers every message and completes - found by the kill -9
    test: `ReplaySubscription.messages` used to raise ReplayError because padding moves the
    position without a message (fixed in archive/replay_subscription.py)."""
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(150, seed=4))
        in_first_term = expected(published, 0, TERM)
        last_start, last_message = in_first_term[-1]
        assert last_start + len(last_message) + 32 < TERM  # so the term ends with padding
        archive.truncate_recording(recording_id, TERM)
        archive.await_recording_signal(RecordingSignal.DELETE, recording_id=recording_id)
        with archive.replay(recording_id, 0, TERM, "aeron:ipc", 2001) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == in_first_term
            assert replay.position == TERM


@pytest.mark.parametrize("sidecar", [["--checksum", "crc32c", "--replay-checksum", "crc32c"]], indirect=True,
                         ids=["crc32c"])
def test_replay_verifies_record_checksums_when_enabled(sidecar: Sidecar, local_aeron: AeronClient):
    """With --replay-checksum the replayer verifies each frame's stored CRC-32C before sending it
    (and restores the session id): a clean recording replays exactly; after one payload byte on
    disk is flipped, the replay delivers what precedes the damaged block and ends with an ERROR
    naming the position. (`serve` had no way to enable this until the audit added the option.)"""
    with ipc_archive(local_aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(100, seed=16))
        with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2001) as replay:
            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)

        victim = published.starts[60]
        with open(sidecar.archive_dir / f"{recording_id}-0.rec", "r+b") as segment:
            segment.seek(victim + 40)
            byte = segment.read(1)
            segment.seek(victim + 40)
            segment.write(bytes([byte[0] ^ 0xFF]))
        received: list[ReplayedMessage] = []
        with pytest.raises(ArchiveError) as failed:
            with archive.replay(recording_id, 0, published.end, "aeron:ipc", 2002) as replay:
                for message in replay.messages(idle_timeout=TIMEOUT):
                    received.append(message)
        assert f"checksum mismatch at position={victim}" in failed.value.archive_message
        assert as_pairs(received) == expected(published, 0, victim)[:len(received)]
        assert all(m.position < victim for m in received)
