"""ClientArchiveAccess over stand-ins shaped like ArchiveClient and driver_integration objects."""

import struct
from types import SimpleNamespace

import numpy as np
import pytest

from aeron_spark.archive.client.archive_client import ListingPage
from aeron_spark.archive.codecs.recording_position import encode_key
from aeron_spark.connector import archive_reading
from aeron_spark.connector.archive_reading import ClientArchiveAccess
from aeron_spark.connector.replay_errors import ReplayFailed
from aeron_spark.connector.options import ReplaySettings
from tests.support.fake_archive import FakeArchive
from tests.support.synthetic_log import SyntheticLog, blocks

SETTINGS = ReplaySettings("aeron:ipc", 1001, idle_timeout_ms=200)


class Counters:
    """driver_integration.counters.CountersReader's shape: find returns a list of ids."""

    def __init__(self):
        self.counters = {}  # id -> (type_id, key, value)

    def find(self, type_id, key_predicate=None):
        return [cid for cid, (t, key, _) in sorted(self.counters.items())
                if t == type_id and (key_predicate is None or key_predicate(key))]

    def value(self, counter_id):
        return self.counters.get(counter_id, (0, b"", 0))[2]  # a freed slot still has a value

    def type_id(self, counter_id):
        return self.counters[counter_id][0]

    def key(self, counter_id):
        return self.counters[counter_id][1]

    def state(self, counter_id):
        return 1 if counter_id in self.counters else 0  # RECORD_ALLOCATED

    def columns(self):
        """As driver_integration's CountersReader: numpy views of the counters (a snapshot here)."""
        self.snapshots = getattr(self, "snapshots", 0) + 1
        count = max(self.counters, default=0) + 1
        columns = SimpleNamespace(values=np.zeros(count, np.int64), states=np.zeros(count, np.int32),
                                  type_ids=np.zeros(count, np.int32), recording_ids=np.zeros(count, np.int64))
        for counter_id, (type_id, key, value) in self.counters.items():
            columns.values[counter_id], columns.states[counter_id] = value, 1
            columns.type_ids[counter_id] = type_id
            columns.recording_ids[counter_id] = struct.unpack_from("<q", key)[0]
        columns.key_int64 = lambda offset: columns.recording_ids
        return columns


class Image:
    """Reports how far its subscriber read (``position``), as driver_integration's does."""

    def __init__(self, session_id, parts):
        self.session_id, self.parts, self.closed = session_id, list(parts), False
        self.is_closed = self.is_end_of_stream = False
        self.position = self.parts[0][0] if self.parts else 0

    def block_poll(self, handler, limit):
        if not self.parts:
            return 0
        position, block = self.parts.pop(0)
        handler(memoryview(block), position, self.session_id, 0)
        self.position = position + len(block)
        return len(block)

    def close(self):
        self.closed = True


class Subscription:
    def __init__(self, channel, image_source):
        self.session_id = int(channel.rsplit("session-id=", 1)[1])
        self.image_source, self.closed = image_source, False

    def image_by_session_id(self, session_id):
        return self.image_source(session_id) if session_id == self.session_id else None

    def close(self):
        self.closed = True


class Counter:
    def __init__(self, counter_id):
        self.counter_id, self.value, self.closed = counter_id, 0, False

    def close(self):
        self.closed = True


class Aeron:
    def __init__(self, log):
        self.counters_reader = Counters()
        self.log = log
        self.subscriptions, self.limits = [], []
        self.deliver_to = None

    def add_subscription(self, channel, stream_id):
        subscription = Subscription(channel, lambda session_id: self.image)
        self.subscriptions.append(subscription)
        return subscription

    def add_counter(self, type_id, key, label):
        counter = Counter(900 + len(self.limits))
        self.limits.append(counter)
        return counter


