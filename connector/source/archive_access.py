"""What the source needs from an archive, in the source's own terms: ``ArchiveAccess``; unit
tests implement it with a fake (tests/support/fake_archive.py).

``open_archive(connection)`` builds the real one, ``archive_reading.ClientArchiveAccess`` over an
``ArchiveClient`` that ``archive_connection.connect_client`` connected (both modules are shared
with the sink); wiring a different client is a change to those two modules only.
``shared_archive`` keeps one connection per Python worker process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ContextManager, Protocol

from aeron_spark.archive.client import ArchiveClient, RecordingDescriptor

from aeron_spark.connector.archive_connection import connect_client, replay_hosts
from aeron_spark.connector.archive_reading import ClientArchiveAccess
from aeron_spark.connector.connection_cache import ConnectionCache
from aeron_spark.connector.options import ArchiveConnection, ReplaySettings
from aeron_spark.connector.replay_pump import BlockPump


class ArchiveAccess(Protocol):
    @property
    def archive_id(self) -> int: ...

    def describe(self, recording_id: int) -> RecordingDescriptor | None:
        """The recording's current descriptor, None if the catalog has no such (valid) recording."""

    def list_matching(self, channel_fragment: str, stream_id: int, from_recording_id: int) -> list[RecordingDescriptor]:
        """Recordings with id >= from_recording_id, this stream id and an original channel
        containing the fragment (Aeron's ListRecordingsForUri), all pages."""

    def list_matching_since(self, channel_fragment: str, stream_id: int,
                            from_recording_id: int) -> tuple[list[RecordingDescriptor], int]:
        """``list_matching``, and the id the next listing starts at: past the last match, or
        further, where the archive's scan ended (so the next one does not scan those again)."""

    def has_recording_from(self, from_recording_id: int) -> bool:
        """Whether the archive has any valid recording with id >= ``from_recording_id``."""

    def list_from(self, from_recording_id: int) -> list[RecordingDescriptor]:
        """Every recording with id >= from_recording_id (Aeron's ListRecordings), all pages."""

    def live_position(self, recording_id: int) -> int | None:
        """The recorded position of an active recording, None once it is not being recorded."""

    def live_positions(self, recording_ids: list[int]) -> dict[int, int | None]:
        """`live_position` of every one of ``recording_ids`` (each a key of the answer), read
        together: called every trigger for every live recording, so without a call per recording."""

    def replay(self, recording_id: int, start: int, end: int,
               settings: ReplaySettings) -> ContextManager[Iterator[tuple[int, bytes]]]:
        """Frames of [start, end) as (position, block) pairs, contiguous, in order."""

    def replay_pump(self, recording_id: int, start: int, end: int,
                    settings: ReplaySettings) -> ContextManager[BlockPump]:
        """The same replay handed out block by block: the caller copies each block where it wants
        it (the partition reader's one copy)."""

    @property
    def is_connected(self) -> bool:
        """False once the archive closed the session: the connection cache then opens a new one."""

    def keep_alive(self) -> None:
        """Read what the archive sent and tell it this client lives (called while idle in the cache)."""

    def close(self) -> None: ...


def open_archive(connection: ArchiveConnection) -> ArchiveAccess:
    client: ArchiveClient = connect_client(connection)
    return ClientArchiveAccess(client, hosts=replay_hosts(connection, client))


_connections: ConnectionCache[ArchiveConnection, ArchiveAccess] = ConnectionCache(lambda c: open_archive(c))


def shared_archive(connection: ArchiveConnection) -> ArchiveAccess:
    """One connection per Python worker process (Spark reuses workers across tasks)."""
    return _connections.get(connection)[0]


def leased_archive(connection: ArchiveConnection) -> ContextManager[tuple[ArchiveAccess, bool]]:
    """This worker's cached connection and whether it was reused, held for the ``with`` block and
    kept alive between blocks."""
    return _connections.lease(connection)


def forget_shared_archive(connection: ArchiveConnection) -> None:
    _connections.forget(connection)
