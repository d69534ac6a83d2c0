"""Whether a client shares its archive's media driver.

Counters, IPC streams and limit counters exist only on one media driver. A client on the archive's
own driver may read the archive's rec-pos counters and bound replays by a counter of its own; a
client on another driver (another host) must not send a counter id at all: the archive would look
the id up on its own driver and find nothing, or an unrelated counter.

The evidence, cheapest first: an IPC control channel (IPC never leaves a driver); then one of the
archive's I/O counters (types 105-110, keyed by its archive id) visible in this client's counters.
Archives older than Aeron 1.44 (no archive id, archive_id -1) or without those counters are treated
as remote unless the control channel is IPC: a length-bounded replay is always correct, a foreign
counter id never is.
"""

from __future__ import annotations

from aeron_spark.archive.codecs.archive_io_counters import ARCHIVE_IO_COUNTER_TYPE_IDS, find_archive_counter
from aeron_spark.archive.codecs.counter_layout import NULL_COUNTER_ID, CounterLookup
from aeron_spark.archive.configuration import IPC_CHANNEL

NULL_ARCHIVE_ID = -1


def shares_archive_driver(control_channel: str, archive_id: int, counters: CounterLookup) -> bool:
    """``counters``: this client's CountersReader; ``archive_id`` as the archive reported it."""
    if control_channel.startswith(IPC_CHANNEL):
        return True
    if archive_id == NULL_ARCHIVE_ID:
        return False
    return any(find_archive_counter(counters, type_id, archive_id) != NULL_COUNTER_ID
               for type_id in ARCHIVE_IO_COUNTER_TYPE_IDS)
