"""The sidecar on a directory of an older version (a 1 KiB slot catalog, file version 2.1.0, as
this project wrote before 3.1.0): it refuses to serve it with a clear "run migrate" error and
changes nothing; after `aeron-archive migrate` it serves the same recordings."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeron_spark.archive.cli.sidecar_process import CAPTURE, SidecarProcess
from aeron_spark.archive.client.archive_client import ArchiveClient
from aeron_spark.driver_integration import AeronClient
from tests.support.old_archives import V2_1, old_descriptor, write_old_catalog


def test_an_old_catalog_is_refused_until_migrated(tmp_path: Path) -> None:
    descriptors = [old_descriptor(0), old_descriptor(1, stream_id=7)]
    catalog = write_old_catalog(tmp_path, V2_1, [(d, True) for d in descriptors])
    before = catalog.read_bytes()
    refused = SidecarProcess.launch(tmp_path, stderr=CAPTURE)
    with pytest.raises(RuntimeError, match=r"catalog file version 2\.1\.0 .* run `aeron-archive migrate --dir"):
        refused.wait_ready(60)
    assert catalog.read_bytes() == before

    from aeron_spark.archive.cli import main as tool
    assert tool.main(["migrate", str(tmp_path)]) == 0
    with SidecarProcess.start(tmp_path) as sidecar:
        aeron = AeronClient(sidecar.aeron_dir, client_name="old-catalog")
        try:
            with ArchiveClient.connect(control_channel=sidecar.control_channel, aeron=aeron, timeout=10) as client:
                listed = client.list_recordings()
        finally:
            aeron.close()
    assert [d.with_changes(control_session_id=0, correlation_id=0) for d in listed] == descriptors
