"""Sink options, column checks, row conversion, staging names/cleanup and marker scanning."""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow as pa
import pytest
from pyarrow.fs import LocalFileSystem
from aeron_spark.connector.data_source import AeronArchiveDataSource
from aeron_spark.connector.options import OptionError
from aeron_spark.connector.sink.frames import PublicationLayout, frame_messages
from aeron_spark.connector.commit_markers import (
    MARKER_RESERVED_VALUE,
    CommitMarker,
    marker_at_tail,
    markers_in_frames,
    sink_id_hash,
    sink_id_of_channel,
)
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.sink.staging import (
    SinkStaging,
    StagedName,
    clean_stale,
    streaming_batch_key,
)
from aeron_spark.connector.sink.writer import (
    SinkDataError,
    check_append_only,
    sink_columns,
    to_staged_batch,
)
from aeron_spark.driver_integration.frame import scan_frames
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

BASE = {"channel": "aeron:ipc", "streamId": "7", "archive.dir": "/data/archive"}


def test_defaults_and_derived_values():
    stream = SinkOptions.parse(BASE, streaming=True)
    assert stream.sink_id is None and stream.staging_root == "/data/archive/spark-sink-staging"
    assert (stream.term_length, stream.mtu, stream.source_location_local) == (16 << 20, 8192, True)
    assert stream.resolve_sink_id("abc-1") == "abc-1"
    assert stream.sink_channel("abc-1", 5) == "aeron:ipc?alias=aeron-spark-sink:abc-1|session-id=5"
    batch = SinkOptions.parse(BASE, streaming=False)
    assert batch.sink_id.startswith("batch-") and batch.sink_id == SinkOptions.parse(BASE, streaming=False).sink_id
    # sink.mtu=auto: Aeron's UDP default beyond this host (a loopback channel gets 8192, see below)
    udp = SinkOptions.parse({**BASE, "channel": "aeron:udp?endpoint=archive-host:4000"}, streaming=True)
    assert (udp.mtu, udp.source_location_local) == (1408, False)
    assert udp.sink_channel("s") == "aeron:udp?endpoint=archive-host:4000|alias=aeron-spark-sink:s"


@pytest.mark.parametrize("extra, message", [
    ({"channel": None}, "needs channel"),
    ({"channel": "aeron:ipc?alias=x"}, "sets alias, which the sink sets itself"),
    ({"channel": "kafka:topic"}, "not a sink channel"),
    ({"sink.id": "a b"}, "sink.id='a b' is not valid"),
    ({"sink.termLength": "100k"}, "power of two"),
    ({"sink.mtu": "100"}, "sink.mtu=100"),
    ({"sink.mtu": "big"}, "sink.mtu='big' is not valid; accepted: auto | a multiple of 32"),
    ({"sink.mtu": "16384", "sink.termLength": "64k"}, "at most sink.termLength / 8 = 8192"),
    ({"sink.sourceLocation": "near"}, "local | remote"),
    ({"channel": "aeron:udp?endpoint=h:1", "sink.receiveWindow": "lots"}, "sink.receiveWindow='lots' is not valid"),
    ({"channel": "aeron:udp?endpoint=h:1", "sink.receiveWindow": "1k"}, "accepted: auto | none | a size from 4k"),
    ({"channel": "aeron:udp?endpoint=h:1", "sink.receiveWindow": "16m"}, r"termLength/2 \(8388608\)"),
    ({"startingPositions": "earliest"}, "startingPositions only applies to read"),
    ({"sink.idd": "x"}, "Did you mean 'sink.id'"),
    ({"archive.dir": None}, "sink.stagingDir is required"),
])
def test_bad_options_name_the_option(extra, message):
    raw = {**BASE, "archive.controlChannel": "aeron:udp?endpoint=localhost:1", **extra}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(OptionError, match=message):
        SinkOptions.parse(raw, streaming=True)


def test_the_query_id_is_needed_without_sink_id():
    with pytest.raises(OptionError, match="sink.id is required"):
        SinkOptions.parse(BASE, streaming=True).resolve_sink_id(None)


def test_data_source_keeps_sink_options_away_from_reads():
    source = AeronArchiveDataSource({**BASE, "sink.id": "s1"})
    with pytest.raises(OptionError, match="sink.id only applies to write"):
        source.reader(None)
    with pytest.raises(OptionError, match="only appends"):
        check_append_only(True)


