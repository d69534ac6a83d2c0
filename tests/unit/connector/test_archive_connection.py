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


# --- on a cluster: which driver, which address the archive is told --------------------------------


def test_cluster_options_are_checked_and_named():
    from aeron_spark.connector.options import OptionError

    base = {"archive.controlChannel": "aeron:udp?endpoint=archive-host:8010", "recordingIds": "1"}
    connection = parse(**base).connection
    assert (connection.driver_mode, connection.host, connection.bind_address) == ("auto", None, None)
    chosen = parse(**base, **{"aeron.driver": "Embedded", "aeron.host": "10.0.0.5",
                              "aeron.bindAddress": "0.0.0.0"}).connection
    assert (chosen.driver_mode, chosen.host, chosen.bind_address) == ("embedded", "10.0.0.5", "0.0.0.0")
    assert parse(**base, **{"aeron.host": "[fe80::1]"}).connection.host == "fe80::1"
    with pytest.raises(OptionError, match=r"aeron.driver='shared'.*auto \| embedded \| external"):
        parse(**base, **{"aeron.driver": "shared"})
    with pytest.raises(OptionError, match=r"aeron.host='10.0.0.5:4000'.*without a port"):
        parse(**base, **{"aeron.host": "10.0.0.5:4000"})
    with pytest.raises(OptionError, match=r"aeron.host='0.0.0.0'.*wildcard.*aeron.bindAddress"):
        parse(**base, **{"aeron.host": "0.0.0.0"})
    with pytest.raises(OptionError, match="replay.channel"):
        parse(**base, **{"replay.channel": "udp://host:1"})


def test_the_response_endpoint_is_told_at_the_address_that_routes_to_the_archive():
    from aeron_spark.connector.archive_connection import default_response_channel, local_hosts

    connection = parse(**{"archive.controlChannel": "aeron:udp?endpoint=localhost:8010", "recordingIds": "1"}).connection
    assert local_hosts(connection, connection.control_channel) == ("127.0.0.1", "127.0.0.1")
    behind_nat = parse(**{"archive.controlChannel": "aeron:udp?endpoint=localhost:8010", "recordingIds": "1",
                          "aeron.host": "203.0.113.7", "aeron.bindAddress": "0.0.0.0"}).connection
    assert local_hosts(behind_nat, behind_nat.control_channel) == ("203.0.113.7", "0.0.0.0")
    assert default_response_channel("aeron:udp?endpoint=localhost:8010", "0.0.0.0") == "aeron:udp?endpoint=0.0.0.0:0"
    assert default_response_channel("aeron:udp?endpoint=localhost:8010", "::1") == "aeron:udp?endpoint=[::1]:0"
    assert default_response_channel("aeron:ipc", "127.0.0.1") == "aeron:ipc"


def test_an_unresolvable_archive_host_names_the_control_channel():
    from aeron_spark.connector.archive_connection import ArchiveUnavailable, local_hosts

    connection = parse(**{"archive.controlChannel": "aeron:udp?endpoint=no-such-host.invalid:8010",
                          "recordingIds": "1"}).connection
    with pytest.raises(ArchiveUnavailable, match=r"archive.controlChannel=aeron:udp\?endpoint=no-such-host.invalid:8010"):
        local_hosts(connection, connection.control_channel)


def test_a_failed_connect_over_a_response_channel_says_what_this_host_must_reach(monkeypatch):
    from aeron_spark.archive.client.archive_client import ArchiveClient, ArchiveTimeoutError
    from aeron_spark.connector import archive_connection

    told = {}

    def refuse(**kw):
        told.update(kw)
        raise ArchiveTimeoutError("no response to AuthConnectRequest")
    monkeypatch.setattr(ArchiveClient, "connect", staticmethod(refuse))
    monkeypatch.setattr(archive_connection, "process_aeron_dir", lambda connection, aeron_dir: "/dev/shm/x")
    response = "aeron:udp?control-mode=response|control=archive-host:8011"
    connection = parse(**{"archive.controlChannel": "aeron:udp?endpoint=localhost:8010", "recordingIds": "1",
                          "archive.responseChannel": response}).connection
    with pytest.raises(archive_connection.ArchiveUnavailable,
                       match=r"over the response channel archive.responseChannel=aeron:udp\?control-mode=response.*"
                             r"the archive needs no route to this host"):
        archive_connection.connect_client(connection)
    assert told["response_channel"] == response and told["response_host"] is None
