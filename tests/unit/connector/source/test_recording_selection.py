"""Several streams: streamId lists, channelPattern, matching and incremental discovery
(connector/source/recording_selection.py and its options)."""

import json
import pickle

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from aeron_spark.archive.client import RecordingDescriptor
from aeron_spark.connector.options import OptionError
from aeron_spark.connector.source.recording_selection import RecordingDiscovery, RecordingSelection
from aeron_spark.connector.source.options import ReadMode, SourceOptions

WHERE = {"archive.controlChannel": "aeron:ipc"}


def parse(**options):
    return SourceOptions.parse(CaseInsensitiveDict({**WHERE, **options}), ReadMode.BATCH)


def descriptor(recording_id: int, stream_id: int, channel: str) -> RecordingDescriptor:
    return RecordingDescriptor(
        recording_id=recording_id, start_timestamp=0, stop_timestamp=-1, start_position=0, stop_position=-1,
        initial_term_id=0, segment_file_length=1 << 20, term_buffer_length=64 * 1024, mtu_length=1408,
        session_id=recording_id, stream_id=stream_id, stripped_channel=channel, original_channel=channel,
        source_identity="test")


@pytest.mark.parametrize("text, expected", [
    ("1001", (1001,)), ("1001,1002", (1001, 1002)), (" 1001 , -7 ", (1001, -7)), ("[1001, 1002]", (1001, 1002)),
    ("[2147483647, -2147483648]", (2147483647, -2147483648)),
])
def test_stream_id_accepts_one_or_a_list(text, expected):
    assert parse(channel="aeron:ipc", streamId=text).stream_ids == expected


@pytest.mark.parametrize("text, message", [
    ("1001,x", r"option streamId='1001,x': 'x' is not a stream id; accepted: .*int32"),
    ("[1001, 1.5]", "1.5 is not a stream id"),
    ("[1001, true]", "True is not a stream id"),
    ("[1, 2147483648]", "2147483648 is not a stream id"),
    ("1001,", "'' is not a stream id"),
    ("[]", "option streamId is empty"),
    ("[1001", "not a JSON list"),
    ('{"a": 1}', "option streamId=.* is not an integer"),
    ("1001,1001", "lists a stream id twice"),
])
def test_a_bad_stream_id_list_names_the_option(text, message):
    with pytest.raises(OptionError, match=message):
        parse(channel="aeron:ipc", streamId=text)


@pytest.mark.parametrize("options, message", [
    ({"channel": "aeron:ipc", "channelPattern": "ipc", "streamId": "1"}, "options channel and channelPattern are exclusive"),
    ({"channelPattern": "endpoint=(", "streamId": "1"}, r"option channelPattern='endpoint=\(' is not a valid regular"),
    ({"recordingIds": "1", "channelPattern": "x"}, "either recordingIds or channel/channelPattern"),
    ({"streamId": "1,2"}, "streamId needs channel .* or channelPattern"),
    ({"channel": "aeron:ipc"}, "channel needs streamId"),
    ({}, "nothing to read: .*channelPattern"),
])
def test_selection_rejections_name_the_options(options, message):
    with pytest.raises(OptionError, match=message):
        parse(**options)


def test_a_pattern_needs_no_stream_id_and_every_selection_keys_its_own_state():
    any_stream = parse(channelPattern=r"endpoint=10\.0\.0\.\d+:4012\d")
    assert any_stream.stream_ids is None and any_stream.subscribes_to_channel
    assert json.loads(any_stream.selection_identity())["streamId"] is None
    one = parse(channel="aeron:ipc", streamId="7")
    # One stream id keys exactly as before lists were accepted: existing checkpoints still match.
    assert json.loads(one.selection_identity()) == {"channel": "aeron:ipc", "streamId": 7,
                                                    "startingPositions": "earliest"}
    two = parse(channel="aeron:ipc", streamId="7,8")
    pattern = parse(channelPattern="aeron:ipc", streamId="7")
    assert len({one.selection_identity(), two.selection_identity(), pattern.selection_identity(),
                any_stream.selection_identity()}) == 4
    assert pickle.loads(pickle.dumps(two)) == two


def test_matching_by_fragment_or_pattern_and_stream_ids():
    udp = descriptor(1, 1001, "aeron:udp?endpoint=10.0.0.5:40123|alias=ticks")
    ipc = descriptor(2, 1002, "aeron:ipc?term-length=64k")
    fragment = RecordingSelection(channel="endpoint=10.0.0.5", stream_ids=(1001, 1002))
    assert fragment.matches(udp) and not fragment.matches(ipc)
    assert not RecordingSelection(channel="", stream_ids=(1003,)).matches(udp)
    pattern = RecordingSelection(channel_pattern=r"endpoint=10\.0\.0\.\d+:4012\d")
    assert pattern.matches(udp) and not pattern.matches(ipc)
    assert RecordingSelection(channel_pattern="^aeron:ipc").matches(ipc)
    assert not RecordingSelection(channel_pattern="^aeron:ipc", stream_ids=(1001,)).matches(ipc)
    assert fragment.describe() == "channel='endpoint=10.0.0.5' streamId=[1001, 1002]"
    assert pattern.describe().endswith("streamId=any")


