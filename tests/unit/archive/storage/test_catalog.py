"""archive.catalog: byte layout, round trips, growth, in-place updates, damage reporting."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_spark.archive.storage.catalog import (
    ARCHIVE_FILE_VERSION, CATALOG_FILE_NAME, ENTRY_LENGTH, MAX_STRINGS_LENGTH, Catalog, CatalogError,
    DescriptorDecodingError, DescriptorEncodingError, UnknownRecordingError,
    decode_recording_descriptor, encode_recording_descriptor)
from aeron_spark.archive import codecs
from aeron_spark.archive.codecs import RecordingDescriptorMessage, descriptor_body
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor

TERM = 64 * 1024
SEGMENT = 128 * 1024


def new_recording(catalog: Catalog, **overrides) -> int:
    fields = dict(start_position=0, initial_term_id=7, segment_file_length=SEGMENT,
                  term_buffer_length=TERM, mtu_length=1408, session_id=-12, stream_id=1001,
                  stripped_channel="aeron:udp?endpoint=localhost:40123",
                  original_channel="aeron:udp?endpoint=localhost:40123|term-length=64k",
                  source_identity="127.0.0.1:5555", start_timestamp=1_700_000_000_000)
    fields.update(overrides)
    return catalog.add_recording(**fields)


def sample_descriptor(**overrides) -> RecordingDescriptor:
    fields = dict(recording_id=3, start_timestamp=11, stop_timestamp=-1, start_position=64,
                  stop_position=-1, initial_term_id=-5, segment_file_length=SEGMENT,
                  term_buffer_length=TERM, mtu_length=1408, session_id=99, stream_id=10,
                  stripped_channel="aeron:ipc", original_channel="aeron:ipc?alias=x",
                  source_identity="aeron:ipc", control_session_id=4, correlation_id=5)
    fields.update(overrides)
    return RecordingDescriptor(**fields)


# ---------------------------------------------------------------- body codec, byte by byte

def test_encoded_body_layout_matches_template_22():
    body = encode_recording_descriptor(sample_descriptor())
    assert struct.unpack_from("<qqqqqqqiiiiii", body, 0) == (
        4, 5, 3, 11, -1, 64, -1, -5, SEGMENT, TERM, 1408, 99, 10)
    assert body[80:84] == struct.pack("<I", 9) and body[84:93] == b"aeron:ipc"
    assert body[93:97] == struct.pack("<I", 17) and body[97:114] == b"aeron:ipc?alias=x"
    assert body[114:118] == struct.pack("<I", 9) and body[118:] == b"aeron:ipc"
    assert len(body) == 127


def test_decode_reports_bytes_used_and_ignores_trailing_bytes():
    descriptor = sample_descriptor()
    body = encode_recording_descriptor(descriptor)
    decoded, used = decode_recording_descriptor(b"\xff" * 8 + body + b"\x00" * 50, offset=8)
    assert decoded == descriptor and used == len(body)


def test_non_ascii_string_is_rejected_naming_the_field():
    with pytest.raises(DescriptorEncodingError, match="source_identity must be US-ASCII"):
        encode_recording_descriptor(sample_descriptor(source_identity="caf\u00e9"))


@pytest.mark.parametrize("cut", [10, 80, 83, 90, 126])
def test_truncated_body_is_a_decoding_error(cut):
    body = encode_recording_descriptor(sample_descriptor())
    with pytest.raises(DescriptorDecodingError):
        decode_recording_descriptor(body[:cut])


# ---------------------------------------------------------------- the file

def test_new_catalog_file_layout(tmp_path):
    with Catalog.open(tmp_path, max_entries=4) as catalog:
        recording_id = new_recording(catalog)
    data = (tmp_path / CATALOG_FILE_NAME).read_bytes()
    assert len(data) == 5 * ENTRY_LENGTH
    assert struct.unpack_from("<ii", data, 0) == (ARCHIVE_FILE_VERSION, 1024)
    assert ARCHIVE_FILE_VERSION == (2 << 16) | (1 << 8)
    assert data[8:1024] == bytes(1016)
    slot = data[1024:2048]
    length, valid = struct.unpack_from("<ib", slot, 0)
    assert recording_id == 0 and valid == 1
    assert slot[5:32] == bytes(27)
    descriptor, used = decode_recording_descriptor(slot, 32)
    assert used == length
    assert descriptor.recording_id == 0 and descriptor.stop_position == -1
    assert descriptor.stop_timestamp == -1 and descriptor.control_session_id == 0
    assert slot[32 + length:] == bytes(1024 - 32 - length)


def test_add_then_lookup_by_id_and_iteration(tmp_path):
    with Catalog.open(tmp_path, max_entries=8) as catalog:
        ids = [new_recording(catalog, stream_id=i) for i in range(5)]
        assert ids == [0, 1, 2, 3, 4]
        assert catalog.descriptor(3).stream_id == 3
        assert catalog.descriptor(5) is None and catalog.descriptor(-1) is None
        assert catalog.descriptor(10_000) is None
        assert [d.recording_id for d in catalog.descriptors(from_recording_id=2, count=2)] == [2, 3]
        assert [d.recording_id for d in catalog] == ids
        assert catalog.count_entries() == 5 and catalog.max_entries() == 8


def test_new_recording_defaults_are_those_of_a_fresh_recording(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        recording_id = new_recording(catalog, start_timestamp=None, start_position=4096)
        descriptor = catalog.descriptor(recording_id)
    assert descriptor.start_timestamp > 1_600_000_000_000
    assert (descriptor.stop_timestamp, descriptor.stop_position) == (-1, -1)
    assert descriptor.start_position == 4096 and descriptor.is_active


def test_reopen_continues_ids_and_keeps_invalid_slots(tmp_path):
    with Catalog.open(tmp_path, max_entries=8) as catalog:
        for _ in range(3):
            new_recording(catalog)
        catalog.invalidate(1)
        assert catalog.descriptor(1) is None
        assert catalog.count_entries() == 2
    with Catalog.open(tmp_path) as catalog:
        assert catalog.next_recording_id == 3
        assert catalog.count_entries() == 2
        assert catalog.entry(1).valid is False
        assert [d.recording_id for d in catalog.descriptors()] == [0, 2]
        assert new_recording(catalog) == 3
        catalog.mark_valid(1)
        assert catalog.descriptor(1) is not None and catalog.count_entries() == 4
        with pytest.raises(CatalogError, match="already valid"):
            catalog.mark_valid(1)


def test_in_place_updates(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        recording_id = new_recording(catalog)
        before = catalog.descriptor(recording_id)
        catalog.recording_stopped(recording_id, 4096, 1234)
        catalog.update_start_position(recording_id, 1024)
        stopped = catalog.descriptor(recording_id)
        assert (stopped.start_position, stopped.stop_position, stopped.stop_timestamp) == (1024, 4096, 1234)
        catalog.extend(recording_id, control_session_id=77, correlation_id=88, session_id=-3)
        extended = catalog.descriptor(recording_id)
        assert extended == before.with_changes(
            start_position=1024, control_session_id=77, correlation_id=88, session_id=-3)
        catalog.update_stop_position(recording_id, 8192)
        catalog.update_stop_timestamp(recording_id, 99)
    with Catalog.open(tmp_path, read_only=True) as catalog:
        final = catalog.descriptor(recording_id)
    assert (final.stop_position, final.stop_timestamp, final.session_id) == (8192, 99, -3)


def test_updates_of_unknown_or_invalid_recordings_name_the_id(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        new_recording(catalog)
        catalog.invalidate(0)
        with pytest.raises(UnknownRecordingError, match="unknown recording 0"):
            catalog.update_stop_position(0, 64)
        with pytest.raises(UnknownRecordingError, match="unknown recording 5"):
            catalog.recording_stopped(5, 64)
        with pytest.raises(UnknownRecordingError, match="recording 9"):
            catalog.invalidate(9)


def test_growth_keeps_entries_and_doubles_capacity(tmp_path):
    with Catalog.open(tmp_path, max_entries=2) as catalog:
        for i in range(5):
            new_recording(catalog, stream_id=i)
        assert catalog.max_entries() == 8
    assert (tmp_path / CATALOG_FILE_NAME).stat().st_size == 9 * ENTRY_LENGTH
    with Catalog.open(tmp_path) as catalog:
        assert [d.stream_id for d in catalog] == [0, 1, 2, 3, 4]


def test_read_only_open_refuses_writes_and_sees_a_writers_additions(tmp_path):
    with Catalog.open(tmp_path, max_entries=2) as writer:
        new_recording(writer)
        reader = Catalog.open(tmp_path, read_only=True)
        try:
            before = (tmp_path / CATALOG_FILE_NAME).read_bytes()
            with pytest.raises(CatalogError, match="read-only"):
                reader.update_stop_position(0, 64)
            with pytest.raises(CatalogError, match="read-only"):
                new_recording(reader)
            assert (tmp_path / CATALOG_FILE_NAME).read_bytes() == before
            for _ in range(3):
                new_recording(writer)  # grows past the reader's view at open
            assert reader.count_entries() == 4
            assert reader.descriptor(3) is not None
        finally:
            reader.close()


def test_read_only_open_of_missing_catalog_is_a_clear_error(tmp_path):
    with pytest.raises(CatalogError, match="archive.catalog is missing"):
        Catalog.open(tmp_path, read_only=True)


def test_file_sync_levels_are_validated(tmp_path):
    with pytest.raises(ValueError, match=r"file_sync must be one of \(0, 1, 2\)"):
        Catalog.open(tmp_path, file_sync=3)
    for level in (1, 2):
        directory = tmp_path / f"sync-{level}"
        directory.mkdir()
        with Catalog.open(directory, file_sync=level) as catalog:
            new_recording(catalog)
            catalog.recording_stopped(0, 64, 1)
        with Catalog.open(directory, read_only=True) as catalog:
            assert catalog.descriptor(0).stop_position == 64


def test_strings_over_900_bytes(tmp_path, caplog):
    channel = "aeron:udp?endpoint=localhost:1|alias=" + "a" * 400
    with Catalog.open(tmp_path) as catalog:
        recording_id = new_recording(catalog, stripped_channel=channel, original_channel=channel,
                                     source_identity="s" * 200)
        stored = catalog.descriptor(recording_id)
        assert len(stored.stripped_channel + stored.original_channel + stored.source_identity) == MAX_STRINGS_LENGTH
        assert stored.source_identity == "s" * (MAX_STRINGS_LENGTH - 2 * len(channel))
        assert "sourceIdentity of 200 bytes truncated" in caplog.text
        with pytest.raises(DescriptorEncodingError, match="exceed the catalog's 900-byte limit"):
            new_recording(catalog, stripped_channel=channel + "b" * 100, original_channel=channel)
        assert catalog.next_recording_id == 1


@pytest.mark.parametrize("bad, message", [
    (dict(term_buffer_length=1000), "term buffer length 1000"),
    (dict(segment_file_length=32 * 1024), "segment file length 32768"),
    (dict(mtu_length=1000), "mtu length 1000"),
    (dict(start_position=33), "start position 33"),
    (dict(stop_position=0, start_position=64), "stop position 0 is below start position 64"),
])
def test_bad_new_recording_values_are_rejected(tmp_path, bad, message):
    with Catalog.open(tmp_path) as catalog:
        with pytest.raises(ValueError, match=message):
            new_recording(catalog, **bad)


def test_damaged_entries_are_reported_not_returned(tmp_path, caplog):
    with Catalog.open(tmp_path, max_entries=8) as catalog:
        for _ in range(4):
            new_recording(catalog)
    path = tmp_path / CATALOG_FILE_NAME
    with open(path, "r+b") as f:
        f.seek(2 * ENTRY_LENGTH)              # recording 1: impossible length
        f.write(struct.pack("<i", 5000))
        f.seek(3 * ENTRY_LENGTH + 32 + 16)    # recording 2: body names another id
        f.write(struct.pack("<q", 42))
        f.seek(4 * ENTRY_LENGTH + 4)          # recording 3: valid flag garbage
        f.write(b"\x07")
    with Catalog.open(tmp_path) as catalog:
        messages = [str(p) for p in catalog.problems]
        assert any(m.startswith("recording 1: descriptor length 5000") for m in messages)
        assert any(m.startswith("recording 2: slot holds a descriptor for recording 42") for m in messages)
        assert any(m.startswith("recording 3: valid flag 7") for m in messages)
        assert [d.recording_id for d in catalog] == [0]
        assert catalog.descriptor(1) is None and catalog.count_entries() == 1
        assert new_recording(catalog) == 4   # damaged slots keep their ids
    assert "descriptor length 5000" in caplog.text


def test_stored_bodies_are_the_bytes_a_descriptor_response_carries(tmp_path):
    with Catalog.open(tmp_path, max_entries=64) as catalog:
        for index in range(40):
            new_recording(catalog, stream_id=1000 + index % 3, source_identity=f"10.0.0.{index}:5555")
        catalog.recording_stopped(5, 4096, 1_700_000_000_999)
        catalog.invalidate(7)
        wanted = [0, 1, 5, 7, 8, 30, 39]  # runs read together and apart
        stored = catalog.stored_bodies(wanted)
        assert [recording_id for recording_id, _ in stored] == [0, 1, 5, 8, 30, 39]  # 7 is not valid
        for recording_id, body in stored:
            expected = codecs.encode(RecordingDescriptorMessage.from_descriptor(
                catalog.descriptor(recording_id), control_session_id=77, correlation_id=-3))
            assert descriptor_body.descriptor_message(body, 77, -3).data == expected
            assert descriptor_body.stream_id(body) == 1000 + recording_id % 3
            assert descriptor_body.channels(body) == (b"aeron:udp?endpoint=localhost:40123",
                                                      b"aeron:udp?endpoint=localhost:40123|term-length=64k")
        assert catalog.stored_bodies([]) == [] and catalog.stored_bodies([40, 63]) == []
    with open(tmp_path / CATALOG_FILE_NAME, "r+b") as f:
        f.seek(2 * ENTRY_LENGTH + 32 + 16)  # recording 1: body names another id
        f.write(struct.pack("<q", 42))
        f.seek(3 * ENTRY_LENGTH + 32 + 80)  # recording 2: stripped channel longer than the body
        f.write(struct.pack("<I", 900))
        f.seek(4 * ENTRY_LENGTH + 32 + 84)  # recording 3: a byte that is not ASCII in a channel
        f.write(b"\xe9")
    with Catalog.open(tmp_path) as catalog:
        assert [recording_id for recording_id, _ in catalog.stored_bodies([0, 1, 2, 3, 4])] == [0, 4]
        assert [catalog.descriptor(i) is not None for i in range(5)] == [True, False, False, False, True]


def test_hole_below_last_entry_is_reported_and_never_reused(tmp_path):
    with Catalog.open(tmp_path, max_entries=8) as catalog:
        for _ in range(3):
            new_recording(catalog)
    with open(tmp_path / CATALOG_FILE_NAME, "r+b") as f:
        f.seek(2 * ENTRY_LENGTH)
        f.write(bytes(4))
    with Catalog.open(tmp_path) as catalog:
        assert any("empty slots 1 below the last used id 2" in str(p) for p in catalog.problems)
        assert new_recording(catalog) == 3


def test_other_catalog_versions_are_refused(tmp_path):
    path = tmp_path / CATALOG_FILE_NAME
    path.write_bytes(struct.pack("<ii", (3 << 16) | (1 << 8), 32) + bytes(2048))
    with pytest.raises(CatalogError, match="entry length 32"):
        Catalog.open(tmp_path)
    path.write_bytes(struct.pack("<ii", 0, 1024) + bytes(2040))
    with pytest.raises(CatalogError, match=r"catalog file version 0\.0\.0 is not supported"):
        Catalog.open(tmp_path)


def test_partial_last_slot_blocks_writing_but_not_reading(tmp_path):
    with Catalog.open(tmp_path, max_entries=2) as catalog:
        new_recording(catalog)
    with open(tmp_path / CATALOG_FILE_NAME, "ab") as f:
        f.write(b"\x00" * 10)
    with pytest.raises(CatalogError, match="not a multiple of 1024"):
        Catalog.open(tmp_path)
    with Catalog.open(tmp_path, read_only=True) as catalog:
        assert catalog.descriptor(0) is not None
        assert "not a multiple of 1024" in str(catalog.problems[0])


# ---------------------------------------------------------------- properties

ascii_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300)
int32 = st.integers(-2**31, 2**31 - 1)

recording_fields = st.fixed_dictionaries(dict(
    start_position=st.integers(0, 2**40).map(lambda p: p * 32),
    initial_term_id=int32,
    term_buffer_length=st.sampled_from([64 * 1024, 1024 * 1024, 1024 ** 3]),
    mtu_length=st.sampled_from([1408, 8192, 65504 // 32 * 32]),
    session_id=int32, stream_id=int32,
    stripped_channel=ascii_text, original_channel=ascii_text, source_identity=ascii_text,
    start_timestamp=st.integers(0, 2**62)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(recording_fields, min_size=1, max_size=12), capacity=st.integers(1, 4))
def test_property_add_reopen_equal_with_growth(tmp_path_factory, records, capacity):
    directory = tmp_path_factory.mktemp("catalog")
    expected = []
    with Catalog.open(directory, max_entries=capacity) as catalog:
        for fields in records:
            fields = dict(fields, segment_file_length=fields["term_buffer_length"])
            recording_id = catalog.add_recording(**fields)
            expected.append(catalog.descriptor(recording_id))
            assert expected[-1].stripped_channel == fields["stripped_channel"]
            assert expected[-1].original_channel == fields["original_channel"]
            room = MAX_STRINGS_LENGTH - len(fields["stripped_channel"]) - len(fields["original_channel"])
            assert expected[-1].source_identity == fields["source_identity"][:room]
    with Catalog.open(directory, read_only=True) as reopened:
        assert list(reopened) == expected
        assert reopened.max_entries() >= len(records)
        assert reopened.problems == []


@settings(max_examples=100, deadline=None)
@given(d=st.builds(
    RecordingDescriptor, recording_id=st.integers(0, 2**63 - 1), start_timestamp=st.integers(-1, 2**63 - 1),
    stop_timestamp=st.integers(-1, 2**63 - 1), start_position=st.integers(-2**63, 2**63 - 1),
    stop_position=st.integers(-2**63, 2**63 - 1), initial_term_id=int32, segment_file_length=int32,
    term_buffer_length=int32, mtu_length=int32, session_id=int32, stream_id=int32,
    stripped_channel=ascii_text, original_channel=ascii_text, source_identity=ascii_text,
    control_session_id=st.integers(-2**63, 2**63 - 1), correlation_id=st.integers(-2**63, 2**63 - 1)))
def test_property_body_round_trip(d):
    body = encode_recording_descriptor(d)
    assert decode_recording_descriptor(body) == (d, len(body))


# ---------------------------------------------------------------- crash recovery on open

def record_frames(directory, recording_id, start, count, frame_length=232):
    from aeron_spark.archive.storage.segment import SegmentWriter
    from aeron_spark.driver_integration import frame, position as positions
    bits = positions.position_bits_to_shift(TERM)
    aligned = frame.aligned_frame_length(frame_length)
    with SegmentWriter(directory, recording_id, start, TERM, SEGMENT) as writer:
        for index in range(count):
            pos = start + index * aligned
            header = frame.DataFrameHeader(
                frame_length=frame_length, term_offset=pos & (TERM - 1), session_id=-12,
                stream_id=1001, term_id=positions.compute_term_id_from_position(pos, bits, 7))
            writer.append(header.pack() + b"\x01" * (aligned - 32))
    return start + count * aligned


def test_open_archive_directory_recovers_active_recordings(tmp_path, caplog):
    from aeron_spark.archive.storage.catalog import open_archive_directory
    with Catalog.open(tmp_path) as catalog:
        active = new_recording(catalog, start_position=512)
        stopped = new_recording(catalog)
        empty = new_recording(catalog, start_position=1024)
        catalog.recording_stopped(stopped, 0, 5)
    end = record_frames(tmp_path, active, 512, 600)  # 600 * 256 bytes: into the second segment
    before = (tmp_path / CATALOG_FILE_NAME).read_bytes()
    with Catalog.open(tmp_path, read_only=True) as reader:  # read-only opens never recover
        assert reader.descriptor(active).is_active
    assert (tmp_path / CATALOG_FILE_NAME).read_bytes() == before
    catalog, report = open_archive_directory(tmp_path, now_ms=777)
    with catalog:
        assert catalog.descriptor(active).stop_position == end
        assert catalog.descriptor(active).stop_timestamp == 777
        assert catalog.descriptor(empty).stop_position == 1024  # no files: stop = start
        assert catalog.descriptor(stopped).stop_timestamp == 5  # untouched
    assert [r.recording_id for r in report.recovered] == [active, empty]
    assert not report.is_clean  # the recording without files is reported
    assert "NO_SEGMENT_FILES" in report.describe()
    assert "recovered stop position" in caplog.text


def test_open_archive_directory_reports_torn_frames_and_orphans(tmp_path):
    from aeron_spark.archive.storage.catalog import open_archive_directory
    with Catalog.open(tmp_path) as catalog:
        active = new_recording(catalog)
    end = record_frames(tmp_path, active, 0, 10)
    with open(tmp_path / f"{active}-0.rec", "r+b") as f:  # a torn frame after the last good one
        f.seek(end)
        f.write(struct.pack("<i", 4000))
    (tmp_path / "9-0.rec").write_bytes(b"")
    catalog, report = open_archive_directory(tmp_path)
    with catalog:
        assert catalog.descriptor(active).stop_position == end
    assert "TORN_FRAME" in report.describe() or "STALE_DATA" in report.describe()
    assert [p.name for p in report.orphan_segment_files] == ["9-0.rec"]
    with open(tmp_path / f"{active}-0.rec", "rb") as f:  # bytes after the stop were zeroed
        f.seek(end)
        assert f.read(4) == bytes(4)


def test_open_archive_directory_on_a_clean_directory(tmp_path):
    from aeron_spark.archive.storage.catalog import open_archive_directory
    catalog, report = open_archive_directory(tmp_path)
    catalog.close()
    assert report.catalog_created and report.is_clean and report.recovered == ()


def test_listable_and_active_ids_follow_every_change_and_survive_reopen(tmp_path):
    with Catalog.open(tmp_path, max_entries=2) as catalog:  # grows twice below
        for index in range(6):
            new_recording(catalog, stream_id=1001 + index % 2)
        catalog.recording_stopped(0, 0)
        catalog.recording_stopped(3, 0)
        catalog.invalidate(4)
        assert catalog.listable_ids(0).tolist() == [0, 1, 2, 3, 5]
        assert catalog.listable_ids(1, 5, stream_id=1002).tolist() == [1, 3]
        assert catalog.listable_ids(7).tolist() == []
        assert catalog.active_recording_ids() == [1, 2, 5]
        catalog.extend(3, control_session_id=1, correlation_id=2, session_id=3)
        catalog.mark_valid(4)
        assert catalog.active_recording_ids() == [1, 2, 3, 4, 5]
    with Catalog.open(tmp_path) as reopened, Catalog.open(tmp_path, read_only=True) as reader:
        for catalog in (reopened, reader):  # the writer's index, the reader's scan: same answers
            assert catalog.listable_ids(0, 6, stream_id=1001).tolist() == [0, 2, 4]
            assert catalog.active_recording_ids() == [1, 2, 3, 4, 5]
