"""``readOnDriver``: stream-only, a boolean, and the data source's stream reader shape follows it."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkNotImplementedError

from aeron_spark.connector.data_source import AeronArchiveDataSource
from aeron_spark.connector.options import OptionError
from aeron_spark.connector.source.driver_read_stream import AeronArchiveDriverStreamReader
from aeron_spark.connector.source.micro_batch_stream import AeronArchiveStreamReader
from aeron_spark.connector.source.options import ReadMode, SourceOptions

BASE = {"archive.controlChannel": "aeron:udp?endpoint=localhost:8010", "recordingIds": "1"}


def test_off_by_default_and_true_when_asked() -> None:
    assert SourceOptions.parse(BASE, ReadMode.STREAM).read_on_driver is False
    assert SourceOptions.parse({**BASE, "readOnDriver": "true"}, ReadMode.STREAM).read_on_driver is True


def test_a_batch_read_refuses_it_and_a_bad_value_names_it() -> None:
    with pytest.raises(OptionError, match="readOnDriver"):
        SourceOptions.parse({**BASE, "readOnDriver": "true"}, ReadMode.BATCH)
    with pytest.raises(OptionError, match="readOnDriver"):
        SourceOptions.parse({**BASE, "readOnDriver": "maybe"}, ReadMode.STREAM)


def test_the_stream_reader_shape_follows_the_option() -> None:
    source = AeronArchiveDataSource(dict(BASE))
    schema = source.schema()
    assert isinstance(source.streamReader(schema), AeronArchiveStreamReader)
    on_driver = AeronArchiveDataSource({**BASE, "readOnDriver": "true"})
    with pytest.raises(PySparkNotImplementedError):  # pyspark then asks simpleStreamReader
        on_driver.streamReader(schema)
    assert isinstance(on_driver.simpleStreamReader(schema), AeronArchiveDriverStreamReader)


class _FakeStream:
    """The default reader's calls the driver reader makes, with two partitions of two batches."""

    def __init__(self, latest: dict) -> None:
        self.latest = latest
        self.committed: list[dict] = []

    def getDefaultReadLimit(self) -> object:  # noqa: N802 - pyspark's name
        return "all"

    def latestOffset(self, start: dict, limit: object) -> dict:  # noqa: N802 - pyspark's name
        return self.latest if self.latest != start else start

    def partitions(self, start: dict, end: dict) -> list[str]:
        return ["p0", "p1"]

    def read(self, partition: str) -> list[str]:
        return [f"{partition}-a", f"{partition}-b"]

    def commit(self, end: dict) -> None:
        self.committed.append(end)


def test_read_returns_every_partitions_batches_and_the_end_or_nothing_at_the_start() -> None:
    stream = _FakeStream({"1": 64})
    reader = AeronArchiveDriverStreamReader(SourceOptions.parse(BASE, ReadMode.STREAM), stream=stream)  # type: ignore[arg-type]
    batches, end = reader.read({"1": 0})
    assert list(batches) == ["p0-a", "p0-b", "p1-a", "p1-b"] and end == {"1": 64}
    batches, end = reader.read({"1": 64})
    assert list(batches) == [] and end == {"1": 64}
    assert list(reader.readBetweenOffsets({"1": 0}, {"1": 64})) == ["p0-a", "p0-b", "p1-a", "p1-b"]
    reader.commit({"1": 64})
    assert stream.committed == [{"1": 64}]