class Listing:
    """A catalog that records every listing request (the recording id each starts from)."""

    def __init__(self, *descriptors: RecordingDescriptor) -> None:
        self.catalog = list(descriptors)
        self.requests: list[tuple] = []

    def list_matching(self, fragment, stream_id, from_id):
        self.requests.append(("uri", stream_id, from_id))
        return [d for d in self.catalog if d.recording_id >= from_id and d.stream_id == stream_id
                and fragment in d.original_channel]

    def list_matching_since(self, fragment, stream_id, from_id):
        """The matches; the scan end told is where the listing started (it says no more)."""
        return self.list_matching(fragment, stream_id, from_id), from_id

    def has_recording_from(self, from_id):
        return any(d.recording_id >= from_id for d in self.catalog)  # not a request counted here

    def list_from(self, from_id):
        self.requests.append(("all", from_id))
        return [d for d in self.catalog if d.recording_id >= from_id]


def test_channel_discovery_keeps_a_cursor_per_stream_id():
    listing = Listing(descriptor(0, 1, "aeron:ipc"), descriptor(1, 2, "aeron:ipc"), descriptor(2, 3, "aeron:ipc"))
    discovery = RecordingDiscovery(RecordingSelection(channel="aeron:ipc", stream_ids=(1, 2)))
    assert [d.recording_id for d in discovery.discover(listing)] == [0, 1]
    # Stream 1's recording 3 started before stream 2's recording 4, but both are new: neither is
    # skipped, and each stream is listed from one past its own newest recording.
    listing.catalog += [descriptor(3, 1, "aeron:ipc"), descriptor(4, 2, "aeron:ipc")]
    listing.requests.clear()
    assert [d.recording_id for d in discovery.discover(listing)] == [3, 4]
    assert listing.requests == [("uri", 1, 1), ("uri", 2, 2)]
    listing.requests.clear()
    assert discovery.discover(listing) == []
    assert listing.requests == [("uri", 1, 4), ("uri", 2, 5)]


def test_pattern_discovery_scans_only_recordings_created_since_the_last_scan():
    listing = Listing(descriptor(0, 1, "aeron:ipc"), descriptor(1, 1, "aeron:udp?endpoint=h:40124"))
    discovery = RecordingDiscovery(RecordingSelection(channel_pattern=r"endpoint=h:4012\d"))
    assert [d.recording_id for d in discovery.discover(listing)] == [1]
    listing.catalog += [descriptor(2, 9, "aeron:ipc"), descriptor(3, 9, "aeron:ipc")]
    assert discovery.discover(listing) == []
    listing.catalog.append(descriptor(4, 5, "aeron:udp?endpoint=h:40125"))
    assert [d.recording_id for d in discovery.discover(listing)] == [4]
    # The cursor passes non-matching recordings too: each scan starts after the newest one seen.
    assert listing.requests == [("all", 0), ("all", 2), ("all", 4)]


class ListingWithScanEnd(Listing):
    """An archive access that also says where the archive's scan ended (connector/archive_reading)."""

    def list_matching_since(self, fragment, stream_id, from_id):
        return self.list_matching(fragment, stream_id, from_id), len(self.catalog)


def test_channel_discovery_continues_where_the_archive_scan_ended():
    listing = ListingWithScanEnd(descriptor(0, 1, "aeron:ipc"), *(descriptor(i, 9, "aeron:udp") for i in range(1, 50)))
    discovery = RecordingDiscovery(RecordingSelection(channel="aeron:ipc", stream_ids=(1,)))
    assert [d.recording_id for d in discovery.discover(listing)] == [0]
    listing.catalog.append(descriptor(50, 1, "aeron:ipc"))
    assert [d.recording_id for d in discovery.discover(listing)] == [50]
    assert discovery.discover(listing) == []
    # Recordings 1..49 of another stream are scanned once, not again at each discovery.
    assert listing.requests == [("uri", 1, 0), ("uri", 1, 50), ("uri", 1, 51)]


class ListingWithProbe(ListingWithScanEnd):
    def has_recording_from(self, from_id):
        self.requests.append(("any", from_id))
        return any(d.recording_id >= from_id for d in self.catalog)


def test_discovery_over_many_stream_ids_that_finds_nothing_costs_one_request():
    listing = ListingWithProbe(*(descriptor(i, 1 + i % 3, "aeron:ipc") for i in range(6)))
    discovery = RecordingDiscovery(RecordingSelection(channel="aeron:ipc", stream_ids=(1, 2, 3)))
    assert [d.recording_id for d in discovery.discover(listing)] == list(range(6))
    listing.requests.clear()
    assert discovery.discover(listing) == []
    assert listing.requests == [("any", 6)]
    listing.catalog.append(descriptor(6, 2, "aeron:ipc"))
    listing.requests.clear()
    assert [d.recording_id for d in discovery.discover(listing)] == [6]
    assert listing.requests == [("any", 6), ("uri", 1, 6), ("uri", 2, 6), ("uri", 3, 6)]
