"""How the source's replays fail (connector/archive_reading.py, replay_errors.py, replay_pump.py),
over stand-ins for ArchiveClient and the Aeron objects; the same cases run against the real sidecar in
tests/integration/connector/test_replay_errors_sidecar.py and against Java 1.15.1 in
tests/interop/test_replay_errors_java.py.

* an ERROR the archive sends after accepting a replay (Java 1.15.1 does that for a bad start
  position) ends the wait for the image and the pump's wait for blocks at once, with its text;
* a pump that stalls asks once per position whether the stall can end (a range end inside a
  frame cannot);
* a replay channel/stream the archive records is refused before replaying;
* a 1.15.x client gets a plain Replay (it has no BoundedReplay).
"""

from __future__ import annotations

import time

import pytest
from aeron_spark.archive.client.response_routing import ArchiveError
from aeron_spark.archive.codecs import RecordingSubscriptionDescriptor
from aeron_spark.connector.archive_reading import ClientArchiveAccess, records_replays
from aeron_spark.connector.replay_errors import ReplayEndInsideFrame, ReplayFailed, ReplayStreamRecorded
from aeron_spark.connector.replay_pump import ReplayPump, await_image
from aeron_spark.connector.options import ReplaySettings

SLOW = ReplaySettings("aeron:ipc", 1977101, idle_timeout_ms=30_000)
FAST_S = 2.0


def archive_error(text: str) -> ArchiveError:
    return ArchiveError(f"archive answered ReplayRequest with ERROR: {text}", code=1, error_code=0,
                        archive_message=text, request="ReplayRequest")


class Image:
    """Image.block_poll's shape: one queued block per poll, then nothing; ``position``: how far
    its subscriber read."""

    def __init__(self, blocks=(), end_of_stream: bool = False) -> None:
        self.blocks = list(blocks)
        self.is_closed = False
        self.is_end_of_stream = end_of_stream
        self.closed = False
        self.position = self.blocks[0][0] if self.blocks else 0

    def block_poll(self, handler, limit):
        if not self.blocks:
            return 0
        position, data = self.blocks.pop(0)
        handler(memoryview(data), position, 1, 2)
        self.position = position + len(data)
        return len(data)

    def close(self):
        self.closed = True


class Watch:
    """A ReplayWatch that fails on the n-th check and records stalls."""

    def __init__(self, fail_on_check: int | None = None, end_reason: str = "",
                 stall_error: ReplayFailed | None = None) -> None:
        self.checks = 0
        self.fail_on_check = fail_on_check
        self.end_reason = end_reason
        self.stall_error = stall_error
        self.stalls: list[int] = []

    def check(self) -> None:
        self.checks += 1
        if self.fail_on_check is not None and self.checks >= self.fail_on_check:
            raise ReplayFailed("recording 9: the archive failed the replay: bad position")

    def explain_end(self) -> str:
        return self.end_reason

    def stalled(self, position: int) -> None:
        self.stalls.append(position)
        if self.stall_error is not None:
            raise self.stall_error


# --- which recording subscriptions would record the replays ----------------------------------------


@pytest.mark.parametrize("recorded, stream, expected", [
    ("aeron:ipc", 1977101, True),
    ("aeron:ipc?term-length=64k", 1977101, True),  # params other than session-id do not matter
    ("aeron:ipc", 1001, False),  # another stream
    ("aeron:ipc?session-id=5", 1977101, False),  # only that session: the replays' ids are random
    ("aeron:udp?endpoint=localhost:40123", 1977101, False),  # other media
    ("not a channel", 1977101, False),
])
def test_an_ipc_replay_is_recorded_by_ipc_subscriptions_of_its_stream(recorded, stream, expected):
    assert records_replays(recorded, stream, "aeron:ipc", 1977101) is expected


@pytest.mark.parametrize("recorded, expected", [
    ("aeron:udp?endpoint=localhost:40123", True),
    ("aeron-spy:aeron:udp?endpoint=localhost:40123", True),  # a LOCAL recording spies on the replay
    ("aeron:udp?endpoint=localhost:40124", False),
    ("aeron:udp?control=localhost:40125|control-mode=dynamic", False),
    ("aeron:ipc", False),
])
def test_a_udp_replay_is_recorded_by_subscriptions_of_its_endpoint(recorded, expected):
    assert records_replays(recorded, 7, "aeron:udp?endpoint=localhost:40123", 7) is expected


# --- the pump and the wait for the image -------------------------------------------------------------


def test_the_pump_fails_at_once_when_the_archive_reports_an_error_while_no_block_arrives():
    watch = Watch(fail_on_check=3)
    pump = ReplayPump(Image([(0, b"a" * 64)]), 9, 0, 128, SLOW.idle_timeout_ms, watch)
    assert pump.next_block(lambda view, position: bytes(view)) == (0, b"a" * 64)
    started = time.monotonic()
    with pytest.raises(ReplayFailed, match="the archive failed the replay: bad position"):
        pump.next_block(lambda view, position: None)
    assert time.monotonic() - started < FAST_S


