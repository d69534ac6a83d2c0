"""A process and every process below it, killed by PID.

Killing a process group is not enough for a Spark driver program: pyspark's worker daemon puts
itself and its Python workers in a process group of their own (``os.setpgid(0, 0)`` in
pyspark/daemon.py), so they survive a ``killpg`` of the program's group. A driver-side worker
in the middle of a sink commit would then finish that commit after the "kill". Tests that
simulate a host dying kill the whole tree.
"""

from __future__ import annotations

import os
import signal


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # pid (comm) state ppid ...: comm may hold spaces and parentheses
                fields = stat.read().rpartition(")")[2].split()
            parents[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return parents


def descendant_pids(root: int) -> list[int]:
    """Every live process below ``root`` (children, grandchildren, ...), whatever their group."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, pending = [], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def kill_tree(root: int) -> None:
    """SIGKILL ``root``, its process group and every process below it, each by PID."""
    doomed = descendant_pids(root)
    for pid in [root, *doomed]:
        try:
            os.kill(pid, signal.SIGSTOP)  # nothing forks or finishes its work while the tree is listed
        except ProcessLookupError:
            pass
    doomed = sorted(set(doomed) | set(descendant_pids(root)))
    try:
        os.killpg(root, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in [root, *doomed]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
