"""Sampling profiles of a benchmark's processes while one of its runs is timed (``--profile DIR``).

Two samplers, both by PID, both stopped by PID when the run ends:

* **py-spy** (``pip install py-spy`` into the venv) on every Python process named: the sidecar and
  the Spark Python workers (``--subprocesses``, so a worker forked during the run is sampled too).
  ``--nonblocking``: the target is never paused. Active samples only (py-spy leaves idle threads
  out), so a function's share of a process's samples is its share of that process's CPU.
* **perf** (``perf record``, no call graph: the C code has no frame pointers) over every process
  named, Python and not: the media drivers (an embedded driver's threads are C threads py-spy cannot
  see: ``sender``, ``receiver``, ``[conductor, sender, receiver]``), the JVMs (by thread name). Each
  sample is charged to (process, thread name, symbol).

``report()`` writes ``DIR/<run>.txt``: per process, the share of each thread (perf) and the top
frames (perf symbols; py-spy leaf functions and the functions found on the stack of most samples,
"inclusive"), each with its % of that process's samples. Profiles taken on a loaded machine are
valid as shares, not as times.

Used by bench/kafka_read.py, bench/kafka_write.py and bench/kafka_live.py; see bench/README.md.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: The processes the Kafka benchmarks profile (ProcessCpu's kinds and named processes).
PROFILED_KINDS = ("sidecar", "sidecar of Kafka's sink", "Spark driver's media driver", "executor Python workers",
                  "driver Python workers", "executor JVMs", "Spark driver JVM", "other Spark processes")
PY_SPY_RATE_HZ = 97  # not a multiple of a timer tick or of the 5 ms publish interval
PERF_RATE_HZ = 499
TOP_FRAMES = 12
STOP_TIMEOUT_S = 30.0


def py_spy_path() -> str | None:
    """py-spy from this venv (bench/README.md installs it there), else from PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass
class Target:
    label: str
    pid: int
    python: bool  # py-spy it (and perf); else perf only
    follow_children: bool = False  # a daemon that forks the workers: sample its children too


@dataclass
class SamplingProfiler:
    out_dir: Path
    py_spy: str | None = field(default_factory=py_spy_path)
    perf: str | None = field(default_factory=lambda: shutil.which("perf"))
    written: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.py_spy is None and self.perf is None:
            raise RuntimeError("--profile needs py-spy (.venv/bin/python -m pip install py-spy) or perf")

    @contextlib.contextmanager
    def profiling(self, run: str, targets: list[Target]) -> Iterator[None]:
        """Samples ``targets`` while the block runs; then writes ``DIR/<run>.txt``."""
        slug = re.sub(r"[^A-Za-z0-9.=-]+", "_", run).strip("_")
        labels = {t.pid: t.label for t in targets}
        for target in (t for t in targets if t.follow_children):
            for child in _descendants(target.pid):
                labels.setdefault(child, f"{target.label} (forked by {target.pid})")
        started: list[tuple[subprocess.Popen, Path, Target | None]] = []
        try:
            if self.py_spy is not None:
                for target in (t for t in targets if t.python):
                    output = self.out_dir / f"{slug}.py-spy.{target.pid}.txt"
                    command = [self.py_spy, "record", "--pid", str(target.pid), "--format", "raw", "--output",
                               str(output), "--rate", str(PY_SPY_RATE_HZ), "--nonblocking", "--threads"]
                    if target.follow_children:
                        command.append("--subprocesses")
                    started.append((subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                     stderr=subprocess.PIPE), output, target))
            perf_data = self.out_dir / f"{slug}.perf.data"
            if self.perf is not None and targets:
                started.append((self._start_perf(perf_data, labels), perf_data, None))
            time.sleep(0.5)  # the samplers attach
            yield
        finally:
            for process, _, _ in started:
                _stop_sampler(process)
        (self.out_dir / f"{slug}.targets.json").write_text(json.dumps({
            "run": run, "labels": {str(pid): label for pid, label in labels.items()},
            "python": {str(t.pid): [t.label, t.follow_children] for t in targets if t.python}}))
        self.written.append(self._write_report(run, slug, labels, started))

    def _start_perf(self, perf_data: Path, labels: dict[int, str]) -> subprocess.Popen:
        """``perf record`` on the processes still running: perf refuses the whole list when one of
        them has exited (a worker Spark ended meanwhile), so a refused start is tried again."""
        assert self.perf is not None
        for _ in range(3):
            pids = [pid for pid in sorted(labels) if os.path.exists(f"/proc/{pid}")]
            command = [self.perf, "record", "--freq", str(PERF_RATE_HZ), "--pid", ",".join(map(str, pids)),
                       "--output", str(perf_data), "--quiet"]
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE)
            try:
                process.wait(0.3)  # still running after this: attached
            except subprocess.TimeoutExpired:
                return process
        return process

    def _write_report(self, run: str, slug: str, labels: dict[int, str],
                      started: list[tuple[subprocess.Popen, Path, Target | None]]) -> Path:
        lines = [f"# sampling profile: {run}", ""]
        for process, output, target in started:
            if target is None:
                lines += perf_summary(output, labels)
            else:
                lines += py_spy_summary(output, target)
            if process.returncode not in (0, -signal.SIGINT, None) and process.stderr is not None:
                lines.append(f"  (sampler exit {process.returncode}: {process.stderr.read().decode()[-300:].strip()})")
        path = self.out_dir / f"{slug}.txt"
        path.write_text("\n".join(lines) + "\n")
        return path