def test_an_ended_image_reports_the_archives_reason():
    pump = ReplayPump(Image(end_of_stream=True), 9, 0, 128, SLOW.idle_timeout_ms,
                      Watch(end_reason="the archive reports: frame_length is 0"))
    with pytest.raises(ReplayFailed, match=r"^recording 9: replay ended at 0, before 128: "
                                           r"the archive reports: frame_length is 0$"):
        pump.next_block(lambda view, position: None)


def test_a_stall_is_examined_once_per_position_and_its_verdict_raised():
    watch = Watch()
    pump = ReplayPump(Image([(0, b"a" * 64)]), 9, 0, 128, idle_timeout_ms=600, watch=watch)
    pump.next_block(lambda view, position: None)
    with pytest.raises(ReplayFailed, match="no progress at 64 for 600 ms"):
        pump.next_block(lambda view, position: None)
    assert watch.stalls == [64]  # once, after 200 ms, not on every idle poll

    inside = ReplayEndInsideFrame(9, 100, 64, 160)
    pump = ReplayPump(Image([(0, b"a" * 64)]), 9, 0, 100, SLOW.idle_timeout_ms, Watch(stall_error=inside))
    pump.next_block(lambda view, position: None)
    started = time.monotonic()
    with pytest.raises(ReplayEndInsideFrame) as raised:
        pump.next_block(lambda view, position: None)
    assert time.monotonic() - started < FAST_S
    assert "the range end 100 is not a frame boundary, it falls inside the frame [64, 160)" in str(raised.value)
    assert "endingPositions" in str(raised.value) and "e.g. 64 or 160" in str(raised.value)


def test_a_short_idle_timeout_is_not_exceeded_by_the_stall_probe():
    watch = Watch()
    pump = ReplayPump(Image(), 9, 0, 64, idle_timeout_ms=100, watch=watch)
    with pytest.raises(ReplayFailed, match="no progress at 0 for 100 ms"):
        pump.next_block(lambda view, position: None)
    assert watch.stalls == [0]  # probed at half the idle timeout


class NoImage:
    def image_by_session_id(self, session_id):
        return None


def test_waiting_for_an_image_the_archive_will_never_send_ends_on_its_error():
    watch = Watch(fail_on_check=5)
    started = time.monotonic()
    with pytest.raises(ReplayFailed, match="bad position"):
        await_image(NoImage(), 42, SLOW.idle_timeout_ms, 9, watch)
    assert time.monotonic() - started < FAST_S and watch.checks == 5


# --- ClientArchiveAccess over a stand-in client ----------------------------------------------------------


class Subscription:
    def __init__(self, channel, image):
        self.session_id = int(channel.rsplit("session-id=", 1)[1])
        self.image = image
        self.closed = False

    def image_by_session_id(self, session_id):
        return self.image if session_id == self.session_id else None

    def close(self):
        self.closed = True


class Counter:
    counter_id = 900
    value = 0

    def close(self):
        pass


class Aeron:
    def __init__(self, image):
        self.image = image
        self.subscriptions = []

    def add_subscription(self, channel, stream_id):
        subscription = Subscription(channel, self.image)
        self.subscriptions.append(subscription)
        return subscription

    def add_counter(self, type_id, key, label):
        return Counter()


class Client:
    """ArchiveClient's shape for replays: start, later errors, listing recording subscriptions."""

    archive_id = 1
    timeout = 10.0
    control_channel = "aeron:ipc"
    response_channel = "aeron:ipc"
    response_hosts = None
    is_connected = True

    def __init__(self, image=None, *, refuse: str | None = None, late_error: str | None = None,
                 recording_subscriptions=(), legacy: bool = False):
        self.aeron = Aeron(image)
        self.refuse, self.late_error = refuse, late_error
        self.recording_subscriptions = list(recording_subscriptions)
        self.is_legacy = legacy
        self.calls: list[str] = []
        self.error_checks = 0

    def shares_archive_driver(self):
        return True

    def keep_alive(self):
        pass

    def start_bounded_replay(self, recording_id, position, length, limit_counter_id, channel, stream_id, *,
                             subscription_registration_id=None):
        self.calls.append("start_bounded_replay")
        if self.refuse:
            raise archive_error(self.refuse)
        return 77

    def start_replay(self, recording_id, position, length, channel, stream_id, *, subscription_registration_id=None):
        self.calls.append("start_replay")
        return 78

    def check_replay_error(self, replay_session_id):
        self.error_checks += 1
        if self.late_error and self.error_checks >= 3:
            raise archive_error(self.late_error)

    def stop_replay(self, replay_session_id):
        self.calls.append("stop_replay")

    def list_recording_subscriptions(self, pseudo_index, count, channel_fragment, stream_id, apply_stream_id):
        self.calls.append("list_recording_subscriptions")
        assert apply_stream_id and channel_fragment == ""
        return [s for s in self.recording_subscriptions if s.stream_id == stream_id][pseudo_index:pseudo_index + count]


