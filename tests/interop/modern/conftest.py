"""Fixtures for tests against the modern Java Aeron (1.51.0 by default): the peer built on first use
(tests/interop/peer/fetch-modern-java-peer: Maven Central via mvn, ~10 s on an empty cache, ~30 ms
afterwards) and one real Java archive per test module. Every process is stopped by PID in teardown,
also when the test fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.peer.modern_peer import (
    ModernPeerInstallation,
    RunningModernJavaArchive,
    ensure_modern_peer_built,
    running_modern_java_archive,
)


@pytest.fixture(scope="session")
def modern_peer() -> ModernPeerInstallation:
    """The built modern peer and the pinned aeron-all jar (fetched if missing)."""
    return ensure_modern_peer_built()


@pytest.fixture(scope="module")
def modern_java_archive(modern_peer: ModernPeerInstallation,
                        tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningModernJavaArchive]:
    """One real modern Archive + MediaDriver per test module, on free ports, shared threading."""
    with running_modern_java_archive(modern_peer, tmp_path_factory.mktemp("modern-java-archive"),
                                     threading="shared") as archive:
        yield archive
