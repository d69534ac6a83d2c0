"""What the Spark benchmarks share: workloads, their payloads, the Parquet side, the Spark session,
the fingerprint both sides must agree on, the timing summary, and the processes of a layout.

Layouts (``--layout``): ``single-host`` runs Spark in ``local[2]`` next to the sidecar and gives the
connector ``archive.dir``. ``cluster`` stands in for three hosts as tests/cluster does: the sidecar
on its own embedded driver, the Spark driver program (this process) on a standalone media driver
process named by ``AERON_DIR``, ``local-cluster[2,1,1024]`` executors whose ``AERON_DIR`` holds no
driver (each Python worker embeds one), and the connector given ``archive.controlChannel`` only.

Imported by bench/spark_source_vs_parquet.py and bench/spark_sink_vs_parquet.py (run as scripts,
so this folder is on sys.path). Every process started here is stopped here, by PID.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PARQUET_ROW_GROUP_BYTES = 16 << 20  # so Spark can split one file across both cores
LAYOUTS = ("single-host", "cluster")
CLUSTER_MASTER = "local-cluster[2,1,1024]"  # two executor JVMs of one core and 1 GiB each
SIDECAR_STOP_GRACE_S = 30.0
PROCESS_STOP_GRACE_S = 15.0
DRIVER_STARTUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Workload:
    count: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.count:,} x {self.size} B"

    @property
    def payload_mb(self) -> float:
        return self.count * self.size / 1e6

    @classmethod
    def parser(cls, max_size: int):
        """An argparse type for ``COUNTxSIZE`` with 8 <= SIZE <= max_size."""
        def parse(text: str) -> Workload:
            count, _, size = text.lower().partition("x")
            try:
                workload = cls(int(count.replace("_", "")), int(size))
            except ValueError:
                raise argparse.ArgumentTypeError(f"workload {text!r}: expected COUNTxSIZE, e.g. 2000000x32") from None
            if workload.count <= 0 or not 8 <= workload.size <= max_size:
                raise argparse.ArgumentTypeError(f"workload {text!r}: count must be > 0 and size in 8..{max_size}")
            return workload
        return parse


def payload_block(workload: Workload, seed: int) -> np.ndarray:
    """All payloads back to back: random bytes (incompressible), message i at [i*size, (i+1)*size)."""
    return np.random.default_rng(seed).integers(0, 256, workload.count * workload.size, dtype=np.uint8)


def write_parquet(path: Path, workload: Workload, data: np.ndarray) -> None:
    """The payloads as one uncompressed Parquet column ``payload``, written with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    offsets = np.arange(0, workload.count + 1, dtype=np.int32) * workload.size
    payload = pa.Array.from_buffers(pa.binary(), workload.count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    pq.write_table(pa.table({"payload": payload}), path, compression="none",
                   row_group_size=max(1, PARQUET_ROW_GROUP_BYTES // workload.size))


def fingerprint(dataframe) -> tuple:
    """count(*), sum(length(payload)), bit_xor(xxhash64(payload)): touches every payload byte."""
    from pyspark.sql import functions as F

    row = dataframe.agg(F.count("*"), F.sum(F.length("payload")), F.bit_xor(F.xxhash64("payload"))).collect()[0]
    return tuple(row)


def local_spark(app_name: str, master: str = "local[2]", **config: str):
    """``master`` (local[2] by default) without UI or progress bars, two shuffle partitions, plus ``config``."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class Timings:
    seconds: list[float]

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def line(self, name: str, workload: Workload) -> str:
        return (f"  {name:<26} min {self.best:7.3f} s  median {self.median:7.3f} s   "
                f"best {workload.count / self.best / 1e6:6.2f} M rows/s {workload.payload_mb / self.best:7.1f} MB/s   "
                f"median {workload.count / self.median / 1e6:6.2f} M rows/s "
                f"{workload.payload_mb / self.median:7.1f} MB/s")

    def ratio_line(self, name: str, reference: Timings, reference_name: str) -> str:
        """How fast this is relative to ``reference`` (rows/s ratio = reference seconds / ours)."""
        return (f"  ratio {name} / {reference_name} (rows/s): best {reference.best / self.best:.2f}x, "
                f"median {reference.median / self.median:.2f}x")


# --- progress and layouts -----------------------------------------------------------------------


def progress(message: str) -> None:
    """A timestamped progress line (stdout, flushed): a run takes minutes."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def add_layout_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--layout", choices=LAYOUTS, default="single-host",
                        help="single-host: local[2], archive.dir (default); cluster: the sidecar, the Spark driver "
                             f"and {CLUSTER_MASTER} executors on separate media drivers, archive.controlChannel only")


def exit_on_sigterm() -> None:
    """SIGTERM raises SystemExit, so the ``finally`` blocks stop what the benchmark started.

    Python runs the handler in the main thread once it is back in Python code: while it waits in a
    py4j call (a Spark action), that is when the action returns, seconds later.
    """
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def loopback_udp_channel() -> str:
    from aeron_spark.archive.cli.sidecar_process import free_udp_port

    return f"aeron:udp?endpoint=127.0.0.1:{free_udp_port()}"


@contextlib.contextmanager
def running_sidecar(archive_dir: Path, *serve_args: str):
    """`aeron-archive serve` (embedded C driver), stopped by PID on exit: SIGTERM, then SIGKILL and
    removal of the embedded driver's directory a killed sidecar leaves behind."""
    from aeron_spark.archive.cli.sidecar_process import SidecarProcess

    sidecar = SidecarProcess.start(archive_dir, *serve_args)
    progress(f"sidecar pid {sidecar.pid} ready: control {sidecar.control_channel}, driver {sidecar.aeron_dir}")
    try:
        yield sidecar
    finally:
        if sidecar.stop(grace_s=SIDECAR_STOP_GRACE_S) != 0:
            sidecar.kill(remove_embedded_driver_dir=True)
        progress(f"sidecar pid {sidecar.pid} stopped (exit {sidecar.process.returncode})")


def shm_dir(prefix: str) -> Path:
    """A fresh directory on /dev/shm (Aeron's default base on Linux; log buffers on tmpfs), else the temp dir."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/dev/shm" if os.path.isdir("/dev/shm") else None))


@contextlib.contextmanager
def running_media_driver_process(aeron_dir: Path) -> Iterator[subprocess.Popen]:
    """``python -m aeron_spark.driver_integration.media_driver --dir DIR``, ready once it prints
    DIR; stopped by PID on exit (SIGTERM, then SIGKILL), its directory removed."""
    import selectors

    process = subprocess.Popen([sys.executable, "-m", "aeron_spark.driver_integration.media_driver",
                                "--dir", str(aeron_dir)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            line = process.stdout.readline().strip() if selector.select(DRIVER_STARTUP_TIMEOUT_S) else ""
        if line != str(aeron_dir):
            raise RuntimeError(f"the media driver process {process.pid} printed {line!r}, not {aeron_dir} "
                               f"(exit code {process.poll()})")
        progress(f"media driver process pid {process.pid} ready on {aeron_dir}")
        yield process
    finally:
        stop_pid(process.pid, process)
        shutil.rmtree(aeron_dir, ignore_errors=True)


@dataclass(frozen=True)
class ClusterHosts:
    """The Spark driver host's media driver (a process) and the executors' AERON_DIR (no driver)."""

    driver_aeron_dir: Path
    driver_pid: int
    executor_aeron_dir: Path

    def spark_config(self) -> dict[str, str]:
        # No driver runs there: each executor's Python worker starts an embedded one (aeron.driver=auto).
        return {"spark.executorEnv.AERON_DIR": str(self.executor_aeron_dir)}


@contextlib.contextmanager
def cluster_hosts(work: Path) -> Iterator[ClusterHosts]:
    """Starts the Spark driver host's media driver and names it by AERON_DIR in this process's
    environment while open: the Spark driver JVM started later, and its Python workers (planning,
    the sink's commit), inherit it. Restores AERON_DIR on exit."""
    driver_dir = shm_dir("aeron-bench-spark-driver-")
    previous = os.environ.get("AERON_DIR")
    with running_media_driver_process(driver_dir) as process:
        os.environ["AERON_DIR"] = str(driver_dir)
        try:
            yield ClusterHosts(driver_dir, process.pid, work / "executor-host-aeron")
        finally:
            if previous is None:
                os.environ.pop("AERON_DIR", None)
            else:
                os.environ["AERON_DIR"] = previous


def spark_for_layout(app_name: str, layout: str, hosts: ClusterHosts | None, **config: str):
    """local[2], or in the cluster layout local-cluster with the executors' AERON_DIR."""
    if layout == "single-host":
        return local_spark(app_name, **config)
    progress(f"starting Spark {CLUSTER_MASTER} (driver on {hosts.driver_aeron_dir}, executors' AERON_DIR "
             f"{hosts.executor_aeron_dir} with no driver)")
    spark = local_spark(app_name, CLUSTER_MASTER, **{**config, **hosts.spark_config()})
    # pyspark copies every spark.executorEnv.* into sc.environment, which register() ships with the
    # data source to *every* Python worker, the driver-side ones (planning, the sink's commit)
    # included: they would start embedded drivers too. Without it there, driver-side workers
    # inherit the driver JVM's AERON_DIR and executors' workers their executor's.
    spark.sparkContext.environment.pop("AERON_DIR", None)
    progress(f"Spark ready: driver JVM pid {spark_jvm_pid(spark)}")
    return spark


def spark_jvm_pid(spark) -> int | None:
    process = getattr(spark.sparkContext._gateway, "proc", None)
    return process.pid if process is not None else None


@contextlib.contextmanager
def spark_processes_stopped() -> Iterator[None]:
    """On exit, also when the session failed to start: the driver JVM pyspark launched and every
    process seen below it (executor JVMs, Python workers), by PID, after ``spark.stop()`` (the
    caller's, inside this block); then the embedded-driver directories of those processes, which
    a worker ended without atexit leaves in /dev/shm.

    A thread lists the processes below the JVM every 0.25 s (~1 ms each): Spark ends workers and
    executors itself, and their PIDs are needed afterwards for the directories. A worker that
    lives shorter than that can still leave one; the next embedded driver started on this
    machine removes it (process_driver.remove_leftover_driver_dirs).
    """
    seen: dict[int, bytes] = {}  # pid -> its start time, so a reused PID is never signalled
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.25):
            _record_spark_processes(seen)

    watcher = threading.Thread(target=watch, name="spark-process-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        from pyspark import SparkContext

        jvm = getattr(SparkContext._gateway, "proc", None)
        if jvm is not None:
            _record_spark_processes(seen)
            stop_pid(jvm.pid, jvm)
        still = [pid for pid, started in seen.items() if _start_time(pid) == started]
        for pid in still:
            stop_pid(pid)
        remove_worker_driver_dirs(list(seen) + ([jvm.pid] if jvm is not None else []))
        if jvm is not None:
            progress(f"Spark stopped: driver JVM pid {jvm.pid}; {len(seen)} processes ran below it, "
                     f"{len(still)} of them still running at the end and stopped here")


def stop_session(spark) -> None:
    """``spark.stop()``; a failure (a py4j call cut short by SIGTERM leaves the gateway unusable) is
    reported, not raised, so the error that ended the run stays the one shown and
    ``spark_processes_stopped`` still stops the processes by PID."""
    try:
        spark.stop()
    except Exception as error:  # noqa: BLE001 - reported; the processes are stopped by PID next
        progress(f"spark.stop() failed ({type(error).__name__}: {str(error)[:200]}); stopping Spark's processes by PID")


def _record_spark_processes(seen: dict[int, bytes]) -> None:
    from pyspark import SparkContext

    jvm = getattr(SparkContext._gateway, "proc", None)
    if jvm is None or jvm.poll() is not None:
        return
    for pid in descendants(jvm.pid, process_table()):
        if pid not in seen and (started := _start_time(pid)) is not None:
            seen[pid] = started


def _start_time(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == b"Z" else fields[19]


def stop_pid(pid: int, process: subprocess.Popen | None = None, grace_s: float = PROCESS_STOP_GRACE_S) -> None:
    """SIGTERM ``pid``, SIGKILL if it is still there after ``grace_s``; reaps it when it is our child."""
    if not _alive(pid, process):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _alive(pid, process) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid, process):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if process is not None:
            process.wait(grace_s)


def _alive(pid: int, process: subprocess.Popen | None) -> bool:
    if process is not None:
        return process.poll() is None
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def remove_worker_driver_dirs(pids: list[int]) -> None:
    """The ``aeron-spark-worker-<pid>-*`` directories of these (stopped) processes' embedded drivers."""
    from aeron_spark.driver_integration.media_driver import default_base_directory
    from aeron_spark.driver_integration.process_driver import EMBEDDED_DIR_PREFIX

    base = Path(default_base_directory())
    for pid in pids:
        for directory in base.glob(f"{EMBEDDED_DIR_PREFIX}{pid}-*"):
            shutil.rmtree(directory, ignore_errors=True)


# --- processes and their CPU time ---------------------------------------------------------------


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, user+system CPU seconds) of every process, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return table


def descendants(root: int, table: dict[int, tuple[int, float]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, pending = [], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


DRIVER_THREAD = ": media driver thread"


def driver_thread_seconds(pid: int) -> float:
    """CPU seconds of the Aeron C media driver's agent threads in ``pid`` (shared mode: one thread
    named ``[conductor, sender, receiver]``, truncated by the kernel; shared_network, the embedded
    default: ``conductor``, ``[sender, receiver]`` truncated and the native resource agent
    ``aeron-md-nra``; dedicated: one per agent)."""
    total = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as stat:
                head, _, rest = stat.read().rpartition(b")")
        except OSError:
            continue
        name = head.partition(b"(")[2]
        if (name.startswith((b"[conductor", b"[sender")) or name == b"aeron-md-nra"
                or name in (b"sender", b"receiver", b"conductor")):
            fields = rest.split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def interleaved_runs(label: str, runs: Mapping[str, Callable[[], object]], repetitions: int,
                     cpu: ProcessCpu, *, alternate: bool = True) -> dict[str, list[float]]:
    """Times each of ``runs`` once per repetition, interleaved, adding each run's CPU to ``cpu``
    under ``"<label>, <name>"``; with ``alternate`` every other repetition runs them in reverse
    order, so load and page cache hit all alike. Returns the seconds of each run, per name."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for repetition in range(repetitions):
        order = list(runs.items())
        if alternate and repetition % 2:
            order.reverse()
        for name, run in order:
            before = cpu.sample()
            started = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - started)
            cpu.add(f"{label}, {name}", before, cpu.sample())
        progress(f"{label}: repetition {repetition + 1}/{repetitions}: "
                 + ", ".join(f"{name} {values[-1]:.2f} s" for name, values in seconds.items()))
    return seconds


@dataclass
class ProcessCpu:
    """CPU seconds per kind of process over each timed run, to say where a layout spends its time.

    ``named``: fixed processes (the sidecar, the Spark driver's media driver). Below the Spark
    driver JVM: executor JVMs (``CoarseGrainedExecutorBackend``) and Python workers, counted as
    the driver's or the executors' by the nearest JVM above them (in local[2] every worker is
    the driver JVM's). The share of the sidecar and of the Python workers spent in an embedded
    media driver's thread (UDP send and receive, IPC log cleaning) is shown in parentheses. A
    process that exits between two samples loses its last CPU time (Spark reuses its Python
    workers, so this is rare).
    """

    named: dict[str, int]
    jvm_pid: int | None
    totals: dict[str, dict[str, float]] = field(default_factory=dict)  # run name -> kind -> seconds
    runs: dict[str, int] = field(default_factory=dict)
    _kinds: dict[tuple[int, str], str] = field(default_factory=dict)  # (pid, command line) -> kind

    def sample(self) -> dict[tuple[int, bool], tuple[str, float]]:
        """(pid, driver thread only) -> (kind, CPU seconds)."""
        table = process_table()
        sample: dict[tuple[int, bool], tuple[str, float]] = {}

        def add(pid: int, kind: str, split_driver: bool) -> None:
            sample[(pid, False)] = (kind, table[pid][1])
            if split_driver:
                sample[(pid, True)] = (kind + DRIVER_THREAD, driver_thread_seconds(pid))

        for name, pid in self.named.items():
            if pid in table:
                add(pid, name, name == "sidecar")
        if self.jvm_pid is None or self.jvm_pid not in table:
            return sample
        add(self.jvm_pid, "Spark driver JVM", False)
        for pid in descendants(self.jvm_pid, table):
            kind = self._kind(pid, table)
            add(pid, kind, "Python" in kind)
        return sample

    def _kind(self, pid: int, table: dict[int, tuple[int, float]]) -> str:
        # Keyed by the command line too: a process caught between fork and exec still shows its
        # parent's (a JVM's child looks like that JVM), and a reused pid is another process.
        command = _cmdline(pid)
        key = (pid, command)
        if key not in self._kinds:
            if "CoarseGrainedExecutorBackend" in command:
                kind = "executor JVMs"
            elif "python" in command.split(" ", 1)[0] or "pyspark" in command:
                parent = table[pid][0]
                while parent in table and parent != self.jvm_pid and "java" not in _cmdline(parent).split(" ", 1)[0]:
                    parent = table[parent][0]
                kind = "driver Python workers" if parent == self.jvm_pid else "executor Python workers"
            else:
                kind = "other Spark processes"
            self._kinds[key] = kind
        return self._kinds[key]

    def pids_by_kind(self) -> dict[str, list[int]]:
        """The processes running now, by kind (the named ones under their names)."""
        table = process_table()
        found: dict[str, list[int]] = {name: [pid] for name, pid in self.named.items() if pid in table}
        if self.jvm_pid is not None and self.jvm_pid in table:
            found["Spark driver JVM"] = [self.jvm_pid]
            for pid in descendants(self.jvm_pid, table):
                found.setdefault(self._kind(pid, table), []).append(pid)
        return found

    def worker_layout(self) -> str:
        """Which media driver each running Python worker uses: AERON_DIR in its environment, and
        how many started an embedded driver (an ``aeron-spark-worker-<pid>-*`` directory)."""
        from aeron_spark.driver_integration.media_driver import default_base_directory
        from aeron_spark.driver_integration.process_driver import EMBEDDED_DIR_PREFIX

        if self.jvm_pid is None:
            return "no Spark JVM"
        table = process_table()
        found: dict[str, list[tuple[str | None, bool]]] = {}
        for pid in descendants(self.jvm_pid, table):
            kind = self._kind(pid, table)
            if "Python" not in kind:
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    variables = dict(item.partition(b"=")[::2] for item in environ.read().split(b"\0") if item)
            except OSError:
                continue
            aeron_dir = variables.get(b"AERON_DIR")
            embedded = any(Path(default_base_directory()).glob(f"{EMBEDDED_DIR_PREFIX}{pid}-*"))
            found.setdefault(kind, []).append((aeron_dir.decode() if aeron_dir else None, embedded))
        return "; ".join(f"{kind}: {len(entries)} running, AERON_DIR {sorted({str(d) for d, _ in entries})}, "
                         f"{sum(e for _, e in entries)} with an embedded driver" for kind, entries in found.items())

    def add(self, run: str, before: dict, after: dict) -> None:
        kinds = self.totals.setdefault(run, {})
        for key, (kind, seconds) in after.items():
            kinds[kind] = kinds.get(kind, 0.0) + seconds - before.get(key, (kind, 0.0))[1]
        self.runs[run] = self.runs.get(run, 0) + 1

    def lines(self) -> list[str]:
        """Per run name: mean CPU seconds per run, by kind of process."""
        lines = []
        for run, kinds in self.totals.items():
            count = self.runs[run]
            shown = []
            for kind, seconds in kinds.items():
                if kind.endswith(DRIVER_THREAD) or seconds <= 0.005:
                    continue
                driver = kinds.get(kind + DRIVER_THREAD)
                shown.append(f"{kind} {seconds / count:.2f}" + (f" (driver thread {driver / count:.2f})"
                                                               if driver is not None else ""))
            total = sum(seconds for kind, seconds in kinds.items() if not kind.endswith(DRIVER_THREAD))
            lines.append(f"  CPU per run, {run} (core-s): {', '.join(shown) or '-'} (total {total / count:.2f})")
        return lines