def subscription(subscription_id: int, channel: str, stream_id: int) -> RecordingSubscriptionDescriptor:
    return RecordingSubscriptionDescriptor(1, 2, subscription_id, stream_id, channel)


def drain(access: ClientArchiveAccess, settings: ReplaySettings = SLOW) -> None:
    with access.replay_pump(9, 0, 64, settings) as pump:
        while pump.next_block(lambda view, position: None) is not None:
            pass


def test_an_error_after_the_ok_ends_the_wait_for_the_image_with_the_archives_text():
    client = Client(image=None, late_error="4096 position not aligned to data header")
    started = time.monotonic()
    with pytest.raises(ReplayFailed) as raised:
        drain(ClientArchiveAccess(client))
    assert time.monotonic() - started < FAST_S
    assert str(raised.value) == ("recording 9: the archive failed the replay (replaySessionId=77): "
                                 "4096 position not aligned to data header")
    assert isinstance(raised.value.__cause__, ArchiveError)
    assert client.calls[-1] == "stop_replay"


def test_an_error_after_the_image_appeared_ends_the_pump_with_the_archives_text():
    client = Client(image=Image(), late_error="unexpected end of recording")
    with pytest.raises(ReplayFailed, match="the archive failed the replay .*: unexpected end of recording"):
        drain(ClientArchiveAccess(client))


def test_a_refused_replay_is_a_replay_failure_naming_the_range():
    client = Client(refuse="replayPosition=40 does not point to a valid frame")
    with pytest.raises(ReplayFailed, match=r"recording 9: the archive refused the replay of \[0, 64\): "
                                           r"replayPosition=40 does not point to a valid frame"):
        drain(ClientArchiveAccess(client))


def test_a_recorded_replay_stream_is_refused_before_anything_is_replayed():
    recorded = subscription(5, "aeron:ipc?term-length=64k", SLOW.stream_id)
    client = Client(image=Image([(0, b"a" * 64)]), recording_subscriptions=[recorded])
    with pytest.raises(ReplayStreamRecorded) as raised:
        drain(ClientArchiveAccess(client))
    assert "start_bounded_replay" not in client.calls
    assert str(raised.value).startswith(
        "options replay.channel=aeron:ipc and replay.streamId=1977101: the archive records that stream "
        "(recording subscription 5 on aeron:ipc?term-length=64k stream 1977101)")


def test_an_unrelated_recording_subscription_is_fine_and_the_check_is_not_repeated_per_replay():
    others = [subscription(5, "aeron:udp?endpoint=localhost:40123", SLOW.stream_id),
              subscription(6, "aeron:ipc", 1001)]
    client = Client(recording_subscriptions=others)
    access = ClientArchiveAccess(client)
    for _ in range(3):
        client.aeron.image = Image([(0, b"a" * 64)])
        drain(access)
    assert client.calls.count("list_recording_subscriptions") == 1
    assert client.calls.count("start_bounded_replay") == 3


def test_a_1_15_archive_gets_a_plain_replay_and_no_subscription_listing():
    client = Client(image=Image([(0, b"a" * 64)]), legacy=True)
    drain(ClientArchiveAccess(client))
    assert client.calls == ["start_replay"]  # read to its end: the archive ends it, no StopReplay


class ClientWithoutErrorCheck(Client):
    def check_replay_error(self, replay_session_id):
        pass  # an archive that never reports an error after a replay's OK


def test_without_an_error_check_a_client_still_replays():
    client = ClientWithoutErrorCheck(image=Image([(0, b"a" * 64)]))
    drain(ClientArchiveAccess(client))
    assert client.calls[-1] == "start_bounded_replay"  # and read to its end


class ClientWithoutSubscriptionListing(Client):
    def list_recording_subscriptions(self, *args):
        self.calls.append("list_recording_subscriptions")
        raise archive_error("unknown template 17")


def test_an_archive_that_cannot_list_recording_subscriptions_still_replays_and_is_asked_once():
    client = ClientWithoutSubscriptionListing()
    access = ClientArchiveAccess(client)
    for _ in range(2):
        client.aeron.image = Image([(0, b"a" * 64)])
        drain(access)
    assert client.calls.count("list_recording_subscriptions") == 1
    assert client.calls.count("start_bounded_replay") == 2
