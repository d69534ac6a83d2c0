"""Shared fixtures: a real embedded Aeron media driver and clients on it, always closed.

* ``media_driver`` (session): one embedded C driver in a fresh /dev/shm directory.
* ``aeron_client`` (session): an AeronClient on that driver.
* ``new_aeron_client`` (function): a factory for extra clients, closed after the test.
* ``free_udp_port``: a localhost UDP port that was free a moment ago.

Markers come from a test's folder (``FOLDER_MARKERS``), so ``-m integration``, ``-m spark``,
``-m interop`` and ``-m cluster`` select by what a test runs; a file adds only the marks its folder
does not give (a Spark test that also starts the sidecar adds ``integration``).

./run-tests runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``), scheduled by
group (``pytest_xdist_make_scheduler``, tests/support/xdist_groups.py): every test that runs Spark,
and every test file that uses network namespaces (fixed ports), is in one group that runs on one worker,
one test after another (two Spark JVMs at once overload a 2-core machine: Aeron's 10 s driver
keepalive runs out); any other test is grouped with its file, so a module's fixtures are set up once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import ports

if TYPE_CHECKING:
    from aeron_spark.driver_integration import AeronClient, MediaDriver

TESTS_ROOT = Path(__file__).parent

# The top folder under tests/ -> the marks every test in it gets (names registered in pyproject).
FOLDER_MARKERS: dict[str, tuple[str, ...]] = {
    "integration": ("integration",),
    "spark": ("spark",),
    "interop": ("interop",),
    "cluster": ("cluster", "spark", "integration"),
}


def folder_markers(test_file: Path) -> tuple[str, ...]:
    """The marks of the top folder under tests/ that holds ``test_file`` (none outside tests/)."""
    try:
        top_folder = test_file.resolve().relative_to(TESTS_ROOT.resolve()).parts[0]
    except ValueError:
        return ()
    return FOLDER_MARKERS.get(top_folder, ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        present = {mark.name for mark in item.iter_markers()}
        for name in folder_markers(item.path):
            if name not in present:
                item.add_marker(name)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown when the plugin is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under ``--dist loadgroup``, the groups of tests/support/xdist_groups.py (pytest-xdist's own
    loadgroup reads ``xdist_group`` marks into node ids, which pytest 9 no longer lets it change)."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    from tests.support.xdist_groups import GroupScheduling

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def media_driver() -> Iterator[MediaDriver]:
    from aeron_spark.driver_integration import MediaDriver

    # Short linger: closed publications leave quickly, so lifecycle tests stay fast.
    driver = MediaDriver(threading_mode="shared", term_buffer_length=1024 * 1024,
                         ipc_term_buffer_length=1024 * 1024,
                         publication_linger_timeout_ns=100_000_000)
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture(scope="session")
def aeron_client(media_driver: MediaDriver) -> Iterator[AeronClient]:
    from aeron_spark.driver_integration import AeronClient

    client = AeronClient(media_driver.dir, client_name="pytest-session")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def new_aeron_client(media_driver: MediaDriver) -> Iterator[Callable[..., AeronClient]]:
    from aeron_spark.driver_integration import AeronClient

    made: list[AeronClient] = []

    def make(**kwargs: object) -> AeronClient:
        client = AeronClient(media_driver.dir, **kwargs)  # type: ignore[arg-type]
        made.append(client)
        return client

    try:
        yield make
    finally:
        for client in made:
            client.close()


@pytest.fixture
def free_udp_port() -> int:
    return ports.free_udp_port()
