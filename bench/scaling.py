"""Cost as work grows: a big catalog, a source over many live recordings, many concurrent replays.

One command, three parts (``--parts``), with the real Java 1.15.1 archive measured in the same run
where it can be (parts 1 and 3):

1. ``catalog``: a catalog of ``--recordings`` entries (default 10,000; written straight to disk in
   each archive's own format, see bench/scaling_catalogs.py). Time to start each archive on it (and
   on an empty directory, the fixed cost), to start after a crash left ``--active`` recordings
   active (recovery), and listings through one Python client speaking the 1.15 protocol to both
   archives over UDP: ListRecordingsForUri with a match near the end and with none, ListRecording
   of one id, ListRecordings of all (pages of 256). Then, ours only (the connector reads the
   archive's counters, which needs its driver): ``latestOffset`` with discovery on every trigger of a
   source whose stream has only a few recordings at the start of the catalog.
2. ``live``: ``--live`` active recordings (IPC publications with distinct session ids on one stream,
   each publishing a trickle) in our sidecar, and the connector's driver-side work per trigger
   (``latestOffset``, ``partitions``) and control requests per trigger, at 1/10 and all of them.
3. ``replays``: ``--replays`` replays of different recordings started at once by one client over
   UDP, ours vs Java 1.15.1: aggregate throughput and per-replay time to first byte.

    flock $BENCH_LOCK .venv/bin/python bench/scaling.py --out bench-results/scaling.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/ and tests/ helpers

from aeron_spark.archive.cli.sidecar_process import SidecarProcess  # noqa: E402
from aeron_spark.archive.client.archive_client import ArchiveClient, SourceLocation  # noqa: E402
from aeron_spark.archive.client.replay_subscription import replay_image_session_id  # noqa: E402
from aeron_spark.connector.archive_reading import ClientArchiveAccess  # noqa: E402
from aeron_spark.connector.source.archive_access import open_archive  # noqa: E402
from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader  # noqa: E402
from aeron_spark.connector.source.options import ReadMode, SourceOptions  # noqa: E402
from aeron_spark.driver_integration.client import AeronClient  # noqa: E402
from aeron_spark.driver_integration.media_driver import MediaDriver, MediaDriverOptions  # noqa: E402
from pyspark.sql.streaming.datasource import ReadAllAvailable  # noqa: E402

from bench import scaling_catalogs as catalogs  # noqa: E402
from bench.bench_processes import dump_json  # noqa: E402
from tests.interop.peer.interop_peer import (  # noqa: E402
    JavaServer,
    PeerInstallation,
    ensure_peer_built,
    shm_tempdir,
)
from tests.support.ports import free_udp_port, udp_channel  # noqa: E402

CONTROL_STREAM_ID = 10
LIVE_STREAM_ID = 5000
REPLAY_STREAM_ID = 6000
RECORDED_STREAM_ID = 6100
LIVE_PUBLICATION_CHANNEL = "aeron:ipc?term-length=64k"
SIDECAR_TIMEOUT_S = 600.0  # an old sidecar needed minutes to open 10,000 recordings
REPLAY_SOCKET_BUFFER = 4 * 1024 * 1024  # /proc/sys/net/core/rmem_max here


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def summary_ms(samples: list[float]) -> dict[str, float]:
    return {"median": median_ms(samples), "min": round(min(samples) * 1000, 2),
            "max": round(max(samples) * 1000, 2), "n": len(samples)}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ archives

@contextlib.contextmanager
def our_sidecar(archive_dir: Path, *args: str) -> Iterator[tuple[SidecarProcess, str, float]]:
    """Our sidecar with its embedded driver and a UDP control channel; yields it, the channel and
    the seconds from launch to its ready line."""
    control = udp_channel(free_udp_port())
    stderr_path = archive_dir.parent / f"{archive_dir.name}.stderr"
    with open(stderr_path, "w") as stderr:
        began = time.perf_counter()
        try:
            sidecar = SidecarProcess.start(archive_dir, "--control-channel", control, "--log-level", "WARNING",
                                           "--segment-length", "64k", *args, stderr=stderr,
                                           timeout_s=SIDECAR_TIMEOUT_S)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {stderr_path.read_text()[-3000:]}") from None
        ready_s = time.perf_counter() - began
    try:
        yield sidecar, control, ready_s
    finally:
        if sidecar.stop(grace_s=30.0) != 0:
            sidecar.kill(remove_embedded_driver_dir=True)


@contextlib.contextmanager
def java_archive(installation: PeerInstallation, archive_dir: Path,
                 jvm_options: tuple[str, ...] = ()) -> Iterator[tuple[JavaServer, str, float]]:
    """The real 1.15.1 ArchivingMediaDriver (shared threading, the peer's default); yields it, its
    control channel and the seconds from launch to its ready line (its ``launchMs`` is the archive
    and driver launch without the JVM's start)."""
    aeron_dir = shm_tempdir("aeron-scale-java-")
    control = udp_channel(free_udp_port())
    args = ["archive", "--archive-dir", str(archive_dir), "--aeron-dir", str(aeron_dir),
            "--control-channel", control, "--control-stream-id", str(CONTROL_STREAM_ID),
            "--recording-events-channel", udp_channel(free_udp_port()),
            "--segment-length", str(catalogs.SEGMENT_LENGTH)]
    import subprocess
    stderr_path = archive_dir.parent / f"{archive_dir.name}.java.stderr"
    with open(stderr_path, "w") as stderr:
        began = time.perf_counter()
        process = subprocess.Popen(installation.command(*args, jvm_options=jvm_options), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr, text=True)
        server = JavaServer(process, "archive", stderr_path)
        try:
            server.wait_ready(SIDECAR_TIMEOUT_S)
        except BaseException:
            server.stop()
            shutil.rmtree(aeron_dir, ignore_errors=True)
            raise
        ready_s = time.perf_counter() - began
    try:
        yield server, control, ready_s
    finally:
        server.stop()
        shutil.rmtree(aeron_dir, ignore_errors=True)


class RequestCounter:
    """Counts the control requests a client sends (each goes through ``ArchiveClient._call``)."""

    def __init__(self, client: ArchiveClient) -> None:
        self.count = 0
        call = client._call

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return call(*args, **kwargs)

        client._call = counted  # type: ignore[method-assign]


@contextlib.contextmanager
def udp_client(control_channel: str, timeout: float = 60.0) -> Iterator[tuple[ArchiveClient, AeronClient]]:
    """One Python client in its own embedded driver, speaking the 1.15 protocol (both archives)."""
    with MediaDriver(MediaDriverOptions(dir=str(shm_tempdir("aeron-scale-client-")))) as driver, \
            AeronClient(driver.dir) as aeron:
        client = ArchiveClient.connect(control_channel=control_channel, control_stream_id=CONTROL_STREAM_ID,
                                       response_channel=udp_channel(free_udp_port()), aeron=aeron,
                                       protocol="legacy", timeout=timeout)
        try:
            yield client, aeron
        finally:
            client.close()


def timed(action: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    samples, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = action()
        samples.append(time.perf_counter() - began)
    return samples, result


# ------------------------------------------------------------------------------------ part 1

def listing_figures(control_channel: str, shape: catalogs.CatalogShape, repeats: int) -> dict[str, Any]:
    with udp_client(control_channel) as (client, _):
        near_end, found = timed(lambda: client.list_recordings_for_uri(
            0, 256, "alias=needle", catalogs.NEEDLE_STREAM_ID), repeats)
        assert [d.recording_id for d in found] == [shape.needle_id], found
        none, found = timed(lambda: client.list_recordings_for_uri(
            0, 256, "no-such-channel", catalogs.BACKGROUND_STREAM_BASE), repeats)
        assert found == []
        describe, found = timed(lambda: client.list_recording(shape.recordings // 2), repeats * 10)
        assert found is not None and found.recording_id == shape.recordings // 2
        everything, found = timed(lambda: client.list_recordings(0, None), repeats)
        assert len(found) == shape.recordings, len(found)
        # What discovery's cursor relies on: the listing's end says where the archive's scan stopped.
        page = client.list_recordings_for_uri_page(0, 256, "no-such-channel", catalogs.BACKGROUND_STREAM_BASE)
    return {"listing_end_relevant_id": page.scanned_to,"listRecordingsForUri_match_near_end_ms": summary_ms(near_end),
            "listRecordingsForUri_no_match_ms": summary_ms(none),
            "listRecording_one_ms": summary_ms(describe),
            "listRecordings_all_ms": summary_ms(everything)}


def discovery_figures(archive_dir: Path, work: Path, triggers: int) -> dict[str, Any]:
    """latestOffset of a source on the early stream, discovering on every trigger."""
    options = SourceOptions.parse({"archive.dir": str(archive_dir), "channel": catalogs.EARLY_CHANNEL,
                                   "streamId": str(catalogs.EARLY_STREAM_ID), "discoveryIntervalMs": "0",
                                   "checkpointLocation": str(work / "checkpoint-discovery")}, ReadMode.STREAM)
    counters: list[RequestCounter] = []

    def opener(connection):
        access = open_archive(connection)
        counters.append(RequestCounter(access._client))  # type: ignore[attr-defined]
        return access

    reader = AeronArchiveStreamReader(options, driver_opener=opener)
    try:
        start = reader.initialOffset()
        samples, requests = [], []
        for _ in range(triggers):
            before = counters[0].count
            began = time.perf_counter()
            end = reader.latestOffset(start, ReadAllAvailable())
            samples.append(time.perf_counter() - began)
            requests.append(counters[0].count - before)
            start = end
    finally:
        reader.stop()
    return {"latestOffset_with_discovery_ms": summary_ms(samples),
            "requests_per_trigger": statistics.median(requests)}


def part_catalog(args: argparse.Namespace, work: Path, installation: PeerInstallation | None) -> dict[str, Any]:
    shape = catalogs.CatalogShape(args.recordings, args.active)
    clean_shape = catalogs.CatalogShape(args.recordings, 0)
    templates = work / "templates"
    began = time.perf_counter()
    catalogs.build_our_archive_dir(templates / "ours-clean", clean_shape)
    catalogs.build_our_archive_dir(templates / "ours-crash", shape)
    catalogs.copy_as_java_1_15_archive_dir(templates / "ours-clean", templates / "java-clean")
    catalogs.copy_as_java_1_15_archive_dir(templates / "ours-crash", templates / "java-crash")
    (templates / "empty").mkdir(exist_ok=True)
    result: dict[str, Any] = {"recordings": args.recordings, "active_at_crash": args.active,
                              "build_seconds": round(time.perf_counter() - began, 2)}
    log(f"catalog templates built in {result['build_seconds']} s")

    def our_start(template: str, *, listings: bool = False, discovery: bool = False) -> dict[str, Any]:
        ready, figures = [], {}
        for repeat in range(args.repeats):
            directory = catalogs.fresh_copy(templates / template, work / "ours-run" / "archive")
            with our_sidecar(directory) as (_, control, ready_s):
                ready.append(ready_s)
                if listings and repeat == 0:
                    figures.update(listing_figures(control, clean_shape, args.repeats))
                if discovery and repeat == 0:
                    figures.update(discovery_figures(directory, work, args.triggers))
        return {"ready_ms": summary_ms(ready), **figures}

    def java_start(template: str, *, listings: bool = False) -> dict[str, Any]:
        ready, launch, figures = [], [], {}
        for repeat in range(args.repeats):
            directory = catalogs.fresh_copy(templates / template, work / "java-run" / "archive")
            entries = f"-Daeron.archive.max.catalog.entries={max(8192, 2 * args.recordings)}"
            with java_archive(installation, directory, (entries,)) as (server, control, ready_s):
                ready.append(ready_s)
                launch.append(server.ready.get("launchMs", 0) / 1000)
                if listings and repeat == 0:
                    figures.update(listing_figures(control, clean_shape, args.repeats))
        return {"ready_ms": summary_ms(ready), "launch_ms": summary_ms(launch), **figures}

    log(f"part 1, ours (load {load()})")
    result["ours"] = {"empty": our_start("empty"), "catalog": our_start("ours-clean", listings=True, discovery=True),
                      "after_crash": our_start("ours-crash")}
    if installation is not None:
        log(f"part 1, Java 1.15.1 (load {load()})")
        result["java"] = {"empty": java_start("empty"), "catalog": java_start("java-clean", listings=True),
                          "after_crash": java_start("java-crash")}
    result["load_after"] = load()
    return result


# ------------------------------------------------------------------------------------ part 2

def part_live(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"live": args.live}
    directory = work / "live" / "archive"
    shutil.rmtree(directory.parent, ignore_errors=True)
    directory.mkdir(parents=True)
    with our_sidecar(directory, "--max-concurrent-recordings", str(args.live + 16)) as (sidecar, _, _), \
            AeronClient(sidecar.ready["aeronDir"]) as aeron:
        control = ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11,
                                        response_channel="aeron:ipc", aeron=aeron, timeout=60.0)
        control.start_recording("aeron:ipc", LIVE_STREAM_ID, SourceLocation.LOCAL)
        publications = []
        message = b"x" * 32
        rng = random.Random(7)
        try:
            for stage in sorted({max(1, args.live // 10), args.live}):
                while len(publications) < stage:
                    publication = aeron.add_exclusive_publication(LIVE_PUBLICATION_CHANNEL, LIVE_STREAM_ID)
                    publications.append(publication)
                _await_recordings(control, stage)
                for publication in publications:
                    _offer(publication, message)
                log(f"part 2: {stage} live recordings (load {load()})")
                stage_result = {}
                for interval in ("1000", "0"):
                    stage_result[f"discoveryIntervalMs={interval}"] = _triggers(
                        directory, work, interval, publications, message, rng, args.triggers)
                result[str(stage)] = stage_result
        finally:
            for publication in publications:
                publication.close()
            control.close()
    result["load_after"] = load()
    return result


def _await_recordings(control: ArchiveClient, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(control.list_recordings_for_uri(0, None, "aeron:ipc", LIVE_STREAM_ID)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} recordings after 120 s")
        time.sleep(0.2)


def _offer(publication, message: bytes) -> None:
    deadline = time.monotonic() + 5
    while publication.offer(message) < 0:
        if time.monotonic() > deadline:
            raise TimeoutError("a live publication stayed back-pressured")
        time.sleep(0.0005)


def _triggers(directory: Path, work: Path, interval: str, publications: list, message: bytes,
              rng: random.Random, triggers: int) -> dict[str, Any]:
    options = SourceOptions.parse({"archive.dir": str(directory), "channel": "aeron:ipc",
                                   "streamId": str(LIVE_STREAM_ID), "discoveryIntervalMs": interval,
                                   "startingPositions": "earliest",
                                   "checkpointLocation": str(Path(tempfile.mkdtemp(dir=work)))}, ReadMode.STREAM)
    counters: list[RequestCounter] = []

    def opener(connection) -> ClientArchiveAccess:
        access = open_archive(connection)
        counters.append(RequestCounter(access._client))  # type: ignore[attr-defined]
        return access

    reader = AeronArchiveStreamReader(options, driver_opener=opener)
    latest, planning, cpu, requests, ranges = [], [], [], [], []
    first: dict[str, Any] = {}
    try:
        # Offsets cross to the JVM and back as JSON (untimed here): each call gets fresh dicts.
        start_json = json.dumps(reader.initialOffset())
        for trigger in range(triggers + 1):
            for publication in rng.sample(publications, min(10, len(publications))):
                _offer(publication, message)  # a trickle: 10 recordings change per trigger
            time.sleep(0.02)
            before = counters[0].count
            start = json.loads(start_json)
            began, began_cpu = time.perf_counter(), time.thread_time()
            end = reader.latestOffset(start, ReadAllAvailable())
            offsets_s, offsets_cpu_s = time.perf_counter() - began, time.thread_time() - began_cpu
            end_json = json.dumps(end)
            start, end = json.loads(start_json), json.loads(end_json)
            began, began_cpu = time.perf_counter(), time.thread_time()
            planned = reader.partitions(start, end)
            planning_s, planning_cpu_s = time.perf_counter() - began, time.thread_time() - began_cpu
            if trigger == 0:
                first = {"latestOffset_ms": round(offsets_s * 1000, 2), "partitions_ms": round(planning_s * 1000, 2),
                         "requests": counters[0].count - before, "recordings": len(json.loads(
                             end if isinstance(end, str) else json.dumps(end)))}
            else:
                latest.append(offsets_s)
                planning.append(planning_s)
                cpu.append(offsets_cpu_s + planning_cpu_s)
                requests.append(counters[0].count - before)
                ranges.append(len(planned))
            start_json = end_json
    finally:
        reader.stop()
    return {"first_trigger": first, "latestOffset_ms": summary_ms(latest), "partitions_ms": summary_ms(planning),
            # this thread's CPU time in both calls: what the machine's load does not inflate
            "cpu_per_trigger_ms": summary_ms(cpu),
            "requests_per_trigger": {"median": statistics.median(requests), "max": max(requests)},
            "ranges_per_trigger": statistics.median(ranges)}


# ------------------------------------------------------------------------------------ part 3

def record_for_replays(control_channel: str, replays: int, bytes_each: int) -> list[int]:
    """``replays`` recordings of ``bytes_each`` bytes, recorded through the control protocol over UDP."""
    channel = udp_channel(free_udp_port())
    with udp_client(control_channel) as (client, aeron):
        client.start_recording(channel, RECORDED_STREAM_ID, SourceLocation.REMOTE)
        message = bytes(1000)
        for _ in range(replays):
            publication = aeron.add_exclusive_publication(channel + "|term-length=1m", RECORDED_STREAM_ID)
            deadline = time.monotonic() + 30
            while not publication.is_connected:
                if time.monotonic() > deadline:
                    raise TimeoutError("the archive did not subscribe to the replayed channel")
                time.sleep(0.001)
            while publication.position < bytes_each:
                if publication.offer(message) < 0:
                    time.sleep(0.0001)
            end = publication.position
            recording_id = -1
            while recording_id < 0:
                recording_id = client.find_last_matching_recording(0, channel, RECORDED_STREAM_ID,
                                                                   publication.session_id)
            while client.recording_position(recording_id) < end:
                time.sleep(0.001)
            publication.close()
        client.stop_recording(channel, RECORDED_STREAM_ID)
        found = client.list_recordings_for_uri(0, None, channel, RECORDED_STREAM_ID)
        deadline = time.monotonic() + 30
        while any(d.stop_position < 0 for d in found):
            if time.monotonic() > deadline:
                raise TimeoutError("recordings did not stop")
            time.sleep(0.05)
            found = client.list_recordings_for_uri(0, None, channel, RECORDED_STREAM_ID)
        return [d.recording_id for d in found]


def concurrent_replays(control_channel: str, recording_ids: list[int]) -> dict[str, Any]:
    """All replays requested back to back by one client to one UDP subscription, each replaying its
    whole recording; polls the images while requesting. Time to first byte: from the request to
    the first block of its image."""
    # All replays share one socket: a receiver window per image small enough that together they
    # fit its buffer, else loopback drops datagrams and NAK/retransmit sets the pace, not the archive.
    receiver_window = max(32 * 1024, min(256 * 1024, REPLAY_SOCKET_BUFFER // (2 * len(recording_ids))))
    replay_channel = f"{udp_channel(free_udp_port())}|so-rcvbuf={REPLAY_SOCKET_BUFFER}|rcv-wnd={receiver_window}"
    with udp_client(control_channel) as (client, aeron):
        descriptors = {rid: client.list_recording(rid) for rid in recording_ids}
        subscription = aeron.add_subscription(replay_channel, REPLAY_STREAM_ID)
        counted: dict[int, int] = {}
        first_byte: dict[int, float] = {}
        requested: dict[int, float] = {}
        ends: dict[int, int] = {}

        def poll_all() -> int:
            work = 0
            for image in subscription.images:
                session = image.session_id

                def count(block, _position, _session, _term, session=session) -> None:
                    counted[session] = counted.get(session, 0) + len(block)
                    first_byte.setdefault(session, time.perf_counter())
                work += image.block_poll(count, 1024 * 1024)
            return work

        began = time.perf_counter()
        for rid, d in descriptors.items():
            requested_at = time.perf_counter()
            replay_session_id = client.start_replay(rid, d.start_position, d.stop_position - d.start_position,
                                                    replay_channel, REPLAY_STREAM_ID)
            session = replay_image_session_id(replay_session_id)
            requested[session] = requested_at
            ends[session] = d.stop_position - d.start_position
            poll_all()
        requested_all = time.perf_counter() - began
        deadline = time.monotonic() + 300
        while any(counted.get(s, 0) < ends[s] for s in ends):
            if not poll_all():
                if time.monotonic() > deadline:
                    short = {s: (counted.get(s, 0), ends[s]) for s in ends if counted.get(s, 0) < ends[s]}
                    images = {i.session_id: (i.position, i.is_closed) for i in subscription.images}
                    raise TimeoutError(f"replays did not finish: (session: counted, length) {short}; "
                                       f"images (position, closed) {images}")
                os.sched_yield()
        elapsed = time.perf_counter() - began
        subscription.close()
    total = sum(counted.values())
    ttfb = [first_byte[s] - requested[s] for s in ends]
    return {"replays": len(ends), "bytes": total, "seconds": round(elapsed, 3),
            "aggregate_MB_s": round(total / elapsed / 1e6, 1), "request_all_ms": round(requested_all * 1000, 1),
            "time_to_first_byte_ms": {"median": median_ms(ttfb), "p90": round(sorted(ttfb)[int(0.9 * len(ttfb))] * 1000, 2),
                                      "max": round(max(ttfb) * 1000, 2)}}


def part_replays(args: argparse.Namespace, work: Path, installation: PeerInstallation | None) -> dict[str, Any]:
    result: dict[str, Any] = {"replays": args.replays, "bytes_each": args.replay_mib << 20,
                              "defaults": {"ours_max_concurrent_replays": 20, "java_1_15_1_max_concurrent_replays": 128}}
    limit = str(args.replays + 8)
    directory = work / "replays-ours" / "archive"
    shutil.rmtree(directory.parent, ignore_errors=True)
    directory.mkdir(parents=True)
    with our_sidecar(directory, "--max-concurrent-replays", limit, "--segment-length", "16m") as (_, control, _):
        ids = record_for_replays(control, args.replays, args.replay_mib << 20)
        log(f"part 3, ours: {len(ids)} recordings (load {load()})")
        result["ours"] = [concurrent_replays(control, ids) for _ in range(args.repeats)]
    if installation is not None:
        directory = work / "replays-java" / "archive"
        shutil.rmtree(directory.parent, ignore_errors=True)
        directory.mkdir(parents=True)
        with java_archive(installation, directory, (f"-Daeron.archive.max.concurrent.replays={limit}",)) \
                as (_, control, _):
            ids = record_for_replays(control, args.replays, args.replay_mib << 20)
            log(f"part 3, Java: {len(ids)} recordings (load {load()})")
            result["java"] = [concurrent_replays(control, ids) for _ in range(args.repeats)]
    result["load_after"] = load()
    return result


# ------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="catalog,live,replays")
    parser.add_argument("--recordings", type=int, default=10_000)
    parser.add_argument("--active", type=int, default=100, help="recordings a crash left active (part 1)")
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--triggers", type=int, default=20)
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--replay-mib", type=int, default=4, help="MiB per replayed recording")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-java", action="store_true", help="skip the Java 1.15.1 archive")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temporary directory")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    installation = None if args.no_java or parts == {"live"} else ensure_peer_built()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="aeron-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"load_before": load(), "args": {k: str(v) for k, v in vars(args).items()}}
    runs = {"catalog": lambda: part_catalog(args, work, installation), "live": lambda: part_live(args, work),
            "replays": lambda: part_replays(args, work, installation)}
    failed = False
    try:
        for name, run in runs.items():
            if name not in parts:
                continue
            try:
                results[name] = run()
            except Exception as error:  # noqa: BLE001 - one part failing keeps the others' figures
                failed = True
                results[name] = {"error": f"{type(error).__name__}: {error}"}
                log(f"part {name} failed: {error!r}")
            if args.out is not None:  # after each part: a later failure keeps what was measured
                args.out.parent.mkdir(parents=True, exist_ok=True)
                dump_json(args.out, results)
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
