"""aeron-archive for Spark: an Aeron Archive sidecar and a Spark source/sink for its recordings.

Subpackages, dependencies pointing one way (the import contracts in pyproject.toml):
  connector -> archive.client -> archive.codecs -> driver_integration;
  archive.cli -> archive.service -> archive.storage -> archive.codecs -> driver_integration.
"""

__version__ = "0.1.0"  # the package version (pyproject.toml reads it from here)
