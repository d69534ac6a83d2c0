"""The pytest-xdist groups of ./run-tests (``-n 2 --dist loadgroup``; hooked in tests/conftest.py).

Each group runs on one worker, its tests one after another in collection order:

* ``ONE_AT_A_TIME``: every test that runs Spark (tests/spark, tests/cluster) and every test file
  that uses network namespaces (imports tests/support/netns.py: fixed ports, host-wide set-up).
  Two Spark JVMs (or a Spark query beside a namespace test) at once overload a 2-core machine,
  where Aeron's 10 s driver keepalive then runs out.
* any other test: its file. A module-scoped fixture (a sidecar, a Java peer) is then set up once,
  not once per worker.

The other worker takes the file groups one by one while the ``ONE_AT_A_TIME`` group runs.
"""

from __future__ import annotations

import functools
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

ONE_AT_A_TIME = "one-at-a-time"
ONE_AT_A_TIME_FOLDERS = ("tests/spark/", "tests/cluster/")
NAMESPACE_IMPORT = "from tests.support.netns import"


@functools.cache
def uses_network_namespaces(test_file: Path) -> bool:
    try:
        return NAMESPACE_IMPORT in test_file.read_text()
    except OSError:
        return False


def group_of(nodeid: str, root: Path) -> str:
    """The group of the test ``nodeid`` (a path relative to ``root``, the repository, then ``::``...)."""
    test_file = nodeid.split("::", 1)[0]
    if test_file.startswith(ONE_AT_A_TIME_FOLDERS) or uses_network_namespaces(root / test_file):
        return ONE_AT_A_TIME
    return test_file


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's load-by-scope scheduling with ``group_of`` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid, self.config.rootpath)
