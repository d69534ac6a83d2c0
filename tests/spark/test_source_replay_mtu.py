"""``replay.mtu`` in a Spark read: 1 KiB messages replayed over UDP (the Python workers on media
drivers of their own, reaching the sidecar by its control channel only) read back the same rows at
the recording's mtu and at a larger one, and the sidecar replays at the mtu the option asks for
(its log names each replay's channel)."""

from __future__ import annotations

import re

import pytest

from tests.spark.source_fixtures import TERM_LENGTH, numbered_payloads, rows_of

pytestmark = pytest.mark.timeout(600)

KIB = 1024
MESSAGES = 400


@pytest.fixture(scope="module")
def one_kib_recording(archive):
    recorded, _ = archive.record(numbered_payloads(0, MESSAGES, sizes=(KIB,)), stop=True)
    assert TERM_LENGTH // 8 < 65504  # so auto's mtu is the term's cap, 8192 here
    return recorded


def read_over_udp(spark_source, archive, recording_id: int, **options: str):
    """Rows of a batch read whose workers share no media driver with the sidecar (UDP replays)."""
    reader = (spark_source.read.format("aeron-archive")
              .option("archive.controlChannel", archive.sidecar.control_channel)
              .option("aeron.driver", "embedded")
              .option("recordingIds", str(recording_id)))
    for name, value in options.items():
        reader = reader.option(name, value)
    return rows_of(reader.load())


def replay_mtus(archive, recording_id: int) -> list[int]:
    """The mtu of each replay of ``recording_id`` the sidecar has logged so far."""
    mtus = []
    for line in archive.sidecar.stderr_lines:
        if f"of recording {recording_id} from" in line and "replay_requests: replay" in line:
            match = re.search(r"\|mtu=(\d+)\|", line)
            if match is not None and "aeron:udp" in line:
                mtus.append(int(match.group(1)))
    return mtus


def test_1kib_messages_read_the_same_rows_at_the_recordings_mtu_and_at_the_largest_the_term_allows(
        spark_source, archive, one_kib_recording):
    recording_id = one_kib_recording.recording_id
    expected = sorted(one_kib_recording.rows())

    at_recording_mtu = read_over_udp(spark_source, archive, recording_id, **{"replay.mtu": "recording"})
    after_recording_mtu = len(replay_mtus(archive, recording_id))
    assert replay_mtus(archive, recording_id) and set(replay_mtus(archive, recording_id)) == {1408}

    by_default = read_over_udp(spark_source, archive, recording_id)  # auto: the largest towards loopback,
    assert set(replay_mtus(archive, recording_id)[after_recording_mtu:]) == {TERM_LENGTH // 8}  # within the term
    assert at_recording_mtu == by_default == expected
