"""Term bisection over synthetic Aeron logs: exact answers, few and short replays."""

import contextlib
import math
import random

import pytest

from aeron_spark.connector.source.message_time import reserved_value_time
from aeron_spark.connector.source.timestamp_positions import RecordedSpan, TermBisection, TimedMessage
from tests.support.synthetic_log import SyntheticLog, blocks

TERM = 4096


class LogReplays:
    """read_frames over a SyntheticLog that, like the archive, refuses non-frame boundaries and
    counts replays and the bytes the caller actually consumed."""

    def __init__(self, log: SyntheticLog, max_block: int = 1024) -> None:
        self.log = log
        self.max_block = max_block
        self.replays: list[tuple[int, int]] = []
        self.bytes_read = 0
        self._boundaries = set(log.frame_boundaries())

    @contextlib.contextmanager
    def __call__(self, start: int, end: int):
        assert start in self._boundaries and end in self._boundaries and start < end, (start, end)
        self.replays.append((start, end))
        data = self.log.bytes_between(start, end)

        def consumed():
            for position, block in blocks(data, start, sorted(self._boundaries), self.max_block):
                self.bytes_read += len(block)
                yield position, block
        yield consumed()


def timed_log(times, sizes=None, term=TERM, mtu=512, start_position=0):
    log = SyntheticLog(term_length=term, mtu=mtu, start_position=start_position)
    for index, time_ns in enumerate(times):
        size = sizes[index % len(sizes)] if sizes else 40
        log.append(index.to_bytes(4, "little") * (size // 4), reserved_value=time_ns)
    return log


def bisect(log, time_ns, replays=None):
    replays = replays or LogReplays(log)
    span = RecordedSpan(log.start_position, log.position, log.term_length)
    return TermBisection(span, replays, reserved_value_time).first_at_or_after(time_ns), replays


def expected(log, time_ns):
    for message in log.messages:
        if message.reserved_value > 0 and message.reserved_value >= time_ns:
            return TimedMessage(message.begin_position, message.reserved_value)
    return None


def test_time_before_the_first_message_gives_the_first_message():
    log = timed_log([1000 + 10 * i for i in range(500)])
    found, _ = bisect(log, 5)
    assert found == TimedMessage(0, 1000)


def test_time_after_the_last_message_gives_none():
    log = timed_log([1000 + 10 * i for i in range(500)])
    assert bisect(log, 1000 + 10 * 500)[0] is None


def test_exact_hit_and_between_two_messages():
    log = timed_log([1000 + 10 * i for i in range(500)])
    message = log.messages[321]
    assert bisect(log, message.reserved_value)[0] == TimedMessage(message.begin_position, message.reserved_value)
    assert bisect(log, message.reserved_value - 3)[0] == TimedMessage(message.begin_position, message.reserved_value)


def test_equal_times_spanning_a_term_boundary_give_the_first_of_them():
    # 40-byte payloads: 96 B frames, 42 per 4 KiB term (+ padding); times equal across term 3/4.
    times = [100 + i for i in range(160)] + [500] * 30 + [600 + i for i in range(200)]
    log = timed_log(times)
    first_500 = log.messages[160]
    last_500 = log.messages[189]
    assert first_500.begin_position // TERM < last_500.end_position // TERM  # really spans a boundary
    assert bisect(log, 500)[0] == TimedMessage(first_500.begin_position, 500)
    assert bisect(log, 450)[0] == TimedMessage(first_500.begin_position, 500)
    assert bisect(log, 501)[0] == TimedMessage(log.messages[190].begin_position, 600)


def test_fragmented_messages_and_padding_at_term_ends():
    # mtu 512: 1500-byte messages are 4 fragments; mixed sizes leave padding at most term ends.
    sizes = [40, 1500, 300, 900, 8]
    log = timed_log([1_000 + 7 * i for i in range(400)], sizes=sizes)
    assert any(len(m.payload) > 480 for m in log.messages)
    pads = [b for b in log.frame_boundaries()[:-1] if log.data[b + 6 - log.start_position] == 0]  # type PAD
    assert len(pads) > 10 and all((b + int.from_bytes(log.data[b:b + 4], "little")) % TERM == 0 for b in pads)
    for target in (999, 1_000, 1_350, 1_351, 2_000, 2_793, 3_000):
        assert bisect(log, target)[0] == expected(log, target), target


def test_untimed_messages_and_a_whole_untimed_term_are_skipped():
    times = [1_000 + i for i in range(100)] + [0] * 120 + [5_000 + i for i in range(100)]
    log = timed_log(times)
    assert bisect(log, 1_099)[0] == expected(log, 1_099)
    assert bisect(log, 1_100)[0] == TimedMessage(log.messages[220].begin_position, 5_000)
    assert bisect(log, 6_000)[0] is None


def test_a_recording_that_starts_inside_a_fragmented_message():
    log = SyntheticLog(term_length=TERM, mtu=512, start_position=3 * TERM + 1024)
    log.append_raw_fragment(b"x" * 480, flags=0x00, reserved_value=7)   # middle of an earlier message
    log.append_raw_fragment(b"y" * 100, flags=0x40, reserved_value=7)   # its end
    for index in range(300):
        log.append(b"m" * 40, reserved_value=2_000 + index)
    assert bisect(log, 1)[0] == TimedMessage(log.messages[0].begin_position, 2_000)
    assert bisect(log, 2_150)[0] == expected(log, 2_150)


def test_an_empty_span_has_no_message():
    log = SyntheticLog(term_length=TERM)
    assert bisect(log, 1)[0] is None


def test_replays_are_logarithmic_in_the_terms_and_read_a_few_terms_at_most():
    log = timed_log([1_000_000 + i for i in range(42 * 256)])  # about 256 terms
    terms = log.position // TERM
    assert terms >= 250
    target = log.messages[7_777]
    found, replays = bisect(log, target.reserved_value)
    assert found == TimedMessage(target.begin_position, target.reserved_value)
    assert len(replays.replays) <= math.ceil(math.log2(terms)) + 2
    assert all(end - start <= TERM for start, end in replays.replays)
    assert replays.bytes_read <= 3 * TERM + len(replays.replays) * 1024  # probes stop after one block
    assert replays.bytes_read < log.position / 20


@pytest.mark.parametrize("seed", range(12))
def test_random_logs_agree_with_a_linear_scan(seed):
    rng = random.Random(seed)
    time_ns, times = 1, []
    for _ in range(rng.randint(0, 700)):
        time_ns += rng.choice([0, 0, 1, 5, 50])
        times.append(0 if rng.random() < 0.05 else time_ns)
    log = timed_log(times, sizes=[rng.choice([8, 40, 300, 700, 2000]) for _ in range(7)],
                    start_position=rng.choice([0, TERM, 2 * TERM + 512]))
    replays = LogReplays(log, max_block=rng.choice([96, 1024, 70_000]))
    for target in [0, 1, time_ns, time_ns + 1] + [rng.randint(0, time_ns + 2) for _ in range(10)]:
        assert bisect(log, target, replays)[0] == expected(log, target), target
