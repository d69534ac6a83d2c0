"""The JVM module's tests (format("aeron-archive-jvm")): the jar, built once per test session; a
sidecar and an archive client on it per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aeron_spark.archive.client import ArchiveClient
from aeron_spark.driver_integration import AeronClient
from tests.support.jvm_module import JvmModule, built_jvm_module
from tests.support.sidecar import Sidecar, running_sidecar


@pytest.fixture(scope="session")
def jvm_module() -> JvmModule:
    """Our jar and aeron-all's, built by tools/build-jvm if anything changed."""
    return built_jvm_module()


@pytest.fixture(scope="module")
def sidecar(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    """The module's own sidecar (its archive under the module's name)."""
    name = request.module.__name__.rpartition(".")[2]
    with running_sidecar(tmp_path_factory.mktemp(f"{name}-sidecar") / "archive") as running:
        yield running


@pytest.fixture(scope="module")
def archive(request: pytest.FixtureRequest, sidecar: Sidecar) -> Iterator[ArchiveClient]:
    """A control session on the module's sidecar, through a client of its driver."""
    name = request.module.__name__.rpartition(".")[2]
    with AeronClient(sidecar.driver_dir, client_name=name) as aeron, \
            ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron, timeout=30.0) as client:
        yield client
