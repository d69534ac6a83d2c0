"""The verdict of an A/B benchmark cell: the median of paired per-repeat ratios, its seeded bootstrap
95 % interval, and "faster"/"slower" only where that interval lies entirely above/below 1.0.

Each repeat runs both sides back to back (order randomised), so the ratio of one repeat compares
two measurements taken under nearly the same machine state; the repeats are then resampled with
replacement (percentile bootstrap of the median). With n repeats the interval's ends are order
statistics of the ratios: for n = 5 they are the smallest and largest ratio (a verdict needs every
repeat on one side of 1.0), for n = 7 the 2nd smallest and 2nd largest, so one outlier on each side
no longer decides. Used by bench/modern_java_archive.py and bench/compare_runs.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 10_000
CONFIDENCE = 0.95
MIN_REPEATS = 5  # issue 34: fewer, and two or three lucky repeats would make a verdict
FASTER, SLOWER, NOT_PROVEN = "faster", "slower", "not proven"
TOO_FEW = "not proven (too few repeats)"


@dataclass(frozen=True)
class CellVerdict:
    median: float
    low: float
    high: float
    verdict: str  # FASTER | SLOWER | NOT_PROVEN | TOO_FEW
    repeats: int

    def text(self) -> str:
        return f"{self.median:.2f}x [{self.low:.2f}, {self.high:.2f}] {self.verdict}"


def bootstrap_median_interval(ratios: list[float], seed: int,
                              resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """The percentile bootstrap 95 % interval of the median of ``ratios`` (seeded: a run's figures
    can be computed again from its JSON)."""
    values = np.asarray(ratios, dtype=float)
    if values.size == 0:
        raise ValueError("no ratios to bootstrap")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.size, size=(resamples, values.size))
    medians = np.median(values[picks], axis=1)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def verdict(ratios: list[float], seed: int, min_repeats: int = MIN_REPEATS) -> CellVerdict:
    """ours/theirs ratios of one cell (one per repeat) -> median, interval, verdict; no verdict from
    fewer than ``min_repeats`` repeats, whatever their interval."""
    low, high = bootstrap_median_interval(ratios, seed)
    word = FASTER if low > 1.0 else SLOWER if high < 1.0 else NOT_PROVEN
    if len(ratios) < min_repeats and word != NOT_PROVEN:
        word = TOO_FEW
    return CellVerdict(float(np.median(ratios)), low, high, word, len(ratios))
