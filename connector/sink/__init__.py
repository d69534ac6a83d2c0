"""The sink of the `aeron-archive` data source: staging, and the exactly-once commit into a recording."""
