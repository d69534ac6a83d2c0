"""The `aeron-archive` source's options: name, accepted values, default, read modes, meaning.

A module of the connector, not of ``connector/source``: the sink names the options that only apply
to reads in its errors and derives that list from this table, and the sink may not import the source
(the import contracts in pyproject.toml). ``connector/source/options.py`` parses these options.
"""

from __future__ import annotations

from aeron_spark.connector.options import BOTH_MODES, CONNECTION_OPTION_SPECS, OptionSpec, ReadMode

_BOTH = BOTH_MODES
_STREAM = frozenset({ReadMode.STREAM})
_BATCH = frozenset({ReadMode.BATCH})

#: startingPositionsByTimestampStrategy: Kafka's startingOffsetsByTimestampStrategy values.
TIME_STRATEGIES = ("error", "latest")

OPTION_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("recordingIds", "comma list or JSON list of recording ids, e.g. 1,2 or [1,2]", None, _BOTH,
               "Read exactly these recordings. Exclusive with channel/streamId."),
    OptionSpec("channel", "a channel fragment, e.g. aeron:udp?endpoint=host:40123", None, _BOTH,
               "With streamId: read every recording whose original channel contains this fragment "
               "(Aeron ListRecordingsForUri); streams also pick up recordings that start later."),
    OptionSpec("streamId", "an int32, or a comma list or JSON list of them, e.g. 1001 or 1001,1002 or [1001,1002]",
               None, _BOTH,
               "Stream id(s) matched together with channel or channelPattern (optional with channelPattern: "
               "any stream id)."),
    OptionSpec("channelPattern", "a Python regular expression, e.g. endpoint=10\\.0\\.0\\.\\d+:4012[0-9]", None, _BOTH,
               "Read every recording whose original channel matches (re.search); exclusive with channel. "
               "Streams also pick up recordings that start later (Kafka's subscribePattern)."),
    *CONNECTION_OPTION_SPECS,
    OptionSpec("startingPositions", "earliest | latest | JSON {\"<recordingId>\": position|-2|-1}",
               "latest (stream), earliest (batch)", _BOTH,
               "Where a new query starts. Resumed queries use their checkpoint."),
    OptionSpec("endingPositions", "latest | JSON {\"<recordingId>\": position|-1}", "latest", _BATCH,
               "Where a batch read stops (exclusive)."),
    OptionSpec("startingTimestamp", "epoch milliseconds, an int >= 0", None, _BOTH,
               "Start every recording at its first message at or after this time (docs/options.md, "
               "Starting at a time). Exclusive with startingPositions and startingPositionsByTimestamp."),
    OptionSpec("startingPositionsByTimestamp", "JSON {\"<recordingId>\": <epoch ms>}", None, _BOTH,
               "startingTimestamp per recording; recordings not named start at earliest."),
    OptionSpec("startingPositionsByTimestampStrategy", " | ".join(TIME_STRATEGIES), "error", _BOTH,
               "When a recording that covers the starting time has no message at or after it: fail "
               "(error) or start at its latest position (latest), like Kafka's "
               "startingOffsetsByTimestampStrategy."),
    OptionSpec("endingTimestamp", "epoch milliseconds, an int >= 0", None, _BATCH,
               "End every recording before its first message at or after this time (latest if none)."),
    OptionSpec("endingPositionsByTimestamp", "JSON {\"<recordingId>\": <epoch ms>}", None, _BATCH,
               "endingTimestamp per recording; recordings not named end at latest."),
    OptionSpec("failOnDataLoss", "true | false", "true", _BOTH,
               "Fail when a range to read was truncated, purged or detached; false skips it with a warning."),
    OptionSpec("maxBytesPerTrigger", "a size > 0, e.g. 268435456, 256m, 1g", None, _STREAM,
               "Soft cap on recorded bytes per micro-batch, shared by recordings in proportion to their backlog."),
    OptionSpec("minBytesPerTrigger", "a size > 0", None, _STREAM,
               "Wait until this many bytes are available (or maxTriggerDelay passed) before a batch."),
    OptionSpec("maxTriggerDelay", "a duration, e.g. 500ms, 30s, 15m, 1h (plain numbers are ms)", "15m",
               _STREAM, "Longest wait for minBytesPerTrigger."),
    OptionSpec("maxBytesPerPartition", "a size > 0", "256m", _BOTH,
               "Split a recording's range into Spark partitions of at most about this many bytes (at term "
               "boundaries). Each partition is one replay, and each replay maps a fresh log of three terms: "
               "pieces much smaller than that cost more than they gain."),
    OptionSpec("minPartitions", "an int >= 1", None, _BOTH,
               "Desired minimum number of partitions per batch (as Kafka's minPartitions); the number of "
               "pieces is also rounded up to a multiple of it, term lengths permitting. Set it to the cores "
               "available to the query."),
    OptionSpec("readOnDriver", "true | false", "false", _STREAM,
               "Each micro-batch is read by the Spark driver's Python source process while Spark asks for "
               "the latest offset, and handed to Spark with the plan (pyspark's SimpleDataSourceStreamReader): "
               "no Python task on the executors, so less latency per batch for a live tail of modest rate; "
               "every row passes through the driver (bound a batch with maxBytesPerTrigger). A batch replayed "
               "after a restart is read on an executor."),
    OptionSpec("discoveryIntervalMs", "an int >= 0 (milliseconds)", "1000", _STREAM,
               "Least time between two catalog listings looking for new recordings (channel/streamId)."),
    OptionSpec("includeTimestamp", "true | false", "false", _BOTH,
               "Add column `timestamp` = reserved_value read as nanoseconds since the epoch."),
    OptionSpec("checkpointLocation", "a directory path or URI (file:, s3:, hdfs:, ...)", None, _STREAM,
               "Not needed: the query's checkpoint keeps the start. If set (as before it was optional), the "
               "source keeps its resolved starting positions in a file under it, as then."),
    OptionSpec("sbe.schema", "a path or URI (file:, s3:, gs:, abfs:, hdfs:, ...) of an SBE schema XML", None, _BOTH,
               "Decode each message with this SBE schema into typed columns (docs/sbe.md)."),
    OptionSpec("sbe.messages", "a comma list of message names or template ids", "every message of the schema",
               _BOTH, "The messages to decode: one gives its fields as columns, several one struct column each."),
    OptionSpec("sbe.unselected", "skip | raw", "skip", _BOTH,
               "Messages of another template (or none): skip drops them; raw keeps them with NULL decoded "
               "columns and their bytes in a nullable payload column."),
    OptionSpec("sbe.timestampField", "<field> of the one selected message, or <message>.<field>", None, _BOTH,
               "An integer root-block field holding the message's time since the epoch: startingTimestamp & co "
               "find positions by it (it wins over includeTimestamp)."),
    OptionSpec("sbe.timestampUnit", "ns | us | ms | s", "ns", _BOTH, "The unit of sbe.timestampField."),
)
