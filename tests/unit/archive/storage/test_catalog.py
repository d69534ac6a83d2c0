"""archive.catalog: byte layout, round trips, growth, in-place updates, damage reporting."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeron_spark.archive.codecs import catalog_layout as layout
from aeron_spark.archive.storage.catalog import (
    ARCHIVE_FILE_VERSION, CATALOG_FILE_NAME, DEFAULT_CAPACITY, DELETED, INVALID, MAX_STRINGS_LENGTH, VALID,
    Catalog, CatalogError, DescriptorDecodingError, DescriptorEncodingError, OldCatalogVersionError,
    UnknownRecordingError, decode_recording_descriptor, encode_recording_descriptor)
from aeron_spark.archive.storage.checksum import CRC32C
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


# ---------------------------------------------------------------- the file (catalog 3.1.0)

def frame_at(data: bytes, offset: int) -> tuple[int, int, int]:
    return struct.unpack_from("<iii", data, offset)


def test_new_catalog_file_layout_byte_by_byte(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        first = new_recording(catalog)
        second = new_recording(catalog, source_identity="x" * 100)
    data = (tmp_path / CATALOG_FILE_NAME).read_bytes()
    assert len(data) == DEFAULT_CAPACITY == 1024 * 1024  # sparse, Aeron's default capacity
    assert ARCHIVE_FILE_VERSION == (3 << 16) | (1 << 8) == 196864
    # CatalogHeader: version, length 32, nextRecordingId, alignment 64, reserved
    assert struct.unpack_from("<iiqi", data, 0) == (ARCHIVE_FILE_VERSION, 32, 2, 64)
    assert data[20:32] == bytes(12)
    body = encode_recording_descriptor(catalog_descriptor(tmp_path, first))
    length, state, checksum = frame_at(data, 32)
    assert (first, state, checksum) == (0, VALID, 0)
    assert length == layout.align(32 + len(body), 64) - 32 == 256 - 32  # 32 + 92 + 97 string bytes -> 256
    assert data[44:64] == bytes(20)  # reserved
    assert data[64:64 + len(body)] == body
    assert data[64 + len(body):32 + 32 + length] == bytes(length - len(body))  # padding
    second_at = 32 + 32 + length
    assert second_at % 64 == 32 and second == 1
    length2, state2, _ = frame_at(data, second_at)
    assert (32 + length2) % 64 == 0 and state2 == VALID
    assert frame_at(data, second_at + 32 + length2)[0] == 0  # the terminator
    decoded, _ = decode_recording_descriptor(data, second_at + 32, length2)
    assert decoded.source_identity == "x" * 100


def catalog_descriptor(directory, recording_id):
    with Catalog.open(directory, read_only=True) as reader:
        return reader.descriptor(recording_id)


def test_descriptor_checksum_is_the_record_checksum_over_the_descriptor_bytes(tmp_path):
    with Catalog.open(tmp_path, checksum=CRC32C) as catalog:
        recording_id = new_recording(catalog)
        offset = catalog.frame_offset(recording_id)

        def stored_and_computed():
            data = (tmp_path / CATALOG_FILE_NAME).read_bytes()
            length, _, stored = frame_at(data, offset)
            return stored, CRC32C.compute(data[offset + 32:offset + 32 + length])

        stored, computed = stored_and_computed()
        assert stored == computed != 0
        catalog.recording_stopped(recording_id, 4096, 1234)  # every update recomputes it
        stored_after, computed_after = stored_and_computed()
        assert stored_after == computed_after != stored
        catalog.extend(recording_id, control_session_id=1, correlation_id=2, session_id=3)
        assert stored_and_computed()[0] == stored_and_computed()[1]
        assert catalog.entry(recording_id).checksum == stored_and_computed()[0]
    with Catalog.open(tmp_path) as unchecked:  # no checksum configured: restamp writes 0
        assert unchecked.restamp_checksums() == 1
        assert unchecked.entry(recording_id).checksum == 0


def test_add_then_lookup_by_id_and_iteration(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        ids = [new_recording(catalog, stream_id=i) for i in range(5)]
        assert ids == [0, 1, 2, 3, 4]
        assert catalog.descriptor(3).stream_id == 3
        assert catalog.descriptor(5) is None and catalog.descriptor(-1) is None
        assert catalog.descriptor(10_000) is None
        assert [d.recording_id for d in catalog.descriptors(from_recording_id=2, count=2)] == [2, 3]
        assert [d.recording_id for d in catalog] == ids
        assert catalog.count_entries() == 5 and catalog.capacity() == DEFAULT_CAPACITY


def test_new_recording_defaults_are_those_of_a_fresh_recording(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        recording_id = new_recording(catalog, start_timestamp=None, start_position=4096)
        descriptor = catalog.descriptor(recording_id)
    assert descriptor.start_timestamp > 1_600_000_000_000
    assert (descriptor.stop_timestamp, descriptor.stop_position) == (-1, -1)
    assert descriptor.start_position == 4096 and descriptor.is_active


def test_states_invalid_valid_deleted_persist_and_ids_continue(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        for _ in range(4):
            new_recording(catalog)
        catalog.invalidate(1)
        catalog.delete(2)
        assert catalog.descriptor(1) is None and catalog.descriptor(2) is None
        assert catalog.count_entries() == 2
        offset = catalog.frame_offset(2)
    data = (tmp_path / CATALOG_FILE_NAME).read_bytes()
    assert frame_at(data, offset)[1] == DELETED  # the frame stays, its state says DELETED
    with Catalog.open(tmp_path) as catalog:
        assert catalog.next_recording_id == 4
        assert catalog.count_entries() == 2
        assert catalog.entry(1).state == INVALID and catalog.entry(2).deleted
        assert [(e.descriptor.recording_id, e.state_name) for e in catalog.entries()] == [
            (0, "VALID"), (1, "INVALID"), (2, "DELETED"), (3, "VALID")]
        assert [d.recording_id for d in catalog.descriptors()] == [0, 3]
        assert new_recording(catalog) == 4
        catalog.mark_valid(1)
        assert catalog.descriptor(1) is not None and catalog.count_entries() == 4
        with pytest.raises(CatalogError, match="is VALID; cannot make it VALID"):
            catalog.mark_valid(1)
        with pytest.raises(CatalogError, match="is DELETED; cannot make it VALID"):
            catalog.mark_valid(2)
        with pytest.raises(CatalogError, match="is DELETED"):
            catalog.invalidate(2)


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


def test_growth_by_one_and_a_half_keeps_entries(tmp_path):
    with Catalog.open(tmp_path, capacity=256) as catalog:
        assert (tmp_path / CATALOG_FILE_NAME).stat().st_size == 256
        for i in range(5):  # 5 frames of 256 bytes + header + terminator: 256 -> 384 -> ... -> 1944
            new_recording(catalog, stream_id=i)
        assert catalog.capacity() == 1944
    assert (tmp_path / CATALOG_FILE_NAME).stat().st_size == 1944
    with Catalog.open(tmp_path) as catalog:
        assert [d.stream_id for d in catalog] == [0, 1, 2, 3, 4]
        assert catalog.max_entries() == 5 + (1944 - 32 - 5 * 256) // 128


def test_read_only_open_refuses_writes_and_sees_a_writers_additions(tmp_path):
    with Catalog.open(tmp_path, capacity=256) as writer:
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
            assert reader.next_recording_id == 4
            writer.delete(2)
            assert reader.descriptor(2) is None and reader.entry(2).deleted
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


def test_long_strings_fit_up_to_the_bound(tmp_path, caplog):
    channel = "aeron:udp?endpoint=localhost:1|alias=" + "a" * 2000  # far over the old 900 bytes
    with Catalog.open(tmp_path) as catalog:
        recording_id = new_recording(catalog, stripped_channel=channel, original_channel=channel,
                                     source_identity="s" * 3000)
        stored = catalog.descriptor(recording_id)
        assert (stored.stripped_channel, stored.source_identity) == (channel, "s" * 3000)
        huge = "aeron:udp?endpoint=localhost:1|alias=" + "a" * MAX_STRINGS_LENGTH
        with pytest.raises(DescriptorEncodingError, match=f"exceed the catalog's {MAX_STRINGS_LENGTH}-byte limit"):
            new_recording(catalog, stripped_channel=huge, original_channel=channel)
        cut = new_recording(catalog, stripped_channel=channel, original_channel=channel,
                            source_identity="s" * MAX_STRINGS_LENGTH)
        assert len(catalog.descriptor(cut).source_identity) == MAX_STRINGS_LENGTH - 2 * len(channel)
        assert "truncated" in caplog.text
        assert catalog.next_recording_id == 2


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
    with Catalog.open(tmp_path) as catalog:
        offsets = [catalog.frame_offset(new_recording(catalog)) for _ in range(4)]
    path = tmp_path / CATALOG_FILE_NAME
    with open(path, "r+b") as f:
        f.seek(offsets[1] + 32 + 80)          # recording 1: stripped channel longer than the frame
        f.write(struct.pack("<I", 5000))
        f.seek(offsets[3] + 4)                # recording 3: state garbage
        f.write(struct.pack("<i", 7))
    with Catalog.open(tmp_path) as catalog:
        messages = [str(p) for p in catalog.problems]
        assert any(m.startswith("recording 1: at offset") for m in messages)
        assert any(m.startswith("recording 3: state 7") for m in messages)
        assert [d.recording_id for d in catalog] == [0, 2]
        assert catalog.descriptor(1) is None and catalog.count_entries() == 2
        assert new_recording(catalog) == 4   # damaged entries keep their ids
    assert "state 7" in caplog.text


def test_a_damaged_frame_length_stops_the_walk_and_blocks_writing(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        offsets = [catalog.frame_offset(new_recording(catalog)) for _ in range(3)]
    with open(tmp_path / CATALOG_FILE_NAME, "r+b") as f:
        f.seek(offsets[1])
        f.write(struct.pack("<i", 100))  # not a multiple of the alignment
    with pytest.raises(CatalogError, match="refusing to append to a damaged catalog"):
        Catalog.open(tmp_path)
    with Catalog.open(tmp_path, read_only=True) as reader:
        assert [d.recording_id for d in reader] == [0]
        assert "entries after it are not read" in str(reader.problems[0])


def test_stored_bodies_are_the_bytes_a_descriptor_response_carries(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        for index in range(40):
            new_recording(catalog, stream_id=1000 + index % 3, source_identity=f"10.0.0.{index}:5555")
        catalog.recording_stopped(5, 4096, 1_700_000_000_999)
        catalog.invalidate(7)
        catalog.delete(8)
        wanted = [0, 1, 5, 7, 8, 9, 30, 39]  # runs read together and apart
        stored = catalog.stored_bodies(wanted)
        assert [recording_id for recording_id, _ in stored] == [0, 1, 5, 9, 30, 39]  # 7, 8 are not valid
        for recording_id, body in stored:
            expected = codecs.encode(RecordingDescriptorMessage.from_descriptor(
                catalog.descriptor(recording_id), control_session_id=77, correlation_id=-3))
            assert descriptor_body.descriptor_message(body, 77, -3).data == expected  # no padding sent
            assert descriptor_body.stream_id(body) == 1000 + recording_id % 3
            assert descriptor_body.channels(body) == (b"aeron:udp?endpoint=localhost:40123",
                                                      b"aeron:udp?endpoint=localhost:40123|term-length=64k")
        assert catalog.stored_bodies([]) == [] and catalog.stored_bodies([40, 63]) == []
        offsets = [catalog.frame_offset(i) for i in range(5)]
    with open(tmp_path / CATALOG_FILE_NAME, "r+b") as f:
        f.seek(offsets[1] + 32 + 16)  # recording 1: body names another id
        f.write(struct.pack("<q", 42))
        f.seek(offsets[2] + 32 + 80)  # recording 2: stripped channel longer than the frame
        f.write(struct.pack("<I", 900))
        f.seek(offsets[3] + 32 + 84)  # recording 3: a byte that is not ASCII in a channel
        f.write(b"\xe9")
    with Catalog.open(tmp_path, read_only=True) as catalog:
        assert [recording_id for recording_id, _ in catalog.stored_bodies([0, 1, 2, 3, 4])] == [0, 4]
        assert [catalog.descriptor(i) is not None for i in range(5)] == [True, False, False, False, True]


def test_a_catalog_the_java_archive_wrote_is_read_alignment_and_next_id_from_the_header(tmp_path):
    """Hand-built as Aeron 1.32+ writes it, with another alignment (128) and a nextRecordingId
    above the last entry (an id handed out whose entry was never written)."""
    bodies = [encode_recording_descriptor(sample_descriptor(recording_id=i, control_session_id=0,
                                                            correlation_id=0)) for i in range(3)]
    data = bytearray(layout.encode_catalog_header(7, alignment=128))
    for index, body in enumerate(bodies):
        data += layout.encode_frame(body, (VALID, INVALID, DELETED)[index], 0, alignment=128)
    data += bytes(4096)
    (tmp_path / CATALOG_FILE_NAME).write_bytes(bytes(data))
    with Catalog.open(tmp_path, read_only=True) as reader:
        assert reader.alignment == 128 and reader.next_recording_id == 7
        assert [(e.descriptor.recording_id, e.state) for e in reader.entries()] == [
            (0, VALID), (1, INVALID), (2, DELETED)]
    with Catalog.open(tmp_path) as writer:
        assert writer.add_recording(start_position=0, initial_term_id=0, segment_file_length=SEGMENT,
                                    term_buffer_length=TERM, mtu_length=1408, session_id=1,
                                    stream_id=2, stripped_channel="aeron:ipc",
                                    original_channel="aeron:ipc", source_identity="aeron:ipc") == 7
        assert (writer.frame_offset(7) - 32) % 128 == 0
    assert struct.unpack_from("<q", (tmp_path / CATALOG_FILE_NAME).read_bytes(), 8)[0] == 8


def test_a_crash_between_body_and_frame_header_leaves_no_entry_and_a_clean_terminator(tmp_path):
    with Catalog.open(tmp_path) as catalog:
        new_recording(catalog)
        end = catalog.frame_offset(0) + 256  # the one frame: 32 + 92 + 97 string bytes -> 256
    # the body of a long entry landed, its header did not (kill -9 in between)
    with open(tmp_path / CATALOG_FILE_NAME, "r+b") as f:
        f.seek(end + 32)
        f.write(b"\x55" * 600)
        f.seek(8)
        f.write(struct.pack("<q", 2))  # the header's id was already handed out
    with Catalog.open(tmp_path) as catalog:
        assert catalog.next_recording_id == 2 and catalog.problems == []
        assert new_recording(catalog) == 2  # a short entry over the long one's bytes
        assert new_recording(catalog) == 3
    with Catalog.open(tmp_path, read_only=True) as reader:
        assert [d.recording_id for d in reader] == [0, 2, 3] and reader.problems == []


def test_old_slot_catalogs_are_read_and_refused_for_writing(tmp_path):
    from tests.support.old_archives import V0, V2_1, old_descriptor, write_old_catalog
    for version in (V0, V2_1):
        write_old_catalog(tmp_path, version, [(old_descriptor(0), True), (old_descriptor(1), False),
                                              (old_descriptor(3, stream_id=9), True)])
        with Catalog.open(tmp_path, read_only=True) as reader:
            assert reader.old_layout and reader.version == version
            assert [(e.descriptor.recording_id, e.valid) for e in reader.entries()] == [
                (0, True), (1, False), (3, True)]
            assert reader.next_recording_id == 4 and reader.count_entries() == 2
            assert [i for i, _ in reader.stored_bodies([0, 1, 3])] == [0, 3]
        with pytest.raises(OldCatalogVersionError, match="run `aeron-archive migrate --dir"):
            Catalog.open(tmp_path)


def test_other_catalog_versions_are_refused(tmp_path):
    path = tmp_path / CATALOG_FILE_NAME
    path.write_bytes(struct.pack("<iiqi", (4 << 16), 32, 0, 64) + bytes(2048))
    with pytest.raises(CatalogError, match=r"incompatible catalog file version 4\.0\.0"):
        Catalog.open(tmp_path)
    path.write_bytes(struct.pack("<iiqi", ARCHIVE_FILE_VERSION, 32, 0, 48) + bytes(2048))
    with pytest.raises(CatalogError, match="alignment 48"):
        Catalog.open(tmp_path, read_only=True)


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
@given(records=st.lists(recording_fields, min_size=1, max_size=12), capacity=st.integers(32, 2048))
def test_property_add_reopen_equal_with_growth(tmp_path_factory, records, capacity):
    directory = tmp_path_factory.mktemp("catalog")
    expected = []
    with Catalog.open(directory, capacity=capacity) as catalog:
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
    from aeron_spark.archive.storage.archive_opening import open_archive_directory
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
    from aeron_spark.archive.storage.archive_opening import open_archive_directory
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
    from aeron_spark.archive.storage.archive_opening import open_archive_directory
    catalog, report = open_archive_directory(tmp_path)
    catalog.close()
    assert report.catalog_created and report.is_clean and report.recovered == ()


def test_listable_and_active_ids_follow_every_change_and_survive_reopen(tmp_path):
    with Catalog.open(tmp_path, capacity=256) as catalog:  # grows below
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


def test_a_reader_in_another_process_sees_appends_growth_and_state_changes(tmp_path):
    import subprocess
    import sys
    script = """
import sys
from aeron_spark.archive.storage.catalog import Catalog
with Catalog.open(sys.argv[1], read_only=True) as catalog:
    for line in sys.stdin:
        print(catalog.next_recording_id, catalog.count_entries(),
              [e.state for e in catalog.entries()], flush=True)
"""
    with Catalog.open(tmp_path, capacity=256) as writer:
        new_recording(writer)
        reader = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            def ask() -> str:
                reader.stdin.write("?\n")
                reader.stdin.flush()
                return reader.stdout.readline().strip()

            assert ask() == "1 1 [1]"
            for _ in range(4):
                new_recording(writer)  # past the file length the reader saw at open
            writer.delete(1)
            writer.invalidate(2)
            assert ask() == "5 3 [1, 2, 0, 1, 1]"
        finally:
            reader.stdin.close()
            reader.wait(10)
