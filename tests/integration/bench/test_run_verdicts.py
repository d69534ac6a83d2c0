"""bench/modern_java_archive.py's verdicts (issue 34): a cell is "faster"/"slower" only where the
seeded bootstrap interval of its median ratio lies entirely on one side of 1.0, with enough
repeats; two runs agree only when every cell's verdict is the same; the archives' order is
balanced; the page-cache and machine readings the spread table shows are real numbers."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))
import compare_runs  # noqa: E402 - bench/ is not a package
from modern_java_archive import ARCHIVES, balanced_orders  # noqa: E402
from ratio_verdicts import FASTER, NOT_PROVEN, SLOWER, TOO_FEW, bootstrap_median_interval, verdict  # noqa: E402
from spread_causes import recording_residency, resident_bytes, snapshot, window  # noqa: E402


def test_a_verdict_needs_the_whole_interval_on_one_side_of_one() -> None:
    assert verdict([1.10, 1.05, 1.20, 1.08, 1.30], seed=1).verdict == FASTER
    assert verdict([0.90, 0.85, 0.95, 0.80, 0.92], seed=1).verdict == SLOWER
    # With 5 repeats the interval spans the smallest to the largest ratio: one repeat below 1.0 is enough doubt.
    unproven = verdict([1.10, 1.05, 1.20, 0.95, 1.30], seed=1)
    assert unproven.verdict == NOT_PROVEN and unproven.low < 1.0 < unproven.high
    assert unproven.median == 1.10


def test_seven_repeats_let_one_outlier_on_each_side_pass() -> None:
    judged = verdict([0.70, 1.10, 1.12, 1.15, 1.08, 1.20, 2.0], seed=3)
    assert judged.verdict == FASTER and judged.low == 1.08 and judged.high == 1.20


def test_fewer_repeats_than_the_minimum_give_no_verdict() -> None:
    assert verdict([1.5, 1.6], seed=1).verdict == TOO_FEW
    assert verdict([0.9, 1.6], seed=1).verdict == NOT_PROVEN


def test_the_interval_is_the_same_for_the_same_seed() -> None:
    ratios = [random.Random(7).uniform(0.5, 1.5) for _ in range(9)]
    assert bootstrap_median_interval(ratios, 11) == bootstrap_median_interval(ratios, 11)


def test_each_archive_goes_first_in_half_the_repeats() -> None:
    orders = balanced_orders(random.Random(5), 6)
    assert sorted(orders) == sorted([ARCHIVES, ARCHIVES[::-1]] * 3)
    odd = balanced_orders(random.Random(5), 5)
    assert len(odd) == 5 and abs(odd.count(ARCHIVES) - odd.count(ARCHIVES[::-1])) == 1
    three = balanced_orders(random.Random(5), 6, (*ARCHIVES, "ours-b"))
    assert all(sorted(order[0] for order in three).count(archive) == 2 for archive in (*ARCHIVES, "ours-b"))


def _run(path: Path, verdicts: dict[tuple[str, int, str], str], repeats: int = 5) -> Path:
    cells = [{"transport": t, "size": size, "operation": op, "median": 1.0, "low": 0.9, "high": 1.1,
              "verdict": v, "ratios": [1.0] * repeats} for (t, size, op), v in verdicts.items()]
    path.write_text(json.dumps({"schema": "modern-java-archive/2", "started": "2026-11-29T06:00:00Z",
                                "config": {"transport": "ipc", "publisher": "per-message", "javaThreading": "shared",
                                           "ourArgs": "", "messages": {}, "warmup": True, "repeats": repeats},
                                "cells": cells}))
    return path


def test_two_runs_agree_only_when_every_verdict_is_the_same(tmp_path: Path, capsys) -> None:
    first = {("ipc", 32, "record"): FASTER, ("ipc", 32, "replay"): NOT_PROVEN}
    a = _run(tmp_path / "a.json", first)
    assert compare_runs.main([str(a), str(_run(tmp_path / "b.json", first, repeats=7))]) == 0
    assert "1 of 2 cells proven" in capsys.readouterr().out
    changed = {**first, ("ipc", 32, "replay"): SLOWER}
    assert compare_runs.main([str(a), str(_run(tmp_path / "c.json", changed))]) == 1
    assert "DISAGREE" in capsys.readouterr().out
    too_few = {**first, ("ipc", 32, "replay"): TOO_FEW}  # not proven either way: the same verdict
    assert compare_runs.main([str(a), str(_run(tmp_path / "e.json", too_few, repeats=2))]) == 0
    missing = {("ipc", 32, "record"): FASTER}
    assert compare_runs.main([str(a), str(_run(tmp_path / "d.json", missing))]) == 1


def test_a_file_that_is_not_a_run_is_named(tmp_path: Path, capsys) -> None:
    (tmp_path / "x.json").write_text("{}")
    assert compare_runs.main([str(tmp_path / "x.json"), str(tmp_path / "x.json")]) == 2
    assert "x.json" in capsys.readouterr().err
    (tmp_path / "failed.json").write_text(json.dumps({"schema": "modern-java-archive/2", "failed": "RuntimeError: x",
                                                      "samples": []}))
    assert compare_runs.main([str(tmp_path / "failed.json"), str(tmp_path / "failed.json")]) == 2
    assert "that run failed" in capsys.readouterr().err


def test_segment_residency_counts_written_pages_not_the_preallocated_size(tmp_path: Path) -> None:
    segment = tmp_path / "7-0.rec"
    with open(segment, "wb") as file:
        file.write(b"\1" * (1 << 20))
        file.truncate(64 << 20)  # preallocated the sparse way: the tail was never written
    assert resident_bytes(segment) == 1 << 20
    assert recording_residency(tmp_path, 7, 1 << 20) == {"segmentFiles": 1, "residentMiB": 1.0, "residentShare": 1.0}
    assert recording_residency(tmp_path, 8, 0)["segmentFiles"] == 0


def test_a_window_reads_the_machine(tmp_path: Path) -> None:
    before = snapshot()
    sum(range(2_000_000))  # some CPU in this process, counted as "others'" (not the archive's)
    os.sync()
    causes = window(before, snapshot(), archive_cpu_s=0.0)
    assert causes["windowSeconds"] > 0 and causes["othersCpuSeconds"] >= 0
    assert {"Cached", "Dirty"} <= set(causes["meminfoMiB"]) and causes["loadAverage"] >= 0
