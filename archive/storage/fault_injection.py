"""FAULT-INJECTION HOOK for the storage crash tests: stop maintenance at a named point. Off by default.

Tests that SIGKILL the sidecar in the middle of truncate, purge or a segment delete set, in the
sidecar's environment::

    AERON_ARCHIVE_STORAGE_FAULT=<point>:kill            the process SIGKILLs itself at <point>
    AERON_ARCHIVE_STORAGE_FAULT=<point>:enospc          the write at <point> fails as on a full disk
    AERON_ARCHIVE_STORAGE_FAULT=<point>:<pause file>    creates <pause file> (holding its pid) and
                                                        waits while it exists (the test kills it)

Points (each fires at its first hit only):

* ``truncate-staged``: the segments past the new stop are renamed ``.rec.del``; catalog unchanged.
* ``truncate-committed``: the catalog has the new stop; the ``.del`` files and the bytes past the
  stop in the segment holding it are still there.
* ``truncate-cut``: between the two ``ftruncate`` calls that zero the holding segment (it is short).
* ``purge-staged``: every segment renamed ``.rec.del``; the recording is still valid.
* ``purge-committed``: the recording is DELETED in the catalog; its ``.del`` files are not deleted yet.
* ``segment-renamed``: one segment of a delete (delete detached, truncate, purge) is ``.rec.del``.
* ``catalog-add``: a new recording's descriptor is about to be written to the catalog (after
  StartRecording was answered OK, when the first image arrives).
* ``catalog-replace-written`` / ``catalog-replace-committed``: UpdateChannel
  (`Catalog.replace_channels`): the rewritten catalog is written and fsynced as
  ``archive.catalog.replace``, not renamed yet; the rename is done and the writer uses the new
  file, the request is not answered yet.
* ``migrate-journaled`` / ``migrate-linked`` / ``migrate-committed`` / ``migrate-unlinked`` /
  ``migrate-marked``: `aeron-archive migrate` after each of its steps (`migration`): the journal
  is written; new segment names are hard-linked; the new catalog is renamed into place (the
  commit point); the old names are unlinked; the mark file is rewritten (the journal remains).
* ``compact-written`` / ``compact-committed``: `aeron-archive compact` (`catalog_compaction`): the
  compacted catalog is written and fsynced as ``archive.catalog.compact``, not renamed yet; it is
  renamed over ``archive.catalog``, the dropped recordings' segment files are not deleted yet.

Unset (production) each point costs one environment lookup. Used by
``tests/integration/storage/test_storage_crash_safety.py``; restart repair is `recovery.repair_archive`.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

ENV_VAR = "AERON_ARCHIVE_STORAGE_FAULT"
POINTS = ("truncate-staged", "truncate-committed", "truncate-cut", "purge-staged", "purge-committed",
          "segment-renamed", "catalog-add", "catalog-replace-written", "catalog-replace-committed",
          "migrate-journaled", "migrate-linked", "migrate-committed", "migrate-unlinked", "migrate-marked",
          "compact-written", "compact-committed")
POLL_S = 0.02
_fired: set[str] = set()


def parse_fault(text: str) -> tuple[str, str]:
    point, _, action = text.partition(":")
    if point not in POINTS or not action:
        raise ValueError(f"{ENV_VAR}={text!r} is not valid; accepted: <point>:kill, <point>:enospc or <point>:<pause file> "
                         f"with <point> one of {', '.join(POINTS)}")
    return point, action


def fault_point(point: str) -> None:
    """SIGKILL this process, or pause while the pause file exists, if the variable names ``point``."""
    text = os.environ.get(ENV_VAR)
    if not text:
        return
    wanted, action = parse_fault(text)
    if wanted != point or point in _fired:
        return
    _fired.add(point)
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "enospc":
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (injected at {point})")
    pause_file = Path(action)
    temporary = pause_file.with_name(pause_file.name + ".tmp")
    temporary.write_text(str(os.getpid()))
    os.replace(temporary, pause_file)
    while pause_file.exists():
        time.sleep(POLL_S)
