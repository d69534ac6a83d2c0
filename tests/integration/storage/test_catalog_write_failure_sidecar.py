"""The catalog write of a new recording fails after StartRecording was answered OK (the disk filled
in between): the client hears STORAGE_SPACE for its request and the catalog has no half-made entry.

The failure is injected where the descriptor is written (``AERON_ARCHIVE_STORAGE_FAULT=catalog-add:
enospc``, archive/storage/fault_injection.py): filling a real disk between the OK and the first
image cannot choose which write fails first (the catalog is sparse, and its page may already be
there), which is what tests/integration/storage/test_storage_space_sidecar.py covers for the segment.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from aeron_spark.archive.cli import main as tool_module
from aeron_spark.archive.client.archive_client import ArchiveError
from aeron_spark.archive.codecs import ArchiveErrorCode, SourceLocation
from aeron_spark.archive.storage import fault_injection
from aeron_spark.driver_integration import AeronClient

from tests.support.sidecar import running_sidecar
from tests.support.sidecar_streams import IPC_RECORDED, RECORDED_STREAM, TIMEOUT, ipc_archive, payloads, publish

pytestmark = pytest.mark.timeout(120)


def test_a_catalog_write_failing_after_the_ok_is_an_error_to_the_client_and_leaves_no_entry(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(fault_injection.ENV_VAR, "catalog-add:enospc")
    directory = tmp_path / "archive"
    with running_sidecar(directory) as sidecar:
        aeron = AeronClient(sidecar.driver_dir, client_name="catalog-enospc")
        try:
            with ipc_archive(aeron) as archive:
                subscription_id = archive.start_recording(IPC_RECORDED, RECORDED_STREAM, SourceLocation.LOCAL)
                assert subscription_id >= 0  # answered OK: nothing had failed yet
                publication = aeron.add_exclusive_publication(IPC_RECORDED, RECORDED_STREAM)
                publish(publication, payloads(3, seed=5))
                deadline, error = time.monotonic() + TIMEOUT, None
                while error is None and time.monotonic() < deadline:
                    try:
                        archive.check_for_error_response()
                        time.sleep(0.01)
                    except ArchiveError as raised:
                        error = raised
                assert error is not None and error.error_code == ArchiveErrorCode.STORAGE_SPACE, error
                assert "catalog write failed" in error.archive_message
                assert archive.list_recordings() == []
                publication.close()
        finally:
            aeron.close()
    out, err = io.StringIO(), io.StringIO()
    assert tool_module.main(["verify", "--dir", str(directory)], stdout=out, stderr=err) == 0, out.getvalue() + err.getvalue()
