"""How a request handler refuses a request: `ArchiveRequestError`, answered with ERROR ``code``.

The control demuxer turns the exception into an ERROR response to the request's correlationId
(see docs/protocol.md for the error codes); `known_recording` is the check most handlers start
with (UNKNOWN_RECORDING for an id the catalog does not hold).
"""

from __future__ import annotations

from aeron_spark.archive.codecs import ArchiveErrorCode
from aeron_spark.archive.codecs.recording_descriptor import RecordingDescriptor
from aeron_spark.archive.storage.catalog import Catalog

NULL_VALUE = -1  # Aeron's NULL_VALUE: "no id" in responses and signals


class ArchiveRequestError(Exception):
    """A request that is answered with ERROR ``code`` and this message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)


def in_catalog_range(catalog: Catalog, recording_id: int) -> bool:
    """Whether ``recording_id`` can name a catalog entry at all: a client's id past the catalog
    (up to 2^63-1 on the wire) must not reach the file read (its offset overflows ``pread``)."""
    return 0 <= recording_id < catalog.next_recording_id


def known_recording(catalog: Catalog, recording_id: int) -> RecordingDescriptor:
    """The recording's descriptor, or ERROR UNKNOWN_RECORDING."""
    descriptor = catalog.descriptor(recording_id) if in_catalog_range(catalog, recording_id) else None
    if descriptor is None:
        raise ArchiveRequestError(ArchiveErrorCode.UNKNOWN_RECORDING,
                                  f"unknown recording id: {recording_id}")
    return descriptor
