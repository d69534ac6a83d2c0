"""Fixtures of the sidecar tests under tests/integration.

* ``sidecar``: `aeron-archive serve` with its embedded driver on a fresh directory, stopped by PID
  after the test; extra ``serve`` options by indirect parametrization
  (``@pytest.mark.parametrize("sidecar", [["--archive-id", "777"]], indirect=True)``).
  A module that defines its own ``sidecar`` fixture uses that one instead.
* ``local_aeron``: a client on the sidecar's own embedded driver, closed before the sidecar stops.
* ``sidecar_threading_mode`` (autouse): every test of a module in `BOTH_THREADING_MODES` runs twice,
  ``[dedicated]`` and ``[shared]``, with every `Sidecar` it makes serving in that mode
  (``serve --threading-mode``); other tests get serve's default. The modules are those whose
  sidecars record, replay, extend, truncate, purge, replicate and stop: all three agents' work.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import Sidecar, running_sidecar, sidecars_in_threading_mode

#: The test modules (file names) whose tests run in both threading modes.
BOTH_THREADING_MODES = frozenset({
    "test_sidecar_record_and_replay.py", "test_sidecar_recording.py", "test_sidecar_recording_lifecycle.py",
    "test_sidecar_replay_modes.py", "test_sidecar_replication.py", "test_sidecar_segment_maintenance.py",
    "test_sidecar_shutdown_and_crash.py", "test_sidecar_update_channel.py", "test_storage_space_sidecar.py",
    "test_low_storage_threshold_sidecar.py",
})
THREADING_MODES = ("dedicated", "shared")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sidecar_threading_mode" in metafunc.fixturenames and metafunc.module.__file__ is not None \
            and Path(metafunc.module.__file__).name in BOTH_THREADING_MODES:
        metafunc.parametrize("sidecar_threading_mode", THREADING_MODES, indirect=True)


@pytest.fixture(autouse=True)
def sidecar_threading_mode(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The threading mode of the sidecars this test makes (None: serve's default)."""
    mode = getattr(request, "param", None)
    with sidecars_in_threading_mode(mode):
        yield mode


@pytest.fixture
def sidecar(tmp_path: Path, request: pytest.FixtureRequest, sidecar_threading_mode: str | None) -> Iterator[Sidecar]:
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
