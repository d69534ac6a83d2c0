"""A small tmpfs as an archive directory, for the tests of what a full or nearly full disk does.

:func:`require_tmpfs_mounts` fails the test (never skips it: a skipped proof proves nothing, as the
network namespace tests) naming what is missing; :func:`small_tmpfs` mounts one of ``size`` on a
new directory and unmounts it on exit, also when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

COMMAND_TIMEOUT_S = 30.0


def require_tmpfs_mounts() -> None:
    """Fails the test unless this process can mount a tmpfs (root, and the mount command)."""
    if os.geteuid() != 0:
        pytest.fail("this test mounts a small tmpfs as the archive directory: run it as root (CI does)")
    for command in ("mount", "umount"):
        if shutil.which(command) is None:
            pytest.fail(f"this test mounts a small tmpfs: it needs the {command} command")


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's syntax: 1m, 8m) mounted on the new directory ``path``."""
    require_tmpfs_mounts()
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True,
                   timeout=COMMAND_TIMEOUT_S)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, timeout=COMMAND_TIMEOUT_S)


def usable_bytes(path: Path) -> int:
    """What an unprivileged writer may still use on ``path``'s file system (Aeron's usable space)."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize
