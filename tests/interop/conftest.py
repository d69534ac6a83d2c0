"""Fixtures for interop tests against the real Java Aeron Archive 1.15.1.

The peer is fetched and built on first use (tests/interop/peer/fetch-java-peer; ~10 s on a fresh
cache, instant afterwards). Every process started here is stopped by PID in the fixture's
teardown, also when the test fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.differential import ScriptRun
from tests.interop.legacy_script import SEGMENT_LENGTH, run_java_client_script
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


@pytest.fixture(scope="session")
def java_1_15_1_client_on_java_archive(peer_installation: PeerInstallation,
                                       tmp_path_factory: pytest.TempPathFactory) -> ScriptRun:
    """The Java 1.15.1 client's scripted session (tests/interop/legacy_script.py) against a fresh
    Java 1.15.1 archive (64 KiB segments), stopped by PID when the run ends: the reference answers
    of the 1.15.1 differential test and of our legacy client's test."""
    work = tmp_path_factory.mktemp("java-1-15-1-scripted")
    with running_java_archive(peer_installation, work, segment_length=SEGMENT_LENGTH) as java:
        return run_java_client_script(peer_installation, "java", java.endpoint.control_channel)
