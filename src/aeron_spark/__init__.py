"""aeron-archive for Spark: an Aeron Archive sidecar and a Spark source/sink for its recordings.

Subpackages, dependencies pointing one way:
  connector -> archive (client) -> driver_integration;  archive (service) -> driver_integration.
"""

__version__ = "0.1.0"
