"""Fixtures of the sidecar tests under tests/integration.

* ``sidecar``: `aeron-archive serve` with its embedded driver on a fresh directory, stopped by PID
  after the test; extra ``serve`` options by indirect parametrization
  (``@pytest.mark.parametrize("sidecar", [["--archive-id", "777"]], indirect=True)``).
  A module that defines its own ``sidecar`` fixture uses that one instead.
* ``local_aeron``: a client on the sidecar's own embedded driver, closed before the sidecar stops.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import Sidecar, running_sidecar


@pytest.fixture
def sidecar(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Sidecar]:
    args = list(getattr(request, "param", []))
    with running_sidecar(tmp_path / "archive", args) as running:
        yield running


@pytest.fixture
def local_aeron(sidecar: Sidecar) -> Iterator[AeronClient]:
    client = AeronClient(sidecar.driver_dir, client_name="acceptance-local")
    try:
        yield client
    finally:
        client.close()
