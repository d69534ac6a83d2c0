"""The source never shows a sink recording's debris: a commit that died before its marker leaves
frames the sink no longer truncates (connector/sink/commit.py); the next batch is appended after
them and its marker names its data_start, so readers skip [previous marker end, data_start)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from aeron_spark.connector.commit_markers import MARKER_RESERVED_VALUE, markers_in_frames
from aeron_spark.connector.source.message_batches import MessageBatchBuilder
from aeron_spark.connector.source.offset_reader import OffsetReader
from aeron_spark.connector.source.sink_visibility import next_batch_start
from aeron_spark.driver_integration.frame import BEGIN_FRAG_FLAG, END_FRAG_FLAG, scan_frames

from tests.support.fake_sink_archive import FakeSinkArchive, InjectedCrash
from tests.unit.connector.source.test_sink_visibility import commit_rows, read_all, rows, source_options


def die_mid_commit(tmp_path, archive: FakeSinkArchive, batch_id: int, payloads: list[bytes], appends: int) -> None:
    archive.crash_after_appends = appends
    with pytest.raises(InjectedCrash):
        commit_rows(tmp_path, archive, batch_id, payloads)
    archive.crash_after_appends = None
    for recording in archive.recordings.values():
        recording.active = False  # autoStop: the dead commit's publication is gone


def marker_spans(archive: FakeSinkArchive, recording_id: int) -> list[tuple[int, int, int]]:
    """(data_start, marker position, marker end) of every marker, in order."""
    recording = archive.recordings[recording_id]
    data = np.frombuffer(bytes(recording.data), dtype=np.uint8)
    found = markers_in_frames(data, recording.start_position, scan_frames(data).offsets)
    return [(m.marker.data_start, m.position, m.end) for m in found]


def sink_with_debris(tmp_path) -> tuple[FakeSinkArchive, int, list[bytes], tuple[int, int]]:
    """Batches 0, 1, 2 committed; a commit of batch 1 died between them (its debris stays)."""
    archive = FakeSinkArchive()
    commit_rows(tmp_path, archive, 0, rows(100, "a"))
    die_mid_commit(tmp_path, archive, 1, rows(4000, "dead"), appends=2)
    rid = next(iter(archive.recordings))
    debris_end = archive.recordings[rid].position
    commit_rows(tmp_path, archive, 1, rows(60, "b"))
    commit_rows(tmp_path, archive, 2, rows(30, "c"))
    spans = marker_spans(archive, rid)
    assert spans[1][0] == debris_end > spans[0][2]  # batch 1 begins after the debris
    return archive, rid, rows(100, "a") + rows(60, "b") + rows(30, "c"), (spans[0][2], spans[1][0])


def test_debris_between_batches_is_never_read(tmp_path):
    archive, rid, expected, _ = sink_with_debris(tmp_path)
    latest, _ = OffsetReader(source_options(rid), lambda: archive).latest_positions([rid])
    assert latest[rid] == archive.recordings[rid].position
    assert read_all(archive, rid, 0, latest[rid]) == expected


def test_every_range_ending_at_a_committed_end_reads_exactly_its_batches(tmp_path):
    archive, rid, expected, (debris_start, debris_end) = sink_with_debris(tmp_path)
    ends = [0] + [end for _, _, end in marker_spans(archive, rid)]
    counts = [0, 100, 160, 190]
    for i, start in enumerate(ends):
        for j in range(i + 1, len(ends)):
            assert read_all(archive, rid, start, ends[j]) == expected[counts[i]:counts[j]]
    # A range may also start inside the debris (a term-boundary split): the rest of it is skipped.
    inside = [b for b in archive.recordings[rid].boundaries() if debris_start < b < debris_end]
    assert inside
    for start in inside[:: max(1, len(inside) // 7)]:
        assert read_all(archive, rid, start, ends[-1]) == expected[100:]


@pytest.mark.parametrize("target", [1 << 10, 1 << 13, 1 << 16])
def test_rows_before_a_marker_are_held_across_chunks_until_it_says_where_its_batch_began(tmp_path, target):
    archive, rid, expected, _ = sink_with_debris(tmp_path)
    recording = archive.recordings[rid]
    builder = MessageBatchBuilder(recording_id=rid, session_id=1, stream_id=1001,
                                  start_position=recording.start_position, min_end_position=recording.start_position,
                                  allow_leading_fragments=True, target_batch_bytes=target,
                                  drop_reserved_value=MARKER_RESERVED_VALUE)
    batches: list[pa.RecordBatch] = []
    with archive.read(rid, recording.start_position, recording.position) as blocks:
        for position, block in blocks:
            batches += builder.add_block(block, position)
    batches += builder.finish()
    assert pa.Table.from_batches(batches).column("payload").to_pylist() == expected
    assert builder.stats.debris_messages > 0 and builder.stats.dropped_fragments == 0


def test_a_dead_commits_unfinished_message_is_debris_not_data_loss(tmp_path):
    archive = FakeSinkArchive()
    big = [bytes([65 + i % 26]) * 5000 for i in range(6)]  # > mtu: fragmented messages
    commit_rows(tmp_path, archive, 0, big)
    rid = next(iter(archive.recordings))
    recording = archive.recordings[rid]
    data = np.frombuffer(bytes(recording.data), dtype=np.uint8)
    offsets = scan_frames(data).offsets
    flags = data[offsets + 5]
    first_fragment = int(offsets[np.flatnonzero((flags & (BEGIN_FRAG_FLAG | END_FRAG_FLAG)) == BEGIN_FRAG_FLAG)[0]])
    second = int(offsets[np.searchsorted(offsets, first_fragment, side="right")])
    recording.data += bytes(recording.data[first_fragment:second])  # a message's first fragment only
    commit_rows(tmp_path, archive, 1, rows(10, "b"))
    end = recording.position
    assert read_all(archive, rid, 0, end) == big + rows(10, "b")  # failOnDataLoss (default) did not fire


def test_a_sink_recording_without_debris_reads_as_before(tmp_path):
    archive = FakeSinkArchive()
    for batch_id in range(4):
        commit_rows(tmp_path, archive, batch_id, rows(25 + batch_id, f"x{batch_id}"))
    rid = next(iter(archive.recordings))
    spans = marker_spans(archive, rid)
    assert all(data_start == previous_end for (data_start, _, _), (_, _, previous_end)
               in zip(spans[1:], spans[:-1]))  # each batch begins at the previous marker's end
    expected = [row for batch_id in range(4) for row in rows(25 + batch_id, f"x{batch_id}")]
    assert read_all(archive, rid, 0, archive.recordings[rid].position) == expected


def read_piece(archive: FakeSinkArchive, rid: int, start: int, end: int, *, look_past_end: bool) -> list[bytes]:
    """One range read as the partition reader does (whole messages here: every frame is one), with
    or without looking past a mid-batch range end for the next marker (next_batch_start)."""
    recording = archive.recordings[rid]
    builder = MessageBatchBuilder(recording_id=rid, session_id=1, stream_id=1001, start_position=start,
                                  min_end_position=start, allow_leading_fragments=start == recording.start_position,
                                  target_batch_bytes=2048, drop_reserved_value=MARKER_RESERVED_VALUE)
    batches: list[pa.RecordBatch] = []
    with archive.read(rid, start, end) as blocks:
        for position, block in blocks:
            batches += builder.add_block(block, position)
    descriptor, replay = recording.descriptor(), source_options(rid).replay
    lookup = (lambda: next_batch_start(archive, descriptor, end, recording.position, replay)) if look_past_end else None
    batches += builder.finish(lookup)
    return pa.Table.from_batches(batches).column("payload").to_pylist() if batches else []


def test_a_range_cut_inside_a_batch_resolves_what_it_holds_by_the_next_marker(tmp_path):
    archive, rid, expected, (debris_start, debris_end) = sink_with_debris(tmp_path)
    recording = archive.recordings[rid]
    cuts = sorted(b for b in recording.boundaries() if recording.start_position < b < recording.position)
    for cut in cuts[:: max(1, len(cuts) // 40)] + [debris_start, debris_end]:
        first = read_piece(archive, rid, recording.start_position, cut, look_past_end=True)
        second = read_piece(archive, rid, cut, recording.position, look_past_end=True)
        assert first + second == expected, cut


def test_without_looking_past_the_range_end_a_cut_inside_debris_shows_it(tmp_path):
    """Why the partition reader looks past a mid-batch range end: a builder not told where the next
    batch starts releases, at a cut between debris and the next marker, the debris as rows."""
    archive, rid, expected, (debris_start, debris_end) = sink_with_debris(tmp_path)
    recording = archive.recordings[rid]
    inside = [b for b in recording.boundaries() if debris_start < b < debris_end]
    head = read_piece(archive, rid, recording.start_position, inside[len(inside) // 2], look_past_end=False)
    assert head[:100] == expected[:100] and len(head) > 100  # debris rows after batch 0
    assert read_piece(archive, rid, recording.start_position, debris_start, look_past_end=False) == expected[:100]


def test_the_partition_reader_splits_a_sink_recording_anywhere_without_showing_debris(tmp_path):
    archive, rid, expected, (debris_start, debris_end) = sink_with_debris(tmp_path)
    recording = archive.recordings[rid]
    inside = [b for b in recording.boundaries() if debris_start < b < debris_end]
    cuts = sorted(b for b in recording.boundaries() if recording.start_position < b < recording.position)
    for cut in cuts[:: max(1, len(cuts) // 20)] + inside[:: max(1, len(inside) // 5)] + [debris_start, debris_end]:
        first = read_all(archive, rid, recording.start_position, cut)
        second = read_all(archive, rid, cut, recording.position)
        assert first + second == expected, cut
