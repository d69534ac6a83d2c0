"""Where the archive is and a connected ``ArchiveClient``: what the source and the sink share to
reach it.

``archive.dir`` is resolved through the archive's mark file (``archive-mark.dat``: control
channel, control stream id, aeron dir; options given explicitly win), and a mark file that says
the archive stopped (or stopped updating) is a clear error at once, not a connect timeout. Every
failure to locate or connect is an ``ArchiveUnavailable`` naming where it looked.
"""

from __future__ import annotations

from aeron_spark.connector.options import DEFAULT_CONTROL_STREAM_ID, ArchiveConnection


class ArchiveUnavailable(RuntimeError):
    """The archive cannot be reached or located."""


def resolve_connection(connection: ArchiveConnection) -> ArchiveConnection:
    """Fill control channel / stream id / aeron dir from the archive's mark file when asked to."""
    if connection.archive_dir is None:
        return connection
    mark = read_mark_file_location(connection.archive_dir)
    if not mark.is_live():
        state = ("stopped cleanly" if mark.terminated else
                 f"has not been updated for {mark.activity_age_ms() / 1000:.1f} s or its process {mark.pid} is gone")
        raise ArchiveUnavailable(f"option archive.dir: no archive is running on {connection.archive_dir} "
                                 f"(its mark file {mark.path} says it {state}); start `aeron-archive serve "
                                 f"--dir {connection.archive_dir}` or point archive.dir at a running archive")
    if not mark.control_channel and not connection.control_channel:
        raise ArchiveUnavailable(f"the archive mark file in {connection.archive_dir} names no control channel; "
                                 "set archive.controlChannel")
    return ArchiveConnection(
        archive_dir=connection.archive_dir,
        control_channel=connection.control_channel or mark.control_channel,
        control_stream_id=connection.control_stream_id if connection.control_stream_id is not None
        else mark.control_stream_id,
        response_channel=connection.response_channel,
        response_stream_id=connection.response_stream_id,
        aeron_dir=connection.aeron_dir or mark.aeron_dir,
        timeout_ms=connection.timeout_ms,
    )


def read_mark_file_location(path):
    """The archive's ArchiveMarkInfo (control channel, control stream id, aeron dir) from its mark file."""
    from aeron_spark.archive.client.archive_location import MarkFileError, read_archive_location
    try:
        return read_archive_location(path)
    except MarkFileError as error:
        raise ArchiveUnavailable(f"option archive.dir: {error}") from None
    except (OSError, ValueError) as error:
        raise ArchiveUnavailable(f"option archive.dir: cannot read the archive mark file {path}: {error}") from None


def default_response_channel(control_channel: str) -> str:
    return "aeron:ipc" if control_channel.startswith("aeron:ipc") else "aeron:udp?endpoint=localhost:0"


def connect_client(connection: ArchiveConnection):
    """An ``ArchiveClient`` connected as ``connection`` says (``archive.dir`` resolved through the
    mark file); ArchiveUnavailable naming where it looked when it cannot. Used by the source and
    the sink."""
    resolved = resolve_connection(connection)
    if not resolved.control_channel:
        raise ArchiveUnavailable("no archive control channel: set archive.controlChannel or archive.dir")
    # Imported late: executors may not need it.
    from aeron_spark.archive.client.archive_client import ArchiveClient
    try:
        return ArchiveClient.connect(
            control_channel=resolved.control_channel,
            control_stream_id=resolved.control_stream_id or DEFAULT_CONTROL_STREAM_ID,
            response_channel=resolved.response_channel or default_response_channel(resolved.control_channel),
            response_stream_id=resolved.response_stream_id,
            aeron_dir=resolved.aeron_dir,
            timeout=resolved.timeout_ms / 1000.0,
        )
    except Exception as error:
        raise ArchiveUnavailable(
            f"cannot connect to the archive at {resolved.control_channel} stream {resolved.control_stream_id} "
            f"(aeron.dir={resolved.aeron_dir}): {error}") from error
