"""The pytest-xdist groups of ./run-tests (``-n 2 --dist loadgroup``; hooked in tests/conftest.py).

Each group runs on one worker, its tests one after another in collection order:

* ``ONE_AT_A_TIME``: every test that runs Spark (tests/spark, tests/cluster) and the tests that use
  fixed ports in network namespaces. Two Spark JVMs (or a Spark query beside a namespace test) at
  once overload a 2-core machine, where Aeron's 10 s driver keepalive then runs out.
* any other test: its file. A module-scoped fixture (a sidecar, a Java peer) is then set up once,
  not once per worker.

The other worker takes the file groups one by one while the ``ONE_AT_A_TIME`` group runs.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

ONE_AT_A_TIME = "one-at-a-time"
ONE_AT_A_TIME_FOLDERS = ("tests/spark/", "tests/cluster/")
# Outside those folders: fixed ports in network namespaces (tests/support/netns.py).
ONE_AT_A_TIME_FILES = frozenset({
    "tests/integration/cli/test_cli_remote_netns.py",
    "tests/integration/service/test_response_channels_netns.py",
})


def group_of(nodeid: str) -> str:
    """The group of the test ``nodeid`` (a path relative to the repository, then ``::``...)."""
    test_file = nodeid.split("::", 1)[0]
    if test_file.startswith(ONE_AT_A_TIME_FOLDERS) or test_file in ONE_AT_A_TIME_FILES:
        return ONE_AT_A_TIME
    return test_file


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's load-by-scope scheduling with ``group_of`` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)