class Client:
    """archive_reading.ReadingClient over a FakeArchive: on the archive's driver, connected, modern."""

    archive_id = 77
    timeout = 10.0
    control_channel = "aeron:ipc"
    response_channel = "aeron:ipc"
    response_hosts = None
    is_connected = True
    is_legacy = False

    def __init__(self, archive, log):
        self.fake = archive
        self.aeron = Aeron(log)
        self.replays, self.stopped = [], []

    def shares_archive_driver(self):
        return True

    def keep_alive(self):
        pass

    def list_recording_subscriptions(self, pseudo_index, count, channel_fragment, stream_id, apply_stream_id):
        return []  # the archive records no replay stream

    def check_replay_error(self, replay_session_id):
        pass  # the archive reports no error after a replay's OK

    def list_recording(self, recording_id):
        return self.fake.describe(recording_id)

    def list_recordings_for_uri(self, from_id, count, fragment, stream_id):
        return self.fake.list_matching(fragment, stream_id, from_id)[:count]

    def list_recordings_for_uri_page(self, from_id, count, fragment, stream_id):
        """As the archive: a short page ends with RECORDING_UNKNOWN at the end of the catalog."""
        found = self.list_recordings_for_uri(from_id, count, fragment, stream_id)
        catalog_end = max(self.fake.recordings, default=-1) + 1
        return ListingPage(found, catalog_end if len(found) < count else None)

    def list_recordings(self, from_id, count):
        return self.fake.list_from(from_id)[:count]

    def recording_position(self, recording_id):
        return -1

    def start_bounded_replay(self, recording_id, position, length, limit_counter_id, channel, stream_id, *,
                             subscription_registration_id=None):
        session_id = int(channel.rsplit("session-id=", 1)[1])
        log = self.aeron.log
        self.aeron.image = Image(session_id, blocks(log.bytes_between(position, position + length), position,
                                                    log.frame_boundaries(), 3000))
        self.replays.append((recording_id, position, length, limit_counter_id, channel, stream_id))
        return (5 << 32) | session_id

    def stop_replay(self, replay_session_id):
        self.stopped.append(replay_session_id)


def setup():
    log = SyntheticLog(mtu=512)
    for index in range(40):
        log.append(bytes([index]) * (index * 37))
    archive = FakeArchive()
    archive.add(1, log)
    client = Client(archive, log)
    return log, client, ClientArchiveAccess(client)


def test_live_position_comes_from_the_rec_pos_counter_of_this_archive(monkeypatch):
    monkeypatch.setattr(archive_reading, "COUNTER_INDEX_MAX_AGE_S", 0.0)  # each miss looks again
    log, client, access = setup()
    counters = client.aeron.counters_reader
    counters.counters[3] = (100, encode_key(1, 55, "src", archive_id=12), 999)  # another archive's
    assert access.live_position(1) is None  # falls back to RecordingPosition: -1 = not active
    counters.counters[4] = (100, encode_key(1, 55, "src", archive_id=77), 4096)
    assert access.live_position(1) == 4096
    counters.counters[4] = (100, encode_key(1, 55, "src", archive_id=77), 8192)
    assert access.live_position(1) == 8192
    del counters.counters[4]  # recording stopped, counter freed
    assert access.live_position(1) is None


def test_live_positions_of_many_recordings_cost_one_pass_over_the_counters(monkeypatch):
    monkeypatch.setattr(archive_reading, "COUNTER_INDEX_MAX_AGE_S", 60.0)  # a slow machine stays in one window
    log, client, access = setup()
    counters = client.aeron.counters_reader
    for recording_id in range(200):
        counters.counters[10 + recording_id] = (100, encode_key(recording_id, 5, "src", archive_id=77), recording_id * 32)
    passes = []
    find = counters.find
    counters.find = lambda *args: passes.append(1) or find(*args)
    assert [access.live_position(rid) for rid in range(200)] == [rid * 32 for rid in range(200)]
    assert len(passes) == 1
    assert access.live_position(5) == 160 and len(passes) == 1  # known counters are read directly


def test_live_positions_read_known_counters_together_and_recheck_a_reused_one():
    log, client, access = setup()
    counters = client.aeron.counters_reader = Counters()
    for recording_id in range(50):
        counters.counters[10 + recording_id] = (100, encode_key(recording_id, 5, "src", archive_id=77), recording_id * 32)
    ids = list(range(50))
    assert access.live_positions(ids) == {rid: rid * 32 for rid in ids}  # counters found one pass
    counters.value = counters.key = counters.state = None  # known counters: no per-counter read
    counters.counters[12] = (100, encode_key(2, 5, "src", archive_id=77), 4096)
    assert access.live_positions(ids) == {**{rid: rid * 32 for rid in ids}, 2: 4096}
    counters.snapshots = 0
    counters.counters[13] = (100, encode_key(777, 5, "src", archive_id=77), 64)  # reused by another
    del counters.value, counters.key, counters.state  # per-counter reads again
    positions = access.live_positions(ids)
    assert positions[3] is None  # not taken as recording 3's position: RecordingPosition says -1
    assert positions[4] == 128 and counters.snapshots == 1
    assert access.live_positions([]) == {}