def test_columns_are_checked():
    ok = StructType([StructField("payload", StringType()), StructField("reserved_value", IntegerType())])
    assert sink_columns(ok).payload_is_string and sink_columns(ok).has_reserved_value
    assert not sink_columns(StructType([StructField("payload", BinaryType())])).has_reserved_value
    with pytest.raises(OptionError, match=r"accepts the columns payload .*unexpected column\(s\) \['id'\]"):
        sink_columns(StructType([StructField("payload", BinaryType()), StructField("id", LongType())]))
    with pytest.raises(OptionError, match=r"accepts the columns payload .*\['value'\]"):
        sink_columns(StructType([StructField("value", BinaryType())]))
    with pytest.raises(OptionError, match="column payload has type bigint"):
        sink_columns(StructType([StructField("payload", LongType())]))
    with pytest.raises(OptionError, match="column reserved_value has type string"):
        sink_columns(StructType([StructField("payload", BinaryType()), StructField("reserved_value", StringType())]))


def test_rows_are_converted_and_bad_rows_rejected():
    staged = to_staged_batch(pa.record_batch({"payload": pa.array(["é", ""]), "reserved_value": pa.array([1, None], pa.int32())}))
    assert staged.column(0).to_pylist() == ["é".encode(), b""] and staged.column(1).to_pylist() == [1, 0]
    assert to_staged_batch(pa.record_batch({"payload": pa.array([b"x"])})).column(1).to_pylist() == [0]
    with pytest.raises(SinkDataError, match="payload is null in row 1"):
        to_staged_batch(pa.record_batch({"payload": pa.array([b"a", None])}))
    with pytest.raises(SinkDataError, match="reserved_value is .* in row 0"):
        to_staged_batch(pa.record_batch({"payload": pa.array([b"a"]), "reserved_value": pa.array([MARKER_RESERVED_VALUE])}))


def test_staging_names_and_cleanup(tmp_path):
    name = StagedName(streaming_batch_key(12), 3, 1, 77)
    assert StagedName.parse(name.file_name) == name and StagedName.parse("other.arrow") is None
    files = {n: tmp_path / StagedName(streaming_batch_key(b), p, a, 1).file_name
             for n, (b, p, a) in {"old": (3, 0, 0), "same": (5, 1, 0), "later": (6, 0, 0)}.items()}
    old_job = tmp_path / StagedName("j" + "a" * 32, 0, 0, 1).file_name
    new_job = tmp_path / StagedName("j" + "b" * 32, 0, 0, 1).file_name
    for path in [*files.values(), old_job, new_job, tmp_path / "_committed.json"]:
        path.write_bytes(b"x")
    os.utime(old_job, (time.time() - 7200, time.time() - 7200))
    deleted = clean_stale(SinkStaging(LocalFileSystem(), str(tmp_path)), keep=set(), committed_batch_id=5)
    assert sorted(deleted) == sorted(map(str, [files["old"], files["same"], old_job]))
    assert files["later"].exists() and new_job.exists() and (tmp_path / "_committed.json").exists()


def test_markers_are_found_among_frames_and_checked_against_the_sink():
    layout = PublicationLayout(3, 64 * 1024, 1408, 9, 7)
    marker = CommitMarker(sink_id_hash("s"), 4, 0, 2, 6, 1).encode()
    payloads = [b"abc", b"def", marker]
    values = np.frombuffer(b"".join(payloads), np.uint8)
    offsets = np.array([0, 3, 6, 70])
    blocks = frame_messages(values, offsets, np.array([0, 0, MARKER_RESERVED_VALUE]), 0, layout)
    data = blocks[0].data
    found = markers_in_frames(data, 1024, scan_frames(data).offsets, sink_id_hash("s"))
    assert [(m.position, m.marker.batch_id) for m in found] == [(1024 + 128, 4)]
    assert markers_in_frames(data, 0, scan_frames(data).offsets, sink_id_hash("other")) == []
    tail = marker_at_tail(data[-96:], data.size - 96, data.size)
    assert tail is not None and tail.end == data.size
    assert marker_at_tail(data[:96], 0, 96) is None


def test_sink_ids_come_from_the_alias_only():
    assert sink_id_of_channel("aeron:ipc?alias=aeron-spark-sink:q1|session-id=4") == "q1"
    assert sink_id_of_channel("aeron:ipc?alias=other") is None
    assert sink_id_of_channel("aeron:udp?endpoint=x:1|tags=aeron-spark-sink:q1") is None


def test_sink_accepts_the_query_name_spark_adds_to_its_options():
    assert SinkOptions.parse({**BASE, "queryName": "vwap-out"}, streaming=True).channel == \
        SinkOptions.parse(BASE, streaming=True).channel


