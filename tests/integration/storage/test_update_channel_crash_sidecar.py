"""SIGKILL of the real sidecar in the middle of an UpdateChannel that grows a catalog entry in the
middle (the later entries move): at ``catalog-replace-written`` (the new catalog written, not
renamed) and ``catalog-replace-committed`` (renamed, not answered). After a restart every recording
is listed with the old resp. the new channel, the moved recording replays byte-exactly, no
``archive.catalog.replace`` is left and offline ``verify`` is clean. The driver is a process of its
own (it outlives the sidecar); every process is stopped by PID, also on failure."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from aeron_spark.archive.cli import main as tool_module
from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveError
from aeron_spark.archive.storage import fault_injection
from aeron_spark.archive.storage.catalog import REPLACE_FILE_NAME
from aeron_spark.driver_integration import AeronClient

from tests.support.driver_process import running_driver_process
from tests.support.sidecar import Sidecar
from tests.support.sidecar_streams import TIMEOUT, as_pairs, expected, ipc_archive, payloads, record_ipc

pytestmark = pytest.mark.timeout(120)

LONG = "aeron:ipc?alias=" + "moved-" * 60 + "|term-length=64k"


@pytest.mark.parametrize("point", ["catalog-replace-written", "catalog-replace-committed"])
def test_sigkill_during_update_channel_leaves_the_old_or_the_new_catalog(tmp_path: Path, point: str,
                                                                         monkeypatch: pytest.MonkeyPatch):
    directory = tmp_path / "archive"
    with running_driver_process(tmp_path / "driver"):
        aeron = AeronClient(str(tmp_path / "driver"), client_name="update-channel-crash")
        try:
            monkeypatch.setenv(fault_injection.ENV_VAR, f"{point}:kill")
            sidecar = Sidecar(directory, aeron_dir=str(tmp_path / "driver"))
            try:
                sidecar.start()
                with ipc_archive(aeron) as archive:
                    recorded = [record_ipc(archive, payloads(40, seed=50 + i), stream_id=1001 + i) for i in range(2)]
                    before = archive.list_recordings()
                with ArchiveClient.connect(control_channel="aeron:ipc", control_stream_id=11,
                                           response_channel="aeron:ipc", aeron=aeron, timeout=2.0) as short:
                    with pytest.raises(ArchiveError):  # never answered: the sidecar is killed first
                        short.update_channel(recorded[0][0], LONG)
                deadline = time.monotonic() + 5.0
                while sidecar.process.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert sidecar.process.poll() is not None, f"{point} not reached:\n{sidecar.log_tail()}"
            finally:
                sidecar.kill()

            monkeypatch.delenv(fault_injection.ENV_VAR)
            restarted = Sidecar(directory, aeron_dir=str(tmp_path / "driver"))
            try:
                restarted.start()
                assert not (directory / REPLACE_FILE_NAME).exists()
                with ipc_archive(aeron) as archive:
                    after = archive.list_recordings()
                    assert [d.stream_id for d in after] == [1001, 1002]
                    wanted = before[0].original_channel if point == "catalog-replace-written" else LONG
                    assert after[0].original_channel == wanted
                    assert after[1].original_channel == before[1].original_channel
                    for (recording_id, published, _), stream in zip(recorded, (2201, 2202)):
                        with archive.replay(recording_id, 0, published.end, "aeron:ipc", stream) as replay:
                            assert as_pairs(list(replay.messages(idle_timeout=TIMEOUT))) == expected(published)
            finally:
                restarted.terminate()
                restarted.kill()
        finally:
            aeron.close()
    out, err = io.StringIO(), io.StringIO()
    code = tool_module.main(["verify", "--dir", str(directory)], stdout=out, stderr=err)
    assert code == 0, out.getvalue() + err.getvalue()
    assert "INVALID" not in out.getvalue() and "ERROR" not in out.getvalue(), out.getvalue()
