"""The source of the `aeron-archive` data source: offsets, planning, replays into Arrow batches."""
