"""archive.codecs.archive_counters: the type ids, keys and labels of Aeron 1.51's archive counters
101-104 and 111-113 (the label texts are those Aeron's Archive.Context and ControlSessionCounter write)."""

from __future__ import annotations

import struct

import pytest

from aeron_spark.archive.codecs import archive_counters as layout
from aeron_spark.archive.codecs.counter_layout import MAX_LABEL_LENGTH


def test_type_ids_are_aerons():
    assert (layout.ARCHIVE_ERROR_COUNT_TYPE_ID, layout.ARCHIVE_CONTROL_SESSIONS_TYPE_ID,
            layout.ARCHIVE_MAX_CYCLE_TIME_TYPE_ID, layout.ARCHIVE_CYCLE_TIME_THRESHOLD_EXCEEDED_TYPE_ID,
            layout.ARCHIVE_RECORDING_SESSION_COUNT_TYPE_ID, layout.ARCHIVE_REPLAY_SESSION_COUNT_TYPE_ID,
            layout.ARCHIVE_CONTROL_SESSION_TYPE_ID) == (101, 102, 103, 104, 111, 112, 113)
    assert layout.ARCHIVE_COUNTER_TYPE_IDS == tuple(range(101, 114))


@pytest.mark.parametrize(("duration_ns", "text"), [
    (100_000_000, "100ms"), (1_500_000, "1500us"), (1_000_000_000, "1s"), (60_000_000_000, "60s"),
    (1234, "1234ns"), (0, "0ns"), (2_000, "2us")])
def test_durations_are_formatted_like_agronas_format_duration(duration_ns: int, text: str):
    assert layout.format_duration(duration_ns) == text


def test_archive_wide_labels():
    assert layout.error_counter_label(7, "0.1.0", "unknown") == \
        "Archive Errors - archiveId=7 version=0.1.0 commit=unknown"
    assert layout.session_count_label(102, 7) == "Archive Control Sessions - archiveId=7"
    assert layout.session_count_label(111, -3) == "Archive Recording Sessions - archiveId=-3"
    assert layout.session_count_label(112, 7) == "Archive Replay Sessions - archiveId=7"
    with pytest.raises(ValueError, match="not an archive session count: accepted types are \\[102, 111, 112\\]"):
        layout.session_count_label(105, 7)


def test_cycle_labels_name_the_agent_the_threshold_and_the_threading_mode():
    assert layout.max_cycle_time_label("archive-conductor", "dedicated", 9) == \
        "archive-conductor max cycle time in ns: DEDICATED - archiveId=9"
    assert layout.cycle_threshold_exceeded_label("archive-recorder", 100_000_000, "shared", 9) == \
        "archive-recorder work cycle time exceeded count: threshold=100ms SHARED - archiveId=9"
    with pytest.raises(ValueError, match="unknown threading mode 'invoker': expected one of dedicated, shared"):
        layout.max_cycle_time_label("archive-conductor", "invoker", 9)
    with pytest.raises(ValueError, match="unknown archive agent 'archive-sessions'"):
        layout.max_cycle_time_label("archive-sessions", "dedicated", 9)


def test_control_session_key_and_label():
    key = layout.control_session_key(5, 1234567890123)
    assert key == struct.pack("<qq", 5, 1234567890123)
    assert layout.decode_control_session_key(key + bytes(96)) == (5, 1234567890123)
    with pytest.raises(ValueError, match="16 bytes, got 8"):
        layout.decode_control_session_key(key[:8])
    assert layout.control_session_label(5, "", "127.0.0.1:5555", -42) == \
        "control-session: sourceIdentity=127.0.0.1:5555 sessionId=-42 - archiveId=5"
    assert layout.control_session_label(5, "name=spark-query-1", "aeron:ipc", 8) == \
        "control-session: name=spark-query-1 sourceIdentity=aeron:ipc sessionId=8 - archiveId=5"


def test_a_long_or_non_ascii_client_info_is_cut_before_the_archive_id_and_made_ascii():
    label = layout.control_session_label(123, "é" + "x" * 500, "aeron:ipc", 1)
    assert len(label) == MAX_LABEL_LENGTH
    assert label.startswith("control-session: ?xxx") and label.endswith(" - archiveId=123")


class FakeReader:
    def __init__(self, counters: dict[int, tuple[int, bytes]]) -> None:
        self.counters = counters

    def find(self, type_id, key_predicate) -> list[int]:
        return [i for i, (t, key) in self.counters.items() if t == type_id and key_predicate(key)]


def test_lookups_match_type_and_key():
    reader = FakeReader({
        0: (113, layout.control_session_key(5, 77) + bytes(96)),
        1: (113, layout.control_session_key(6, 77) + bytes(96)),
        2: (103, struct.pack("<q", 5) + bytes(104)),
        3: (103, struct.pack("<q", 5) + bytes(104)),
        4: (103, struct.pack("<q", 6) + bytes(104)),
    })
    assert layout.find_control_session_counter(reader, 6, 77) == 1
    assert layout.find_control_session_counter(reader, 6, 78) == layout.NULL_COUNTER_ID
    assert layout.find_archive_wide_counters(reader, 103, 5) == [2, 3]
    assert layout.find_archive_wide_counters(reader, 104, 5) == []
