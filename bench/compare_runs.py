"""Do two runs of an A/B archive benchmark agree on every verdict? (issue 34: "two full runs, an
hour apart, that agree on every verdict").

    .venv/bin/python bench/compare_runs.py FIRST.json SECOND.json

Reads two ``--json`` files of ``bench/modern_java_archive.py`` and prints, per cell (the ratio:
ours/java, and with an A/B ours-b/java and ours-b/ours; transport; payload; record or replay), each
run's median ratio with its 95 % interval and verdict, and
whether the verdicts agree. Exit status 0 when every cell of both runs has the same verdict and
the runs measured the same configuration, 1 when a verdict differs or a cell is missing from one
run, 2 on unreadable input. "not proven" in both runs is agreement, and is listed as such: a
verdict that holds from run to run must also be a proven one, so the summary says how many
cells are proven in both.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SCHEMAS = ("modern-java-archive/2",)
# Configuration that must be equal for two runs' verdicts to be comparable (repeats and seed may differ).
COMPARED_CONFIG = ("transport", "publisher", "javaThreading", "ourArgs", "messages", "warmup", "abOurArgs", "abOurEnv")

Cell = tuple[str, str, int, str]  # comparison (e.g. "ours/java"), transport, payload, operation


def verdict_of(cell: dict[str, Any]) -> str:
    """"faster", "slower" or "not proven" (whatever the reason it is not proven)."""
    return "not proven" if cell["verdict"].startswith("not proven") else cell["verdict"]


def load(path: Path) -> dict[str, Any]:
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"{path}: not a readable run ({error})") from None
    if run.get("schema") not in SCHEMAS:
        raise SystemExit(f"{path}: schema {run.get('schema')!r} is not one of {', '.join(SCHEMAS)} "
                         "(write it with bench/modern_java_archive.py --json)")
    if "failed" in run:
        raise SystemExit(f"{path}: that run failed ({run['failed'][:300]}); it has {len(run.get('samples', []))} "
                         "samples and no verdicts")
    return run


def cells_of(run: dict[str, Any]) -> dict[Cell, dict[str, Any]]:
    return {(c.get("comparison", "ours/java"), c["transport"], int(c["size"]), c["operation"]): c for c in run["cells"]}


def describe(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "(missing)"
    return f"{cell['median']:.2f}x [{cell['low']:.2f}, {cell['high']:.2f}] {cell['verdict']}"


def compare(first: dict[str, Any], second: dict[str, Any]) -> tuple[list[str], bool]:
    """(report lines, whether the runs agree on every verdict with comparable configurations)."""
    lines: list[str] = []
    agree = True
    # An option a run's version did not have yet was at its default: absent, "" and {} are the same.
    differing = [key for key in COMPARED_CONFIG
                 if (first["config"].get(key) or None) != (second["config"].get(key) or None)]
    if differing:
        agree = False
        for key in differing:
            lines.append(f"configuration differs: {key} = {first['config'].get(key)!r} vs {second['config'].get(key)!r}")
    a, b = cells_of(first), cells_of(second)
    proven_both = 0
    lines.append(f"| ratio | transport | payload | operation | first ({first['started']}, {first['config']['repeats']} repeats) "
                 f"| second ({second['started']}, {second['config']['repeats']} repeats) | agree |")
    lines.append("|---|---|---|---|---|---|---|")
    for cell in dict.fromkeys([*a, *b]):
        left, right = a.get(cell), b.get(cell)
        same = left is not None and right is not None and verdict_of(left) == verdict_of(right)
        agree &= same
        if same and left is not None and verdict_of(left) != "not proven":
            proven_both += 1
        comparison, transport, size, operation = cell
        lines.append(f"| {comparison} | {transport} | {size} B | {operation} | {describe(left)} | {describe(right)} "
                     f"| {'yes' if same else 'NO'} |")
    lines.append(f"{'the runs agree on every verdict' if agree else 'the runs DISAGREE'}; "
                 f"{proven_both} of {len(dict.fromkeys([*a, *b]))} cells proven (faster or slower) in both")
    return lines, agree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Whether two runs of bench/modern_java_archive.py --json agree "
                                                 "on every verdict")
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    try:
        first, second = load(args.first), load(args.second)
    except SystemExit as error:
        print(error, file=sys.stderr)
        return 2
    lines, agree = compare(first, second)
    print("\n".join(lines))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
