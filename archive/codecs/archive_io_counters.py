"""The recorder's and replayer's I/O counters (Aeron counter types 105-110): type ids and key.

Each counter's key is ``archiveId:i64`` (8 bytes, little-endian), as Aeron's
``ArchiveCounters.allocate``. The service allocates them (``archive.service.counters``); a client
that finds one for its archive's id in its own driver's counters shares the archive's media
driver (``archive.client.archive_driver``).
"""

from __future__ import annotations

import struct

from aeron_spark.archive.codecs.counter_layout import CounterLookup, first_counter_id

RECORDER_MAX_WRITE_TIME_TYPE_ID = 105
RECORDER_TOTAL_WRITE_BYTES_TYPE_ID = 106
RECORDER_TOTAL_WRITE_TIME_TYPE_ID = 107
REPLAYER_MAX_READ_TIME_TYPE_ID = 108
REPLAYER_TOTAL_READ_BYTES_TYPE_ID = 109
REPLAYER_TOTAL_READ_TIME_TYPE_ID = 110
ARCHIVE_IO_COUNTER_TYPE_IDS = tuple(range(RECORDER_MAX_WRITE_TIME_TYPE_ID, REPLAYER_TOTAL_READ_TIME_TYPE_ID + 1))

_ARCHIVE_ID_KEY = struct.Struct("<q")


def archive_id_key(archive_id: int) -> bytes:
    """The 8-byte key of every archive-wide counter."""
    return _ARCHIVE_ID_KEY.pack(archive_id)


def find_archive_counter(reader: CounterLookup, type_id: int, archive_id: int) -> int:
    """Id of the live counter of ``type_id`` whose key is ``archive_id``, else NULL_COUNTER_ID."""
    wanted = archive_id_key(archive_id)
    found = reader.find(type_id, lambda key: bytes(key[:8]) == wanted)
    return first_counter_id(found)
