"""The `aeron-archive` command: serve, offline inspection, client commands."""