def _stop_sampler(process: subprocess.Popen) -> None:
    """SIGINT (both samplers then write what they have), then SIGKILL past the timeout; by PID."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGINT)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait()


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parent = int(stat.read().rpartition(b")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


# --- summaries -------------------------------------------------------------------------------------


def _percent_lines(counter: collections.Counter, total: int, indent: str = "    ") -> list[str]:
    return [f"{indent}{100.0 * count / total:5.1f} %  {name}" for name, count in counter.most_common(TOP_FRAMES)]


#: Leaf frames of a thread that waits (py-spy's idle detection misses sleeps inside these): left
#: out of the shares, counted apart. Their CPU, if any (a yielding backoff), shows in perf's
#: "idle" category.
IDLE_LEAVES = re.compile(r"^(BackoffIdleStrategy\.idle|Condition\.wait|Event\.wait|manager|_worker|select|"
                         r"wait|sleep|idle_backoff|accept|poll \(selectors|_recv_into|readinto|recv|read \(socket)")
_PY_SPY_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _py_spy_function(frame: str) -> str:
    """``function (file:line)`` -> ``function (file)``: one name per function, not per line."""
    match = _PY_SPY_FRAME.match(frame)
    return f"{match['function']} ({match['file']})" if match else frame


def py_spy_summary(path: Path, target: Target) -> list[str]:
    """Top leaf functions and top inclusive functions, per process (and per thread when several)."""
    if not path.exists():
        return [f"## {target.label} (pid {target.pid}): py-spy wrote nothing", ""]
    leaf: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    inclusive: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    threads: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    totals: collections.Counter = collections.Counter()
    idle: collections.Counter = collections.Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        process = frames[0] if frames[0].startswith("process ") else f"process {target.pid}"
        frames = frames[1:] if frames[0].startswith("process ") else frames
        thread = frames[0] if frames and frames[0].startswith("thread ") else "thread ?"
        frames = [_py_spy_function(f) for f in (frames[1:] if frames and frames[0].startswith("thread ") else frames)]
        if not frames or IDLE_LEAVES.match(frames[-1]):  # no Python frame: a thread blocked in C
            idle[process] += count
            continue
        totals[process] += count
        threads[process][thread] += count
        if frames:
            leaf[process][frames[-1]] += count
            for name in set(frames):
                inclusive[process][name] += count
    if not totals:
        return [f"## {target.label} (pid {target.pid}): no active samples", ""]
    lines = []
    for process, total in totals.most_common():
        lines.append(f"## {target.label}: py-spy, {process.split(' (')[0]}, {total} busy samples "
                     f"({total / PY_SPY_RATE_HZ:.1f} s of a thread; {idle[process]} more in an idle or wait frame, "
                     "left out)")
        if len(threads[process]) > 1:
            lines.append("  threads:")
            lines += _percent_lines(threads[process], total)
        lines.append("  leaf (self) functions:")
        lines += _percent_lines(leaf[process], total)
        lines.append("  on the stack (inclusive):")
        lines += _percent_lines(inclusive[process], total)
        lines.append("")
    return lines


#: What a native symbol is spent on, first match wins (perf's flat samples grouped so that a
#: thread's shares read as causes: idling in the scheduler, socket syscalls, page faults, copies).
CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern)) for name, pattern in (
    ("idle: yield / sleep / context switch", r"finish_task_switch|sched_yield|__schedule|schedule\b|nanosleep|"
                                             r"hrtimer|_raw_spin_unlock_irq|pick_next|futex|psi_|update_curr|"
                                             r"dequeue|enqueue|select_task_rq|try_to_wake_up|yield"),
    ("page faults: fresh memory zeroed and mapped", r"clear_page|page_fault|handle_mm_fault|do_anonymous_page|"
                                                    r"alloc_pages|rmqueue|folio|lru_|mem_cgroup|zap_|unmap|mmap"),
    ("socket send/receive (kernel: syscalls, UDP, copies)", r"msg|udp|skb|\bip_|_ip\b|sock|net_|dev_|"
                                                             r"_copy_(from|to)_iter|copy_msghdr|iovec|fdget|fput|"
                                                             r"do_syscall|entry_SYSCALL|syscall_exit|loopback|"
                                                             r"softirq|netif|napi|__sys_|csum"),
    ("memcpy / memset", r"memmove|memcpy|memset"),
    ("Aeron C (driver, client)", r"_pyaeron|aeron_"),
    ("Python interpreter", r"libpython|_Py|Py[A-Z]"),
    ("numpy / Arrow / cffi", r"multiarray|arrow|cffi|ffi_"),
    ("JIT-compiled Java code", r"JIT-compiled"),
    ("JVM runtime (compiler, GC)", r"libjvm"),
    ("other kernel", r"kernel\.kallsyms"),
))


def category_of(symbol: str) -> str:
    for name, pattern in CATEGORIES:
        if pattern.search(symbol):
            return name
    return "other"


_PERF_LINE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+(?P<rest>.*)$")


def perf_summary(path: Path, labels: dict[int, str]) -> list[str]:
    """Per process: thread names and symbols (with their library) by % of samples."""
    if not path.exists():
        return ["## perf wrote nothing", ""]
    script = subprocess.run(["perf", "script", "--input", str(path), "--fields", "comm,pid,tid,ip,sym,dso"],
                            capture_output=True, text=True, check=False)
    threads: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    symbols: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    per_thread_symbols: dict[tuple[int, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for line in script.stdout.splitlines():
        match = _PERF_LINE.match(line)
        if match is None:
            continue
        pid = int(match["pid"])
        comm = match["comm"].strip()
        symbol = re.sub(r"\s+", " ", match["rest"].strip())
        symbol = re.sub(r"\+0x[0-9a-f]+", "", symbol)
        symbol = re.sub(r"^[0-9a-f]+ ", "", symbol)
        symbol = re.sub(r"\((?:[^()]*/)?([^()/]+)\)$", r"(\1)", symbol)  # the library's file name only
        if symbol.startswith("[unknown] (perf-"):
            symbol = "JIT-compiled Java code"  # no perf map agent: one bucket
        threads[pid][comm] += 1
        symbols[pid][symbol] += 1
        per_thread_symbols[(pid, comm)][symbol] += 1
    if not threads:
        return [f"## perf: no samples ({script.stderr.strip()[-200:]})", ""]
    lines = []
    owner = {pid: labels.get(pid) or _command_of(pid) for pid in threads}
    for pid in sorted(threads, key=lambda p: -sum(threads[p].values())):
        total = sum(threads[pid].values())
        lines.append(f"## {owner[pid]} (pid {pid}): perf, {total} samples ({total / PERF_RATE_HZ:.1f} s of a core)")
        lines.append("  threads:")
        lines += _percent_lines(threads[pid], total)
        categories: collections.Counter = collections.Counter()
        for symbol, count in symbols[pid].items():
            categories[category_of(symbol)] += count
        lines.append("  spent on:")
        lines += _percent_lines(categories, total)
        lines.append("  symbols:")
        lines += _percent_lines(symbols[pid], total)
        for comm, count in threads[pid].most_common(4):
            if count >= 0.1 * total and len(threads[pid]) > 1:
                lines.append(f"  thread {comm} ({100.0 * count / total:.1f} % of the process): spent on")
                thread_categories: collections.Counter = collections.Counter()
                for symbol, samples in per_thread_symbols[(pid, comm)].items():
                    thread_categories[category_of(symbol)] += samples
                lines += _percent_lines(thread_categories, count, indent="      ")
                lines.append("    symbols:")
                lines += _percent_lines(per_thread_symbols[(pid, comm)], count, indent="      ")
        lines.append("")
    return lines


def _command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")[:80] or "exited"
    except OSError:
        return "exited"


def spark_targets(cpu, kinds: tuple[str, ...]) -> list[Target]:
    """The processes of ``kinds`` (ProcessCpu's kinds: "sidecar", "executor Python workers", "executor
    JVMs", "Spark driver's media driver", ...) now running, as targets. A ``pyspark.daemon`` is
    followed into the workers it forks, which are then not targets of their own (py-spy would
    sample them twice)."""
    targets: list[Target] = []
    followed: set[int] = set()
    for kind, pids in cpu.pids_by_kind().items():
        if kind not in kinds:
            continue
        for pid in pids:
            python = "Python" in kind or kind.startswith("sidecar") or "python" in _command_of(pid).split(" ")[0]
            daemon = "pyspark.daemon" in _command_of(pid)
            if daemon:
                followed.update(_descendants(pid))
            targets.append(Target(kind, pid, python, follow_children=daemon))
    return [t for t in targets if t.pid not in followed]


def main(argv: list[str] | None = None) -> int:
    """Writes the summaries again from what a ``--profile DIR`` run left (after changing this file)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    for facts_path in sorted(args.directory.glob("*.targets.json")):
        facts = json.loads(facts_path.read_text())
        slug = facts_path.name[:-len(".targets.json")]
        labels = {int(pid): label for pid, label in facts["labels"].items()}
        lines = [f"# sampling profile: {facts['run']}", ""]
        for pid, (label, follow) in facts["python"].items():
            lines += py_spy_summary(args.directory / f"{slug}.py-spy.{pid}.txt", Target(label, int(pid), True, follow))
        lines += perf_summary(args.directory / f"{slug}.perf.data", labels)
        (args.directory / f"{slug}.txt").write_text("\n".join(lines) + "\n")
        print(args.directory / f"{slug}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