def test_replay_uses_a_private_session_and_a_limit_counter_and_cleans_up():
    log, client, access = setup()
    end = log.messages[30].end_position
    with access.replay(1, 0, end, SETTINGS) as replayed:
        data = b"".join(block for _, block in replayed)
    assert data == log.bytes_between(0, end)
    recording_id, position, length, limit_id, channel, stream_id = client.replays[0]
    assert (recording_id, position, length, stream_id) == (1, 0, end, 1001)
    assert "session-id=" in channel and channel.startswith("aeron:ipc?")
    limit = client.aeron.limits[0]
    assert limit.counter_id == limit_id and limit.value == end and limit.closed
    assert client.aeron.subscriptions[0].closed and client.aeron.image.closed


def test_replay_that_stalls_fails_after_the_idle_timeout():
    log, client, access = setup()
    end = log.messages[30].end_position
    with pytest.raises(ReplayFailed, match="no progress"):
        with access.replay(1, 0, end, SETTINGS) as replayed:
            client.aeron.image.parts = client.aeron.image.parts[:2]
            for _ in replayed:
                pass
    assert client.aeron.limits[0].closed


def test_list_matching_pages_through_the_catalog():
    log, client, access = setup()
    for recording_id in range(2, 600):
        client.fake.add(recording_id, log)
    found = access.list_matching("aeron:udp", 1001, 0)
    assert [d.recording_id for d in found] == list(range(1, 600))
    assert [d.recording_id for d in access.list_from(7)] == list(range(7, 600))
    assert struct.calcsize("<q") == 8


def test_list_matching_since_continues_where_the_archive_scan_ended():
    log, client, access = setup()
    for recording_id in range(2, 300):
        client.fake.add(recording_id, log, channel="aeron:ipc" if recording_id < 5 else "aeron:udp")
    found, next_from = access.list_matching_since("aeron:ipc", 1001, 0)
    assert [d.recording_id for d in found] == [2, 3, 4]
    assert next_from == 300  # not 5: recordings 5..299 of other channels are not scanned again


@pytest.mark.parametrize("reader", ["replay", "replay_pump"])
def test_a_replay_read_to_its_end_is_not_stopped_the_archive_ends_it(reader):
    log, client, access = setup()
    end = log.messages[30].end_position
    if reader == "replay":
        with access.replay(1, 0, end, SETTINGS) as replayed:
            data = b"".join(block for _, block in replayed)
    else:
        with access.replay_pump(1, 0, end, SETTINGS) as pump:
            parts = []
            while pump.next_block(lambda view, _position: parts.append(bytes(view))) is not None:
                pass
            data = b"".join(parts)
    assert data == log.bytes_between(0, end)
    assert client.stopped == []  # no StopReplay round trip: the bounded replay ends itself
    assert client.aeron.image.closed and client.aeron.subscriptions[0].closed and client.aeron.limits[0].closed


def test_a_replay_left_before_its_end_is_stopped():
    log, client, access = setup()
    end = log.messages[30].end_position
    with access.replay(1, 0, end, SETTINGS) as replayed:
        next(iter(replayed))
    assert len(client.stopped) == 1 and client.aeron.image.closed
    with pytest.raises(RuntimeError, match="reader failed"):
        with access.replay(1, 0, end, SETTINGS) as replayed:
            for _ in replayed:
                raise RuntimeError("reader failed")
    assert len(client.stopped) == 2


def test_delivered_to_is_false_for_a_released_image():
    from aeron_spark.driver_integration import ResourceClosedError

    class Released:
        @property
        def position(self):
            raise ResourceClosedError("image session 5 (stream 1001) is closed")

    assert not archive_reading.delivered_to(Released(), 0)
    assert archive_reading.delivered_to(SimpleNamespace(position=4096), 4096)
    assert not archive_reading.delivered_to(SimpleNamespace(position=4064), 4096)
