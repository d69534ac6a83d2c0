"""failOnDataLoss: fail with a clear error, or skip the lost range with a warning."""

from __future__ import annotations

import logging
from dataclasses import dataclass

LOG = logging.getLogger("aeron_spark.connector")


class DataLossError(RuntimeError):
    """Recorded data the query still had to read is gone (truncated, purged, detached, deleted)."""


@dataclass(frozen=True)
class DataLossPolicy:
    fail_on_data_loss: bool

    def report(self, message: str) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(
                f"{message}. Data that the query has not read yet is no longer in the archive. "
                "Set option failOnDataLoss=false to skip lost ranges with a warning instead.")
        LOG.warning("aeron-archive source: %s; skipped (failOnDataLoss=false)", message)
