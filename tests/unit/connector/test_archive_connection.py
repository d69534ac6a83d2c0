"""connector/archive_connection.py: locating the archive through its mark file."""

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from aeron_spark.connector.source.options import ReadMode, SourceOptions


def parse(mode=ReadMode.BATCH, **options):
    return SourceOptions.parse(CaseInsensitiveDict(options), mode)


def test_archive_dir_is_resolved_through_the_archive_mark_file(tmp_path):
    from aeron_spark.archive.storage.mark_file import ArchiveMarkFile
    from aeron_spark.connector.archive_connection import ArchiveUnavailable, resolve_connection

    missing = parse(**{"archive.dir": str(tmp_path), "recordingIds": "1"})
    with pytest.raises(ArchiveUnavailable, match="archive.dir"):
        resolve_connection(missing.connection)
    mark = ArchiveMarkFile.create(tmp_path, archive_id=5, control_channel="aeron:udp?endpoint=localhost:8010",
                                  control_stream_id=77, local_control_channel="aeron:ipc", local_control_stream_id=10,
                                  events_channel="aeron:ipc", events_stream_id=30, aeron_directory="/dev/shm/drv")
    try:
        resolved = resolve_connection(missing.connection)
        assert (resolved.control_channel, resolved.control_stream_id, resolved.aeron_dir) == (
            "aeron:udp?endpoint=localhost:8010", 77, "/dev/shm/drv")
        overridden = parse(**{"path": str(tmp_path), "recordingIds": "1", "archive.controlStreamId": "12",
                              "aeron.dir": "/other"})
        resolved = resolve_connection(overridden.connection)
        assert (resolved.control_stream_id, resolved.aeron_dir) == (12, "/other")
    finally:
        mark.close()