def test_small_batches_are_coalesced_in_order_and_messages_pickle():
    import pickle

    from aeron_spark.connector.sink.writer import SinkCommitMessage, coalesce

    batches = [to_staged_batch(pa.record_batch({"payload": pa.array([bytes([i]) * 10] * 5)})) for i in range(7)]
    combined = list(coalesce(iter(batches), target_bytes=2 * batches[0].nbytes + 1))
    assert [b.num_rows for b in combined] == [15, 15, 5]
    assert [p for b in combined for p in b.column(0).to_pylist()] == [p for b in batches for p in b.column(0).to_pylist()]
    message = SinkCommitMessage("s", "b0000000000000000001", 2, 0, "/x", 5, 50)
    assert pickle.loads(pickle.dumps(message)) == message


@pytest.mark.parametrize("channel, given, mtu", [
    ("aeron:ipc", None, 8192),
    ("aeron:udp?endpoint=localhost:4000", None, 8192),  # the simulated cluster: no IP fragmentation on loopback
    ("aeron:udp?endpoint=127.0.0.1:4000", "auto", 8192),
    ("aeron:udp?endpoint=[::1]:4000", "AUTO", 8192),
    ("aeron:udp?endpoint=10.1.2.3:4000", None, 1408),  # beyond 1472 B a datagram is fragmented on Ethernet
    ("aeron:udp?endpoint=archive-host:4000", "auto", 1408),
    ("aeron:udp?endpoint=localhost:4000", "1408", 1408),  # an int is taken as given
    ("aeron:udp?endpoint=10.1.2.3:4000", "4096", 4096),
])
def test_sink_mtu_auto_is_8192_for_ipc_and_loopback_udp_else_1408(channel, given, mtu):
    raw = {**BASE, "channel": channel, **({"sink.mtu": given} if given is not None else {})}
    assert SinkOptions.parse(raw, streaming=True).mtu == mtu


def test_sink_mtu_auto_stays_within_the_smallest_term():
    raw = {**BASE, "channel": "aeron:udp?endpoint=localhost:4000", "sink.termLength": "64k"}
    assert SinkOptions.parse(raw, streaming=True).mtu == 8192  # 64k / 8: still valid for the smallest term


def test_sink_mtu_auto_shares_the_replay_loopback_rule():
    from aeron_spark.connector.replay_endpoint import is_loopback_udp

    assert is_loopback_udp("aeron:udp?endpoint=localhost:1")
    assert not is_loopback_udp("aeron:udp?endpoint=192.168.0.2:1")
    assert not is_loopback_udp("aeron:ipc")


@pytest.mark.parametrize("channel, given, window", [
    ("aeron:udp?endpoint=localhost:4000", None, 2 << 20),  # the archive on this host: its rmem_max is known
    ("aeron:udp?endpoint=127.0.0.1:4000", "auto", 2 << 20),
    ("aeron:udp?endpoint=10.1.2.3:4000", None, None),  # another host's limits are not known here
    ("aeron:udp?endpoint=localhost:4000", "none", None),
    ("aeron:udp?endpoint=localhost:4000|rcv-wnd=64k", None, None),  # the channel's own setting wins
    ("aeron:udp?endpoint=localhost:4000|so-rcvbuf=1m", "4m", None),
    ("aeron:udp?endpoint=10.1.2.3:4000", "4m", 4 << 20),
    ("aeron:ipc", "4m", None),
])
def test_sink_receive_window(tmp_path, channel, given, window):
    from aeron_spark.connector.sink.options import parse_sink_receive_window

    rmem_max = tmp_path / "rmem_max"
    rmem_max.write_text("4194304\n")
    raw = {**BASE, "channel": channel, **({"sink.receiveWindow": given} if given is not None else {})}
    assert parse_sink_receive_window(raw, channel, 16 << 20, str(rmem_max)) == window


def test_sink_receive_window_auto_stays_within_rmem_max_and_the_term(tmp_path):
    from aeron_spark.connector.sink.options import parse_sink_receive_window

    rmem_max = tmp_path / "rmem_max"
    rmem_max.write_text("1048576\n")
    loopback = "aeron:udp?endpoint=localhost:4000"
    assert parse_sink_receive_window({}, loopback, 16 << 20, str(rmem_max)) == 1 << 20
    assert parse_sink_receive_window({}, loopback, 1 << 20, str(rmem_max)) == 512 << 10
    assert parse_sink_receive_window({}, loopback, 16 << 20, str(tmp_path / "missing")) is None


def test_the_receive_window_goes_on_the_sink_channel():
    options = SinkOptions.parse({**BASE, "channel": "aeron:udp?endpoint=10.1.2.3:4000", "sink.receiveWindow": "1m"},
                                streaming=True)
    assert options.sink_channel("s", 5) == ("aeron:udp?endpoint=10.1.2.3:4000|alias=aeron-spark-sink:s"
                                            "|rcv-wnd=1048576|so-rcvbuf=1048576|session-id=5")
