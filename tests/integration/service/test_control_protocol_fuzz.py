"""A control-protocol fuzz of a real sidecar (docs/reliability.md, "Control plane").

Several rounds of sessions (over UDP and IPC) connect, send a seeded mix of bad messages
(tests/support/control_fuzz.py: random bytes, bad headers, huge var-data lengths, bad channels,
foreign and random session ids, random correlation ids, out-of-range ids) in bulk and close.
After the fuzz the sidecar process is alive, a new client connects, records and replays
byte-exactly, and the sidecar's anonymous memory (RssAnon) after the last round is back near its
level after the first one, and its open files near where they started: a fuzz that closes its
sessions leaves nothing behind.

100,000 messages by default (~30-60 s here). A longer run:
``AERON_FUZZ_MESSAGES=1000000 ./run-tests tests/integration/service/test_control_protocol_fuzz.py``
(``AERON_FUZZ_SEED`` varies the seed, ``AERON_FUZZ_ROUNDS`` the number of rounds; the messages are
spread over the rounds, ``AERON_FUZZ_SESSIONS`` the sessions per round; ``AERON_FUZZ_DUMP_LOG=<file>``
writes the sidecar's log there; ``AERON_ARCHIVE_TRACEMALLOC=1`` prints the sidecar's Python allocation
growth per round).
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest
from aeron_spark.driver_integration.client import AeronClient

from tests.support.control_fuzz import FuzzMix, cpu_seconds, fuzz_session, rss_anon_kb
from tests.support.ports import udp_channel
from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import drain_until, expected, ipc_archive, payloads, record_ipc

pytestmark = pytest.mark.timeout(600)

MESSAGES = int(os.environ.get("AERON_FUZZ_MESSAGES", "100000"))
SEED = int(os.environ.get("AERON_FUZZ_SEED", "13"))
ROUNDS = int(os.environ.get("AERON_FUZZ_ROUNDS", "5"))
SESSIONS_PER_ROUND = int(os.environ.get("AERON_FUZZ_SESSIONS", "4"))
MEMORY_MARGIN_KB = 8 * 1024
OPEN_FILES_MARGIN = 4  # the fuzz's connects' response publications (UDP sockets) are closed again
SETTLE_S = 3.0  # for the closed sessions' publications to go


def fuzz_rounds(sidecar: Sidecar, aeron: AeronClient) -> tuple[list[int], list[int], int]:
    rng = random.Random(SEED)
    per_session = max(1, MESSAGES // (ROUNDS * SESSIONS_PER_ROUND))
    other_sessions: list[int] = []
    mix = FuzzMix()
    memory: list[int] = []
    open_files: list[int] = []
    sent = 0
    for round_index in range(ROUNDS):
        started, cpu = time.monotonic(), cpu_seconds(sidecar.pid)
        responses = 0
        for index in range(SESSIONS_PER_ROUND):
            on_ipc = index % 2 == 1
            result = fuzz_session(
                aeron, "aeron:ipc" if on_ipc else sidecar.control_channel, 11 if on_ipc else 10, rng,
                per_session, other_sessions, mix, response_stream_id=40 + index)
            sent += result.sent
            responses += result.responses
            exit_code = sidecar.process.poll()
            assert exit_code is None, f"the sidecar exited ({exit_code}) in round {round_index}:\n{sidecar.log_tail()}"
        fuzzing, cpu = time.monotonic() - started, cpu_seconds(sidecar.pid) - cpu
        time.sleep(SETTLE_S)
        exit_code = sidecar.process.poll()
        assert exit_code is None, f"the sidecar exited ({exit_code}) in round {round_index}:\n{sidecar.log_tail()}"
        memory.append(rss_anon_kb(sidecar.pid))
        open_files.append(len(os.listdir(f"/proc/{sidecar.pid}/fd")))
        if os.environ.get("AERON_ARCHIVE_TRACEMALLOC") == "1":  # the sidecar logs its growth since the last round
            os.kill(sidecar.pid, signal.SIGUSR2)
        print(f"round {round_index}: {SESSIONS_PER_ROUND * per_session} messages in {fuzzing:.1f} s "
              f"(sidecar CPU {cpu:.1f} s), "
              f"{responses} responses, sidecar RssAnon {memory[-1]} KiB, {open_files[-1]} open files")
    print("mix:", mix.counts)
    if os.environ.get("AERON_ARCHIVE_TRACEMALLOC") == "1":
        time.sleep(1.0)
        print("\n".join(line for line in sidecar.stderr_lines if "tracemalloc" in line or line.startswith("  ")))
    return memory, open_files, sent


def record_and_replay_exactly(aeron: AeronClient) -> None:
    with ipc_archive(aeron) as archive:
        recording_id, published, _ = record_ipc(archive, payloads(200, seed=SEED))
        with archive.replay(recording_id, 0, published.end, udp_channel(), 2001) as replay:
            received: list = []
            drain_until(replay, received, 200, "the replay after the fuzz")
        assert received == expected(published)


def test_a_control_protocol_fuzz_leaves_the_sidecar_serving_with_bounded_memory(sidecar: Sidecar) -> None:
    aeron = AeronClient(sidecar.driver_dir)
    try:
        before = rss_anon_kb(sidecar.pid)
        files_before = len(os.listdir(f"/proc/{sidecar.pid}/fd"))
        memory, open_files, sent = fuzz_rounds(sidecar, aeron)
        assert sent >= MESSAGES - ROUNDS * SESSIONS_PER_ROUND
        assert sidecar.process.poll() is None, sidecar.log_tail()
        # a new client connects and is served; nothing the fuzz sent started a recording
        with ipc_archive(aeron) as archive:
            subscriptions = archive.list_recording_subscriptions(0, 100, "", 0, False)
            assert [(d.stream_id, d.stripped_channel) for d in subscriptions] == []
            assert archive.list_recordings(0, 100) == []
        record_and_replay_exactly(aeron)
        print(f"sidecar RssAnon: {before} KiB before, after each round {memory} KiB")
        print(f"sidecar open files: {files_before} before, after each round {open_files}")
        assert memory[-1] <= memory[0] + MEMORY_MARGIN_KB, (before, memory)
        assert max(open_files) <= files_before + OPEN_FILES_MARGIN, (files_before, open_files)
        tracebacks = sum("Traceback" in line for line in sidecar.stderr_lines)
        lines = sidecar.stderr_lines
        logged_with_a_traceback = sorted({lines[i - 1].split(": ", 1)[-1][:120] for i, line in enumerate(lines)
                                          if line.startswith("Traceback") and i > 0})
        if os.environ.get("AERON_FUZZ_DUMP_LOG"):
            open(os.environ["AERON_FUZZ_DUMP_LOG"], "w").write("\n".join(lines))
        print(f"{len(lines)} log lines, {tracebacks} tracebacks, after:", *logged_with_a_traceback[:30], sep="\n  ")
        # every bad request is answered or dropped with at most one log line per kind (and a count):
        # no tracebacks (those are for the archive's own bugs), and the log does not grow per message
        complaints = [line for line in lines if " WARNING " in line or " ERROR " in line]
        assert tracebacks == 0, logged_with_a_traceback
        assert len(complaints) <= 400 + sent // 200, complaints[-20:]
    finally:
        aeron.close()
