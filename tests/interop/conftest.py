"""Fixtures for interop tests against the real Java Aeron Archive 1.15.1.

The peer is fetched and built on first use (tests/interop/peer/fetch-java-peer; ~10 s on a fresh
cache, instant afterwards). Every process started here is stopped by PID in the fixture's
teardown, also when the test fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.peer.interop_peer import (
    PeerInstallation,
    RunningJavaArchive,
    ensure_peer_built,
    running_java_archive,
)


@pytest.fixture(scope="session")
def peer_installation() -> PeerInstallation:
    """The built peer, the Aeron 1.15.1 jar and the Java 11 runtime (fetched if missing)."""
    return ensure_peer_built()


@pytest.fixture(scope="module")
def java_archive(peer_installation: PeerInstallation,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningJavaArchive]:
    """One real 1.15.1 ArchivingMediaDriver per test module, on free ports, stopped by PID after."""
    with running_java_archive(peer_installation, tmp_path_factory.mktemp("java-archive")) as archive:
        yield archive
